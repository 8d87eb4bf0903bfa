"""Uniformly random legal play, for every game."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from spiral_arena.agents.base import BaseAgent


class RandomAgent(BaseAgent):
    """Picks uniformly among ``info["legal_actions"]``; in free-text games, among the env's
    ``info["action_examples"]`` (well-formed actions valid now).

    ``per_state=True`` (``random#per_state=true``): each distinct observation gets its own fixed,
    arbitrary preferences over its legal actions (weights drawn from a hash of the text), so play is
    still strategy-free and, over many positions, no action is favoured, but what is played depends on
    the position. A model warm-started on it must read the position (Kuhn's card) to imitate it; on
    uniform play it learns to ignore it, and self-play then starts from a card-blind policy.
    """

    def __init__(self, seed: int | None = None, per_state: bool = False) -> None:
        if not isinstance(per_state, bool):
            raise ValueError(f"per_state must be true or false, got {per_state!r}")
        self.rng = np.random.default_rng(seed)
        self.per_state = per_state

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        options = info.get("legal_actions") or info.get("action_examples")
        if not options:
            raise ValueError("RandomAgent needs info['legal_actions'] or info['action_examples'] to choose from")
        if not self.per_state:
            return options[int(self.rng.integers(len(options)))]
        digest = hashlib.sha256(observation.encode()).digest()
        weights = np.random.default_rng(int.from_bytes(digest[:8], "little")).dirichlet(np.ones(len(options)))
        return options[int(self.rng.choice(len(options), p=weights))]
