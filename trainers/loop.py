"""``train(config)``: self-play RL with role-conditioned advantages, readable top to bottom.

One policy step:
1. rollouts: play games (self-play, against a fixed opponent, or some against frozen snapshots of
   the policy) until enough turns are done;
2. advantages: each trained player's return minus its (game, role) EMA baseline (RAE), or
   optionally minus the mean return of the step's other turns at the same position;
3. learner: recompute old log-probs, then PPO-clip or REINFORCE epochs (+ optional KL anchor);
4. the engine gets the new weights; every K steps, evaluation and a checkpoint.
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
import math
import sys
import time
import warnings
from collections import defaultdict
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.distributed.tensor import DTensor

from spiral_arena.agents import make_agent
from spiral_arena.models.policy import Policy
from spiral_arena.models.prompting import stop_token_ids
from spiral_arena.registry import REGISTRY
from trainers import checkpoint
from trainers.belief import log_beliefs
from trainers.config import TrainConfig
from trainers.distributed import Distributed, gather_states, is_sharded, optimizer_loader, select_device, shard
from trainers.evaluate import eval_games, eval_line, final_summary, kuhn_metrics, play_against
from trainers.logprobs import pack, response_logprobs
from trainers.losses import aggregate, kl_to_reference, policy_loss
from trainers.pool import OpponentPool
from trainers.rae import RAE, state_advantages
from trainers.rollout import EnvPool, GameResult, Turn, collect, parse_mixture, response_action
from trainers.sft import play_transcripts, sft
from trainers.starpo import delta_belief_rewards, starpo_advantages, turnwise_advantages

logger = logging.getLogger(__name__)


def train(config: TrainConfig, progress: bool = True) -> Path:
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # its per-file bars would interleave with ours
    device = select_device(config.device)
    ddp = Distributed(device)
    if config.rollout_shards % ddp.world:
        raise ValueError(f"rollout_shards ({config.rollout_shards}) must be a multiple of the {ddp.world} ranks")
    if config.fsdp and ddp.world == 1:  # (fsdp with lora_rank is refused by the config's own validation)
        raise ValueError("fsdp shards the model over torchrun ranks: run it under torchrun with 2 or more processes")
    run_dir = Path(ddp.gather(config.output_dir or f"runs/{datetime.now():%Y%m%d-%H%M%S}")[0])
    if ddp.main:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.json").write_text(json.dumps(asdict(config), indent=2))
    torch.manual_seed(config.seed)
    # One random stream per rollout shard (rank r plays shards r, r + world, ...), one for the learner.
    shards = list(range(ddp.rank, config.rollout_shards, ddp.world))
    shard_rngs = {s: np.random.default_rng([config.seed, s]) for s in shards}
    learner_rng = np.random.default_rng([config.seed, 1_000_000])
    samples_per_shard = math.ceil(config.samples_per_step / config.rollout_shards)
    grouped = config.algo != "rae"  # StarPO / delta-belief: groups of games on one secret, exact counts
    group_games = config.groups_per_step // config.rollout_shards * config.group_size if grouped else None
    specs, weights = parse_mixture(config.games, config.game_weights)
    trained_labels = [s.label for s in specs]
    generation = dict(
        max_new_tokens=config.max_new_tokens,
        top_p=config.top_p,
        max_game_actions=config.max_game_actions,
        obs_format=config.obs_format,
    )

    # --- model, engine, opponent ---------------------------------------------------------------
    previous = checkpoint.latest(run_dir / "checkpoints") if config.resume else None
    if ddp.main and previous is None and config.model == "tiny":
        tiny_model_dir(config, run_dir)
    ddp.barrier()
    model, tokenizer, model_path = load_model(config, run_dir, previous, device)
    stops = stop_token_ids(tokenizer, model.generation_config)
    engine = make_engine(config, model, tokenizer, model_path, stops)
    policy = Policy(engine, tokenizer, config.prompt_template, stops, thinking=config.thinking)
    envs = EnvPool()
    opponent = None if config.opponent == "self" else make_agent(config.opponent)
    log = MetricsLog(
        run_dir,
        resume_step=None if previous is None else int(previous.name.split("_")[1]),
        enabled=ddp.main,
        config=config,
    )

    # --- warm start (once per run; a resumed run reloads it) --------------------------------------
    # Every rank runs the same seeded SFT, so all start from identical weights.
    warm_dir = run_dir / "warm_start"
    start_row: dict[str, Any] = {"step": 0}  # step 0: the warm start's loss and evaluation
    if previous is None and config.sft_steps > 0:
        records = list(
            play_transcripts(config.sft_agent, specs, weights, sft_games(config), config.seed, config.obs_format)
        )
        losses = sft(
            model,
            policy,
            records,
            config.sft_steps,
            config.sft_batch,
            config.sft_lr,
            config.seed,
            progress=progress and ddp.main,
            autocast=lambda: autocast(config, device),
        )
        start_row.update({"sft/loss_first": losses[0], "sft/loss_last": losses[-1]})
    if previous is None and ddp.main and (config.sft_steps > 0 or config.kl_coef > 0):
        model.save_pretrained(warm_dir)  # the policy RL starts from (and the KL anchor)
        tokenizer.save_pretrained(warm_dir)
    reference = None
    if config.kl_coef > 0:  # the frozen warm-start policy; a resumed run reads it back from disk
        reference = load_reference(config, run_dir, warm_dir, device) if previous is not None else copy.deepcopy(model)
        reference.eval().requires_grad_(False)
    # The engine was built from the weights on disk; the first rollout must sample from the
    # policy the learner trains (after the warm start), or step 1 is silently off-policy.
    engine.load_weights(model)
    pool = None  # population play: frozen snapshots for the other seat (taken before any sharding)
    if config.opponent_pool:
        sampling = {"max_new_tokens": config.max_new_tokens, "temperature": config.temperature, "top_p": config.top_p}
        pool = OpponentPool(model, policy, config.opponent_pool, config.pool_prob, sampling, config.seed)
    if config.fsdp:  # from here on each rank holds a shard; the engine keeps its own full copy
        shard(model, device, config.bf16)

    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=(config.adam_beta1, config.adam_beta2), weight_decay=config.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(config, s))
    rae = RAE(config.rae_decay)
    start = 0
    if previous is not None:
        start = checkpoint.load_state(
            previous, optimizer_loader(model, optimizer), scheduler, rae, shard_rngs, learner_rng
        )["step"]

    if previous is not None and ddp.main:
        print(f"resumed {run_dir} at step {start} of {config.steps} (from {previous.name})")
    if pool is not None:
        pool.add(model, start)  # the warm start (or the resumed policy) is the first snapshot

    started = time.monotonic()
    bar = progress_bar(config, start, progress and ddp.main)
    if previous is None and config.eval_at_start and (ddp.main or config.fsdp):  # the warm start's own numbers
        with autocast(config, device):
            scores = evaluate(model, policy, config, specs, play=ddp.main)
        if ddp.main:
            start_row.update({"time_s": time.monotonic() - started, **scores})
            bar.write(eval_line(0, scores, trained_labels))
    if len(start_row) > 1:
        log.write(start_row)
    step = start
    for step in range(start + 1, config.steps + 1):
        # 1. rollouts ------------------------------------------------------------------------
        t0 = time.monotonic()
        with autocast(config, device):
            mine = [
                collect(
                    policy,
                    specs,
                    weights,
                    min_samples=samples_per_shard,
                    games_in_flight=config.games_in_flight,
                    rng=shard_rngs[s],
                    temperature=config.temperature,
                    invalid_penalty=config.invalid_penalty,
                    invalid_opponent_reward=config.invalid_opponent_reward,
                    opponent=opponent,
                    pool=envs,
                    games=group_games,
                    group_size=config.group_size if grouped else 1,
                    snapshots=pool,
                    **generation,
                )
                for s in shards
            ]
        # every rank gets every shard's games, in shard order, so RAE sees the same sequence everywhere
        gathered = ddp.gather(dict(zip(shards, mine, strict=True)))
        by_shard = {s: games for part in gathered for s, games in part.items()}
        results = [game for s in sorted(by_shard) for game in by_shard[s]]
        own = [game for s in shards for game in by_shard[s]]
        rollout_s = time.monotonic() - t0

        # 2. advantages: RAE baseline per (game, role), read before it is updated; or, for a single
        #    player, each game against the other games of its group (StarPO, delta-belief) ---------
        t0 = time.monotonic()
        if grouped:
            keys = [(s, game.game, game.seed) for s in sorted(by_shard) for game in by_shard[s]]
            with autocast(config, device):
                group_stats = group_advantages(results, keys, config, model, policy)
        else:
            group_stats = {}
            for game in results:
                for seat in game.policy_seats:
                    ret = game.shaped[seat]
                    adv = rae.advantage(game.game, seat, ret) if config.rae else ret
                    for turn in game.turns:
                        if turn.role == seat:
                            turn.advantage = adv
            if config.state_baseline:  # positions seen often this step: return minus their mean return
                mine_turns = [(t, g.shaped[t.role]) for g in results for t in g.turns if t.role in g.policy_seats]
                keys = [(t.game, t.role, t.prompt) for t, _ in mine_turns]
                by_state = state_advantages(keys, [r for _, r in mine_turns], config.state_baseline)
                for (turn, _), adv in zip(mine_turns, by_state, strict=True):
                    if adv is not None:
                        turn.advantage = adv
                group_stats["state_baseline/share"] = sum(a is not None for a in by_state) / max(1, len(by_state))
        advantage_s = time.monotonic() - t0
        turns = [t for g in results for t in g.turns]
        trained = [t for g in own for t in g.turns if t.advantage != 0.0]  # zero advantage: no gradient
        total_trained, total_tokens = (
            int(x) for x in ddp.sum([len(trained), sum(len(t.response_ids) for t in trained)])
        )

        # 3. learner --------------------------------------------------------------------------
        t0 = time.monotonic()
        engine.sleep()  # frees the accelerator for the update (vLLM); a no-op for the hf engine
        stats = update(
            model, reference, optimizer, trained, (total_trained, total_tokens), config, learner_rng, device, ddp
        )
        with warnings.catch_warnings():  # a step with nothing to train (all advantages 0) skips optimizer.step()
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step()`")
            scheduler.step()
        t_sync = time.monotonic()
        engine.load_weights(model)  # the engine samples the next rollouts from the updated weights
        sync_s = time.monotonic() - t_sync
        if pool is not None and step % config.pool_every == 0:
            pool.add(model, step)
        update_s = time.monotonic() - t0 - sync_s

        # 4. metrics, evaluation, checkpoint ----------------------------------------------------
        metrics = {
            "step": step,
            "time_s": time.monotonic() - started,
            "lr": scheduler.get_last_lr()[0],
            "rollout_s": rollout_s,
            "advantage_s": advantage_s,
            "update_s": update_s,
            "sync_s": sync_s,
            **group_stats,
            "samples": len(turns),
            "trained": total_trained,
            **stats,
            **rollout_metrics(results, turns, rollout_s),
            **{f"rae/{k}": v for k, v in rae.baselines.items()},
        }
        if pool is not None:
            metrics["pool/snapshots"] = len(pool.snapshots)
            metrics["pool/games_share"] = sum(g.snapshot_step is not None for g in results) / max(1, len(results))
        out_of_time = config.time_limit_s > 0 and metrics["time_s"] >= config.time_limit_s
        out_of_time = bool(ddp.sum([float(out_of_time)])[0])  # all ranks stop at the same step
        last = step == config.steps or out_of_time
        if out_of_time and step < config.steps:  # a safety stop, not the plan: say so where it is read
            metrics["stopped_by_time_limit"] = 1.0
        if (step % config.eval_every == 0 or last) and (ddp.main or config.fsdp):
            with autocast(config, device):  # under FSDP every rank joins the scoring forward passes
                scores = evaluate(model, policy, config, specs, play=ddp.main)
                if ddp.main and config.eval_reasoning:  # maths and science questions, through the policy's engine
                    scores.update(reasoning(policy, tokenizer, config))
            if ddp.main:
                metrics.update(scores)
                log.transcripts(step, results)
                bar.write(eval_line(step, scores, trained_labels))
        log.write(metrics)
        if step % config.save_every == 0 or last:
            states = ddp.gather({s: shard_rngs[s].bit_generator.state for s in shards})
            model_state, optimizer_state = gather_states(model, optimizer)
            if ddp.main:
                checkpoint.save(
                    run_dir / "checkpoints",
                    step,
                    model,
                    tokenizer,
                    optimizer_state,
                    scheduler,
                    rae,
                    {s: st for part in states for s, st in part.items()},
                    learner_rng,
                    {"config": asdict(config), "base_model": base_model_path(config, run_dir)},
                    model_state,
                )
        ddp.barrier()
        bar.update(metrics)
        if out_of_time:
            break
    bar.close()
    if ddp.main and step < config.steps:  # printed, not logged: it must be seen whatever the logging set-up
        print(
            f"WARNING: STOPPED EARLY by time_limit_s={config.time_limit_s:g} at step {step} of {config.steps}: "
            "the final numbers are from a shorter run than configured and depend on this machine's speed",
            file=sys.stderr,
        )
    if ddp.main and progress:
        print(final_summary(log.last_eval, step, time.monotonic() - started, config, trained_labels))
    if config.plots and ddp.main:
        from trainers.plots import plot_run

        plot_run(run_dir)
    ddp.barrier()
    engine.close()  # vLLM leaves torchrun's process group (destroying it, as it joined it) before we do
    ddp.close()
    return run_dir


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
    groups = merge_duplicates(turns)
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
            kl = (
                kl_to_reference(logp, ref[i], mask, config.aggregation, config.max_new_tokens, weights) if ref else None
            )
            objective = loss + config.kl_coef * kl if kl is not None else loss
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
            if kl is not None:
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


def evaluate(model, policy: Policy, config: TrainConfig, specs, play: bool = True) -> dict[str, float]:
    """Fixed-seed matches on the training games, plus the out-of-domain ones unless
    ``eval_out_of_domain`` is off (or on ``eval_env_ids``; skipped when not ``play``), and Kuhn
    exploitability when Kuhn is trained."""
    # the out-of-domain games are two-player games; a single-player run evaluates on its own games
    games = specs
    if config.algo == "rae" or config.eval_env_ids:
        games = eval_games(specs, config.eval_env_ids, config.eval_out_of_domain)
    opponents = [o for o in config.eval_opponents.split(",") if o]
    model.eval()
    metrics = {}
    if play:
        metrics = play_against(
            policy,
            games,
            opponents,
            config.eval_games,
            seed=12345,
            secret_samples=config.eval_samples_per_secret,
            long_questions=config.eval_long_questions,
            max_new_tokens=config.max_new_tokens,
            temperature=config.eval_temperature,
            top_p=config.top_p,
            max_game_actions=config.max_game_actions,
            obs_format=config.obs_format,
        )
    kuhn_rounds = [{**REGISTRY[s.env_id].options, **s.options}["rounds"] for s in specs if s.env_id == "KuhnPoker-v0"]
    if kuhn_rounds:  # read on single hands whatever the run trains on; the rounds trained are logged beside it
        metrics.update(kuhn_metrics(model, policy, config.obs_format, config.eval_temperature))
        metrics["eval/kuhn_trained_rounds"] = max(kuhn_rounds)
    model.train()
    return metrics


def reasoning(policy: Policy, tokenizer, config: TrainConfig) -> dict[str, float]:
    """The fixed, seeded reasoning subset of ``config.eval_reasoning``, answered by the policy's engine."""
    from spiral_arena.evals.training import reasoning_eval

    return reasoning_eval(
        policy.engine,
        tokenizer,
        config.eval_reasoning,
        seed=config.seed,
        data_dir=config.eval_reasoning_data or None,
        overrides={"max_new_tokens": str(config.eval_reasoning_max_new_tokens)},
    )


