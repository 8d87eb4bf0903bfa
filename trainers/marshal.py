"""MARSHAL's advantages (ICLR 2026, arXiv 2510.15414; code: github.com/thu-nics/MARSHAL at 2db0222, built on
ROLL): a turn-level return per player, normalised per agent, in place of one baseline per (game, role).

As the paper's method figure draws it: each player's turns of a game carry rewards r_1 .. r_T (a reward per
turn; in our games only the last turn's is not 0, the player's return), each turn gets the reward-to-go
G_t = r_t + ... + r_T (no discount: the released configs leave gamma at 1), and the returns are normalised
per agent, each (game, seat) of the step on its own: A_t = (G_t - mean) / (std + eps) over every turn of that
game and seat in the step (population std, as a batch norm). Every token of a turn gets that turn's A_t.

Two things differ from SPIRAL's RAE: the baseline is the step's own mean (not an EMA across steps) and the
scale is divided out, per seat. The released code reaches a similar place by another road (it centres each
turn's reward per game and player, reward-to-go, centres per player, then whitens the whole batch); this is
the figure's definition, which the tests pin on a hand-computed batch.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Hashable, Sequence

EPS = 1e-6  # ROLL's epsilon for a normalisation by the std


def turn_returns(rewards: Sequence[float]) -> list[float]:
    """The reward-to-go at each turn: G_t = r_t + r_{t+1} + ... + r_T."""
    return list(itertools.accumulate(reversed(rewards)))[::-1]


def marshal_advantages(episodes: Sequence[tuple[Hashable, Sequence[float]]], eps: float = EPS) -> list[list[float]]:
    """Per-turn advantages of each episode, an episode being one seat's turns in one game: (agent key, the
    rewards of its turns in order). Returns are normalised over every turn of the episodes that share the
    agent key (our trainer's key: game and seat)."""
    returns = [turn_returns(rewards) for _, rewards in episodes]
    pooled: dict[Hashable, list[float]] = defaultdict(list)
    for (agent, _), values in zip(episodes, returns, strict=True):
        pooled[agent].extend(values)
    stats = {}
    for agent, values in pooled.items():
        mean = sum(values) / len(values)
        stats[agent] = (mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)))
    return [
        [(g - stats[agent][0]) / (stats[agent][1] + eps) for g in values]
        for (agent, _), values in zip(episodes, returns, strict=True)
    ]
