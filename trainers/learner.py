"""The learner: one policy update from a step's turns (old log-probs, then PPO-clip or REINFORCE epochs over
mini-batches, an optional KL anchor and entropy bonus, duplicate turns merged into weighted rows), the
learning-rate schedule and bf16 autocast."""

from __future__ import annotations

import dataclasses
import logging
import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch
from torch.distributed.tensor import DTensor

from spiral_arena.models.logprobs import pack, response_logprobs
from spiral_arena.rollout import Turn
from trainers.config import AsyncConfig, LearnerConfig, ModelConfig, TrainConfig
from trainers.distributed import Distributed, is_sharded
from trainers.losses import UNITS, aggregate, importance_weights, kl_per_token, policy_loss, row_coefficients

logger = logging.getLogger(__name__)


@dataclass
class Row:
    """Identical turns trained as one row: their summed coefficient, their coefficient-weighted mean advantage."""

    turns: list[Turn]
    coefficient: float
    advantage: float


def update(model, reference, optimizer, turns: list[Turn], config: TrainConfig, rng, device, ddp: Distributed):
    """Old log-probs recomputed without grad, then ``epochs`` passes over ``mini_batches`` parts of the
    step's turns (those of advantage 0 left out with ``filter_zero_adv``), one optimiser step per part.

    The parts are runs of whole groups in the step's order (a self-play game is its own group), as verl
    splits its batch into PPO mini-batches: after the first part's step the others are off-policy, which is
    where PPO's clips act. Each part is normalised as a batch of its own over every rank
    (``losses.row_coefficients``), so its micro-batches add up to exactly its loss and gradient, however it
    was split. With ``train_stop_token`` off the end-of-turn token is left out of the loss, as
    delta-belief-rl's mask leaves ``<|im_end|>`` out.

    Turns with the same prompt and response (and sign of advantage) go through the model once, as one row
    (``merge_duplicates``): the tiny recipe's ~1,300 Kuhn and TicTacToe turns a step are ~420 rows, and the
    loss and gradient are those of the unmerged batch for both losses, the KL, the entropy bonus and every
    aggregation (up to float rounding). Forward passes run under bf16 autocast when ``config.bf16``;
    parameters, gradients and AdamW state stay fp32. A step whose gradient norm is not finite is skipped, as
    verl skips it.

    Each turn's log-probs before any optimiser step are compared token by token with the log-probs the
    engine reported while sampling it: ``logprob_gap/mean`` and ``/max``. Near 0 means the rollouts came from
    the policy being trained; a gap means they did not (stale engine weights, a different dtype or a sampling
    transform the learner does not apply)."""
    # a zero advantage gives no gradient: SPIRAL leaves such turns out, delta-belief-rl keeps them in the means
    turns = [trainable(t, config.train_stop_token) for t in turns if t.advantage != 0.0 or not config.filter_zero_adv]
    trained = int(ddp.sum([float(len(turns))])[0])
    if trained == 0:
        return {"trained": 0}
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    split = split_by_group(turns, config.mini_batches)
    parts = [micro_batches(part, config, ddp) for part in split]  # each part's micro-batches of rows
    placeholder = None
    if is_sharded(model):  # every forward/backward is a collective: all ranks run as many micro-batches
        placeholder = Row([Turn("", 0, "", [pad], [pad], [0.0], "", True)], 0.0, 0.0)  # coefficient 0: adds nothing
        for batches, n in zip(parts, ddp.max([float(len(batches)) for batches in parts]), strict=True):
            batches += [[placeholder]] * (int(n) - len(batches))
    learner = Update(model, optimizer, config, device, ddp, pad, placeholder, config.epochs * len(parts))
    # the learner's log-probs before any step: PPO's ratio reads them, and so do the on-policy check when later
    # mini-batches are taken after a step and the off-policy correction (REINFORCE on one mini-batch, on-policy,
    # reads its first pass instead)
    correct = config.tis != "none"
    keep_old = config.loss == "ppo" or len(parts) > 1 or correct
    old = [[learner.forward(model, b, False)[:2] for b in batches] if keep_old else None for batches in parts]
    ref = None
    if reference is not None:
        ref = [[learner.forward(reference, b, False)[0] for b in batches] for batches in parts]
    # per batch: each token's importance weight (rollouts sampled by other weights: async_steps)
    tis = learner.importance(parts, old, correct) if keep_old else None
    if tis is not None and config.tis_drop_masked:
        for part_turns, batches, weights, before in zip(split, parts, tis, old, strict=True):
            drop_masked(part_turns, batches, weights, [mask for _, mask in before], config, ddp.sum)
    model.train()
    for epoch in range(config.epochs):
        for k, batches in enumerate(parts):
            learner.step(batches, rng, epoch == 0 and not keep_old, old[k] if config.loss == "ppo" else None,
                         ref[k] if ref else None, tis[k] if tis else None)  # fmt: skip
    return learner.stats(trained, bool(ref), correct)


