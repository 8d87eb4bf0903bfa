"""``train(config)``: self-play RL with role-conditioned advantages, readable top to bottom.

One policy step:
1. rollouts: play games (self-play, against a fixed opponent, or some against frozen snapshots of
   the policy) until enough turns are done;
2. advantages: each trained player's return minus its (game, role) EMA baseline (RAE), or
   optionally minus the mean return of the step's other turns at the same position;
3. learner: recompute old log-probs, then PPO-clip or REINFORCE epochs over mini-batches (+ optional KL anchor);
4. the engine gets the new weights; every K steps, evaluation and a checkpoint.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import re
import sys
import time
import warnings
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spiral_arena.agents import make_agent
from spiral_arena.models.policy import Policy
from spiral_arena.models.prompting import stop_token_ids
from spiral_arena.play import reading
from trainers import checkpoint, rundir
from trainers.actor import Actor, shared_engine
from trainers.config import TrainConfig
from trainers.distributed import Distributed, gather_states, optimizer_loader, select_device, shard
from trainers.evaluate import NOTES, eval_line, evaluate, final_summary, reasoning
from trainers.groups import group_advantages
from trainers.learner import autocast, lr_factor, update
from trainers.marshal import assign_marshal
from trainers.metrics import MetricsLog, progress_bar, rollout_metrics
from trainers.pool import OpponentPool
from trainers.rae import RAE, state_advantages
from trainers.rollout import EnvPool, collect, parse_mixture
from trainers.setup import (
    base_model_path,
    load_model,
    load_reference,
    make_engine,
    tiny_model_dir,
    warm_start_games,
)
from trainers.sft import play_transcripts, sft, sft_games

logger = logging.getLogger(__name__)


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
    began = time.monotonic()  # time_limit_s counts from here: the warm start is part of the run
    deadline = began + config.time_limit_s if config.time_limit_s > 0 else None
    device = select_device(config.device)
    ddp = Distributed(device)
    if config.rollout_shards % ddp.world:
        raise ValueError(f"rollout_shards ({config.rollout_shards}) must be a multiple of the {ddp.world} ranks")
    if config.async_steps and ddp.world > 1:
        raise ValueError(
            f"async_steps runs in one process (an actor thread beside the learner), not under torchrun's {ddp.world} "
            "ranks: use async_steps 0 there, or run one process"
        )
    if config.fsdp and ddp.world == 1:  # (fsdp with lora_rank is refused by the config's own validation)
        raise ValueError("fsdp shards the model over torchrun ranks: run it under torchrun with 2 or more processes")
    run_dir = Path(ddp.gather(config.output_dir or f"runs/{datetime.now():%Y%m%d-%H%M%S}")[0])
    if ddp.main:
        if config.overwrite and (removed := rundir.clear(run_dir)):
            print(f"removed the run in {run_dir} (overwrite): {', '.join(p.name for p in removed)}")
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ValueError(f"output_dir {run_dir} cannot be made: {error.strerror or error}") from error
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
    generation = dict(max_game_actions=config.max_game_actions, obs_format=config.obs_format)

    # --- model, engine, opponent ---------------------------------------------------------------
    previous = checkpoint.latest(run_dir / "checkpoints") if config.resume else None
    if ddp.main and previous is None and config.model == "tiny":
        tiny_model_dir(config, run_dir)
    ddp.barrier()
    model, tokenizer, model_path = load_model(config, run_dir, previous, device)
    stops = stop_token_ids(tokenizer, model.generation_config)
    engine = make_engine(config, model, tokenizer, model_path, stops)
    if ddp.main:  # only now: a run that cannot start leaves a resumed run's config as it was
        (run_dir / "config.json").write_text(json.dumps(asdict(config), indent=2))
    policy = Policy(engine, tokenizer, config.prompt_template, stops, thinking=config.thinking)
    envs = EnvPool()
    opponent = None if config.opponent == "self" else make_agent(config.opponent)
    if opponent is not None and ddp.main:  # a checkpoint opponent reads each game as it trained (rollout.EnvPool)
        for spec in specs:
            NOTES(reading(opponent, spec).note)
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
        played, mixture = warm_start_games(config)
        records = list(
            play_transcripts(
                config.sft_agent, played, mixture, sft_games(config), config.seed, config.obs_format, config.sft_naming
            )
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
            deadline=deadline if ddp.world == 1 else None,  # ranks must stop SFT at the same step
        )
        start_row.update({"sft/loss_first": losses[0], "sft/loss_last": losses[-1], "sft/steps": len(losses)})
        if len(losses) < config.sft_steps and ddp.main:
            print(
                f"WARNING: the warm start stopped at SFT step {len(losses)} of {config.sft_steps}: "
                f"time_limit_s={config.time_limit_s:g} covers the whole run (one RL step follows)",
                file=sys.stderr,
            )
    anchored = any(config.kl_by_game.values())
    if previous is None and ddp.main and (config.sft_steps > 0 or anchored):
        model.save_pretrained(warm_dir)  # the policy RL starts from (and the KL anchor)
        tokenizer.save_pretrained(warm_dir)
    reference = None
    if anchored:  # the frozen warm-start policy; a resumed run reads it back from disk
        reference = load_reference(config, run_dir, warm_dir, device) if previous is not None else copy.deepcopy(model)
        reference.eval().requires_grad_(False)
    # The engine was built from the weights on disk; the first rollout must sample from the
    # policy the learner trains (after the warm start), or step 1 is silently off-policy.
    engine.load_weights(model)
    pool = None  # population play: frozen snapshots for the other seat (taken before any sharding)
    if config.opponent_pool:
        pool = OpponentPool(model, policy, config.opponent_pool, config.pool_prob, config.sampling, config.seed)
    if config.fsdp:  # from here on each rank holds a shard; the engine keeps its own full copy
        shard(model, device, config.bf16)

    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=(config.adam_beta1, config.adam_beta2), weight_decay=config.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(config, s))
    rae = RAE(config.rae_decay)
    start = 0
    if previous is not None:
        state = checkpoint.load_state(
            previous, optimizer_loader(model, optimizer), scheduler, rae, shard_rngs, learner_rng
        )
        start = state["step"]
        if pool is not None and "pool_rng" in state["extra"]:
            pool.rng.bit_generator.state = state["extra"]["pool_rng"]

    if previous is not None and ddp.main:
        print(f"resumed {run_dir} at step {start} of {config.steps} (from {previous.name})")
        if pool is not None and (config.opponent_pool > 1 or start % config.pool_every):
            print(
                "WARNING: the opponent pool restarts from the resumed policy alone, so this run will not replay "
                f"the uninterrupted one exactly (it does with opponent_pool 1 and checkpoints every multiple of "
                f"pool_every={config.pool_every})",
                file=sys.stderr,
            )
    if pool is not None:
        # the warm start, or on resume the resumed policy: with one snapshot, taken at this very step, the
        # pool the uninterrupted run held here
        pool.add(model, start)

    started = time.monotonic()
    bar = progress_bar(config, start, progress and ddp.main)
    evaluate_start = previous is None and config.eval_at_start
    if evaluate_start and late(deadline, ddp):  # the warm start used the time: the limit bounds the run
        evaluate_start = False
        if ddp.main:
            print(
                f"WARNING: {SKIPPED.format(what='the warm start (step 0)', limit=config.time_limit_s)}", file=sys.stderr
            )
    if evaluate_start and (ddp.main or config.fsdp):  # the warm start's own numbers
        with autocast(config, device):
            scores = evaluate(model, policy, config, specs, play=ddp.main)
        if ddp.main:
            start_row.update({"time_s": time.monotonic() - started, **scores})
            bar.write(eval_line(0, scores, trained_labels))
    if len(start_row) > 1:
        log.write(start_row)

    def play(on: Policy) -> dict[int, list]:
        """One step's games on this rank's rollout shards, each shard drawing on its own stream."""
        with autocast(config, device):
            return {
                s: collect(
                    on,
                    specs,
                    weights,
                    min_samples=samples_per_shard,
                    games_in_flight=config.games_in_flight,
                    rng=shard_rngs[s],
                    sampling=config.sampling,
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
            }

    actor = None  # async_steps: the thread that plays the next steps' games while this one learns
    if config.async_steps:
        pending = state["extra"].get("pending", []) if previous is not None else []
        actor = Actor.for_run(config, model, engine, tokenizer, stops, play, shard_rngs, pool, start, pending)
        actor.start(model)

    step = start
    try:
        for step in range(start + 1, config.steps + 1):
            # 1. rollouts: played now (synchronous), or taken from the actor, which played them ahead -----
            t0 = time.monotonic()
            if actor is None:
                # every rank gets every shard's games, in shard order, so RAE sees the same sequence everywhere
                gathered = ddp.gather(play(policy))
                by_shard = {s: games for part in gathered for s, games in part.items()}
                rollout_s, async_stats = time.monotonic() - t0, {}
            else:
                batch, waited = actor.take(step)
                by_shard, rollout_s = batch.games, batch.rollout_s
                async_stats = {  # staleness: updates between the weights that sampled and those being trained
                    "async/staleness": step - 1 - batch.version,
                    "async/learner_idle_s": waited,
                    "async/actor_idle_s": batch.idle_s,
                }
            for s, games in by_shard.items():
                for game in games:
                    game.shard = s
            results = [game for s in sorted(by_shard) for game in by_shard[s]]
            own = [game for s in shards for game in by_shard[s]]  # this rank's: the ones it trains on
            groups: dict[tuple, int] = {}  # the learner's units: each turn's game and group (self-play: the game)
            for index, game in enumerate(own):
                group = groups.setdefault(
                    (game.shard, game.game, game.record.seed) if grouped else (index,), len(groups)
                )
                for turn in game.turns:
                    turn.game_id, turn.group_id = index, group

            # 2. advantages: RAE baseline per (game, role), read before it is updated; or, for a single
            #    player, each game against the other games of its group (StarPO, delta-belief) ---------
            t0 = time.monotonic()
            if grouped:
                keys = [(s, game.game, game.record.seed) for s in sorted(by_shard) for game in by_shard[s]]
                with autocast(config, device):
                    group_stats = group_advantages(results, keys, config, model, policy)
            elif config.advantage == "marshal":  # each turn's reward through the released pipeline
                group_stats = {}
                assign_marshal(results, config.turn_reward, config.draw_reward)
            else:
                group_stats = {}
                for game in results:
                    baseline_actor = game.shard if config.rae_scope == "shard" else None
                    for seat in game.policy_seats:
                        ret = game.shaped[seat]
                        adv = rae.advantage(game.game, seat, ret, baseline_actor) if config.rae else ret
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

            # 3. learner --------------------------------------------------------------------------
            t0 = time.monotonic()
            if actor is None:
                engine.sleep()  # frees the accelerator for the update (vLLM); a no-op for the hf engine
            stats = update(
                model, reference, optimizer, [t for g in own for t in g.turns], config, learner_rng, device, ddp
            )
            with warnings.catch_warnings():  # a step with nothing to train (all advantages 0) skips optimizer.step()
                warnings.filterwarnings("ignore", message=re.escape("Detected call of `lr_scheduler.step()`"))
                scheduler.step()
            t_sync = time.monotonic()
            if actor is None:
                engine.load_weights(model)  # the engine samples the next rollouts from the updated weights
            else:  # the actor loads them before the first step they play
                actor.publish(step, model)
            sync_s = time.monotonic() - t_sync
            if actor is None and pool is not None and step % config.pool_every == 0:  # (async: the actor's on_load)
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
                **async_stats,
                **group_stats,
                "samples": len(turns),
                **stats,
                **rollout_metrics(results, turns, rollout_s),
                **{f"rae/{k}": v for k, v in rae.baselines.items()},
            }
            if pool is not None:
                metrics["pool/snapshots"] = len(pool.snapshots) if actor is None else batch.states["snapshots"]
                metrics["pool/games_share"] = sum(g.snapshot_step is not None for g in results) / max(1, len(results))
            out_of_time = late(deadline, ddp)
            last = step == config.steps or out_of_time
            if out_of_time and step < config.steps:  # a safety stop, not the plan: say so where it is read
                metrics["stopped_by_time_limit"] = 1.0
            due = step % config.eval_every == 0 or last
            if due and out_of_time:  # the limit bounds the whole run: its checkpoint is saved, its evaluation not run
                metrics["eval_skipped_by_time_limit"] = 1.0
            elif due and (ddp.main or config.fsdp):
                # under FSDP every rank joins the scoring forward passes; an async run's vLLM engine is the actor's
                with autocast(config, device), shared_engine(actor, engine, model):
                    scores = evaluate(model, policy, config, specs, play=ddp.main)
                    if ddp.main and config.eval_reasoning:  # maths and science questions, through the policy's engine
                        scores.update(reasoning(policy, tokenizer, config))
                if ddp.main:
                    metrics.update(scores)
                    log.transcripts(step, results)
                    bar.write(eval_line(step, scores, trained_labels))
            log.write(metrics)
            if step % config.save_every == 0 or last:
                if actor is None:
                    states = ddp.gather({s: shard_rngs[s].bit_generator.state for s in shards})
                    streams = {"pool_rng": pool.rng.bit_generator.state} if pool is not None else {}
                else:  # the batches already played for the next steps, and the actor's streams after them
                    pending, after = actor.pending(step)
                    states = [after["shards"]]
                    streams = {"pool_rng": after["pool_rng"]} if pool is not None else {}
                    streams["pending"] = [b.saved() for b in pending]
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
                        {
                            "config": asdict(config),
                            "base_model": base_model_path(config, run_dir),
                            **({"stopped_early": f"at step {step} of {config.steps} by time_limit_s="
                                f"{config.time_limit_s:g}"} if last and step < config.steps else {}),  # fmt: skip
                            **streams,
                        },
                        model_state,
                    )
            ddp.barrier()
            bar.update(metrics)
            if out_of_time:
                break
    finally:  # Ctrl-C, an error or the end: the actor stops after the batch in hand
        if actor is not None:
            actor.stop()
    bar.close()
    if ddp.main and step < config.steps:  # printed, not logged: it must be seen whatever the logging set-up
        print(
            f"WARNING: STOPPED EARLY by time_limit_s={config.time_limit_s:g} at step {step} of {config.steps}: "
            "the final numbers are from a shorter run than configured and depend on this machine's speed",
            file=sys.stderr,
        )
    skipped = step > start and out_of_time and due  # the last step's evaluation, cut by the time limit
    if ddp.main and skipped:
        print(f"WARNING: {SKIPPED.format(what=f'step {step}', limit=config.time_limit_s)}", file=sys.stderr)
    if ddp.main and progress and (log.last_eval or not skipped):
        print(final_summary(log.last_eval, step, time.monotonic() - started, config, trained_labels))
    elif ddp.main and progress:
        print(f"\nNo evaluation ran: time_limit_s={config.time_limit_s:g} passed first (checkpoints/step_{step:06d})")
    if config.plots and ddp.main:
        from trainers.plots import plot_run

        plot_run(run_dir)
    ddp.barrier()
    engine.close()  # vLLM leaves torchrun's process group (destroying it, as it joined it) before we do
    ddp.close()
    return run_dir
