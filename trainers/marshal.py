"""MARSHAL's advantages as its code released them (ICLR 2026, arXiv 2510.15414; github.com/thu-nics/MARSHAL at
2db0222, built on alibaba/ROLL; the self-play configs' ``adv_estimator: reinforce``, ``use_turn_scores``,
``reward_normalization: {grouping: tags, method: mean, separate_norm_for_selfplay: true}``,
``whiten_rewards``, ``advantage_norm: mean``, ``whiten_advantages``).

Each turn of a player carries a reward (``turn_rewards``: a format reward for each valid turn, the game's
outcome added to the player's own last turn). Then, in the released order:

1. each turn's reward minus the mean over every turn of the same game and seat in the batch (no std);
2. whitened over every response token of the batch (the rewards sit on each turn's last token, every other
   token is 0; step 1 makes their mean 0, so this is a rescale by 1 / sqrt(var + 1e-8), var the unbiased
   variance over the tokens);
3. the reward-to-go (gamma 1): each turn gets the sum of its player's rewards from that turn on;
4. per seat (every game of the batch pooled), minus the mean of the distinct returns, the 0 of the padding
   positions counted among them (a return shared by several turns counts once);
5. whitened over every response token of the batch, both seats together: (A - mean) / sqrt(var + 1e-8), with
   the token-weighted mean and unbiased variance.

Every token of a turn gets its turn's value. Where the released code works on token tensors in float32, this
works on one value per turn in float64: the values other tokens carry there are 0 up to rounding, which
float32 drops. Unlike the released code, a (game, seat) with a single turn is centred to 0 instead of raising,
and a batch of one token gets advantage 0.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from spiral_arena.rollout import GameResult

EPS = 1e-8  # ROLL's masked_whiten: x * rsqrt(var + 1e-8)


@dataclass(frozen=True)
class Episode:
    """One seat's turns in one game: ``game`` keys step 1 (with the seat), ``seat`` step 4; each turn's
    reward and number of response tokens, in order."""

    game: Hashable
    seat: int
    rewards: Sequence[float]
    tokens: Sequence[int]


def turn_rewards(turns: int, outcome: float, invalid_last: bool, turn_reward: float) -> list[float]:
    """A seat's rewards over its ``turns`` as MARSHAL's environments pay them: ``turn_reward`` for each valid
    turn (the released format reward), ``outcome`` (the seat's game result) added to its last turn; a game
    ended by this seat's invalid answer pays no format reward at that turn."""
    rewards = [turn_reward] * turns
    if invalid_last:
        rewards[-1] = 0.0
    rewards[-1] += outcome
    return rewards


def marshal_outcome(game: GameResult, seat: int, draw_reward: float) -> float:
    """The result a seat's last turn carries: its return as the run shapes it (an invalid answer's penalty,
    a truncated game's 0), and ``draw_reward`` for a drawn game (the released environments pay 0.1)."""
    record = game.record
    drawn = record.winner is None and not record.truncated and record.invalid_seat is None
    return draw_reward if drawn else game.shaped[seat]


def _whiten_scale(values: Sequence[float], tokens: Sequence[int]) -> tuple[float, float]:
    """The token-weighted mean and 1 / sqrt(unbiased variance + EPS) of per-turn ``values``."""
    count = sum(tokens)
    mean = sum(v * n for v, n in zip(values, tokens, strict=True)) / count
    var = sum(n * (v - mean) ** 2 for v, n in zip(values, tokens, strict=True)) / (count - 1)
    return mean, 1.0 / math.sqrt(var + EPS)


def marshal_advantages(episodes: Sequence[Episode]) -> list[list[float]]:
    """Each episode's per-turn advantages (every token of a turn shares its turn's)."""
    flat_tokens = [n for e in episodes for n in e.tokens]
    if sum(flat_tokens) < 2:
        return [[0.0] * len(e.rewards) for e in episodes]
    # 1. centre each turn's reward per (game, seat)
    keys = [(e.game, e.seat) for e in episodes]
    pooled: dict[tuple, list[float]] = defaultdict(list)
    for key, e in zip(keys, episodes, strict=True):
        pooled[key].extend(e.rewards)
    means = {key: sum(values) / len(values) for key, values in pooled.items()}
    centred = [[r - means[key] for r in e.rewards] for key, e in zip(keys, episodes, strict=True)]
    # 2. whiten over the batch's tokens: the reward on each turn's last token (weight 1), 0 on the others
    on_last = [r for rewards in centred for r in rewards]
    mean, scale = _whiten_scale([*on_last, 0.0], [1] * len(on_last) + [sum(flat_tokens) - len(on_last)])
    whitened = [[(r - mean) * scale for r in rewards] for rewards in centred]
    # 3. reward-to-go, gamma 1, as ROLL's recursion G_t = x_t + G_{t+1} (its rounding decides step 4's ties)
    returns = [list(itertools.accumulate(reversed(rewards)))[::-1] for rewards in whitened]
    # 4. per seat, minus the mean of the distinct returns and the padding's 0
    distinct: dict[int, set[float]] = defaultdict(lambda: {0.0})
    for e, values in zip(episodes, returns, strict=True):
        distinct[e.seat].update(values)
    baseline = {seat: sum(values) / len(values) for seat, values in distinct.items()}
    centred_returns = [[g - baseline[e.seat] for g in values] for e, values in zip(episodes, returns, strict=True)]
    # 5. whiten over the batch's tokens, both seats together
    flat = [a for values in centred_returns for a in values]
    mean, scale = _whiten_scale(flat, flat_tokens)
    return [[(a - mean) * scale for a in values] for values in centred_returns]


def assign_marshal(results: Sequence[GameResult], turn_reward: float, draw_reward: float) -> None:
    """Give every policy turn of ``results`` its MARSHAL reward and advantage (one batch: the step's games);
    a seat whose opponent ended the game before it moved has no turn to train."""
    episodes, seated = [], []
    for game in results:
        for seat in game.policy_seats:
            if turns := [t for t in game.turns if t.role == seat]:
                outcome = marshal_outcome(game, seat, draw_reward)
                rewards = turn_rewards(len(turns), outcome, game.record.invalid_seat == seat, turn_reward)
                episodes.append(Episode(game.game, seat, rewards, [len(t.response_ids) for t in turns]))
                seated.append(turns)
    for turns, episode, advantages in zip(seated, episodes, marshal_advantages(episodes), strict=True):
        for turn, reward, advantage in zip(turns, episode.rewards, advantages, strict=True):
            turn.reward, turn.advantage = reward, advantage  # the transcripts show each turn's own reward
