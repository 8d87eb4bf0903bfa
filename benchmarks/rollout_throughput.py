"""Rollout speed of the tiny model: one game at a time vs 64 games sharing each generation call.

Prints games/s, generated tokens/s, and the share of rollout time spent outside the model
(envs, prompt building, tokenising), for self-play on the tiny recipe's games. Targets: batch 64
at least 10x the games/s of batch 1; time outside the model at most 10%.

    python benchmarks/rollout_throughput.py [--seconds 20] [--repeats 3] [--model DIR]

An untrained model's answers are mostly invalid, so its games end at the first decision and every
generation call pays for a reset per game; ``--model`` with a trained checkpoint (e.g. the default
run's ``checkpoints/step_000120``) measures the games training actually plays.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import torch
from rich.console import Console
from rich.table import Table
from transformers import AutoModelForCausalLM, AutoTokenizer

from spiral_arena.models import Sampling
from spiral_arena.models.hf import HFEngine
from spiral_arena.models.policy import Policy
from spiral_arena.models.prompting import stop_token_ids
from spiral_arena.rollout import EnvPool, collect, parse_mixture
from trainers.config import TrainConfig
from trainers.tiny import create_tiny


class TimedEngine(HFEngine):
    """The HF engine, with the time spent inside generate() added up."""

    seconds = 0.0

    def generate(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return super().generate(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def measure(policy: Policy, engine: TimedEngine, config: TrainConfig, in_flight: int, seconds: float) -> dict:
    specs, weights = parse_mixture(config.games, config.game_weights)
    rng = np.random.default_rng(0)
    envs = EnvPool()
    games = tokens = decisions = 0
    engine.seconds = 0.0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        results = collect(
            policy,
            specs,
            weights,
            min_samples=0,
            games=in_flight,
            games_in_flight=in_flight,
            rng=rng,
            sampling=Sampling(1.0, 1.0, config.max_new_tokens),
            max_game_actions=config.max_game_actions,
            invalid_penalty=-1.5,
            invalid_opponent_reward=0.5,
            obs_format=config.obs_format,
            envs=envs,
        )
        games += len(results)
        tokens += sum(len(t.response_ids) for r in results for t in r.turns)
        decisions += sum(len(r.turns) for r in results)
    total = time.perf_counter() - start
    return {
        "games_per_s": games / total,
        "tokens_per_s": tokens / total,
        "decisions_per_game": decisions / games,
        "outside": 1 - engine.seconds / total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per batch size and repeat")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats; mean [min, max] shown (3)")
    parser.add_argument("--model", default="", help="a model directory (default: a fresh tiny model)")
    args = parser.parse_args()
    if args.repeats < 1 or args.seconds <= 0:
        parser.error("--repeats must be at least 1 and --seconds positive")
    config = TrainConfig.build({})  # the tiny recipe's games, prompts and answer length
    path = args.model or str(create_tiny(tempfile.mkdtemp() + "/tiny"))
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    engine = TimedEngine(model, stop_token_ids(tokenizer, model.generation_config), tokenizer.pad_token_id)
    policy = Policy(engine, tokenizer, config.prompt_template)
    torch.manual_seed(0)
    rows: dict[int, list[dict]] = {1: [], 64: []}
    for _ in range(args.repeats):  # interleaved, so a slow spell of a shared machine hits both sizes
        for n in rows:
            rows[n].append(measure(policy, engine, config, n, args.seconds))

    def spread(values: list[float], fmt: str) -> str:
        return f"{np.mean(values):{fmt}} [{min(values):{fmt}}, {max(values):{fmt}}]"

    table = Table(title=f"Tiny-model rollouts ({config.games}; {torch.get_num_threads()} threads; mean [min, max])")
    for col in ("games in flight", "games/s", "generated tokens/s", "decisions/game", "time outside the model"):
        table.add_column(col, justify="right")
    for n, runs in rows.items():
        cells = [spread([r[k] for r in runs], f) for k, f in (("games_per_s", ".1f"), ("tokens_per_s", ".0f"))]
        cells += [spread([r["decisions_per_game"] for r in runs], ".2f"), spread([r["outside"] for r in runs], ".1%")]
        table.add_row(str(n), *cells)
    console = Console()
    console.print(table)
    speedups = [big["games_per_s"] / one["games_per_s"] for big, one in zip(rows[64], rows[1], strict=True)]
    console.print(
        f"batch 64 vs batch 1: {spread(speedups, '.1f')}x games/s over {args.repeats} repeats "
        f"(target >= 10x: {'met' if min(speedups) >= 10 else 'not met'} on the slowest)"
    )
    outside = [r["outside"] for r in rows[64]]
    console.print(
        f"time outside the model at batch 64: {spread(outside, '.1%')} "
        f"(target <= 10%: {'met' if max(outside) <= 0.10 else 'not met'} on the worst)"
    )


if __name__ == "__main__":
    main()