def micro_batches(part: list[Turn], config: LearnerConfig, ddp: Distributed) -> list[list[Row]]:
    """One part's turns as merged rows (``merge_duplicates``), in micro-batches of rows of like length."""
    coefficients = part_coefficients(part, [float(len(t.response_ids)) for t in part], config, ddp.sum)
    rows = [r for r in merge_duplicates(part, coefficients) if r.turns[0].response_ids]
    # rows of like length share a micro-batch: less padding (a seventh of the tiny recipe's update), the same sums
    rows.sort(key=lambda r: len(r.turns[0].prompt_ids) + len(r.turns[0].response_ids))
    return [rows[i : i + config.micro_batch] for i in range(0, len(rows), config.micro_batch)]


class Update:
    """One update's passes: forward passes over rows, optimiser steps, and the sums its statistics come from."""

    def __init__(self, model, optimizer, config: TrainConfig, device, ddp: Distributed, pad: int, placeholder, steps):
        self.model, self.optimizer, self.config, self.device, self.ddp = model, optimizer, config, device, ddp
        self.pad, self.placeholder, self.steps = pad, placeholder, steps  # steps: optimiser steps in the update
        self.totals: dict[str, float] = defaultdict(float)
        self.gap = [0.0, 0.0, 0.0]  # summed |gap|, tokens compared, max

    def forward(self, net, batch: list[Row], grad: bool, entropy: bool = False):
        ids, attention, positions, mask = pack(
            [r.turns[0].prompt_ids for r in batch], [r.turns[0].response_ids for r in batch], self.pad, self.device
        )
        with torch.set_grad_enabled(grad), autocast(self.config, self.device):
            return response_logprobs(net, ids, attention, positions, mask, self.config.temperature, entropy=entropy)

    def importance(self, parts: list[list[list[Row]]], old: list, correct: bool) -> list[list[torch.Tensor]] | None:
        """The engine's log-probs against the learner's before any step: the gap, and with ``correct`` each
        batch's token importance weights (``tis_weights``)."""
        tis: list[list[torch.Tensor]] | None = [] if correct else None
        for batches, before in zip(parts, old, strict=True):
            part = []
            for batch, (logp, mask) in zip(batches, before, strict=True):
                if batch[0] is self.placeholder:
                    part.append(torch.ones_like(mask))
                    continue
                sampled = member_logprobs(batch, mask)
                add_gap(self.gap, logp, sampled)
                if correct:
                    part.append(tis_weights(len(batch), logp, sampled, self.config, self.totals))
            if tis is not None:
                tis.append(part)
        return tis

    def step(self, batches: list[list[Row]], rng, first_pass: bool, old, ref, tis) -> None:
        """One optimiser step over one part's micro-batches, in a random order. ``first_pass``: no step taken
        yet and no old log-probs kept, so these log-probs are the ones the gap compares."""
        config, device, totals, steps = self.config, self.device, self.totals, self.steps
        sharded = self.placeholder is not None
        self.optimizer.zero_grad(set_to_none=True)
        for i in rng.permutation(len(batches)):
            batch = batches[i]
            logp, mask, *entropy = self.forward(self.model, batch, True, entropy=config.entropy_coef > 0)
            if batch[0] is self.placeholder:
                (logp.sum() * 0.0).backward()
                continue
            if first_pass:
                add_gap(self.gap, logp.detach(), member_logprobs(batch, mask))
            coefficients = torch.tensor([r.coefficient for r in batch], device=device, dtype=logp.dtype)
            weights = torch.tensor([float(len(r.turns)) for r in batch], device=device)
            loss, info = policy_loss(
                logp,
                old[i][0] if old is not None else None,
                torch.tensor([r.advantage for r in batch], device=device),
                mask,
                coefficients,
                config.loss,
                config.clip,
                clip_high=config.clip_high or None,
                dual_clip=config.dual_clip or None,
                weights=weights,
                token_weights=tis[i] if tis else None,
            )
            objective = loss
            if ref is not None:  # each turn's KL at its game's weight (kl_by_game); the logged kl is unweighted
                games = torch.tensor([config.kl_by_game[r.turns[0].game] for r in batch], device=device)
                per_token = kl_per_token(logp, ref[i], config.kl_estimator)
                objective = objective + aggregate(per_token * games[:, None], mask, coefficients)
                totals["kl"] += aggregate(per_token.detach(), mask, coefficients).item() / steps
            if entropy:  # the bonus: a higher entropy lowers the objective
                mean_entropy = aggregate(entropy[0], mask, coefficients)
                objective = objective - config.entropy_coef * mean_entropy
                totals["entropy"] += mean_entropy.item() / steps
            # FSDP averages gradients over ranks; scaling by the rank count makes that the sum
            (objective * (self.ddp.world if sharded else 1)).backward()
            counted = float((mask * weights[:, None]).sum())
            totals["loss"] += loss.item() / steps
            totals["tokens"] += counted
            totals["clipped"] += info["clip_fraction"] * counted
            totals["dual_clipped"] += info.get("dual_clip_fraction", 0.0) * counted
        if not sharded:
            self.ddp.sum_gradients(self.model)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), config.grad_clip)
        if isinstance(grad_norm, DTensor):
            grad_norm = grad_norm.full_tensor()
        if math.isfinite(float(grad_norm)):
            totals["grad_norm"] += float(grad_norm) / steps
            self.optimizer.step()
        else:  # a NaN or inf gradient would ruin every weight it touches
            totals["skipped_steps"] += 1
            self.optimizer.zero_grad(set_to_none=True)

    def stats(self, trained: int, anchored: bool, correct: bool) -> dict[str, float]:
        """The update's numbers, summed over every rank."""
        config, ddp, totals, gap = self.config, self.ddp, self.totals, self.gap
        keys = ("loss", "kl", "entropy", "tokens", "clipped", "dual_clipped")
        *values, gap_sum, gap_tokens = ddp.sum([totals[k] for k in keys] + gap[:2])
        summed = dict(zip(keys, values, strict=True))
        tokens = max(summed["tokens"], 1.0)
        stats = {"trained": trained, "loss": summed["loss"], "clip_fraction": summed["clipped"] / tokens}
        stats["grad_norm"] = totals["grad_norm"]
        if anchored:
            stats["kl"] = summed["kl"]
        if config.dual_clip:
            stats["dual_clip_fraction"] = summed["dual_clipped"] / tokens
        if config.entropy_coef:
            stats["entropy"] = summed["entropy"]
        if correct:  # over the tokens whose sampling log-prob is known, each merged turn counted
            ratio_sum, ratio_tokens, capped = ddp.sum([totals["tis_sum"], totals["tis_tokens"], totals["tis_capped"]])
            stats["tis/ratio_mean"] = ratio_sum / max(ratio_tokens, 1.0)
            stats["tis/ratio_max"] = ddp.max([totals["tis_max"]])[0]
            stats["tis/capped_share"] = capped / max(ratio_tokens, 1.0)
        if totals["skipped_steps"]:
            stats["skipped_steps"] = totals["skipped_steps"]
            logger.warning("%d optimiser step(s) skipped: the gradient norm was not finite", totals["skipped_steps"])
        if gap_tokens == 0:  # no turn carried engine log-probs
            return stats
        stats["logprob_gap/mean"] = gap_sum / gap_tokens
        stats["logprob_gap/max"] = ddp.max([gap[2]])[0]
        if stats["logprob_gap/mean"] > config.logprob_gap_warn:
            logger.warning(
                "rollouts look off-policy: mean |generation log-prob - learner log-prob| = %.4f per token "
                "(max %.4f, warning above %g); check that the engine samples from the learner's weights",
                stats["logprob_gap/mean"],
                stats["logprob_gap/max"],
                config.logprob_gap_warn,
            )
        return stats


