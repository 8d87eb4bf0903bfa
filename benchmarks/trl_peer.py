"""Our trainer beside TRL's ``GRPOTrainer`` on the tiny recipe: the same warm start, the same games, prompts and
evaluation, side by side.

For each seed, one run at a time in a fresh process and alternating: (a) ``sync``, the default main job
(``spiral-arena train``'s recipe); (b) ``async1``, the same with ``async_steps=1``; (c) ``trl``, TRL 1.16's
``GRPOTrainer`` from (a)'s warm start (``RUN/warm_start``), its turns played by
``spiral_arena.integrations.trl.selfplay_rollout_func`` (the trainer's model in both seats, prompted by the recipe's
own ``Policy``: the same prompt ids as ours), its final model saved with (a)'s ``spiral_arena.json`` record and
evaluated by ``trainers.evaluate.evaluate`` at the recipe's settings, as (a) and (b) evaluate themselves. The tables:
seconds per RL step and turns trained per second (the steps after the first without an evaluation), the whole run's
wall time (process start to end: (a) and (b) include their warm start and three evaluations, (c) one evaluation and
no warm start), where a step's seconds go, and each mode's final targets (``trainers.summary.TARGETS``), as mean +-
95% interval over seeds.

    python benchmarks/trl_peer.py --seeds 3                   # the measurement
    python benchmarks/trl_peer.py --seeds 1 --set steps=20    # a quick look (any config key, all three modes)
    python benchmarks/trl_peer.py --seeds 3 --report          # tables from finished runs only

A run whose directory holds its final evaluation is read, not repeated.

The recipe in ``GRPOConfig`` (``grpo_settings``; each TRL run writes what it used to ``RUN/grpo.json``):

- rollouts: each step trains as many turns as (a)'s steps played on average (our trainer asks for ``samples_per_step``
  and finishes every game in flight: ~1,400 turns on the recipe), rounded to whole groups of ``--group-size`` (16),
  each group the turns of one game, so both trainers learn from the same number of turns. The recipe weighs the games
  it starts, TRL the game of a group: the groups per game follow each game's share of turns, its recipe weight times
  its mean turns per game in (a)'s logged steps (``transcripts.jsonl``). The games are played by our trainer's own
  rollouts (``spiral_arena.rollout.collect``), ``games_in_flight`` games of each game at once, all waiting seats in
  one generation call; turns past a group's need are dropped (``played / trained``; the first step is left out of
  the tables, as every mode's is).
- advantages: reward minus its group's mean (``scale_rewards="none"``: not divided by the group's spread), the closest
  TRL comes to RAE, which subtracts an EMA per (game, seat) over the games before. A group is 16 turns of one game with
  both seats' turns mixed, so in a zero-sum game its mean is near 0 apart from the invalid-move shaping: closer to no
  baseline than to RAE's per-seat one. The rewards are the recipe's shaping (``invalid_penalty``,
  ``invalid_opponent_reward``); TRL plays no ``max_game_actions`` cut (the tiny games end well within it).
- loss: ``loss_type="dapo"`` (token sum over the step's tokens: the recipe's ``token_mean``), one pass
  (``num_iterations`` = epochs = 1) and one optimiser step per generation of a step's turns in
  micro-batches of ``micro_batch`` (gradient accumulation), so the ratio is 1 and the clipped objective is the
  recipe's REINFORCE. TRL keeps turns of advantage 0 in the update (their KL term, and their tokens in the count:
  the recipe leaves them out, ``filter_zero_adv``) and does not merge identical turns into one weighted row.
- KL: one ``beta`` and TRL's only estimator, k3 = exp(d) - d - 1 (d = log pi_ref - log pi): the recipe anchors with
  k2 = d^2 / 2 at 0.3 / 0.1 / 0.3 per game. ``beta`` is the game coefficient that holds for most turns (0.3: Kuhn and
  SimpleNegotiation), so TicTacToe is anchored three times as hard; k2 and k3 have the same gradient near pi_ref,
  k3 pulls back harder on answers pi has dropped.
- optimiser: AdamW at ``lr`` with cosine to ``lr_min`` (``cosine_with_min_lr``: the same formula), the recipe's
  betas, weight decay, gradient clip, warm-up; ``max_completion_length`` = ``max_new_tokens``, ``temperature``,
  ``top_p``, ``bf16``, no gradient checkpointing (TRL turns it on by default; the recipe does not).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from async_rollouts import MODES as PROJECT_MODES
from async_rollouts import finished_runs, metrics, modes_parser, parse_modes_args, plain_steps
from learning import final_table, finished, interval, train_fresh
from rich.console import Console
from rich.table import Table

MODES = (*PROJECT_MODES, "trl")  # sync, async1, trl: the order they run in for each seed
PEER = "sync"  # the run whose warm start, turn mix and checkpoint record the TRL run takes
GROUP_SIZE = 16
HERE = Path(__file__).resolve().parent


def game_lengths(peer: Path, labels: list[str]) -> list[float]:
    """Each game's mean turns per game over ``peer``'s logged steps (``transcripts.jsonl``: every turn of each
    evaluated step); a game none of whose games was logged gets the mean of the others'."""
    turns: Counter = Counter()
    games: dict[str, set] = {label: set() for label in labels}
    for line in (peer / "transcripts.jsonl").read_text().splitlines():
        if line.strip():
            turn = json.loads(line)
            turns[turn["game"]] += 1
            games.setdefault(turn["game"], set()).add((turn["step"], turn["game_index"]))
    lengths = {label: turns[label] / len(games[label]) for label in labels if games[label]}
    if not lengths:
        raise ValueError(f"{peer}/transcripts.jsonl holds no turns of {', '.join(labels)}")
    return [lengths.get(label, float(np.mean(list(lengths.values())))) for label in labels]


