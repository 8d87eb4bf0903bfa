"""Sampling with transformers: a batched loop with a KV cache over the learner's own model.

Prompts are left-padded into one batch; each row keeps its own positions, so every prompt gets
exactly the completion it would get alone. Log-probs are those of the tempered distribution
the token was drawn from.
"""

from __future__ import annotations

import torch

from trainers.engines import Completion


class HFEngine:
    def __init__(self, model, stop_ids: list[int], pad_token_id: int) -> None:
        self.model = model  # shared with the learner: no weight copy is needed
        self.stop_ids, self.pad = list(stop_ids), pad_token_id
        self.eos = self.stop_ids[0]  # TODO(helper): stop on any of stop_ids

    def load_weights(self, model) -> None:
        self.model = model

    def sleep(self) -> None:
        pass

    def wake(self) -> None:
        pass

    @torch.no_grad()
    def generate(
        self, prompts: list[list[int]], max_new_tokens: int, temperature: float, top_p: float, seed: int
    ) -> list[Completion]:
        if not prompts:
            return []
        device = next(self.model.parameters()).device
        generator = torch.Generator(device=device).manual_seed(seed)
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad, dtype=torch.long, device=device)
        mask = torch.zeros((len(prompts), width), dtype=torch.long, device=device)
        for i, p in enumerate(prompts):
            input_ids[i, width - len(p) :] = torch.tensor(p, device=device)
            mask[i, width - len(p) :] = 1
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        was_training = self.model.training
        self.model.eval()
        out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True)
        cache, logits = out.cache, out.logits[:, -1, :]
        next_position = positions[:, -1:] + 1
        tokens = torch.empty((len(prompts), 0), dtype=torch.long, device=device)
        logps = torch.empty((len(prompts), 0), device=device)
        done = torch.zeros(len(prompts), dtype=torch.bool, device=device)
        for _ in range(max_new_tokens):
            token, logp = sample(logits, temperature, top_p, generator)
            token = torch.where(done, torch.full_like(token, self.pad), token)
            tokens = torch.cat([tokens, token[:, None]], dim=1)
            logps = torch.cat([logps, logp[:, None]], dim=1)
            done |= token == self.eos
            if bool(done.all()):
                break
            mask = torch.cat([mask, torch.ones_like(token)[:, None]], dim=1)
            out = self.model(
                input_ids=token[:, None],
                attention_mask=mask,
                position_ids=next_position,
                cache=cache,
                use_cache=True,
            )
            cache, logits = out.cache, out.logits[:, -1, :]
            next_position = next_position + 1
        self.model.train(was_training)
        return [self._completion(tokens[i].tolist(), logps[i].tolist()) for i in range(len(prompts))]

    def _completion(self, ids: list[int], logps: list[float]) -> Completion:
        if self.eos in ids:
            end = ids.index(self.eos) + 1
            return Completion(ids[:end], logps[:end], True)
        return Completion(ids, logps, False)


def sample(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row; temperature 0 is greedy (log-prob then from the untempered softmax)."""
    if temperature <= 0:
        logp = torch.log_softmax(logits.float(), dim=-1)
        token = logp.argmax(dim=-1)
        return token, logp.gather(1, token[:, None]).squeeze(1)
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    probs = logp.exp()
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        outside = sorted_probs.cumsum(dim=-1) - sorted_probs > top_p
        sorted_probs = sorted_probs.masked_fill(outside, 0.0)
        probs = torch.zeros_like(probs).scatter(1, order, sorted_probs)
        probs = probs / probs.sum(dim=-1, keepdim=True)
        logp = probs.clamp(min=1e-30).log()
    token = torch.multinomial(probs, 1, generator=generator).squeeze(1)
    return token, logp.gather(1, token[:, None]).squeeze(1)
