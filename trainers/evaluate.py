"""Evaluation with fixed seeds: match results against fixed opponents, and Kuhn exploitability.

Exploitability is exact: the policy's probability of each legal answer at the 12 single-hand
information states is read from its log-probs (normalised over the two legal actions; the mass
on anything else is reported as ``kuhn_invalid_mass``), then scored by
``spiral_arena.analysis.kuhn_exploitability``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import torch

from spiral_arena import list_envs
from spiral_arena.agents import make_agent
from spiral_arena.analysis import kuhn_exploitability, kuhn_policy_from_scores
from trainers.logprobs import pack, response_logprobs
from trainers.rollout import GameSpec, Policy, collect

OUT_OF_DOMAIN = ("Snake-v0", "PigDice-v0", "LiarsDice-v0", "TruthAndDeception-v0")


def eval_games(training_games: list[GameSpec], extra: str) -> list[GameSpec]:
    if extra:
        return [GameSpec.parse(g) for g in extra.split(",") if g.strip()]
    registered = set(list_envs())
    return training_games + [GameSpec.parse(g) for g in OUT_OF_DOMAIN if g in registered]


def play_against(
    policy: Policy, games: list[GameSpec], opponents: list[str], n_games: int, seed: int, **generation: Any
) -> dict[str, float]:
    """Win/draw/loss and invalid rate of the policy vs each opponent, seats alternating."""
    metrics: dict[str, float] = {}
    for spec in games:
        for name in opponents:
            opponent = make_agent(name)
            if hasattr(opponent, "reset"):
                opponent.reset(seed=seed)
            results = collect(
                policy,
                [spec],
                np.ones(1),
                min_samples=0,
                games_in_flight=n_games,
                rng=np.random.default_rng(seed),
                opponent=opponent,
                games=n_games,
                invalid_penalty=-1.0,
                invalid_opponent_reward=1.0,
                **generation,
            )
            counts: dict[str, int] = defaultdict(int)
            for r in results:
                me = r.policy_seats[0]
                mine, theirs = r.returns[me], r.returns[1 - me]
                counts["win" if mine > theirs else "loss" if mine < theirs else "draw"] += 1
                counts["invalid"] += r.invalid_by == me
            key = f"eval/{spec.label}/{name}"
            for outcome in ("win", "draw", "loss", "invalid"):
                metrics[f"{key}/{outcome}"] = counts[outcome] / len(results)
    return metrics


def model_scorer(model, policy: Policy):
    """(observation, answers) -> log-prob of each whole answer (plus end of turn) under ``model``."""
    tokenizer, device = policy.tokenizer, next(model.parameters()).device

    @torch.no_grad()
    def score(observation: str, answers: list[str]) -> list[float]:
        prompt = policy.prompt_ids(observation)
        targets = [tokenizer(a, add_special_tokens=False)["input_ids"] + [policy.end_of_turn] for a in answers]
        ids, attention, positions, mask = pack([prompt] * len(answers), targets, tokenizer.pad_token_id, device)
        logp, m = response_logprobs(model, ids, attention, positions, mask)
        return (logp * m).sum(dim=1).tolist()

    return score


def kuhn_metrics(model, policy: Policy, obs_format: str = "") -> dict[str, float]:
    probs, invalid_mass = kuhn_policy_from_scores(model_scorer(model, policy), obs_format)
    out = {"eval/kuhn_exploitability": kuhn_exploitability(probs), "eval/kuhn_invalid_mass": invalid_mass}
    out.update({f"eval/kuhn_p_bet/{k}": v for k, v in probs.items()})
    return out