def group_counts(shares: list[float], groups: int) -> list[int]:
    """``groups`` split by ``shares`` (largest remainders), each game with a share at least one group."""
    if groups < sum(s > 0 for s in shares):
        raise ValueError(f"{groups} groups cannot hold one group of each of {sum(s > 0 for s in shares)} games")
    exact = [s / sum(shares) * groups for s in shares]
    counts = [max(int(e), 1 if s > 0 else 0) for e, s in zip(exact, shares, strict=True)]
    while sum(counts) < groups:
        counts[max(range(len(counts)), key=lambda i: exact[i] - counts[i])] += 1
    while sum(counts) > groups:
        counts[max((i for i in range(len(counts)) if counts[i] > 1), key=lambda i: counts[i] - exact[i])] -= 1
    return counts


def grpo_settings(config: Any, shares: list[float], group_size: int, turns: float) -> dict[str, Any]:
    """The ``GRPOConfig`` fields that carry ``config`` (a ``TrainConfig``) with ``shares`` of turns per game and
    about ``turns`` turns a step (see the module docstring for what each one does and does not express)."""
    groups = max(1, round(turns / group_size))
    samples = groups * group_size
    micro = max(d for d in range(1, min(config.micro_batch, samples) + 1) if samples % d == 0)
    coefs: dict[float, float] = {}  # each KL coefficient with the share of turns it holds for
    for coef, share in zip(config.kl_by_game.values(), shares, strict=True):
        coefs[coef] = coefs.get(coef, 0.0) + share
    schedules = {"constant": "constant", "warmup": "constant_with_warmup", "cosine": "cosine_with_min_lr"}
    return {
        "max_steps": config.steps,
        "num_generations": group_size,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": samples // micro,  # one optimiser step per generation of `samples` turns
        "max_completion_length": config.max_new_tokens,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "num_iterations": config.epochs,
        "epsilon": config.clip,
        "epsilon_high": config.clip_high or config.clip,
        "beta": max(coefs, key=lambda c: coefs[c]),
        "scale_rewards": "none",
        "loss_type": "dapo",
        "learning_rate": config.lr,
        "lr_scheduler_type": schedules[config.lr_schedule],
        "lr_scheduler_kwargs": {"min_lr": config.lr_min} if config.lr_schedule == "cosine" else {},
        "warmup_steps": config.warmup_steps,
        "adam_beta1": config.adam_beta1,
        "adam_beta2": config.adam_beta2,
        "weight_decay": config.weight_decay,
        "max_grad_norm": config.grad_clip,
        "bf16": config.bf16,
        "activation_checkpointing": config.gradient_checkpointing,  # (transformers 5: gradient_checkpointing)
        "seed": config.seed,
    }


