"""Policy-gradient losses on per-token log-probs, and how tokens are summed into one number.

Shapes: ``logprobs``, ``old_logprobs``, ``mask`` are [batch, tokens] (mask 1 on response tokens),
``advantages`` is [batch] (one scalar per turn, broadcast to its tokens).
"""

from __future__ import annotations

import torch

AGGREGATIONS = ("dr_grpo", "token_mean")
LOSSES = ("ppo", "reinforce")


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, how: str, max_tokens: int) -> torch.Tensor:
    """``dr_grpo``: sum over tokens / a constant (the generation limit), mean over the batch, so
    long answers are not down-weighted per token (Dr.GRPO); ``token_mean``: mean over all tokens."""
    if how == "dr_grpo":
        return (per_token * mask).sum(dim=1).div(max_tokens).mean()
    if how == "token_mean":
        return (per_token * mask).sum() / mask.sum().clamp(min=1)
    raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {how!r}")


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    kind: str = "ppo",
    clip: float = 0.2,
    aggregation: str = "dr_grpo",
    max_tokens: int = 4096,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clip, or REINFORCE (-A * log pi); returns the loss and the clip fraction."""
    adv = advantages.unsqueeze(1)
    if kind == "ppo":
        ratio = torch.exp(logprobs - old_logprobs)
        unclipped = ratio * adv
        clipped = ratio.clamp(1.0 - clip, 1.0 + clip) * adv
        per_token = -torch.minimum(unclipped, clipped)
        clipped_share = ((unclipped > clipped).float() * mask).sum() / mask.sum().clamp(min=1)
    elif kind == "reinforce":
        per_token = -logprobs * adv
        clipped_share = torch.zeros(())
    else:
        raise ValueError(f"loss must be one of {LOSSES}, got {kind!r}")
    return aggregate(per_token, mask, aggregation, max_tokens), {"clip_fraction": float(clipped_share)}


def kl_to_reference(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor, aggregation: str, max_tokens: int
) -> torch.Tensor:
    """k3 estimator of KL(pi || pi_ref) on the sampled tokens: exp(d) - d - 1 with d = ref - logp.
    Keeps the tiny model near its warm start so it cannot collapse (see the README's learning notes)."""
    d = ref_logprobs - logprobs
    return aggregate(torch.exp(d) - d - 1.0, mask, aggregation, max_tokens)
