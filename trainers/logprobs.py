"""Per-token log-probs of responses given prompts, the one forward pass learner and SFT share."""

from __future__ import annotations

import torch


def pack(prompts: list[list[int]], responses: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, ...]:
    """Right-padded [prompt + response] ids, attention mask, and a mask of response positions."""
    width = max(len(p) + len(r) for p, r in zip(prompts, responses, strict=True))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    response_mask = torch.zeros((len(prompts), width), dtype=torch.float)
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        ids[i, : len(p) + len(r)] = torch.tensor(p + r)
        attention[i, : len(p) + len(r)] = 1
        response_mask[i, len(p) : len(p) + len(r)] = 1.0
    return ids.to(device), attention.to(device), response_mask.to(device)


def response_logprobs(
    model, ids: torch.Tensor, attention: torch.Tensor, response_mask: torch.Tensor, temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi(token_t | tokens_<t) at every response position ([batch, width-1]) and its mask.

    Logits are divided by the sampling temperature, so the numbers describe the distribution
    the tokens were actually drawn from (as SPIRAL's learner does).
    """
    logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1, :].float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    targets = ids[:, 1:]
    logp = torch.log_softmax(logits, dim=-1).gather(2, targets.unsqueeze(2)).squeeze(2)
    return logp, response_mask[:, 1:]
