"""Reading a policy off a model: the log-probability of each whole answer (its tokens, then the end of
turn) as the reply to an observation, at a sampling temperature. Exact Kuhn exploitability, TicTacToe
tactics and ``hf:`` agents' stated policies are all read this way."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from spiral_arena.models.logprobs import pack, response_logprobs
from spiral_arena.models.policy import Policy

GREEDY_TEMPERATURE = 1e-3  # temperature 0 (greedy) is read as this: the greedy path gets all the mass


class AnswerScorer:
    """(observation, answers) -> log-prob of each whole answer (plus end of turn) under ``model``, prompted
    by ``policy``, sampled at ``temperature`` (each token's logits divided by it, as the engines sample;
    0 = greedy). ``many`` scores many observations' answers together, ``rows`` answers per forward pass:
    a read-out over thousands of positions then costs tens of passes, not thousands."""

    def __init__(self, model, policy: Policy, temperature: float = 1.0, rows: int = 256) -> None:
        self.model, self.policy, self.rows = model, policy, rows
        self.temperature = temperature if temperature > 0 else GREEDY_TEMPERATURE
        self.device = next(model.parameters()).device

    def __call__(self, observation: str, answers: list[str]) -> list[float]:
        return self.many([(observation, answers)])[0]

    @torch.no_grad()
    def many(self, items: Sequence[tuple[str, list[str]]]) -> list[list[float]]:
        tokenizer, end = self.policy.tokenizer, self.policy.end_of_turn
        answer_ids: dict[str, list[int]] = {}  # a read-out asks the same few answers at every position
        rows = []
        for observation, answers in items:
            prompt = self.policy.prompt_ids(observation)
            for answer in answers:
                if answer not in answer_ids:
                    answer_ids[answer] = tokenizer(answer, add_special_tokens=False)["input_ids"] + [end]
                rows.append((prompt, answer_ids[answer]))
        # rows of similar length share a pass, so little of it is spent on padding
        order = sorted(range(len(rows)), key=lambda i: (len(rows[i][0]), len(rows[i][1])))
        scores = [0.0] * len(rows)
        for start in range(0, len(rows), self.rows):
            chunk = order[start : start + self.rows]
            ids, attention, positions, mask = pack(
                [rows[i][0] for i in chunk], [rows[i][1] for i in chunk], tokenizer.pad_token_id, self.device
            )
            logp, m = response_logprobs(self.model, ids, attention, positions, mask, self.temperature)
            for i, score in zip(chunk, (logp * m).sum(dim=1).tolist(), strict=True):
                scores[i] = score
        out, at = [], 0
        for _, answers in items:
            out.append(scores[at : at + len(answers)])
            at += len(answers)
        return out


def answer_scorer(model, policy: Policy, temperature: float = 1.0) -> AnswerScorer:
    """The answer scorer of ``model`` as ``policy`` prompts it, at ``temperature`` (see ``AnswerScorer``)."""
    return AnswerScorer(model, policy, temperature)
