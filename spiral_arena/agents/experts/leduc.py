"""Leduc Hold'em: an approximate Nash equilibrium computed by CFR+ (``scripts/leduc_expert.py``)."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any, ClassVar

import numpy as np

from spiral_arena.games.leduc_holdem import CALL, FOLD, RAISE, RANKS

# the answer for each rules action, by whether the player faces a bet
_ANSWER = {False: {CALL: "[check]", RAISE: "[bet]"}, True: {FOLD: "[fold]", CALL: "[call]", RAISE: "[raise]"}}


@functools.cache
def expert_policy() -> dict[str, dict[str, float]]:
    """The stored policy: rank-only information state (``spiral_arena.analysis.leduc``'s keys without
    suits, e.g. ``Q:crc/J:r``) -> {action: probability}."""
    text = resources.files("spiral_arena").joinpath("data/leduc_expert.json").read_text()
    return json.loads(text)["policy"]


class LeducExpert:
    """Plays the stored CFR+ policy: 2,000 iterations over every deal, exploitability 0.0002 chips a hand
    (uniform random: 2.37); player 0 expects -0.0856 chips a hand against it, the game's value. Against
    uniformly random play it wins +0.59 chips a hand as player 0 and +0.81 as player 1, exactly
    (``leduc_policy_value``; ``tests/test_leduc.py`` checks 2,000 games per seat against these). It reads
    ranks only, as the text shows them.
    """

    game: ClassVar[str] = "LeducHoldem"
    params: ClassVar[tuple[str, ...]] = ()

    @property
    def policy(self) -> dict[str, dict[str, float]]:
        """What it plays, stated for exact analysis (the leaderboard's exploitability column)."""
        return expert_policy()

    def act(self, view: dict[str, Any], info: dict[str, Any], rng: np.random.Generator) -> str:
        h1, h2 = view["histories"]
        key = f"{RANKS[view['card']]}:{h1}"
        if view["public"] is not None:
            key += f"/{RANKS[view['public']]}:{h2}"
        dist = self.policy.get(key)
        if dist is None:
            raise ValueError(f"Leduc expert has no information state {key!r}")
        actions = list(dist)
        action = actions[int(rng.choice(len(actions), p=np.array([dist[a] for a in actions])))]
        current = h1 if view["round"] == 1 else h2
        return _ANSWER[current.endswith("r")][action]
