"""``train(config)``: self-play RL with role-conditioned advantages, readable top to bottom.

0. set up the run (``trainers.start``): the policy and its engine, the warm start, a resumed checkpoint;
then each step:
1. play: the step's games (self-play, against a fixed opponent, or some against frozen snapshots of the
   policy), played now or taken from the actor that played them ahead (``trainers.sources``);
2. advantages: each trained player's return minus its (game, role) EMA baseline (RAE), or the method's own
   (``trainers.advantages``);
3. learn: old log-probs, then PPO-clip or REINFORCE epochs over mini-batches, an optional KL anchor
   (``trainers.learner``); the engine gets the new weights;
4. every K steps, evaluate (``trainers.evaluate``) and save a checkpoint (``trainers.checkpoint``).
"""

from __future__ import annotations

import re
import sys
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trainers import checkpoint
from trainers.advantages import assign_advantages
from trainers.config import TrainConfig
from trainers.distributed import Distributed, gather_states
from trainers.evaluate import evaluate, reasoning
from trainers.learner import autocast, update
from trainers.metrics import progress_bar, rollout_metrics
from trainers.sources import Asynchronous, Played, Synchronous, label, rollout_source
from trainers.start import Run, base_model_path, start_run
from trainers.summary import eval_line, final_summary

SKIPPED = (
    "the evaluation of {what} was skipped: time_limit_s={limit:g} has passed (evaluate its checkpoint with "
    "spiral-arena play or leaderboard)"
)


def late(deadline: float | None, ddp: Distributed) -> bool:
    """Whether the time limit has passed, the same answer on every rank (so all stop, or skip, together)."""
    passed = deadline is not None and time.monotonic() >= deadline
    return bool(ddp.sum([float(passed)])[0])


def train(config: TrainConfig, progress: bool = True) -> Path:
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # its per-file bars would interleave with ours
    run = start_run(config, progress)  # 0. the model, its engine, the warm start, or the checkpoint resumed
    ddp = run.ddp
    started = time.monotonic()
    bar = progress_bar(config, run.start, progress and ddp.main, run.deadline)
    evaluate_start(run, bar, started)
    source = rollout_source(run)
    step, out_of_time, due = run.start, False, False
    try:
        for step in range(run.start + 1, config.steps + 1):
            # 1. play: this step's games, played now or by the actor ahead of time
            played = source.take(step)
            own = label(run, played.by_shard)

            # 2. advantages: RAE's baseline per (game, role), read before it is updated, or the method's own
            t0 = time.monotonic()
            advantage_stats = assign_advantages(run, played)
            advantage_s = time.monotonic() - t0

            # 3. learn on this rank's turns; then the new weights reach whoever samples the next games
            t0 = time.monotonic()
            source.learning()
            stats = update(
                run.model, run.reference, run.optimizer, [t for g in own for t in g.turns], config,
                run.learner_rng, run.device, ddp,
            )  # fmt: skip
            with warnings.catch_warnings():  # a step with nothing to train (all advantages 0) skips optimizer.step()
                warnings.filterwarnings("ignore", message=re.escape("Detected call of `lr_scheduler.step()`"))
                run.scheduler.step()
            sync_s = source.updated(step)
            update_s = time.monotonic() - t0 - sync_s

            # 4. metrics; every eval_every steps an evaluation, every save_every a checkpoint
            timings = dict(rollout_s=played.rollout_s, advantage_s=advantage_s, update_s=update_s, sync_s=sync_s)
            metrics = step_metrics(run, source, played, step, started, timings, advantage_stats, stats)
            out_of_time = late(run.deadline, ddp)
            last = step == config.steps or out_of_time
            if out_of_time and step < config.steps:  # a safety stop, not the plan: say so where it is read
                metrics["stopped_by_time_limit"] = 1.0
            due = step % config.eval_every == 0 or last
            if due and out_of_time:  # the limit bounds the whole run: its checkpoint is saved, its evaluation not run
                metrics["eval_skipped_by_time_limit"] = 1.0
            elif due:
                evaluate_step(run, source, played, step, bar, metrics)
            run.log.write(metrics)
            if step % config.save_every == 0 or last:
                save(run, source, step, stopped_early=last and step < config.steps)
            ddp.barrier()
            bar.update(metrics)
            if out_of_time:
                break
    finally:  # Ctrl-C, an error or the end: the actor stops after the batch in hand
        source.stop()
    bar.close()
    finish(run, step, out_of_time and due, started)
    return run.run_dir