def group_advantages(results: list[GameResult], keys: list, config: TrainConfig, model, policy) -> dict[str, float]:
    """Advantages of single-player games, each compared with the games of its group (``keys``: one
    group key per game, the games of one reset seed). StarPO: the group-normalised return on every
    turn. delta-belief: per-turn rewards (turn penalty + end reward + belief_coef x belief gain, the
    belief read under the current policy, no gradient), normalised per turn index in the group.
    A game where the oracle failed (an LLM judge's "error" verdict) is left out, advantage 0: a
    missing answer is not the player's doing."""
    answered = ["error" not in game.verdicts for game in results]
    dropped = {"judge/dropped_games": float(len(results) - sum(answered))}
    keys = [k for k, ok in zip(keys, answered, strict=True) if ok]
    results = [game for game, ok in zip(results, answered, strict=True) if ok]
    if not results:
        return dropped
    if config.algo == "starpo":
        for game, advantage in zip(results, starpo_advantages([g.shaped[0] for g in results], keys), strict=True):
            for turn in game.turns:
                turn.advantage = advantage
        return dropped
    histories = [h for g in results for h in [t.prompt for t in g.turns] + [g.final_observation]]
    secrets = [g.secret for g in results for _ in range(len(g.turns) + 1)]
    flat = iter(log_beliefs(model, policy, histories, secrets, batch_size=config.micro_batch))
    rewards, gains = [], []
    for game in results:
        beliefs = [next(flat) for _ in range(len(game.turns) + 1)]
        won = game.won
        end_reward = game.shaped[0] - sum(game.penalties)
        rewards.append(delta_belief_rewards(beliefs, game.penalties, end_reward, won, config.belief_coef))
        gains += [b - a for a, b in itertools.pairwise(beliefs)]
    max_turns = max(len(r) for r in rewards)
    for game, advantages in zip(results, turnwise_advantages(rewards, keys, max_turns, config.turn_norm), strict=True):
        for turn, advantage in zip(game.turns, advantages, strict=True):
            turn.advantage = advantage
    gain_share = float(np.mean(np.array(gains) > 0))
    return {**dropped, "belief/gain_mean": float(np.mean(gains)), "belief/positive_share": gain_share}


