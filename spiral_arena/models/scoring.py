"""Reading a policy off a model: the log-probability of each whole answer (its tokens, then the end of
turn) as the reply to an observation, at a sampling temperature. Exact Kuhn exploitability, TicTacToe
tactics and ``hf:`` agents' stated policies are all read this way."""

from __future__ import annotations

from collections.abc import Callable

import torch

from spiral_arena.models.logprobs import pack, response_logprobs
from spiral_arena.models.policy import Policy

GREEDY_TEMPERATURE = 1e-3  # temperature 0 (greedy) is read as this: the greedy path gets all the mass


def answer_scorer(model, policy: Policy, temperature: float = 1.0) -> Callable[[str, list[str]], list[float]]:
    """(observation, answers) -> log-prob of each whole answer (plus end of turn) under ``model``, prompted
    by ``policy``, sampled at ``temperature`` (each token's logits divided by it, as the engines sample;
    0 = greedy). The answers of one observation go through the model in one batch."""
    tokenizer, device = policy.tokenizer, next(model.parameters()).device
    temperature = temperature if temperature > 0 else GREEDY_TEMPERATURE

    @torch.no_grad()
    def score(observation: str, answers: list[str]) -> list[float]:
        prompt = policy.prompt_ids(observation)
        targets = [tokenizer(a, add_special_tokens=False)["input_ids"] + [policy.end_of_turn] for a in answers]
        ids, attention, positions, mask = pack([prompt] * len(answers), targets, tokenizer.pad_token_id, device)
        logp, m = response_logprobs(model, ids, attention, positions, mask, temperature)
        return (logp * m).sum(dim=1).tolist()

    return score
