"""The learner: one policy update from a step's turns (old log-probs, then PPO-clip or REINFORCE epochs,
an optional KL anchor and entropy bonus, duplicate turns merged into weighted rows), the learning-rate
schedule and bf16 autocast."""

from __future__ import annotations

import logging
import math
from collections import defaultdict

import torch
from torch.distributed.tensor import DTensor

from spiral_arena.models.logprobs import pack, response_logprobs
from trainers.config import TrainConfig
from trainers.distributed import Distributed, is_sharded
from trainers.losses import aggregate, kl_per_token, policy_loss
from trainers.rollout import Turn

logger = logging.getLogger(__name__)


def update(
    model,
    reference,
    optimizer,
    turns: list[Turn],
    total: tuple[int, int],
    config: TrainConfig,
    rng,
    device,
    ddp: Distributed,
) -> dict[str, float]:
    """Old log-probs recomputed without grad, then ``epochs`` passes of one optimiser step each.

    Turns with the same prompt and response (and sign of advantage) go through the model once, as
    one row with their mean advantage and their count as weight (``merge_duplicates``): the tiny
    recipe's ~1,300 Kuhn and TicTacToe turns a step are ~420 rows. The loss and gradient
    are those of the unmerged batch for both losses, the KL, the entropy bonus and every
    aggregation (up to float rounding).

    Micro-batches accumulate into that step weighted by their share of the whole batch over every
    rank (``total`` = trained turns, their response tokens), so summing the ranks' gradients gives
    exactly the gradient of the full batch, however it was split. Forward passes run under bf16
    autocast when ``config.bf16``; parameters, gradients and AdamW state stay fp32.

    The first epoch's log-probs (taken before any optimiser step) are compared token by token with
    the log-probs the engine reported while sampling every turn: ``logprob_gap/mean`` and ``/max``.
    Near 0 means the rollouts came from the policy being trained; a gap means they did not (stale
    engine weights, a different dtype or a sampling transform the learner does not apply)."""
    if total[0] == 0:
        return {}
    by_tokens = config.aggregation == "token_mean"
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    # rows of like length share a micro-batch: less padding (a seventh of the tiny recipe's update), the same sums
    groups = sorted(merge_duplicates(turns), key=lambda g: len(g[0].prompt_ids) + len(g[0].response_ids))
    batches = [groups[i : i + config.micro_batch] for i in range(0, len(groups), config.micro_batch)]
    sharded, placeholder = is_sharded(model), None
    if sharded:  # every forward/backward is a collective: all ranks run as many micro-batches
        most = int(ddp.max([len(batches)])[0])
        placeholder = [Turn("", 0, "", [pad], [pad], [0.0], "", True)]  # weight 0: joins, adds nothing
        batches += [[placeholder]] * (most - len(batches))

    def forward(net, batch, grad: bool, entropy: bool = False):
        ids, attention, positions, mask = pack(
            [g[0].prompt_ids for g in batch], [g[0].response_ids for g in batch], pad, device
        )
        with torch.set_grad_enabled(grad), autocast(config, device):
            return response_logprobs(net, ids, attention, positions, mask, config.temperature, entropy=entropy)

    # PPO's ratio needs the pre-update log-probs; REINFORCE never reads them
    old = [forward(model, b, False)[0] for b in batches] if config.loss == "ppo" else [None] * len(batches)
    ref = [forward(reference, b, False)[0] for b in batches] if reference is not None else None
    kl_by_game = config.kl_by_game
    totals: dict[str, float] = defaultdict(float)
    gap_sum = gap_max = gap_tokens = 0.0
    model.train()
    for epoch in range(config.epochs):
        optimizer.zero_grad(set_to_none=True)
        for i in rng.permutation(len(batches)):
            batch = batches[i]
            logp, mask, *entropy = forward(model, batch, True, entropy=config.entropy_coef > 0)
            if batch[0] is placeholder:
                (logp.sum() * 0.0).backward()
                continue
            if epoch == 0:  # every merged turn against its own sampled log-probs
                members = [t for g in batch for t in g]
                rows = torch.tensor([row for row, g in enumerate(batch) for _ in g], device=device)
                engine_logp, known = generation_logprobs(members, mask[rows])
                gap = (logp.detach()[rows] - engine_logp).abs() * known
                gap_sum, gap_tokens = gap_sum + float(gap.sum()), gap_tokens + float(known.sum())
                gap_max = max(gap_max, float(gap.max()))
            advantages = torch.tensor([sum(t.advantage for t in g) / len(g) for g in batch], device=device)
            weights = torch.tensor([float(len(g)) for g in batch], device=device)
            loss, info = policy_loss(
                logp,
                old[i],
                advantages,
                mask,
                config.loss,
                config.clip,
                config.aggregation,
                config.max_new_tokens,
                clip_high=config.clip_high or None,
                dual_clip=config.dual_clip or None,
                weights=weights,
            )
            objective = loss
            if ref:  # each turn's KL at its game's weight (kl_by_game); the logged kl is unweighted
                coefs = torch.tensor([kl_by_game[g[0].game] for g in batch], device=device)
                per_token = kl_per_token(logp, ref[i], config.kl_estimator)
                args = (mask, config.aggregation, config.max_new_tokens, weights)
                kl = aggregate(per_token.detach(), *args)
                objective = objective + aggregate(per_token * coefs[:, None], *args)
            # this micro-batch's part of the whole batch (over all ranks): by turns, or by tokens for token_mean
            if by_tokens:
                share = sum(len(g[0].response_ids) * len(g) for g in batch) / total[1]
            else:
                share = sum(len(g) for g in batch) / total[0]
            if entropy:  # the bonus: a higher entropy lowers the objective
                mean_entropy = aggregate(entropy[0], mask, config.aggregation, config.max_new_tokens, weights)
                objective = objective - config.entropy_coef * mean_entropy
                totals["entropy"] += mean_entropy.item() * share / config.epochs
            # FSDP averages gradients over ranks; scaling by the rank count makes that the sum
            (objective * share * (ddp.world if sharded else 1)).backward()
            totals["loss"] += loss.item() * share / config.epochs
            totals["clip_fraction"] += info["clip_fraction"] * share / config.epochs
            totals["dual_clip_fraction"] += info.get("dual_clip_fraction", 0.0) * share / config.epochs
            if ref:
                totals["kl"] += kl.item() * share / config.epochs
        if not sharded:
            ddp.sum_gradients(model)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        if isinstance(grad_norm, DTensor):
            grad_norm = grad_norm.full_tensor()
        totals["grad_norm"] += float(grad_norm) / config.epochs
        optimizer.step()
    keys = ("loss", "clip_fraction", "kl", "dual_clip_fraction", "entropy")
    summed = ddp.sum([totals[k] for k in keys] + [gap_sum, gap_tokens])
    stats = {**dict(zip(keys, summed[:5], strict=True)), "grad_norm": totals["grad_norm"]}
    if not config.dual_clip:
        del stats["dual_clip_fraction"]
    if not config.entropy_coef:
        del stats["entropy"]
    if summed[6] == 0:  # no turn carried engine log-probs
        return stats
    stats["logprob_gap/mean"] = summed[5] / summed[6]
    stats["logprob_gap/max"] = ddp.max([gap_max])[0]
    if stats["logprob_gap/mean"] > config.logprob_gap_warn:
        logger.warning(
            "rollouts look off-policy: mean |generation log-prob - learner log-prob| = %.4f per token "
            "(max %.4f, warning above %g); check that the engine samples from the learner's weights",
            stats["logprob_gap/mean"],
            stats["logprob_gap/max"],
            config.logprob_gap_warn,
        )
    return stats


