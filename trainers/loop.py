"""``train(config)``: self-play RL with role-conditioned advantages, readable top to bottom.

One policy step:
1. rollouts: play games (self-play, or against a fixed opponent) until enough turns are done;
2. advantages: each trained player's return minus its (game, role) EMA baseline (RAE);
3. learner: recompute old log-probs, then PPO-clip or REINFORCE epochs (+ optional KL anchor);
4. the engine gets the new weights; every K steps, evaluation and a checkpoint.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections import defaultdict
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spiral_arena.agents import make_agent
from trainers import checkpoint
from trainers.config import TrainConfig
from trainers.evaluate import eval_games, kuhn_metrics, play_against
from trainers.logprobs import pack, response_logprobs
from trainers.losses import kl_to_reference, policy_loss
from trainers.rae import RAE
from trainers.rollout import GameResult, Policy, Turn, collect, parse_mixture, response_action
from trainers.sft import play_transcripts, sft


def train(config: TrainConfig, progress: bool = True) -> Path:
    run_dir = Path(config.output_dir or f"runs/{datetime.now():%Y%m%d-%H%M%S}")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(asdict(config), indent=2))
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    device = torch.device("cuda" if config.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if config.device == "auto" else config.device))
    specs, weights = parse_mixture(config.games, config.game_weights)
    generation = dict(max_new_tokens=config.max_new_tokens, top_p=config.top_p,
                      max_game_actions=config.max_game_actions, obs_format=config.obs_format)

    # --- model, engine, opponent ---------------------------------------------------------------
    previous = checkpoint.latest(run_dir / "checkpoints") if config.resume else None
    model, tokenizer, model_path = load_model(config, run_dir, previous, device)
    engine = make_engine(config, model, tokenizer, model_path)
    policy = Policy(engine, tokenizer, config.prompt_template)
    opponent = None if config.opponent == "self" else make_agent(config.opponent)
    log = MetricsLog(run_dir, resume=previous is not None)

    # --- warm start (once per run; a resumed run reloads it) --------------------------------------
    warm_dir = run_dir / "warm_start"
    if previous is None and config.sft_steps > 0:
        records = list(play_transcripts("random", specs, weights, games=2000, seed=config.seed,
                                        obs_format=config.obs_format))
        losses = sft(model, policy, records, config.sft_steps, config.sft_batch, config.sft_lr, config.seed)
        log.write({"step": 0, "sft/loss_first": losses[0], "sft/loss_last": losses[-1]})
        model.save_pretrained(warm_dir)
        tokenizer.save_pretrained(warm_dir)
    reference = None
    if config.kl_coef > 0:
        reference = load_reference(warm_dir, model, device)

    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=(config.adam_beta1, config.adam_beta2),
                                  weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(config, s))
    rae = RAE(config.rae_decay)
    start = 0
    if previous is not None:
        start = checkpoint.load_state(previous, optimizer, scheduler, rae, rng)["step"]

    started = time.monotonic()
    bar = progress_bar(config, start, progress)
    step = start
    for step in range(start + 1, config.steps + 1):
        # 1. rollouts ------------------------------------------------------------------------
        t0 = time.monotonic()
        results = collect(policy, specs, weights, min_samples=config.samples_per_step,
                          games_in_flight=config.games_in_flight, rng=rng, temperature=config.temperature,
                          invalid_penalty=config.invalid_penalty,
                          invalid_opponent_reward=config.invalid_opponent_reward, opponent=opponent, **generation)
        rollout_s = time.monotonic() - t0

        # 2. advantages: RAE baseline per (game, role), read before it is updated ----------------
        for game in results:
            for seat in game.policy_seats:
                ret = game.shaped[seat]
                adv = rae.advantage(game.game, seat, ret) if config.rae else ret
                for turn in game.turns:
                    if turn.role == seat:
                        turn.advantage = adv
        turns = [t for g in results for t in g.turns]
        trained = [t for t in turns if t.advantage != 0.0]  # zero advantage carries no gradient

        # 3. learner --------------------------------------------------------------------------
        t0 = time.monotonic()
        engine.sleep()  # frees the accelerator for the update (vLLM); a no-op for the hf engine
        stats = update(model, reference, optimizer, trained, config, rng, device) if trained else {}
        scheduler.step()
        engine.load_weights(model)
        update_s = time.monotonic() - t0

        # 4. metrics, evaluation, checkpoint ----------------------------------------------------
        metrics = {"step": step, "time_s": time.monotonic() - started, "lr": scheduler.get_last_lr()[0],
                   "rollout_s": rollout_s, "update_s": update_s, "samples": len(turns), "trained": len(trained),
                   **stats, **rollout_metrics(results, turns, rollout_s), **{f"rae/{k}": v for k, v in rae.baselines.items()}}
        out_of_time = config.time_limit_s > 0 and metrics["time_s"] >= config.time_limit_s
        last = step == config.steps or out_of_time
        if step % config.eval_every == 0 or last:
            metrics.update(evaluate(model, policy, config, specs, final=last))
            log.transcripts(step, turns)
        log.write(metrics)
        if step % config.save_every == 0 or last:
            checkpoint.save(run_dir / "checkpoints", step, model, tokenizer, optimizer, scheduler, rae, rng,
                            {"config": asdict(config)})
        bar.update(metrics)
        if out_of_time:
            break
    bar.close()
    if config.plots:
        from trainers.plots import plot_run

        plot_run(run_dir)
    return run_dir


def update(model, reference, optimizer, turns: list[Turn], config: TrainConfig, rng, device) -> dict[str, float]:
    """Old log-probs recomputed without grad, then ``epochs`` passes of one optimiser step each
    (micro-batches accumulate into it, weighted by their share of the batch)."""
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    batches = [turns[i : i + config.micro_batch] for i in range(0, len(turns), config.micro_batch)]

    def forward(net, batch, grad: bool):
        ids, attention, positions, mask = pack([t.prompt_ids for t in batch], [t.response_ids for t in batch], pad, device)
        with torch.set_grad_enabled(grad):
            return response_logprobs(net, ids, attention, positions, mask, config.temperature)

    old = [forward(model, b, False)[0] for b in batches]
    ref = [forward(reference, b, False)[0] for b in batches] if reference is not None else None
    totals: dict[str, float] = defaultdict(float)
    model.train()
    for _ in range(config.epochs):
        optimizer.zero_grad(set_to_none=True)
        for i in rng.permutation(len(batches)):
            batch = batches[i]
            logp, mask = forward(model, batch, True)
            advantages = torch.tensor([t.advantage for t in batch], device=device)
            loss, info = policy_loss(logp, old[i], advantages, mask, config.loss, config.clip, config.aggregation,
                                     config.max_new_tokens)
            kl = kl_to_reference(logp, ref[i], mask, config.aggregation, config.max_new_tokens) if ref else None
            total = loss + config.kl_coef * kl if kl is not None else loss
            share = len(batch) / len(turns)
            (total * share).backward()
            totals["loss"] += float(loss) * share / config.epochs
            totals["clip_fraction"] += info["clip_fraction"] * share / config.epochs
            if kl is not None:
                totals["kl"] += float(kl) * share / config.epochs
        totals["grad_norm"] += float(torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)) / config.epochs
        optimizer.step()
    return dict(totals)


def evaluate(model, policy: Policy, config: TrainConfig, specs, final: bool) -> dict[str, float]:
    games = eval_games(specs, config.eval_env_ids)
    if final:
        games = eval_games(specs, "") if not config.eval_env_ids else games
    opponents = [o for o in config.eval_opponents.split(",") if o]
    model.eval()
    metrics = play_against(policy, games, opponents, config.eval_games, seed=12345,
                           max_new_tokens=config.max_new_tokens, temperature=config.eval_temperature,
                           top_p=config.top_p, max_game_actions=config.max_game_actions, obs_format=config.obs_format)
    if any(s.env_id == "KuhnPoker-v0" for s in specs):
        metrics.update(kuhn_metrics(model, policy, config.obs_format))
    model.train()
    return metrics


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


def load_model(config: TrainConfig, run_dir: Path, previous: Path | None, device):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if previous is not None:
        path = previous
    elif config.model == "tiny":
        from trainers.tiny import create_tiny

        path = run_dir / "tiny_init"
        if not path.exists():
            create_tiny(path, [s.env_id for s in parse_mixture(config.games, config.game_weights)[0]], seed=config.seed)
    else:
        path = config.model
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        dtype = torch.bfloat16 if config.bf16 and device.type == "cuda" else torch.float32
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)
    except OSError as error:
        raise ValueError(f"cannot load model {str(path)!r}: {error}") from error
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    if config.lora_rank > 0:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha,
                                                 target_modules="all-linear", task_type="CAUSAL_LM"))
    return model, tokenizer, path


def load_reference(warm_dir: Path, model, device):
    """The frozen warm-start policy the KL term anchors to (the initial model when there was no SFT)."""
    if warm_dir.exists():
        from transformers import AutoModelForCausalLM

        reference = AutoModelForCausalLM.from_pretrained(warm_dir).to(device)
    else:
        reference = copy.deepcopy(model)
    reference.eval().requires_grad_(False)
    return reference


def make_engine(config: TrainConfig, model, tokenizer, model_path):
    if config.backend == "hf":
        from trainers.engines.hf import HFEngine

        return HFEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
    if config.backend == "vllm":
        from trainers.engines.vllm import VLLMEngine

        return VLLMEngine(config, model, tokenizer, model_path)
    raise ValueError(f"backend must be 'hf' or 'vllm', got {config.backend!r}")


class MetricsLog:
    """metrics.jsonl (one line per step), transcripts.jsonl, optional TensorBoard and wandb."""

    def __init__(self, run_dir: Path, resume: bool) -> None:
        self.run_dir = run_dir
        mode = "a" if resume else "w"
        self.metrics = open(run_dir / "metrics.jsonl", mode)
        self.transcript_file = open(run_dir / "transcripts.jsonl", mode)

    def write(self, metrics: dict[str, Any]) -> None:
        self.metrics.write(json.dumps(metrics) + "\n")
        self.metrics.flush()

    def transcripts(self, step: int, turns: list[Turn]) -> None:
        for t in turns:
            self.transcript_file.write(json.dumps({
                "step": step, "game": t.game, "role": t.role, "prompt": t.prompt, "response": t.response,
                "action": response_action(t.response), "reward": t.reward, "advantage": t.advantage,
            }) + "\n")
        self.transcript_file.flush()


class progress_bar:  # noqa: N801 - used like tqdm
    """A tqdm bar over steps (or seconds, under a time limit) showing the latest key numbers."""

    def __init__(self, config: TrainConfig, start: int, enabled: bool) -> None:
        from tqdm import tqdm

        self.by_time = config.time_limit_s > 0
        total = config.time_limit_s if self.by_time else config.steps
        self.bar = tqdm(total=total, initial=0 if self.by_time else start, disable=not enabled,
                        unit="s" if self.by_time else "step", dynamic_ncols=True)

    def update(self, metrics: dict[str, Any]) -> None:
        if self.by_time:
            self.bar.n = min(self.bar.total, round(metrics["time_s"], 1))
        else:
            self.bar.update(1)
        shown = {"step": metrics["step"]}
        for key in ("eval/kuhn_exploitability", "loss", "kl"):
            if key in metrics:
                shown[key.split("/")[-1]] = f"{metrics[key]:.3f}"
        self.bar.set_postfix(shown)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()