def trainable(turn: Turn, stop_token: bool) -> Turn:
    """The turn as the loss sees it: without its end-of-turn token when ``stop_token`` is off."""
    if stop_token or not turn.finished:
        return turn
    return dataclasses.replace(turn, response_ids=turn.response_ids[:-1], logprobs=turn.logprobs[:-1])


def split_by_group(turns: list[Turn], parts: int) -> list[list[Turn]]:
    """``turns`` in ``parts`` runs of whole groups in their order (group counts differ by at most one; a part
    may be empty on a rank with fewer groups than parts)."""
    groups = list(dict.fromkeys(t.group_id for t in turns))
    part_of = {groups[i]: k for k, chunk in enumerate(np.array_split(np.arange(len(groups)), parts)) for i in chunk}
    split: list[list[Turn]] = [[] for _ in range(parts)]
    for turn in turns:
        split[part_of[turn.group_id]].append(turn)
    return split


def part_coefficients(part: list[Turn], tokens: list[float], config: TrainConfig, reduce) -> list[float]:
    """Each turn's factor in its part's loss (``losses.row_coefficients``), given its tokens in the loss."""
    unit = UNITS.get(config.aggregation)
    units = torch.tensor([t.game_id if unit == "game" else t.group_id for t in part], dtype=torch.long)
    counts = torch.tensor(tokens, dtype=torch.float64)
    return row_coefficients(counts, config.aggregation, config.max_new_tokens, units, reduce).tolist()