def train_trl(run: Path, overrides: dict[str, Any], peer: Path, group_size: int = GROUP_SIZE) -> None:
    """TRL's ``GRPOTrainer`` on ``overrides`` (the recipe's overrides, as ``peer``'s run got them) from ``peer``'s
    warm start (its base model when it had none), in this process: writes ``run``'s config.json, metrics.jsonl (one
    row per step: its seconds, the rollout's share, the turns trained and played, TRL's logged numbers; the last row
    with the evaluation), grpo.json, first_prompts.json and the final model in ``run/final``."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is "experimental" in TRL 1.16
    from dataclasses import asdict

    import datasets
    import torch
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    from spiral_arena.agents.hf import HFAgent
    from spiral_arena.integrations.trl import selfplay_reward, selfplay_rollout_func
    from spiral_arena.models.checkpoints import SETTINGS_FILE, read_settings
    from spiral_arena.models.named import local_dir
    from spiral_arena.models.policy import Policy
    from spiral_arena.models.prompting import stop_token_ids
    from spiral_arena.rollout import parse_mixture
    from trainers import checkpoint
    from trainers.config import TrainConfig
    from trainers.distributed import select_device
    from trainers.evaluate import evaluate
    from trainers.learner import autocast
    from trainers.start import base_model_path

    config = TrainConfig.build({**overrides, "output_dir": str(run)})
    specs, weights = parse_mixture(config.games, config.game_weights)
    # the recipe weighs the games it starts; TRL a group's game: each game's share of turns, weight x length
    turns = weights * np.array(game_lengths(peer, [s.label for s in specs]))
    shares = [float(t) for t in turns / turns.sum()]
    per_step = float(np.mean([r["samples"] for r in metrics(peer) if "samples" in r]))  # (a)'s turns a step
    settings = grpo_settings(config, shares, group_size, per_step)
    counts = group_counts(
        shares, settings["gradient_accumulation_steps"] * settings["per_device_train_batch_size"] // group_size
    )
    # each game as the recipe's envs are made: its options and the run's observation format
    games = [s.with_options(obs_format=config.obs_format).label if config.obs_format else s.label for s in specs]
    rows = [{"prompt": game} for game, n in zip(games, counts, strict=True) for _ in range(n)]

    warm = peer / "warm_start"
    if not warm.exists():  # a peer run with no warm start: TRL starts from the same base model
        warm = Path(local_dir(base_model_path(config, peer)))
    tokenizer = AutoTokenizer.from_pretrained(warm)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(warm, dtype=torch.float32)
    stops = stop_token_ids(tokenizer, model.generation_config)
    model.generation_config.eos_token_id = stops  # TRL ends a completion at these, as our engine does
    policy = Policy(None, tokenizer, config.prompt_template, stops, thinking=config.thinking)  # prompts only
    first: dict[str, Any] = {}

    def prompt_ids(observations: list[str]) -> list[list[int]]:
        ids = policy.prompt_ids_batch(observations)
        first.setdefault("observations", observations)
        first.setdefault("prompt_ids", ids)
        return ids

    rollout = selfplay_rollout_func(
        invalid_penalty=config.invalid_penalty,
        invalid_opponent_reward=config.invalid_opponent_reward,
        first_seed=config.seed * 10**8,
        max_games=64 * config.samples_per_step,
        prompt_ids=prompt_ids,
        in_flight=config.games_in_flight,
    )
    clock = {"rollout_s": 0.0}

    def timed_rollout(prompts: list[Any], trainer: Any) -> dict[str, list]:
        began = time.monotonic()
        out = rollout(prompts, trainer)
        clock["rollout_s"] += time.monotonic() - began
        return out

    steps: list[dict[str, Any]] = []

    class Clock(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            clock["began"] = time.monotonic()

        def on_step_end(self, args, state, control, **kwargs):
            now = time.monotonic() - clock["began"]
            since = now - (steps[-1]["time_s"] if steps else 0.0)
            steps.append(
                {
                    "step": state.global_step,
                    "time_s": now,
                    "rollout_s": clock["rollout_s"],
                    "update_s": since - clock["rollout_s"],  # TRL's scoring, reference log-probs and update
                    "samples": args.generation_batch_size,  # turns trained on
                    "played_turns": rollout.played["turns"],  # turns played so far, those dropped included
                    "played_games": rollout.played["games"],
                }
            )
            clock["rollout_s"] = 0.0

    class Recorded(trl.GRPOTrainer):
        """Keeps the first prompt ids TRL's model generated from."""

        def _generate_single_turn(self, prompt_ids, *args, **kwargs):
            first.setdefault("generated_from", [list(p) for p in prompt_ids])
            return super()._generate_single_turn(prompt_ids, *args, **kwargs)

    args = trl.GRPOConfig(
        output_dir=str(run / "trl"),
        use_cpu=config.device == "cpu",
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        **settings,
    )
    trainer = Recorded(
        model=model,
        reward_funcs=selfplay_reward,
        args=args,
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
        rollout_func=timed_rollout,
        callbacks=[Clock()],
    )
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps(asdict(config), indent=2))
    record = {"settings": settings, "groups": dict(zip(games, counts, strict=True)), "turn_shares": shares}
    (run / "grpo.json").write_text(json.dumps(record, indent=2))
    trainer.train()
    final = run / "final"
    trainer.save_model(str(final))
    # how the model reads each game and how its run sampled it: the peer run's record (same config), at this step
    recorded = read_settings(checkpoint.latest(peer / "checkpoints"))
    (final / SETTINGS_FILE).write_text(json.dumps({**recorded, "step": trainer.state.global_step}))
    (run / "first_prompts.json").write_text(json.dumps(first))
    for row in steps:  # TRL's own numbers of each step (reward, kl, loss, entropy, grad_norm, learning_rate, ...)
        for entry in trainer.state.log_history:
            if entry.get("step") == row["step"]:
                row.update({f"trl/{k}": v for k, v in entry.items() if k != "step" and isinstance(v, int | float)})
    del trainer, model
    device = select_device(config.device)
    agent = HFAgent(str(final), device=str(device))  # reads final/spiral_arena.json: prompt template, games
    with autocast(config, device):
        scores = evaluate(agent.model, agent.policy, config, specs)
    steps[-1].update(scores)
    with (run / "metrics.jsonl").open("w") as handle:
        for row in steps:
            handle.write(json.dumps(row) + "\n")


