"""Rollout speed of the tiny model: one game at a time vs 64 games sharing each generation call.

Prints games/s, generated tokens/s, and the share of rollout time spent outside the model
(envs, prompt building, tokenising), for self-play on the tiny recipe's games. Targets: batch 64
at least 10x the games/s of batch 1; time outside the model at most 10%.

    python benchmarks/rollout_throughput.py [--seconds 20] [--model DIR]
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

from spiral_arena.agents.prompting import stop_token_ids
from trainers.config import TrainConfig
from trainers.engines.hf import HFEngine
from trainers.rollout import EnvPool, Policy, collect, parse_mixture
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
    pool = EnvPool()
    games = tokens = 0
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
            max_new_tokens=config.max_new_tokens,
            temperature=1.0,
            top_p=1.0,
            max_game_actions=config.max_game_actions,
            invalid_penalty=-1.5,
            invalid_opponent_reward=0.5,
            obs_format=config.obs_format,
            pool=pool,
        )
        games += len(results)
        tokens += sum(len(t.response_ids) for r in results for t in r.turns)
    total = time.perf_counter() - start
    return {"games_per_s": games / total, "tokens_per_s": tokens / total, "outside": 1 - engine.seconds / total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per batch size")
    parser.add_argument("--model", default="", help="a model directory (default: a fresh tiny model)")
    args = parser.parse_args()
    config = TrainConfig.build({})  # the tiny recipe's games, prompts and answer length
    path = args.model or str(create_tiny(tempfile.mkdtemp() + "/tiny"))
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    engine = TimedEngine(model, stop_token_ids(tokenizer, model.generation_config), tokenizer.pad_token_id)
    policy = Policy(engine, tokenizer, config.prompt_template)
    torch.manual_seed(0)
    rows = {n: measure(policy, engine, config, n, args.seconds) for n in (1, 64)}
    table = Table(title=f"Tiny-model rollouts ({config.games}; {torch.get_num_threads()} threads)")
    for col in ("games in flight", "games/s", "generated tokens/s", "time outside the model"):
        table.add_column(col, justify="right")
    for n, r in rows.items():
        table.add_row(str(n), f"{r['games_per_s']:.1f}", f"{r['tokens_per_s']:.0f}", f"{r['outside']:.1%}")
    console = Console()
    console.print(table)
    speedup = rows[64]["games_per_s"] / rows[1]["games_per_s"]
    console.print(
        f"batch 64 vs batch 1: {speedup:.1f}x games/s (target >= 10x: {'met' if speedup >= 10 else 'not met'})"
    )
    outside = rows[64]["outside"]
    console.print(
        f"time outside the model at batch 64: {outside:.1%} (target <= 10%: {'met' if outside <= 0.10 else 'not met'})"
    )


if __name__ == "__main__":
    main()
