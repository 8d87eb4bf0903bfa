"""Bradley-Terry ratings with bootstrap intervals.

The model: agent i beats agent j with probability ``expit(theta_i - theta_j)``; a draw counts as half a
win for each side. Strengths are the maximum-likelihood estimate with one virtual draw added to every
pair that met: without it an agent that never lost (an expert against random play) has an infinite
estimate; with hundreds of games per pair it moves ratings by well under one percent.

Intervals come from a stratified bootstrap that keeps the tournament's design: within every
(group, pair) stratum (group = game id) the seed blocks are resampled with replacement, a block
being the games of one seed (both seatings in duplicate format), so resamples keep the luck
cancellation of duplicate play. A block's content takes few distinct values, so each stratum is
resampled with one multinomial draw over those values, and the fits of all resamples run at once as
a batched Newton iteration.

Only differences between strengths are identified, so the scale needs a fixed point: an anchor agent
at ``ELO_CENTRE`` (the leaderboard's ``random``, a reference that does not move when entrants come and
go), else the mean of the rated agents. Every resample is shifted the same way, so the intervals are
those of differences from the anchor, and the anchor's own interval is the single point ``ELO_CENTRE``.
Group weights scale every game of a group (game id) in the fit and in each resample alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

ELO_PER_NAT = 400.0 / math.log(10.0)  # ratings are shown on the Elo scale
ELO_CENTRE = 1000.0  # the anchor agent's rating, or the mean rating when there is no anchor
PRIOR_DRAWS = 1.0
DEFAULT_RESAMPLES = 1000
_MAX_STEP = 2.0  # largest Newton step in natural units, which keeps the iteration from overshooting
_TOLERANCE = 1e-9
_MAX_ITERATIONS = 200


def fit_bradley_terry(wins: np.ndarray, prior_draws: float = PRIOR_DRAWS) -> np.ndarray:
    """Strengths (natural units, mean 0) from ``wins[..., i, j]``, the (fractional) wins of i over j.

    Leading dimensions are independent problems solved together (bootstrap resamples). Newton's method
    on the concave log-likelihood; the all-ones matrix added to the Laplacian-shaped Hessian pins the
    free offset, so each step is one batched linear solve.
    """
    wins = np.asarray(wins, dtype=float)
    n = wins.shape[-1]
    met = (wins + np.swapaxes(wins, -1, -2)) > 0
    wins = wins + np.where(met, prior_draws / 2.0, 0.0)
    games = wins + np.swapaxes(wins, -1, -2)
    theta = np.zeros(wins.shape[:-1])
    pin = np.ones((n, n)) + 1e-9 * np.eye(n)
    for _ in range(_MAX_ITERATIONS):
        p = expit(theta[..., :, None] - theta[..., None, :])
        gradient = (wins - games * p).sum(-1)
        curvature = games * p * (1.0 - p)
        hessian = -curvature + np.eye(n) * curvature.sum(-1)[..., None, :] + pin
        step = np.linalg.solve(hessian, gradient[..., None])[..., 0]
        largest = np.abs(step).max(-1, keepdims=True)
        theta = theta + step * np.minimum(1.0, _MAX_STEP / np.maximum(largest, 1e-300))
        theta -= theta.mean(-1, keepdims=True)
        if largest.max() < _TOLERANCE:
            break
    return theta


@dataclass(frozen=True)
class Ratings:
    """Elo-scale ratings of agents ``0..n-1`` with bootstrap percentile intervals: the anchor agent at
    ``ELO_CENTRE``, or their mean there when ``anchor`` is None."""

    rating: np.ndarray
    low: np.ndarray
    high: np.ndarray
    games: np.ndarray  # games each agent played in the fit (unweighted)
    resamples: int
    anchor: int | None = None


def equal_group_weights(groups: Sequence[int]) -> np.ndarray:
    """Weight per group id (``[g]``) that gives every group present in ``groups`` the same total: the mean
    number of games per group over the group's own number. Absent ids get 0, as they weigh nothing."""
    counts = np.bincount(np.asarray(groups, dtype=np.int64)).astype(float)
    return np.divide(counts[counts > 0].mean(), counts, out=np.zeros_like(counts), where=counts > 0)


def _elo(theta: np.ndarray, anchor: int | None) -> np.ndarray:
    """Strengths ``[..., n]`` on the Elo scale, each row shifted so that its anchor (or mean) is ``ELO_CENTRE``."""
    centre = theta.mean(-1, keepdims=True) if anchor is None else theta[..., anchor : anchor + 1]
    return ELO_CENTRE + ELO_PER_NAT * (theta - centre)


