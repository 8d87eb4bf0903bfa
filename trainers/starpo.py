"""Group advantages for single-player multi-turn games (20 Questions): StarPO and ΔBelief-RL.

A group is the games played on one secret in one step (``DEFAULT_GROUP_SIZE`` of them). There is no
opponent to compare against, so each game is compared with its siblings on the same secret:

- StarPO (trajectory level, after RAGEN): one advantage per game, the group-normalised return,
  given to every turn of the game.
- ΔBelief-RL: one reward per turn (penalty + end reward + a bonus for raising the questioner's own
  belief in the secret), normalised per turn index within the group.

Standard deviations use Bessel's correction (n - 1), as the reference implementation does. It is
undefined for a single value, so a group of one game (or, per turn, one value) gets advantage 0
(verl's GRPO instead takes mean 0 and std 1 there, so a lone game's advantage is its raw return);
so does a group whose values are all equal, which carries no signal to learn from.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

import numpy as np

DEFAULT_GROUP_SIZE = 16  # games per secret word in one step
DELTA_BELIEF_LAMBDA = 0.1  # weight of the belief-gain bonus
STD_EPSILON = 1e-6
TURNWISE_MODES = ("padded", "active")


def normalise(values: Sequence[float]) -> np.ndarray:
    """(v - mean) / (Bessel std + 1e-6); zeros for fewer than two values or no spread at all."""
    array = np.asarray(values, dtype=np.float64)
    if array.size < 2 or np.all(array == array[0]):
        return np.zeros_like(array)  # exactly 0, not float noise from mean and std
    return (array - array.mean()) / (array.std(ddof=1) + STD_EPSILON)


def members_by_group(groups: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    """Game indices of each group, in input order."""
    members: dict[Hashable, list[int]] = defaultdict(list)
    for index, group in enumerate(groups):
        members[group].append(index)
    return members


def starpo_advantages(returns: Sequence[float], groups: Sequence[Hashable]) -> list[float]:
    """A_i = (R_i - mean R) / (std R + 1e-6) over the games of i's group; one value per game.

    ``returns[i]`` is game i's whole return (per-turn penalties plus the end reward) and ``groups[i]``
    its group key, e.g. the secret word. The caller gives A_i to every questioner token of game i.
    """
    if len(returns) != len(groups):
        raise ValueError(f"returns and groups must have the same length, got {len(returns)} and {len(groups)}")
    advantages = [0.0] * len(returns)
    for members in members_by_group(groups).values():
        for index, advantage in zip(members, normalise([returns[i] for i in members]), strict=True):
            advantages[index] = float(advantage)
    return advantages


def delta_belief_rewards(
    log_beliefs: Sequence[float],
    penalties: Sequence[float],
    end_reward: float,
    won: bool,
    lam: float = DELTA_BELIEF_LAMBDA,
) -> list[float]:
    """Per-turn rewards of one game: r_t = p_t + end_reward + lam * max(log b_t - log b_{t-1}, 0).

    ``log_beliefs`` holds log b_0 .. log b_T (b_0 on the initial prompt, b_t after t questions and
    their answers), ``penalties`` p_1 .. p_T. The end reward goes to every turn. Only belief gains are
    rewarded (a drop is not punished). The bonus is 0 on the winning turn: naming the secret ends the
    game, and the win is already paid by the end reward.
    """
    turns = len(penalties)
    if turns == 0:
        raise ValueError("a game has at least one turn, got no penalties")
    if len(log_beliefs) != turns + 1:
        raise ValueError(
            f"log_beliefs must hold one value per turn plus the initial one ({turns + 1}), got {len(log_beliefs)}"
        )
    rewards = []
    for t in range(1, turns + 1):
        winning_turn = won and t == turns
        gain = 0.0 if winning_turn else max(log_beliefs[t] - log_beliefs[t - 1], 0.0)
        rewards.append(penalties[t - 1] + end_reward + lam * gain)
    return rewards


def turnwise_advantages(
    rewards: Sequence[Sequence[float]], groups: Sequence[Hashable], max_turns: int, mode: str = "padded"
) -> list[list[float]]:
    """A_{i,t} = (r_{i,t} - mean_j r_{j,t}) / (std_j r_{j,t} + 1e-6), j over i's group, per turn t.

    ``rewards[i]`` holds game i's per-turn rewards (its length is the game's number of turns, at most
    ``max_turns``). The result has the same shape: advantages for real turns only.

    ``mode="padded"`` is the reference implementation's behaviour: each game's rewards are padded
    with zeros to ``max_turns``, so a game that has already ended still counts at turn t, with reward
    0. ``mode="active"`` compares a turn only with the games still running at that turn.

    Why it matters: the end reward is added to every turn, so a won game's turns sit around +1 to
    +2 and a lost game's below 0 (-0.05 per question asked; penalties lower both; only a large belief
    gain lifts a lost game's turn above 0). A game ends early only by winning; a lost one runs all its
    questions. So at late turn indices the padded statistics hold the zeros of games already won, and
    a game still running is judged by the sign of its reward against 0 rather than against the games
    as long as itself: every late turn of a lost game gets a clearly negative advantage even where
    all games still running lost the same way (where "active" gives 0), and a late win a clearly
    positive one. The pull grows as fewer games remain: one running game among n zeros gets
    n / sqrt(n + 1) times the sign of its reward, ±3.75 in a group of 16, however small the reward
    is. Padding beyond the group's longest game changes nothing (no game has a turn there), so
    ``max_turns`` only bounds the input.
    """
    if mode not in TURNWISE_MODES:
        raise ValueError(f"mode must be one of {TURNWISE_MODES}, got {mode!r}")
    if len(rewards) != len(groups):
        raise ValueError(f"rewards and groups must have the same length, got {len(rewards)} and {len(groups)}")
    for index, game in enumerate(rewards):
        if len(game) > max_turns:
            raise ValueError(f"game {index} has {len(game)} turns, more than max_turns={max_turns}")
    advantages = [[0.0] * len(game) for game in rewards]
    for members in members_by_group(groups).values():
        longest = max(len(rewards[i]) for i in members)
        for t in range(longest):
            compared = members if mode == "padded" else [i for i in members if t < len(rewards[i])]
            values = [rewards[i][t] if t < len(rewards[i]) else 0.0 for i in compared]
            for index, advantage in zip(compared, normalise(values), strict=True):
                if t < len(rewards[index]):  # a padded turn is compared with, never trained on
                    advantages[index][t] = float(advantage)
    return advantages