def rollout_metrics(results: list[GameResult], turns: list[Turn], seconds: float) -> dict[str, float]:
    out: dict[str, float] = {}
    by_game: dict[str, list[GameResult]] = defaultdict(list)
    for r in results:
        by_game[r.game].append(r)
    for game, rs in by_game.items():
        out[f"train/{game}/games"] = len(rs)
        out[f"train/{game}/invalid"] = sum(r.invalid_by is not None for r in rs) / len(rs)
        out[f"train/{game}/draw"] = sum(r.invalid_by is None and len(set(r.returns)) == 1 for r in rs) / len(rs)
        out[f"train/{game}/p0_win"] = sum(r.returns[0] > max(r.returns[1:], default=0) for r in rs) / len(rs)
        if len(rs[0].returns) == 1:  # a single player: how often it succeeded, and in how many turns
            out[f"train/{game}/success"] = out.pop(f"train/{game}/p0_win")
            out[f"train/{game}/turns_mean"] = sum(len(r.turns) for r in rs) / len(rs)
    tokens = sum(len(t.response_ids) for t in turns)
    out["response_tokens_mean"] = tokens / max(1, len(turns))
    out["response_chars_mean"] = sum(len(t.response) for t in turns) / max(1, len(turns))
    out["generated_tokens_per_s"] = tokens / max(seconds, 1e-9)
    return out


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