def evaluate_start(run: Run, bar: progress_bar, started: float) -> None:
    """Step 0's row: the warm start's losses and, before a fresh run's first update, its evaluation."""
    config, ddp = run.config, run.ddp
    wanted = run.previous is None and config.eval_at_start
    if wanted and late(run.deadline, ddp):  # the warm start used the time: the limit bounds the run
        wanted = False
        if ddp.main:
            skipped = SKIPPED.format(what="the warm start (step 0)", limit=config.time_limit_s)
            print(f"WARNING: {skipped}", file=sys.stderr)
    if wanted and (ddp.main or config.fsdp):  # under FSDP every rank joins the scoring forward passes
        with autocast(config, run.device):
            scores = evaluate(run.model, run.policy, config, run.specs, play=ddp.main)
        if ddp.main:
            run.start_row.update({"time_s": time.monotonic() - started, **scores})
            bar.write(eval_line(0, scores, run.trained_labels))
    if len(run.start_row) > 1:
        run.log.write(run.start_row)


def step_metrics(
    run: Run, source: Synchronous | Asynchronous, played: Played, step: int, started: float,
    timings: dict[str, float], advantage_stats: dict[str, float], update_stats: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """The step's row of metrics.jsonl (before its evaluation)."""
    results = played.results
    turns = [t for g in results for t in g.turns]
    metrics = {
        "step": step,
        "time_s": time.monotonic() - started,
        "lr": run.scheduler.get_last_lr()[0],
        **timings,
        **played.stats,
        **advantage_stats,
        "samples": len(turns),
        **update_stats,
        **rollout_metrics(results, turns, played.rollout_s),
        **{f"rae/{k}": v for k, v in run.rae.baselines.items()},
    }
    if run.pool is not None:
        metrics["pool/snapshots"] = source.snapshots(played)
        metrics["pool/games_share"] = sum(g.snapshot_step is not None for g in results) / max(1, len(results))
    return metrics


def evaluate_step(
    run: Run, source: Synchronous | Asynchronous, played: Played, step: int, bar: progress_bar, metrics: dict
) -> None:
    """The policy against the evaluation opponents (and the reasoning questions), into ``metrics``."""
    config, ddp = run.config, run.ddp
    if not (ddp.main or config.fsdp):  # under FSDP every rank joins the scoring forward passes
        return
    with autocast(config, run.device), source.evaluating():
        scores = evaluate(run.model, run.policy, config, run.specs, play=ddp.main)
        if ddp.main and config.eval_reasoning:  # maths and science questions, through the policy's engine
            scores.update(reasoning(run.policy, run.tokenizer, config))
    if ddp.main:
        metrics.update(scores)
        run.log.transcripts(step, played.results)
        bar.write(eval_line(step, scores, run.trained_labels))


def save(run: Run, source: Synchronous | Asynchronous, step: int, stopped_early: bool) -> None:
    """A checkpoint that resumes exactly: weights, optimiser, schedule, baselines and every random stream."""
    config = run.config
    states, streams = source.streams(step)
    model_state, optimizer_state = gather_states(run.model, run.optimizer)
    if not run.ddp.main:
        return
    extra = {
        "config": asdict(config),
        "base_model": base_model_path(config, run.run_dir),
        **({"stopped_early": f"at step {step} of {config.steps} by time_limit_s={config.time_limit_s:g}"}
           if stopped_early else {}),
        **streams,
    }  # fmt: skip
    checkpoint.save(
        run.run_dir / "checkpoints", step, run.model, run.tokenizer, optimizer_state, run.scheduler, run.rae,
        {s: st for part in states for s, st in part.items()}, run.learner_rng, extra, model_state,
    )  # fmt: skip


def finish(run: Run, step: int, skipped_last: bool, started: float) -> None:
    """Say how the run ended (early, by its time limit, or with its final numbers), draw its plots, let go."""
    config, ddp = run.config, run.ddp
    if ddp.main and step < config.steps:  # printed, not logged: it must be seen whatever the logging set-up
        print(
            f"WARNING: STOPPED EARLY by time_limit_s={config.time_limit_s:g} at step {step} of {config.steps}: "
            "the final numbers are from a shorter run than configured and depend on this machine's speed",
            file=sys.stderr,
        )
    skipped = step > run.start and skipped_last  # the last step's evaluation, cut by the time limit
    if ddp.main and skipped:
        print(f"WARNING: {SKIPPED.format(what=f'step {step}', limit=config.time_limit_s)}", file=sys.stderr)
    if ddp.main and run.progress and (run.log.last_eval or not skipped):
        print(final_summary(run.log.last_eval, step, time.monotonic() - started, config, run.trained_labels))
    elif ddp.main and run.progress:
        print(f"\nNo evaluation ran: time_limit_s={config.time_limit_s:g} passed first (checkpoints/step_{step:06d})")
    if config.plots and ddp.main:
        from trainers.plots import plot_run

        plot_run(run.run_dir)
    ddp.barrier()
    run.engine.close()  # vLLM leaves torchrun's process group (destroying it, as it joined it) before we do
    ddp.close()
