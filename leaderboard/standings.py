"""From stored games to standings: ratings, records, payoffs and head-to-head matrices per scope.

A scope is one game id, plus "overall" (all games pooled) when there are several. Games ended by an
agent's error are left out of everything but the error counts. The payoff of a game is its chips in
games that keep chips (Kuhn poker) and its reward otherwise; chip games are ranked by mean payoff
(expected value), not by games won (docs, section 7: winning many small pots is not winning chips). An
invalid move forfeits: in a chip game the offender's payoff is its chips at that point but at most -1.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from leaderboard.ratings import DEFAULT_RESAMPLES, rate
from leaderboard.reasoning import ReasoningColumn
from leaderboard.store import AgentRecord, StoredGame
from spiral_arena.registry import REGISTRY

OVERALL = "overall"
KUHN_GAME = "KuhnPoker"


@dataclass
class AgentStanding:
    label: str
    rating: float | None  # None when every game of the agent in this scope was an error
    low: float | None
    high: float | None
    games: int
    wins: int
    draws: int
    losses: int
    mean_payoff: float | None
    invalid_rate: float | None
    errors: int  # games this agent broke off with an error (not counted anywhere else)
    exploitability: float | None = None

    @property
    def score(self) -> float | None:
        """Points per game, a draw being half a win."""
        return (self.wins + self.draws / 2) / self.games if self.games else None


@dataclass
class HeadToHead:
    wins: int = 0
    draws: int = 0
    losses: int = 0
    payoff_sum: float = 0.0

    def add(self, points: float, payoff: float) -> None:
        """One game: ``points`` 1 / 0.5 / 0 for a win / draw / loss."""
        if points == 1.0:
            self.wins += 1
        elif points == 0.5:
            self.draws += 1
        else:
            self.losses += 1
        self.payoff_sum += payoff

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float | None:
        return (self.wins + self.draws / 2) / self.games if self.games else None

    @property
    def mean_payoff(self) -> float | None:
        return self.payoff_sum / self.games if self.games else None


@dataclass
class Scope:
    name: str  # OVERALL or an env id
    payoff_unit: str | None  # "chips", "reward", or None for OVERALL (units differ between games)
    ranked_by: str
    agents: list[AgentStanding]  # in rank order
    head_to_head: dict[str, dict[str, HeadToHead]]  # row agent -> column agent -> row's record
    games: int
    errors: int


@dataclass
class Standings:
    scopes: list[Scope]
    errors: list[StoredGame] = field(default_factory=list)
    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    reasoning: ReasoningColumn | None = None  # set by ``--reasoning``; the same per agent in every scope


def _points(game: StoredGame) -> float:
    """Seat 0's result: 1 win, 0.5 draw, 0 loss."""
    return 1.0 if game.reward0 > game.reward1 else 0.5 if game.reward0 == game.reward1 else 0.0


def _payoffs(game: StoredGame) -> tuple[float, float]:
    if game.payoff0 is None:
        return game.reward0, game.reward1
    p0, p1 = game.payoff0, game.payoff1
    if game.invalid0:
        p0 = min(p0, -1.0)
        p1 = -p0
    elif game.invalid1:
        p1 = min(p1, -1.0)
        p0 = -p1
    return p0, p1


def _is_kuhn(env_id: str) -> bool:
    spec = REGISTRY.get(env_id)
    return spec is not None and spec.game.name == KUHN_GAME


def _scope(
    name: str,
    games: Sequence[StoredGame],
    env_order: dict[str, int],
    agents: dict[str, AgentRecord],
    resamples: int,
    seed: int,
) -> Scope:
    labels = sorted({g.player0 for g in games} | {g.player1 for g in games})
    valid = [g for g in games if g.error is None]
    chips = name != OVERALL and any(g.payoff0 is not None for g in valid)
    total = {label: HeadToHead() for label in labels}
    invalid, errors = defaultdict(int), defaultdict(int)
    head = {row: {col: HeadToHead() for col in labels if col != row} for row in labels}
    for g in games:
        if g.error is not None:
            errors[(g.player0, g.player1)[g.error_seat]] += 1
    for g in valid:
        points, pays = _points(g), _payoffs(g)
        for seat, (me, other) in enumerate(((g.player0, g.player1), (g.player1, g.player0))):
            mine = points if seat == 0 else 1.0 - points
            total[me].add(mine, pays[seat])
            head[me][other].add(mine, pays[seat])
            invalid[me] += bool(g.invalid0 if seat == 0 else g.invalid1)

    # Only agents with a finished game are rated: one that only ever failed has no strength to estimate.
    index = {label: k for k, label in enumerate(label for label in labels if total[label].games)}
    ratings = None
    if valid:
        ratings = rate(
            len(index),
            [index[g.player0] for g in valid],
            [index[g.player1] for g in valid],
            [_points(g) for g in valid],
            [g.seed for g in valid],
            [env_order[g.env_id] for g in valid],
            resamples=resamples,
            seed=seed,
        )
    kuhn = name != OVERALL and _is_kuhn(name)
    rows = []
    for label in labels:
        played, k = total[label].games, index.get(label)
        rated = ratings is not None and k is not None
        rows.append(
            AgentStanding(
                label=label,
                rating=float(ratings.rating[k]) if rated else None,
                low=float(ratings.low[k]) if rated else None,
                high=float(ratings.high[k]) if rated else None,
                games=played,
                wins=total[label].wins,
                draws=total[label].draws,
                losses=total[label].losses,
                mean_payoff=total[label].mean_payoff if name != OVERALL else None,
                invalid_rate=invalid[label] / played if played else None,
                errors=errors[label],
                exploitability=agents[label].kuhn_exploitability if kuhn and label in agents else None,
            )
        )
    if chips:
        rows.sort(key=lambda r: (r.mean_payoff is None, -(r.mean_payoff or 0.0), -(r.rating or 0.0), r.label))
    else:
        rows.sort(key=lambda r: (r.rating is None, -(r.rating or 0.0), r.label))
    return Scope(
        name=name,
        payoff_unit=None if name == OVERALL else "chips" if chips else "reward",
        ranked_by="mean chips per game" if chips else "rating",
        agents=rows,
        head_to_head=head,
        games=len(valid),
        errors=len(games) - len(valid),
    )


def compute(
    games: Sequence[StoredGame],
    agents: dict[str, AgentRecord] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Standings:
    """Standings of every game id found in ``games`` (in order of appearance), and overall if several."""
    if not games:
        raise ValueError("no games stored yet; play some with: spiral-arena leaderboard run")
    agents = agents or {}
    env_order: dict[str, int] = {}
    by_env: dict[str, list[StoredGame]] = defaultdict(list)
    for g in games:
        env_order.setdefault(g.env_id, len(env_order))
        by_env[g.env_id].append(g)
    names = ([OVERALL] if len(env_order) > 1 else []) + list(env_order)
    scopes = [
        _scope(name, games if name == OVERALL else by_env[name], env_order, agents, resamples, seed) for name in names
    ]
    return Standings(scopes, [g for g in games if g.error is not None], resamples, seed)


def score_matrix(scope: Scope) -> tuple[list[str], np.ndarray]:
    """The row agent's points per game against each column agent (NaN where they never met), in rank order."""
    labels = [r.label for r in scope.agents]
    matrix = np.full((len(labels), len(labels)), np.nan)
    for i, row in enumerate(labels):
        for j, col in enumerate(labels):
            score = scope.head_to_head[row][col].score if row != col else None
            if score is not None:
                matrix[i, j] = score
    return labels, matrix
