"""Policy-gradient losses on per-token log-probs, and how tokens are summed into one number.

Shapes: ``logprobs``, ``old_logprobs``, ``mask`` are [batch, tokens] (mask 1 on response tokens),
``advantages`` is [batch] (one scalar per turn, broadcast to its tokens), ``weights`` is [batch]: how
many identical turns each row stands for (the learner merges duplicates; None = one each).

SPIRAL uses a symmetric PPO clip and Dr.GRPO aggregation; the 20 Questions recipe (StarPO and
ΔBelief-RL) uses a wider upper clip (ε_low 0.2, ε_high 0.28), dual-clip c = 3 and the mean over each
sequence's tokens, then over sequences.
"""

from __future__ import annotations

import torch

AGGREGATIONS = ("dr_grpo", "token_mean", "seq_mean_token_mean")
KL_ESTIMATORS = ("k3", "k2")
LOSSES = ("ppo", "reinforce")


def aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, how: str, max_tokens: int, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """``dr_grpo``: sum over tokens / a constant (the generation limit), mean over the batch, so
    long answers are not down-weighted per token (Dr.GRPO); ``token_mean``: mean over all tokens;
    ``seq_mean_token_mean``: mean over each sequence's tokens, then over the sequences that have
    tokens, so every turn weighs the same whatever its length (verl's name, the 20 Questions recipe).
    A row of weight w counts as w copies of itself, so merging identical turns changes nothing."""
    w = torch.ones(mask.shape[0], dtype=mask.dtype, device=mask.device) if weights is None else weights
    if how == "dr_grpo":
        return ((per_token * mask).sum(dim=1).div(max_tokens) * w).sum() / w.sum().clamp(min=1)
    if how == "token_mean":
        return (per_token * mask).sum(dim=1).mul(w).sum() / mask.sum(dim=1).mul(w).sum().clamp(min=1)
    if how == "seq_mean_token_mean":
        tokens_per_sequence = mask.sum(dim=1)
        sequence_means = (per_token * mask).sum(dim=1) / tokens_per_sequence.clamp(min=1)
        return (sequence_means * w).sum() / (w * (tokens_per_sequence > 0)).sum().clamp(min=1)
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
    *,
    clip_high: float | None = None,
    dual_clip: float | None = None,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clip, or REINFORCE (-A * log pi); returns the loss and its clip statistics.

    The ratio is clipped to [1 - clip, 1 + clip_high] (``clip_high`` None: symmetric, SPIRAL's rule).
    A wider upper bound lets unlikely tokens with positive advantage gain more per step, which keeps
    exploration alive (DAPO's "clip higher"). ``dual_clip`` c > 1 bounds the loss of a token with
    negative advantage by -c * A: without it a token whose ratio has grown far above 1 + clip_high
    (off-policy data) would get a loss, and a gradient, that grows with the ratio without limit; with
    it such a token contributes a constant and no gradient. Positive advantages are untouched.

    ``clip_fraction``: share of response tokens where the clipped term was taken; with dual clip,
    ``dual_clip_fraction``: share where the -c * A bound was taken (both counting ``weights``).
    """
    if advantages.dim() != 1:
        raise ValueError(f"advantages must have shape [batch] (one per turn), got {tuple(advantages.shape)}")
    if clip_high is not None and clip_high <= 0:
        raise ValueError(f"clip_high must be positive, got {clip_high}")
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be greater than 1, got {dual_clip}")
    adv = advantages.unsqueeze(1)
    mask_w = mask if weights is None else mask * weights.unsqueeze(1)  # statistics count merged turns too
    tokens = mask_w.sum().clamp(min=1)
    stats: dict[str, float] = {}
    if kind == "ppo":
        ratio = torch.exp(logprobs - old_logprobs)
        upper = clip if clip_high is None else clip_high
        unclipped_loss = -ratio * adv
        clipped_loss = -ratio.clamp(1.0 - clip, 1.0 + upper) * adv
        per_token = torch.maximum(unclipped_loss, clipped_loss)
        stats["clip_fraction"] = float(((clipped_loss > unclipped_loss).float() * mask_w).sum() / tokens)
        if dual_clip is not None:
            bound = -dual_clip * adv
            bounded = (adv < 0) & (per_token > bound)
            per_token = torch.where(bounded, bound, per_token)
            stats["dual_clip_fraction"] = float((bounded.float() * mask_w).sum() / tokens)
    elif kind == "reinforce":
        per_token = -logprobs * adv
        stats["clip_fraction"] = 0.0
    else:
        raise ValueError(f"loss must be one of {LOSSES}, got {kind!r}")
    return aggregate(per_token, mask, aggregation, max_tokens, weights), stats


def kl_per_token(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """KL(pi || pi_ref) estimated at each sampled token, with d = ref - logp: k3 = exp(d) - d - 1, or
    k2 = d^2 / 2 (``TrainConfig.kl_estimator`` says what each one's gradient pulls toward). The learner
    aggregates it like the policy loss, once as logged and once times each turn's game KL weight. Keeps the
    tiny model near its warm start so it cannot collapse (docs/results/learning.md)."""
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")
    d = ref_logprobs - logprobs
    return torch.exp(d) - d - 1.0 if estimator == "k3" else 0.5 * d * d