def sft_games(config: TrainConfig) -> int:
    """Games of ``sft_agent`` for the warm start: about one per 10 samples trained on (a game yields
    several), at least 50 and at most 2,000, so a short warm start does not wait on data it never reads."""
    return min(2000, max(50, config.sft_steps * config.sft_batch // 10))


def tiny_model_dir(config: TrainConfig, run_dir: Path) -> Path:
    """The embedded tiny model of this run, created on first use (tokenizer trained on our games)."""
    from trainers.tiny import create_tiny

    path = run_dir / "tiny_init"
    if not path.exists():
        env_ids = [s.env_id for s in parse_mixture(config.games, config.game_weights)[0]]
        create_tiny(path, env_ids, seed=config.seed, agent=config.sft_agent)
    return path


def load_model(config: TrainConfig, run_dir: Path, previous: Path | None, device):
    """The policy with fp32 weights (bf16 is compute only, see ``autocast``), its tokenizer and the
    directory its weights came from. With LoRA the base comes from ``config.model`` and the adapter
    is new, or on resume the checkpoint's own adapter, trainable, so training continues with it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = base_model_path(config, run_dir)
    lora_checkpoint = previous is not None and (previous / "adapter_config.json").exists()
    if previous is not None and lora_checkpoint != (config.lora_rank > 0):
        saved = "a LoRA adapter" if lora_checkpoint else "full weights"
        raise ValueError(f"cannot resume {previous}: it holds {saved}, but lora_rank is {config.lora_rank}")
    path = previous if previous is not None and not lora_checkpoint else base
    try:
        tokenizer = AutoTokenizer.from_pretrained(previous or base)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device)
    except OSError as error:
        raise ValueError(f"cannot load model {str(path)!r}: {error}") from error
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id
    if config.gradient_checkpointing:
        # non-reentrant checkpointing also works when the embeddings are frozen (LoRA)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if config.lora_rank > 0:
        from peft import LoraConfig, PeftModel, get_peft_model

        if lora_checkpoint:
            model = PeftModel.from_pretrained(model, previous, is_trainable=True)
        else:
            model = get_peft_model(
                model,
                LoraConfig(
                    r=config.lora_rank,
                    lora_alpha=config.lora_alpha,
                    target_modules="all-linear",
                    task_type="CAUSAL_LM",
                ),
            )
    return model, tokenizer, path


def base_model_path(config: TrainConfig, run_dir: Path) -> str:
    """Where the run's initial weights live (absolute for the tiny model, so a LoRA adapter's
    record of its base stays valid from any working directory)."""
    return str((run_dir / "tiny_init").resolve()) if config.model == "tiny" else config.model


def load_reference(config: TrainConfig, run_dir: Path, warm_dir: Path, device):
    """The frozen warm-start policy the KL term anchors to, as saved before RL began (full weights,
    or the base plus the warm-start adapter under LoRA)."""
    from transformers import AutoModelForCausalLM

    if not warm_dir.exists():
        raise ValueError(f"cannot resume a KL-anchored run: its warm start {warm_dir} is missing")
    if not (warm_dir / "adapter_config.json").exists():
        return AutoModelForCausalLM.from_pretrained(warm_dir, dtype=torch.float32).to(device)
    from peft import PeftModel

    base = AutoModelForCausalLM.from_pretrained(base_model_path(config, run_dir), dtype=torch.float32)
    return PeftModel.from_pretrained(base.to(device), warm_dir)


def make_engine(config: TrainConfig, model, tokenizer, model_path, stop_ids: list[int]):
    if config.backend == "hf":
        from spiral_arena.models.hf import HFEngine

        # under FSDP the learner holds only a shard: the engine samples from a full copy
        return HFEngine(copy.deepcopy(model) if config.fsdp else model, stop_ids, tokenizer.pad_token_id)
    if config.backend == "vllm":
        from spiral_arena.models.vllm import VLLMEngine, VLLMSettings

        settings = VLLMSettings(
            dtype="bfloat16" if config.bf16 else "float32",  # the learner's compute dtype (see autocast)
            seed=config.seed,
            max_model_len=config.vllm_max_model_len,
            gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            kv_cache_gib=config.vllm_kv_cache_gib,
            sleep=True,
            enforce_eager=config.vllm_enforce_eager,
        )
        return VLLMEngine(settings, model_path, stop_ids, learner=model)
    raise ValueError(f"backend must be 'hf' or 'vllm', got {config.backend!r}")


class MetricsLog:
    """metrics.jsonl (one line per step), transcripts.jsonl, optional TensorBoard and wandb."""

    def __init__(
        self, run_dir: Path, resume_step: int | None, enabled: bool = True, config: TrainConfig | None = None
    ) -> None:
        self.enabled = enabled
        self.last_eval: dict[str, Any] = {}  # the latest row with evaluation numbers, for the final summary
        self.tensorboard = self.wandb = None
        if not enabled:
            return
        if config is not None and config.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as error:
                raise ImportError("--tensorboard needs the tensorboard package: pip install tensorboard") from error
            self.tensorboard = SummaryWriter(str(run_dir / "tensorboard"))
        if config is not None and config.wandb:
            try:
                import wandb
            except ImportError as error:
                raise ImportError("--wandb needs the wandb package: pip install wandb") from error
            self.wandb = wandb.init(
                project="spiral-arena", name=run_dir.name, dir=str(run_dir), config=asdict(config), resume="allow"
            )
        names = ("metrics.jsonl", "transcripts.jsonl")
        if resume_step is not None:  # drop what a crashed run wrote after its last checkpoint
            for name in names:
                path = run_dir / name
                kept = [line for line in path.read_text().splitlines() if json.loads(line)["step"] <= resume_step]
                path.write_text("".join(line + "\n" for line in kept))
        self.metrics, self.transcript_file = (
            open(run_dir / name, "a" if resume_step is not None else "w") for name in names
        )

    def write(self, metrics: dict[str, Any]) -> None:
        if not self.enabled:
            return
        if any(k.startswith("eval/") for k in metrics):
            self.last_eval = metrics
        self.metrics.write(json.dumps(metrics) + "\n")
        self.metrics.flush()
        numbers = {k: v for k, v in metrics.items() if k != "step" and isinstance(v, (int, float))}
        if self.tensorboard is not None:
            for key, value in numbers.items():
                self.tensorboard.add_scalar(key, value, metrics["step"])
            self.tensorboard.flush()
        if self.wandb is not None:
            self.wandb.log(numbers, step=metrics["step"])

    def transcripts(self, step: int, games: list[GameResult]) -> None:
        """One line per turn of the step's games. ``game_index`` (the game's place among the step's games,
        in the order the advantages were computed), ``game_rewards`` (its rewards per seat, as trained on)
        and ``policy_seats`` let the step's advantages be replayed from the file alone."""
        if not self.enabled:
            return
        for index, game in enumerate(games):
            for t in game.turns:
                record = {
                    "step": step,
                    "game": t.game,
                    "role": t.role,
                    "prompt": t.prompt,
                    "response": t.response,
                    "action": response_action(t.response),
                    "reward": t.reward,
                    "advantage": t.advantage,
                    "game_index": index,
                    "game_rewards": list(game.shaped),
                    "policy_seats": list(game.policy_seats),
                }
                self.transcript_file.write(json.dumps(record) + "\n")
        self.transcript_file.flush()


class progress_bar:  # noqa: N801 - used like tqdm
    """A tqdm bar over steps, with its ETA, showing the latest key numbers (and the time limit, if any)."""

    def __init__(self, config: TrainConfig, start: int, enabled: bool) -> None:
        from tqdm import tqdm

        self.time_limit_s = config.time_limit_s
        self.bar = tqdm(total=config.steps, initial=start, disable=not enabled, unit="step", dynamic_ncols=True)

    def update(self, metrics: dict[str, Any]) -> None:
        self.bar.update(1)
        shown = {}
        for key in ("eval/kuhn_exploitability", "loss", "kl"):
            if key in metrics:
                shown[key.split("/")[-1]] = f"{metrics[key]:.3f}"
        if self.time_limit_s > 0:
            shown["time"] = f"{metrics['time_s']:.0f}/{self.time_limit_s:.0f}s"
        self.bar.set_postfix(shown, refresh=False)
        self.bar.refresh()

    def write(self, line: str) -> None:
        """A line above the bar (or plain, when the bar is off)."""
        if self.bar.disable:
            return
        self.bar.write(line)

    def close(self) -> None:
        self.bar.close()
