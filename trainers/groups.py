"""Advantages of single-player games (Twenty Questions), each compared with the games of its group: StarPO's
group-normalised return, or delta-belief's per-turn rewards with the policy's own belief gain."""

from __future__ import annotations

import itertools

import numpy as np

from spiral_arena.rollout import GameResult
from trainers.belief import log_beliefs
from trainers.config import TrainConfig
from trainers.starpo import delta_belief_rewards, starpo_advantages, turnwise_advantages


def group_advantages(results: list[GameResult], keys: list, config: TrainConfig, model, policy) -> dict[str, float]:
    """Advantages of single-player games, each compared with the games of its group (``keys``: one
    group key per game, the games of one reset seed). StarPO: the group-normalised return on every
    turn. delta-belief: per-turn rewards (turn penalty + end reward + belief_coef x belief gain, the
    belief read under the current policy, no gradient), normalised per turn index in the group.
    A game where the oracle failed (an LLM judge's "error" verdict) is left out, advantage 0: a
    missing answer is not the player's doing."""
    answered = ["error" not in game.verdicts for game in results]
    dropped = {"judge/dropped_games": float(len(results) - sum(answered))}
    keys = [k for k, ok in zip(keys, answered, strict=True) if ok]
    results = [game for game, ok in zip(results, answered, strict=True) if ok]
    if not results:
        return dropped
    if config.algo == "starpo":
        for game, advantage in zip(results, starpo_advantages([g.shaped[0] for g in results], keys), strict=True):
            for turn in game.turns:
                turn.advantage = advantage
        return dropped
    histories = [h for g in results for h in [t.prompt for t in g.turns] + [g.final_observation]]
    secrets = [g.secret for g in results for _ in range(len(g.turns) + 1)]
    flat = iter(log_beliefs(model, policy, histories, secrets, config.micro_batch, config.belief_probe))
    rewards, gains = [], []
    for game in results:
        beliefs = [next(flat) for _ in range(len(game.turns) + 1)]
        won = game.won
        end_reward = game.shaped[0] - sum(game.penalties)
        rewards.append(delta_belief_rewards(beliefs, game.penalties, end_reward, won, config.belief_coef))
        gains += [b - a for a, b in itertools.pairwise(beliefs)]
    max_turns = max(len(r) for r in rewards)
    for game, advantages in zip(results, turnwise_advantages(rewards, keys, max_turns, config.turn_norm), strict=True):
        for turn, advantage in zip(game.turns, advantages, strict=True):
            turn.advantage = advantage
    gain_share = float(np.mean(np.array(gains) > 0))
    return {**dropped, "belief/gain_mean": float(np.mean(gains)), "belief/positive_share": gain_share}
