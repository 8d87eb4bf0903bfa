"""Per-token log-probs of responses given prompts, the one forward pass learner and SFT share.

Rows are laid out as ``[left padding | prompt | response | right padding]`` so every response
occupies the same last columns; the model then computes logits for those columns only
(``logits_to_keep``), which skips the vocabulary projection over the prompt: most of the cost
for a small model.
"""

from __future__ import annotations

import torch


def pack(prompts: list[list[int]], responses: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, ...]:
    """ids, attention mask, position ids, and the mask of real response tokens ([batch, R])."""
    p_width = max(len(p) for p in prompts)
    r_width = max(len(r) for r in responses)
    n = len(prompts)
    ids = torch.full((n, p_width + r_width), pad_id, dtype=torch.long)
    attention = torch.zeros((n, p_width + r_width), dtype=torch.long)
    response_mask = torch.zeros((n, r_width), dtype=torch.float)
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        ids[i, p_width - len(p) : p_width + len(r)] = torch.tensor(p + r)
        attention[i, p_width - len(p) : p_width + len(r)] = 1
        response_mask[i, : len(r)] = 1.0
    positions = (attention.cumsum(dim=1) - 1).clamp(min=0)
    return ids.to(device), attention.to(device), positions.to(device), response_mask.to(device)


def response_logprobs(
    model,
    ids: torch.Tensor,
    attention: torch.Tensor,
    positions: torch.Tensor,
    response_mask: torch.Tensor,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi(response token | everything before it), [batch, R], and the response mask.

    Logits are divided by the sampling temperature, so the numbers describe the distribution
    the tokens were actually drawn from (as SPIRAL's learner does).
    """
    r_width = response_mask.shape[1]
    logits = (
        model(input_ids=ids, attention_mask=attention, position_ids=positions, logits_to_keep=r_width + 1)
        .logits[:, :-1, :]
        .float()
    )
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    targets = ids[:, -r_width:]
    logp = torch.log_softmax(logits, dim=-1).gather(2, targets.unsqueeze(2)).squeeze(2)
    return logp, response_mask
