"""Scripted strong players, one module per game; ``spiral_arena.agents.expert.ExpertAgent`` dispatches.

Each expert reads ``info["view"]`` (the acting player's knowledge as plain values), never the prose,
and answers with text the game's parser accepts.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

import numpy as np


class GameExpert(Protocol):
    """One game's scripted strategy. ``params`` names the keyword options its constructor takes."""

    game: ClassVar[str]  # TextGame.name of the game it plays
    params: ClassVar[tuple[str, ...]]

    def act(self, view: dict[str, Any], info: dict[str, Any], rng: np.random.Generator) -> str:
        """The answer for one decision; mixed strategies draw from ``rng`` only."""
