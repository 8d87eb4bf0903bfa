"""Uniformly random legal play, for every game."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import numpy as np

from spiral_arena.agents.base import BaseAgent

_KIND = re.compile(r"\s*\[\s*([A-Za-z]+)")


class RandomAgent(BaseAgent):
    """Picks uniformly among ``info["legal_actions"]``; in free-text games, among the env's
    ``info["action_examples"]`` (well-formed actions valid now).

    ``per_state=True`` (``random#per_state=true``): each distinct observation gets its own fixed,
    arbitrary preferences over its legal actions (weights drawn from a hash of the text), so play is
    still strategy-free and, over many positions, no action is favoured, but what is played depends on
    the position. A model warm-started on it must read the position (Kuhn's card) to imitate it; on
    uniform play it learns to ignore it, and self-play then starts from a card-blind policy.

    ``kinds=True`` (free-text games): first a kind of move, uniformly (or by the position's preferences with
    ``per_state``), then a move of that kind: the kind is the bracketed word an example opens with
    (``[Offer: ...]``, ``[Accept]``, ``[Deny]``) or plain chat. In SimpleNegotiation a pending offer is then
    accepted a quarter of the time instead of once in 21 moves (eighteen of its examples are offers), so a
    policy warm-started on it meets accepted trades, and their results, often enough to learn from them.
    """

    def __init__(self, seed: int | None = None, per_state: bool = False, kinds: bool = False) -> None:
        for name, value in (("per_state", per_state), ("kinds", kinds)):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false, got {value!r}")
        self.rng = np.random.default_rng(seed)
        self.per_state, self.kinds = per_state, kinds

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        options = info.get("legal_actions") or info.get("action_examples")
        if not options:
            raise ValueError("RandomAgent needs info['legal_actions'] or info['action_examples'] to choose from")
        groups = [options]
        if self.kinds and not info.get("legal_actions"):
            by_kind: dict[str, list[str]] = {}
            for option in options:
                by_kind.setdefault(_kind(option), []).append(option)
            groups = list(by_kind.values())
        choices = groups if len(groups) > 1 else options
        if not self.per_state:
            chosen = choices[int(self.rng.integers(len(choices)))]
        else:
            digest = hashlib.sha256(observation.encode()).digest()
            weights = np.random.default_rng(int.from_bytes(digest[:8], "little")).dirichlet(np.ones(len(choices)))
            chosen = choices[int(self.rng.choice(len(choices), p=weights))]
        return chosen[int(self.rng.integers(len(chosen)))] if isinstance(chosen, list) else chosen


def _kind(action: str) -> str:
    """The kind of a free-text move: the word its leading ``[...]`` opens with, or "" for plain chat."""
    match = _KIND.match(action)
    return match.group(1).lower() if match else ""