def merge_duplicates(turns: list[Turn]) -> list[list[Turn]]:
    """``turns`` grouped by (prompt tokens, response tokens, sign of the advantage), in order of first
    appearance. Members share their log-probs, and both losses are linear in the advantage within a
    sign (PPO's clip and dual clip depend on the sign only), so one row with the group's mean
    advantage, weighted by its size, carries the whole group's loss and gradient."""
    groups: dict[tuple, list[Turn]] = {}
    for turn in turns:
        key = (tuple(turn.prompt_ids), tuple(turn.response_ids), turn.advantage > 0)
        groups.setdefault(key, []).append(turn)
    return list(groups.values())


def generation_logprobs(batch: list[Turn], mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The engine's per-token log-probs of ``batch`` laid out like ``mask`` ([batch, R]), and where
    they are known (turns from elsewhere, e.g. replayed transcripts, carry none)."""
    values, known = torch.zeros_like(mask), torch.zeros_like(mask)
    for row, turn in enumerate(batch):
        values[row, : len(turn.logprobs)] = torch.tensor(turn.logprobs, dtype=values.dtype)
        known[row, : len(turn.logprobs)] = 1.0
    return values, known * mask


def autocast(config: TrainConfig, device: torch.device):
    """bf16 compute for forward passes when ``config.bf16``, over fp32 parameters.

    The weights themselves stay fp32 (master weights): at SPIRAL's lr of 1e-6 an AdamW step is
    below bf16's resolution for almost every weight, so updating bf16 weights changes ~2% of them.
    Memory per parameter: 4 (fp32 weight) + 4 (grad) + 8 (AdamW) bytes, the same as bf16 weights
    with a separate fp32 master copy, and simpler."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.bf16)


def lr_factor(config: TrainConfig, step: int) -> float:
    if config.warmup_steps and step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    if config.lr_schedule in ("constant", "warmup"):
        return 1.0
    if config.lr_schedule == "cosine":
        horizon = max(1, config.steps - config.warmup_steps)
        progress = min(1.0, (step - config.warmup_steps) / horizon)
        floor = config.lr_min / config.lr
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
    raise ValueError(f"lr_schedule must be constant, warmup or cosine; got {config.lr_schedule!r}")