def train_trl_fresh(run: Path, overrides: dict[str, Any], peer: Path, group_size: int) -> None:
    """``train_trl`` in a fresh process (as ``learning.train_fresh`` trains ours); an unfinished run there is
    replaced."""
    shutil.rmtree(run, ignore_errors=True)
    code = "\n".join(
        (
            "import json, sys",
            "from pathlib import Path",
            f"sys.path.insert(0, {str(HERE)!r})",
            "from trl_peer import train_trl",
            "train_trl(Path(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))",
        )
    )
    subprocess.run(
        [sys.executable, "-c", code, str(run), json.dumps(overrides), str(peer), str(group_size)], check=True
    )


def timing(run: Path) -> dict[str, float]:
    """Seconds per RL step and turns trained per second over the steps after the first that ran no evaluation
    (``async_rollouts.plain_steps``), the whole run's wall time, the per-step means of rollout and update
    seconds, and (TRL) the turns played per turn trained over those steps."""
    plain = plain_steps(run)
    seconds = [s for _, s in plain]
    wall = run / "wall.json"
    out = {
        "step_s": float(np.mean(seconds)) if seconds else float("nan"),
        "turns_per_s": sum(r["samples"] for r, _ in plain) / sum(seconds) if seconds else float("nan"),
        "wall_min": json.loads(wall.read_text())["seconds"] / 60 if wall.exists() else float("nan"),
    }
    for key in ("rollout_s", "update_s", "samples"):
        values = [r[key] for r, _ in plain if key in r]
        out[key] = float(np.mean(values)) if values else float("nan")
    rows = {r["step"]: r for r in metrics(run)}
    played = [r["played_turns"] - rows[r["step"] - 1]["played_turns"] for r, _ in plain if "played_turns" in r]
    out["played_per_trained"] = sum(played) / sum(r["samples"] for r, _ in plain) if played else float("nan")
    return out


