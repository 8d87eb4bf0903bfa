"""What each speed lever buys a training step on a real model (SmolLM2-135M-Instruct by default), side by side.

Each lever is a short ``spiral-arena train`` run in a fresh process, one after another, all on the same texts: the
games of the tiny recipe (single Kuhn hands for chips, TicTacToe in the ``lines`` layout, the negotiation's brief
action line, weights 4:2:2), the bare prompt with the latest message alone, 12-token answers, 64 turns a step in
micro-batches of 16, REINFORCE, no warm start, evaluation off. The levers:

- ``fp32``: every weight trained, fp32 compute (the baseline);
- ``bf16``: the same under bf16 autocast (``--bf16``; this CPU's AVX-512 BF16, where it has it);
- ``lora16``: a LoRA adapter of rank 16 on every projection (``--lora-rank 16``), fp32;
- ``lora16-bf16``: both.

Per lever the table gives, over the steps after the first (``--steps`` - 1 repeats, each a step of its own
games), the update's seconds per trained turn and the rollout's generated tokens per second (median [min, max]),
and the whole run's peak memory. Rollouts sample from the policy as trained, so after step 1 the levers play
different games; the per-turn and per-token rates are what compare.

    python benchmarks/real_model_levers.py                       # SmolLM2, 4 steps a lever
    python benchmarks/real_model_levers.py --levers fp32,bf16 --steps 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from trainers.recipes import TINY_GAMES

LEVERS: dict[str, list[str]] = {
    "fp32": ["--no-bf16"],
    "bf16": ["--bf16"],
    "lora16": ["--no-bf16", "--lora-rank", "16", "--lora-alpha", "32"],
    "lora16-bf16": ["--bf16", "--lora-rank", "16", "--lora-alpha", "32"],
}
TEXTS = [
    "--games", TINY_GAMES, "--game-weights", "4,2,2", "--prompt-template", "bare", "--obs-format", "last",
    "--max-new-tokens", "12", "--samples-per-step", "64", "--games-in-flight", "32", "--micro-batch", "16",
    "--loss", "reinforce", "--epochs", "1", "--lr", "1e-5", "--sft-steps", "0", "--no-eval-at-start",
    "--eval-every", "1000000", "--eval-games", "1", "--eval-opponents", "", "--eval-kuhn-samples", "0",
    "--no-eval-tactics", "--no-eval-out-of-domain", "--save-every", "1000000", "--no-plots",
]  # fmt: skip


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3g} [{min(values):.3g}, {max(values):.3g}]" if values else "-"


def peak_run(name: str, command: list[str], log: Path) -> tuple[float, float]:
    """Run ``command`` to the end (output to ``log``): its wall seconds and its own peak memory in GiB (that
    child's max RSS); ``name`` says whose run failed."""
    started = time.monotonic()
    with log.open("w") as sink:
        child = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{name}: failed (exit {os.waitstatus_to_exitcode(status)}):\n{log.read_text()[-3000:]}")
    return time.monotonic() - started, usage.ru_maxrss / 2**20


def run_lever(name: str, model: str, steps: int, seed: int, out: Path) -> dict:
    """One lever's run in a fresh process: its steps' rates and its peak memory (that process's max RSS)."""
    command = [sys.executable, "-m", "trainers", "--model", model, "--output-dir", str(out), "--steps", str(steps),
               "--seed", str(seed), *TEXTS, *LEVERS[name]]  # fmt: skip
    wall_s, peak_gib = peak_run(name, command, out.with_suffix(".log"))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    later = [r for r in rows if r["step"] > 1 and r.get("trained")]
    return {
        "lever": name,
        "wall_s": wall_s,
        "update_s_per_turn": [r["update_s"] / r["trained"] for r in later],
        "update_s": [r["update_s"] for r in later],
        "rollout_tokens_per_s": [r["generated_tokens_per_s"] for r in later],
        "peak_gib": peak_gib,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m", help="a named model or a model directory")
    parser.add_argument("--levers", default=",".join(LEVERS), help=f"comma-separated, of {', '.join(LEVERS)}")
    parser.add_argument("--steps", type=int, default=4, help="steps a lever (the first is left out)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    levers = [name.strip() for name in args.levers.split(",") if name.strip()]
    unknown = sorted(set(levers) - set(LEVERS))
    if unknown or args.steps < 2:
        parser.error(f"levers must be of {', '.join(LEVERS)} and steps at least 2 (got {unknown}, {args.steps})")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in levers:
            rows.append(run_lever(name, args.model, args.steps, args.seed, Path(tmp) / name))
            Console().print(f"{name}: done in {rows[-1]['wall_s']:.0f} s")
    base = statistics.median(rows[0]["update_s_per_turn"])
    table = Table(title=f"{args.model}: steps 2-{args.steps} of 64 turns each, a lever a fresh process")
    for column in ("lever", "update s / turn", f"vs {rows[0]['lever']}", "update s / step", "rollout tokens/s",
                   "peak GiB", "run s"):  # fmt: skip
        table.add_column(column, justify="left" if column == "lever" else "right")
    for row in rows:
        ratio = base / statistics.median(row["update_s_per_turn"])
        cells = [spread(row["update_s_per_turn"]), f"{ratio:.2f}x", spread(row["update_s"])]
        cells += [spread(row["rollout_tokens_per_s"]), f"{row['peak_gib']:.1f}", f"{row['wall_s']:.0f}"]
        table.add_row(row["lever"], *cells)
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
