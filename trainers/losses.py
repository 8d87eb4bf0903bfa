"""Policy-gradient losses on per-token log-probs, and how tokens are summed into one number.

Shapes: ``logprobs``, ``old_logprobs``, ``mask`` are [batch, tokens] (mask 1 on response tokens),
``advantages`` is [batch] (one scalar per turn, broadcast to its tokens), ``coefficients`` is [batch]: each
row's factor in the batch's token sum (``row_coefficients``), ``weights`` is [batch]: how many identical
turns each row stands for (the learner merges duplicates; None = one each), for the statistics.

SPIRAL uses a symmetric PPO clip and Dr.GRPO aggregation; the 20 Questions recipes (StarPO and
ΔBelief-RL) a wider upper clip (ε_low 0.2, ε_high 0.28), dual-clip c = 3, and the token mean of each game
(StarPO) or of each group of games (ΔBelief), then the mean over them (verl's rules as delta-belief-rl
runs them).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

AGGREGATIONS = ("dr_grpo", "token_mean", "seq_mean_token_mean", "game_mean_token_mean", "group_mean_token_mean")
KL_ESTIMATORS = ("k3", "k2")
LOSSES = ("ppo", "reinforce")
TIS_MODES = ("none", "truncate", "mask")
TIS_LEVELS = ("token", "sequence", "geometric")
# the token means, by what one unit of the mean is: every token of the batch, one turn, one game, one group
UNITS = {"token_mean": "batch", "seq_mean_token_mean": "turn", "game_mean_token_mean": "game",
         "group_mean_token_mean": "group"}  # fmt: skip


def _local(values: list[float]) -> list[float]:
    return values


def row_coefficients(
    tokens: torch.Tensor,
    how: str,
    max_tokens: int,
    units: torch.Tensor | None = None,
    reduce: Callable[[list[float]], list[float]] = _local,
) -> torch.Tensor:
    """Each row's factor c, given its number of response ``tokens``, such that the aggregated loss is
    sum_rows c * sum_tokens(loss * mask): every aggregation is a weighted token sum, so a batch split into
    micro-batches (or over ranks) adds up to the whole batch's loss exactly, and identical rows merge by
    adding their factors.

    ``dr_grpo``: each row's token sum / ``max_tokens`` (the generation limit), mean over rows, so long answers
    are not down-weighted per token (Dr.GRPO, SPIRAL's). The token means: ``token_mean`` over every token;
    ``seq_mean_token_mean`` each turn's own token mean, then the mean over turns; ``game_mean_token_mean`` and
    ``group_mean_token_mean`` the token mean of each unit (``units``: each row's game or group id), then the
    mean over units: delta-belief-rl's two losses, whose row is a whole game (StarPO: verl's
    seq-mean-token-mean) and whose micro-batch is one group of 16 games (delta-belief: verl's token-mean
    within a micro-batch, then the mean over micro-batches). Units without tokens do not count. ``reduce``
    sums a list of numbers over ranks (rank-local ``units``: a game or group lives on one rank)."""
    if how == "dr_grpo":
        rows = reduce([float(tokens.shape[0])])[0]
        return torch.full_like(tokens, 1.0 / (max_tokens * max(rows, 1.0)))
    if how == "token_mean":
        return torch.full_like(tokens, 1.0 / max(reduce([float(tokens.sum())])[0], 1.0))
    if how not in UNITS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {how!r}")
    if how == "seq_mean_token_mean":
        units = torch.arange(tokens.shape[0], device=tokens.device)
    elif units is None or units.shape != tokens.shape:
        raise ValueError(f"{how} needs one {UNITS[how]} id per row")
    unit_tokens = torch.zeros(int(units.max()) + 1 if len(units) else 0, dtype=tokens.dtype, device=tokens.device)
    unit_tokens.index_add_(0, units, tokens)
    live = reduce([float((unit_tokens > 0).sum())])[0]
    own = unit_tokens[units]
    return torch.where(own > 0, 1.0 / own.clamp(min=1.0), 0.0) / max(live, 1.0)


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, coefficients: torch.Tensor) -> torch.Tensor:
    """sum_rows coefficient * sum_tokens(per_token * mask): the loss under the rows' ``row_coefficients``."""
    return ((per_token * mask).sum(dim=1) * coefficients).sum()


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    coefficients: torch.Tensor,
    kind: str = "ppo",
    clip: float = 0.2,
    *,
    clip_high: float | None = None,
    dual_clip: float | None = None,
    weights: torch.Tensor | None = None,
    token_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clip, or REINFORCE (-A * log pi); returns the loss (the rows' ``coefficients``-weighted token
    sum) and its clip statistics.

    The ratio exp(log pi - log pi_old), its exponent held to [-20, 20] (verl's guard against overflow), is
    clipped to [1 - clip, 1 + clip_high] (``clip_high`` None: symmetric, SPIRAL's rule). A wider upper bound
    lets unlikely tokens with positive advantage gain more per step, which keeps exploration alive (DAPO's
    "clip higher"). ``dual_clip`` c > 1 bounds the loss of a token with
    negative advantage by -c * A: without it a token whose ratio has grown far above 1 + clip_high
    (off-policy data) would get a loss, and a gradient, that grows with the ratio without limit; with
    it such a token contributes a constant and no gradient. Positive advantages are untouched.

    ``token_weights`` [batch, tokens] (no gradient) multiply each token's loss: the off-policy correction
    of rollouts sampled by older weights (``importance_weights``); the clip statistics do not count them.

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
        ratio = torch.exp((logprobs - old_logprobs).clamp(-20.0, 20.0))
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
    if token_weights is not None:
        per_token = per_token * token_weights
    return aggregate(per_token, mask, coefficients), stats


def importance_weights(
    learner_logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    known: torch.Tensor,
    mode: str,
    cap: float,
    lower: float = 0.0,
    level: str = "token",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token weights that correct rollouts sampled by other weights than the learner's, from the ratio
    rho = pi_learner / mu, pi_learner being the learner's log-probs before its first optimiser step of the
    policy step (PPO's old ones) and mu the engine's at sampling. ``level`` says whose ratio: "token", each
    token's own; "sequence", the row's product exp(sum of log-ratios) (verl's sequence-level ratio);
    "geometric", the row's geometric mean exp(mean of log-ratios) (the per-token size of the sequence's
    mismatch); a row's ratio weighs each of its tokens. The log-ratio (its sum for a sequence) is held to
    [-20, 20]. ``mode``: "truncate", min(rho, cap) (truncated importance sampling); "mask", rho where
    lower <= rho <= cap and 0 outside (masked importance sampling: verl's rollout_is masks two-sided with
    lower 1/cap, TRL and the first masked IS above the cap only, lower 0); "none", 1. Where ``known`` is 0
    (a token whose sampling log-prob was not recorded, or padding) the weight is 1, and it takes no part in
    a row's ratio.

    Returns (weights, rho, bounded): each token's rho and where the bounds acted, for the statistics."""
    if mode not in TIS_MODES:
        raise ValueError(f"tis must be one of {TIS_MODES}, got {mode!r}")
    if level not in TIS_LEVELS:
        raise ValueError(f"tis_level must be one of {TIS_LEVELS}, got {level!r}")
    if cap < 1.0:
        raise ValueError(f"tis_cap must be at least 1 (a ratio of 1 is on-policy), got {cap}")
    if not 0.0 <= lower <= 1.0:
        raise ValueError(f"tis_lower must be in [0, 1] (a ratio of 1 is on-policy), got {lower}")
    log_ratio = (learner_logprobs - behaviour_logprobs) * known
    if level == "token":
        rho = torch.exp(log_ratio.clamp(-20.0, 20.0))
    else:
        total = log_ratio.sum(dim=1, keepdim=True)
        if level == "geometric":
            total = total / known.sum(dim=1, keepdim=True).clamp(min=1.0)
        rho = torch.exp(total.clamp(-20.0, 20.0)).expand_as(log_ratio)
    live = known > 0
    if mode == "truncate":
        bounded = (rho > cap) & live
        weights = rho.clamp(max=cap)
    elif mode == "mask":
        bounded = ((rho > cap) | (rho < lower)) & live
        weights = torch.where(bounded, 0.0, rho)
    else:
        weights, bounded = torch.ones_like(rho), torch.zeros_like(live)
    return torch.where(live, weights, 1.0), rho, bounded


def kl_per_token(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """KL(pi || pi_ref) estimated at each sampled token, with d = ref - logp: k3 = exp(d) - d - 1, or
    k2 = d^2 / 2 (``TrainConfig.kl_estimator`` says what each one's gradient pulls toward). The learner
    aggregates it like the policy loss, once as logged and once times each turn's game KL weight. Keeps the
    tiny model near its warm start so it cannot collapse (docs/results/learning.md)."""
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")
    d = ref_logprobs - logprobs
    return torch.exp(d) - d - 1.0 if estimator == "k3" else 0.5 * d * d