def spread(values: list[float], fmt: str) -> str:
    """Mean +- 95% interval over seeds, then each seed's value."""
    mean, half = interval(values)
    shown = "" if math.isnan(half) else f" +- {half:{fmt}}"
    return f"{mean:{fmt}}{shown} ({', '.join(f'{v:{fmt}}' for v in values)})"


def speed_table(timings: dict[str, list[dict]]) -> Table:
    table = Table(title="speed: mean +- 95% t-interval over seeds (each seed's value)")
    columns = {
        "s / RL step": ("step_s", ".2f"),
        "turns trained / s": ("turns_per_s", ".0f"),
        "wall (min)": ("wall_min", ".1f"),
        "rollout s / step": ("rollout_s", ".2f"),
        "update s / step": ("update_s", ".2f"),
        "turns / step": ("samples", ".0f"),
        "played / trained": ("played_per_trained", ".2f"),
    }
    table.add_column("mode")
    table.add_column("seeds", justify="right")
    for name in columns:
        table.add_column(name, justify="right")
    for mode, rows in timings.items():
        cells = []
        for key, fmt in columns.values():
            values = [t[key] for t in rows]
            cells.append("-" if all(math.isnan(v) for v in values) else spread(values, fmt))
        table.add_row(mode, str(len(rows)), *cells)
    return table


def main(argv: list[str] | None = None) -> None:
    parser = modes_parser(__doc__.splitlines()[0], "runs/trl_peer")
    parser.add_argument("--group-size", type=int, default=GROUP_SIZE, help=f"TRL's num_generations ({GROUP_SIZE})")
    args, settings = parse_modes_args(parser, argv)
    if args.group_size < 2:
        parser.error("--group-size must be at least 2 (TRL's num_generations)")
    out, console = Path(args.out), Console()
    for seed in range(args.seeds):  # alternating: sync, async1, trl for each seed, so drift hits all alike
        for mode in MODES:
            run = out / mode / f"seed{seed}"
            if args.report or finished(run):
                continue
            overrides = {"seed": seed, **settings}
            began = time.monotonic()
            if mode == "trl":
                train_trl_fresh(run, overrides, out / PEER / f"seed{seed}", args.group_size)
            else:
                train_fresh(run, {**overrides, **PROJECT_MODES[mode]})
            (run / "wall.json").write_text(json.dumps({"seconds": time.monotonic() - began}))
    timings, finals = finished_runs(out, MODES, args.seeds, timing)
    if not timings:
        console.print("no finished runs under", out)
        return
    console.print(speed_table(timings))
    console.print(final_table(finals))
    if (grpo := out / "trl" / "seed0" / "grpo.json").exists():
        used = json.loads(grpo.read_text())
        groups = ", ".join(f"{game} {n}" for game, n in used["groups"].items())
        console.print(
            f"trl: groups of {used['settings']['num_generations']} a step: {groups}; beta {used['settings']['beta']:g}"
        )


if __name__ == "__main__":
    main()