def rate(
    n: int,
    player0: Sequence[int],
    player1: Sequence[int],
    score0: Sequence[float],
    seeds: Sequence[int],
    groups: Sequence[int] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    anchor: int | None = None,
    group_weights: Sequence[float] | None = None,
) -> Ratings:
    """Ratings of ``n`` agents from games ``k``: ``player0[k]`` (seat 0) against ``player1[k]``, scoring
    ``score0[k]`` in {0, 0.5, 1} for seat 0, on seed ``seeds[k]`` of game ``groups[k]`` (default: one game).

    ``anchor``: the agent rated ``ELO_CENTRE`` exactly (default: the mean is). ``group_weights[g]``: what
    each game of group ``g`` counts for (default: 1), e.g. ``equal_group_weights(groups)``."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    i, j = np.asarray(player0, dtype=np.int64), np.asarray(player1, dtype=np.int64)
    score = np.asarray(score0, dtype=float)
    group = np.zeros_like(i) if groups is None else np.asarray(groups, dtype=np.int64)
    if len(i) == 0:
        raise ValueError("no games to rate")
    if np.any(i == j) or i.min() < 0 or max(i.max(), j.max()) >= n:
        raise ValueError(f"every game needs two different agents among 0..{n - 1}")
    games = np.bincount(np.concatenate([i, j]), minlength=n)
    if anchor is not None and not (0 <= anchor < n and games[anchor]):
        raise ValueError(f"the anchor must be an agent among 0..{n - 1} that played a game, got {anchor}")
    weight = _group_weights(group, group_weights)
    a, b = np.minimum(i, j), np.maximum(i, j)
    score_a = np.where(i == a, score, 1.0 - score)

    # Blocks (group, pair, seed) -> their wins for the lower index and their number of games.
    blocks, block_of = np.unique(
        np.stack([group, a, b, np.asarray(seeds, dtype=np.int64)], 1), axis=0, return_inverse=True
    )
    block_wins = np.bincount(block_of, weights=score_a)
    block_games = np.bincount(block_of).astype(float)
    strata, stratum_of = np.unique(blocks[:, :3], axis=0, return_inverse=True)
    kinds, kind_of = np.unique(np.stack([block_wins, block_games], 1), axis=0, return_inverse=True)
    counts = np.zeros((len(strata), len(kinds)))
    np.add.at(counts, (stratum_of, kind_of), 1.0)

    # Each stratum's wins and losses land in the (a, b) and (b, a) cells of the n x n wins matrix.
    stratum_weight = weight[strata[:, 0]]
    to_cells = np.zeros((len(strata), n * n))
    to_cells[np.arange(len(strata)), strata[:, 1] * n + strata[:, 2]] = 1.0
    from_cells = np.zeros((len(strata), n * n))
    from_cells[np.arange(len(strata)), strata[:, 2] * n + strata[:, 1]] = 1.0

    def wins_matrix(kind_counts: np.ndarray) -> np.ndarray:
        won, played = np.moveaxis(stratum_weight[:, None] * (kind_counts @ kinds), -1, 0)
        return (won @ to_cells + (played - won) @ from_cells).reshape(*kind_counts.shape[:-2], n, n)

    theta = fit_bradley_terry(wins_matrix(counts))
    rng = np.random.default_rng(seed)
    size = counts.sum(1)
    draws = rng.multinomial(size.astype(np.int64), counts / size[:, None], size=(resamples, len(strata)))
    boot = _elo(fit_bradley_terry(wins_matrix(draws.astype(float))), anchor)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(boot, [tail, 1.0 - tail], axis=0)
    return Ratings(_elo(theta, anchor), low, high, games, resamples, anchor)


def _group_weights(group: np.ndarray, group_weights: Sequence[float] | None) -> np.ndarray:
    """The weight of every group id up to the largest in ``group``; each group that has games needs a
    finite weight above 0."""
    if group.min() < 0:
        raise ValueError(f"groups must be ids >= 0, got {group.min()}")
    if group_weights is None:
        return np.ones(group.max() + 1)
    weight = np.asarray(group_weights, dtype=float)
    used = weight[group] if len(weight) > group.max() else np.array([np.nan])
    if not np.all(np.isfinite(used) & (used > 0)):
        raise ValueError(f"group_weights needs a finite weight > 0 for every group among 0..{group.max()}")
    return weight