def merged(turns: list[Turn], coefficients: list[float]) -> tuple[float, float]:
    """One row's coefficient and advantage for ``turns`` merged: their summed coefficient and their
    coefficient-weighted mean advantage."""
    weight = sum(coefficients)
    mean = sum(c * t.advantage for c, t in zip(coefficients, turns, strict=True)) / weight if weight else 0.0
    return weight, mean


def merge_duplicates(turns: list[Turn], coefficients: list[float]) -> list[Row]:
    """``turns`` grouped by (prompt tokens, response tokens, sign of the advantage), in order of first
    appearance. Members share their log-probs, and both losses are linear in the advantage within a sign
    (PPO's clip and dual clip depend on the sign only), so one row with the summed coefficient and the
    coefficient-weighted mean advantage carries the whole group's loss and gradient."""
    groups: dict[tuple, list[int]] = {}
    for k, turn in enumerate(turns):
        key = (tuple(turn.prompt_ids), tuple(turn.response_ids), turn.advantage > 0)
        groups.setdefault(key, []).append(k)
    rows = []
    for members in groups.values():
        group = [turns[k] for k in members]
        rows.append(Row(group, *merged(group, [coefficients[k] for k in members])))
    return rows


def member_logprobs(batch: list[Row], mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For every member turn of ``batch``'s rows: its row, the engine's log-probs laid out like its row of
    ``mask``, and where they are known (``generation_logprobs``)."""
    members = [t for r in batch for t in r.turns]
    rows = torch.tensor([row for row, r in enumerate(batch) for _ in r.turns], device=mask.device)
    return (rows, *generation_logprobs(members, mask[rows]))


def tis_weights(n_rows: int, logp: torch.Tensor, sampled: tuple, config: AsyncConfig, totals) -> torch.Tensor:
    """Each token's importance weight (``losses.importance_weights``) for one micro-batch of ``n_rows`` rows,
    from the learner's log-probs ``logp`` and the engine's of the rows' member turns (``member_logprobs``; a
    row takes their mean: a merged row's members were sampled by the same weights, so they differ by float
    rounding only); adds the ratio's statistics to ``totals``."""
    rows, engine_logp, known = sampled
    count = torch.zeros(n_rows, device=logp.device).index_add_(0, rows, torch.ones_like(rows, dtype=torch.float))
    behaviour = torch.zeros_like(logp, dtype=torch.float).index_add_(0, rows, engine_logp) / count[:, None]
    row_known = torch.zeros_like(behaviour).index_add_(0, rows, known) == count[:, None]  # every member's is known
    weights, rho, capped = importance_weights(
        logp.float(), behaviour, row_known.float(), config.tis, config.tis_cap, config.tis_lower, config.tis_level
    )
    counted = row_known.float() * count[:, None]  # statistics per turn, as the gap's
    totals["tis_sum"] += float((rho * counted).sum())
    totals["tis_tokens"] += float(counted.sum())
    totals["tis_capped"] += float((capped.float() * counted).sum())
    totals["tis_max"] = max(totals["tis_max"], float((rho * row_known).max()) if row_known.any() else 0.0)
    return weights.to(logp.dtype)


