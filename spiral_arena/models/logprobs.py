"""Per-token log-probs of responses given prompts, the one forward pass learner and SFT share.

Rows are laid out as ``[left padding | prompt | response | right padding]`` so every response
occupies the same last columns. The decoder runs once; only the response columns' hidden states
then go through the vocabulary projection, which skips it over the prompt (most of the cost for a
small model). The projection runs a chunk of tokens at a time, recomputed in backward, because
memory for whole fp32 logits grows with the vocabulary: [batch, response, vocab] is about 20 GB
per copy at micro-batch 8, 4,096 response tokens and Qwen's 152k vocabulary, and a softmax and its
backward hold several copies. Chunked, that part stays a few [chunk, vocab] tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import MethodType

import torch
from torch.distributed.fsdp import FSDPModule, register_fsdp_forward_method
from torch.utils.checkpoint import checkpoint

LOGITS_PER_CHUNK = 1024 * 151_936  # ~0.6 GB of fp32 logits per chunk


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
    chunk_size: int | None = None,
    *,
    entropy: bool = False,
) -> tuple[torch.Tensor, ...]:
    """log pi(response token | everything before it), [batch, R], and the response mask; with
    ``entropy``, a third [batch, R] tensor: the entropy of each position's next-token distribution
    over the whole vocabulary (what an entropy bonus raises), from the same logits.

    Logits are divided by the sampling temperature, so the numbers describe the distribution
    the tokens were actually drawn from (as SPIRAL's learner does). ``chunk_size`` response
    tokens go through the head at a time; 0 puts them all in one chunk; None sizes chunks to
    ``LOGITS_PER_CHUNK`` logits (1,024 tokens at Qwen's 152k vocabulary; one chunk, and no
    recomputation, for a small vocabulary like the tiny model's).
    """
    compute = fsdp_method(model) if isinstance(model, FSDPModule) else partial(token_logprobs, model)
    r_width = response_mask.shape[1]
    flat = compute(ids, attention, positions, r_width, temperature, chunk_size, entropy)
    if entropy:
        return flat[:, 0].view(ids.shape[0], r_width), response_mask, flat[:, 1].view(ids.shape[0], r_width)
    return flat.view(ids.shape[0], r_width), response_mask


def fsdp_method(model) -> Callable[..., torch.Tensor]:
    """``token_logprobs`` as a forward method of a fully_shard-ed model: FSDP2 gathers the root's own
    parameters (embeddings, final norm, head) only around the forward methods it knows of."""
    if not hasattr(model, "response_token_logprobs"):
        model.response_token_logprobs = MethodType(token_logprobs, model)
        register_fsdp_forward_method(model, "response_token_logprobs")
    return model.response_token_logprobs


def token_logprobs(
    model,
    ids: torch.Tensor,
    attention: torch.Tensor,
    positions: torch.Tensor,
    r_width: int,
    temperature: float,
    chunk_size: int | None,
    entropy: bool = False,
) -> torch.Tensor:
    """[batch * R] log-probs: the decoder once over every column, then the head and log-softmax a
    chunk of response tokens at a time (flat, as FSDP warns about a view for an output); with
    ``entropy``, [batch * R, 2]: log-prob and entropy side by side."""
    width = ids.shape[1]
    hidden = model.get_decoder()(
        input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=False
    ).last_hidden_state
    # column t's hidden state predicts token t + 1, so the R columns before each response token
    response_hidden = hidden[:, width - r_width - 1 : width - 1, :].reshape(-1, hidden.shape[-1])
    targets = ids[:, width - r_width :].reshape(-1)
    head = model.get_output_embeddings()
    softcap = getattr(model.config, "final_logit_softcapping", None)
    divide = temperature > 0 and temperature != 1.0

    def chunk_logprobs(chunk_hidden: torch.Tensor, chunk_targets: torch.Tensor) -> torch.Tensor:
        logits = head(chunk_hidden).float()
        if softcap is not None:  # as transformers' Gemma heads do, before any sampling temperature
            logits = torch.tanh(logits / softcap) * softcap
        if divide:
            logits = logits / temperature
        if not entropy:
            return logits.gather(1, chunk_targets.unsqueeze(1)).squeeze(1) - torch.logsumexp(logits, dim=-1)
        log_probs = torch.log_softmax(logits, dim=-1)
        chosen = log_probs.gather(1, chunk_targets.unsqueeze(1)).squeeze(1)
        return torch.stack([chosen, -(log_probs.exp() * log_probs).sum(dim=-1)], dim=1)

    if chunk_size is None:
        chunk_size = max(1, LOGITS_PER_CHUNK // head.weight.shape[0])
    step = chunk_size or max(1, targets.numel())
    # backward would otherwise keep every chunk's [chunk, vocab] logits alive; recomputing costs the head's forward
    recompute = torch.is_grad_enabled() and targets.numel() > step
    pieces = [
        checkpoint(chunk_logprobs, h, t, use_reentrant=False) if recompute else chunk_logprobs(h, t)
        for h, t in zip(torch.split(response_hidden, step), torch.split(targets, step), strict=True)
    ]
    return torch.cat(pieces)
