"""Uniformly random legal play, for every game."""

from __future__ import annotations

from typing import Any

import numpy as np

from spiral_arena.agents.base import BaseAgent


class RandomAgent(BaseAgent):
    """Picks uniformly among ``info["legal_actions"]``; in free-text games, among the env's
    ``info["action_examples"]`` (well-formed actions valid now)."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        options = info.get("legal_actions") or info.get("action_examples")
        if not options:
            raise ValueError("RandomAgent needs info['legal_actions'] or info['action_examples'] to choose from")
        return options[int(self.rng.integers(len(options)))]