def drop_masked(
    turns: list[Turn], batches: list[list[Row]], weights: list[torch.Tensor], masks: list[torch.Tensor], config, reduce
) -> None:
    """``tis_drop_masked``: the part's row coefficients computed again from the tokens the importance mask
    kept (``weights`` not 0, within ``masks``), so a masked token leaves the loss's token counts as well as
    its sum (verl's rollout correction); each row's advantage stays its members' coefficient-weighted mean."""
    kept: dict[int, float] = {}
    for batch, w, mask in zip(batches, weights, masks, strict=True):
        for row, n in zip(batch, ((w != 0).float() * mask).sum(dim=1).tolist(), strict=True):
            kept.update((id(t), n) for t in row.turns)
    new = part_coefficients(turns, [kept.get(id(t), 0.0) for t in turns], config, reduce)
    coefficient = dict(zip(map(id, turns), new, strict=True))
    for batch in batches:
        for row in batch:
            row.coefficient, row.advantage = merged(row.turns, [coefficient.get(id(t), 0.0) for t in row.turns])


def add_gap(gap: list[float], logp: torch.Tensor, sampled: tuple) -> None:
    """Adds each member turn's |learner - engine| log-prob gap to ``gap`` (sum, tokens, max); ``sampled``:
    ``member_logprobs`` of the rows ``logp`` holds."""
    rows, engine_logp, known = sampled
    diff = (logp[rows] - engine_logp).abs() * known
    gap[0] += float(diff.sum())
    gap[1] += float(known.sum())
    gap[2] = max(gap[2], float(diff.max()))


def generation_logprobs(batch: list[Turn], mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The engine's per-token log-probs of ``batch`` laid out like ``mask`` ([batch, R]), and where
    they are known (turns from elsewhere, e.g. replayed transcripts, carry none)."""
    values, known = torch.zeros_like(mask), torch.zeros_like(mask)
    for row, turn in enumerate(batch):
        values[row, : len(turn.logprobs)] = torch.tensor(turn.logprobs, dtype=values.dtype)
        known[row, : len(turn.logprobs)] = 1.0
    return values, known * mask


def autocast(config: ModelConfig, device: torch.device):
    """bf16 compute for forward passes when ``config.bf16``, over fp32 parameters.

    The weights themselves stay fp32 (master weights): at SPIRAL's lr of 1e-6 an AdamW step is
    below bf16's resolution for almost every weight, so updating bf16 weights changes ~2% of them.
    Memory per parameter: 4 (fp32 weight) + 4 (grad) + 8 (AdamW) bytes, the same as bf16 weights
    with a separate fp32 master copy, and simpler."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.bf16)


def lr_factor(config: LearnerConfig, step: int) -> float:
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
