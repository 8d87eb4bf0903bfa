"""Bradley-Terry ratings and their bootstrap intervals on synthetic games with known strengths."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from scipy.stats import kendalltau

from leaderboard.ratings import ELO_PER_NAT, PRIOR_DRAWS, fit_bradley_terry, rate


def synthetic_games(strengths, seeds_per_pair, seed=0, draw_rate=0.0):
    """Duplicate-format games: every pair, every seed from both seats, outcomes drawn from the BT model
    (with an optional share of draws)."""
    rng = np.random.default_rng(seed)
    p0, p1, score, seeds = [], [], [], []
    for a, b in itertools.combinations(range(len(strengths)), 2):
        for s in range(seeds_per_pair):
            for i, j in ((a, b), (b, a)):
                u = rng.random()
                win = expit(strengths[i] - strengths[j]) * (1 - draw_rate)
                p0.append(i), p1.append(j), seeds.append(s)
                score.append(1.0 if u < win else 0.5 if u < win + draw_rate else 0.0)
    return p0, p1, score, seeds


def test_ratings_recover_a_clear_ordering():
    strengths = np.array([0.0, 0.6, -1.2, 1.8, -0.4, 1.1, 2.5, -2.0])
    ratings = rate(len(strengths), *synthetic_games(strengths, 100, draw_rate=0.1), resamples=1000)
    tau = kendalltau(ratings.rating, strengths).statistic
    assert tau == pytest.approx(1.0)
    assert np.all(ratings.low < ratings.rating) and np.all(ratings.rating < ratings.high)
    # Draws shrink differences but the scale stays close: top minus bottom is 4.5 nats = 1954 Elo.
    spread = ratings.rating.max() - ratings.rating.min()
    assert 0.6 * 4.5 * ELO_PER_NAT < spread < 1.1 * 4.5 * ELO_PER_NAT


def test_intervals_shrink_with_more_games():
    strengths = np.array([-1.0, 0.0, 0.5, 1.0])
    few = rate(4, *synthetic_games(strengths, 20, seed=1))
    many = rate(4, *synthetic_games(strengths, 320, seed=1))
    width_few = np.mean(few.high - few.low)
    width_many = np.mean(many.high - many.low)
    # 16x the games: the width should fall about 4x.
    assert width_many < 0.4 * width_few


def test_newton_fit_is_the_maximum_of_the_likelihood():
    """Cross-check against scipy's optimiser on the same objective (wins plus one virtual draw per pair)."""
    rng = np.random.default_rng(3)
    n = 5
    wins = rng.integers(0, 30, size=(n, n)).astype(float) / 2
    np.fill_diagonal(wins, 0.0)
    wins[0, 4] = 12.0  # agent 4 never beat agent 0: only the virtual draw keeps the estimate finite
    wins[4, 0] = 0.0
    prior = wins + PRIOR_DRAWS / 2 * (1 - np.eye(n))

    def negative_log_likelihood(theta):
        d = theta[:, None] - theta[None, :]
        return -np.sum(prior * log_expit(d))

    best = minimize(negative_log_likelihood, np.zeros(n), method="BFGS", options={"gtol": 1e-10}).x
    ours = fit_bradley_terry(wins)
    assert ours == pytest.approx(best - best.mean(), abs=1e-5)
    assert np.sum(ours) == pytest.approx(0.0, abs=1e-12)


def test_batched_fits_equal_single_fits():
    rng = np.random.default_rng(4)
    batch = rng.integers(0, 10, size=(3, 4, 4)).astype(float)
    for k in range(3):
        np.fill_diagonal(batch[k], 0.0)
    together = fit_bradley_terry(batch)
    for k in range(3):
        assert together[k] == pytest.approx(fit_bradley_terry(batch[k]), abs=1e-9)


def test_a_draw_counts_as_half_a_win():
    # 30 wins and 0 losses each way count the same as 60 draws: equal ratings.
    p0, p1, score, seeds = [], [], [], []
    for s in range(30):
        p0 += [0, 1]
        p1 += [1, 0]
        score += [1.0, 1.0]  # seat 0 wins both: each agent wins once per seed
        seeds += [s, s]
    wins_split = rate(2, p0, p1, score, seeds, resamples=10)
    draws = rate(2, p0, p1, [0.5] * 60, seeds, resamples=10)
    assert wins_split.rating == pytest.approx([1000.0, 1000.0])
    assert draws.rating == pytest.approx([1000.0, 1000.0])
    # A 3:1 record (draws counted as halves) gives exp(theta difference) close to 3.
    ratings = rate(2, [0] * 40, [1] * 40, [1.0] * 20 + [0.5] * 20, list(range(40)), resamples=10)
    odds = np.exp((ratings.rating[0] - ratings.rating[1]) / ELO_PER_NAT)
    assert odds == pytest.approx((30 + 0.5) / (10 + 0.5))


def test_bootstrap_is_seeded():
    games = synthetic_games(np.array([0.0, 0.3, 0.9]), 30, seed=5)
    first, again, other = rate(3, *games, seed=7), rate(3, *games, seed=7), rate(3, *games, seed=8)
    assert np.array_equal(first.low, again.low) and np.array_equal(first.high, again.high)
    assert not np.array_equal(first.low, other.low)
    assert first.resamples == 1000


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="two different agents"):
        rate(2, [0], [0], [1.0], [0])
    with pytest.raises(ValueError, match="no games"):
        rate(2, [], [], [], [])
    with pytest.raises(ValueError, match="resamples"):
        rate(2, [0], [1], [1.0], [0], resamples=0)
    with pytest.raises(ValueError, match="anchor must be an agent among 0..2 that played a game, got 2"):
        rate(3, [0], [1], [1.0], [0], anchor=2)
    with pytest.raises(ValueError, match="group_weights needs a finite weight > 0 for every group among 0..1"):
        rate(2, [0, 1], [1, 0], [1.0, 0.0], [0, 0], groups=[0, 1], group_weights=[1.0, 0.0])
    with pytest.raises(ValueError, match="group_weights"):
        rate(2, [0, 1], [1, 0], [1.0, 0.0], [0, 0], groups=[0, 1], group_weights=[1.0])
