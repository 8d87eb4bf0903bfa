"""Speed of ``spiral-arena eval`` on the tiny model and the project's own benchmark files.

Rows (targets in brackets):

- generation, hf backend: items/s of the tiny model answering ``--items`` maths prompts (spiral-offline
  template, T 0.6, ``--new-tokens`` tokens each) one prompt at a time vs 32 per batch [batch 32 >= 8x batch 1];
- grading: maths items/s through the process pool of ``--workers`` workers, on responses built from the
  project's files (each gold answer boxed at the end of a paragraph, plus as many wrong ones), after the
  workers are up [>= 150 items/s on 2 cores]; the workers' start-up is printed separately;
- a whole run: ``run_eval`` on all eight benchmarks (spiral-offline, 16 samples on AIME/AMC, ``--run-tokens``
  new tokens; real runs generate 4,096-8,192, which only makes generation's share larger), and the share
  of its wall time spent outside generation (model loading, data, prompts, grading, metrics, files)
  [<= 10%], in a process that has already imported torch and transformers and started its grading
  workers (once-per-process costs, printed separately as a one-item run in the fresh process).

    python benchmarks/eval_throughput.py [--items 64] [--new-tokens 64] [--run-tokens 256] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "evals"


def generation_rates(model_dir: str, items: int, new_tokens: int) -> dict[int, float]:
    from spiral_arena.evals.data import load_benchmark
    from spiral_arena.evals.generate import HFBackend, Request
    from spiral_arena.evals.presets import load_preset, render
    from spiral_arena.models import Sampling

    preset = load_preset("spiral-offline")
    questions = [item.question for item in load_benchmark("math500", DATA).items]
    requests = [Request(render(preset.math, questions[i % len(questions)]), "raw") for i in range(items)]
    sampling = Sampling(0.6, 0.95, new_tokens)
    rates = {}
    for batch in (1, 32):
        backend = HFBackend(model_dir, device="cpu", batch_size=batch)
        backend.generate(requests[:batch], sampling, seed=0)  # warm-up
        start = time.perf_counter()
        backend.generate(requests, sampling, seed=0)
        rates[batch] = items / (time.perf_counter() - start)
    return rates


def grading_tasks(copies: int):
    from spiral_arena.evals.data import BENCHMARKS, load_benchmark
    from spiral_arena.evals.grading import MathTask

    tasks = []
    for name, benchmark in BENCHMARKS.items():
        if benchmark.kind != "math":
            continue
        for item in load_benchmark(name, DATA).items:
            gold = item.answers[0].replace("$", "")
            right = (
                f"We work through the problem carefully and simplify at each step. So the answer is \\boxed{{{gold}}}."
            )
            wrong = "We work through the problem, but an arithmetic slip gives \\boxed{\\frac{7}{3}} in the end."
            tasks += [
                MathTask(right, item.answers, "last-box-or-text"),
                MathTask(wrong, item.answers, "last-box-or-text"),
            ]
    return tasks * copies


def grading_rate(workers: int) -> tuple[float, float, int]:
    from spiral_arena.evals.grading import MathGrader

    tasks = grading_tasks(copies=20)
    start = time.perf_counter()
    with MathGrader(workers=workers) as grader:
        grader.grade(tasks[:workers])  # returns once every worker has imported math-verify and graded one item
        startup = time.perf_counter() - start
        start = time.perf_counter()
        verdicts = grader.grade(tasks)
        rate = len(tasks) / (time.perf_counter() - start)
    assert sum(v.correct for v in verdicts) == len(tasks) // 2, "every boxed gold answer must grade as correct"
    return rate, startup, len(tasks)


def whole_run(model_dir: str, output: Path, new_tokens: int, workers: int) -> dict:
    from spiral_arena.evals.data import BENCHMARKS
    from spiral_arena.evals.run import EvalOptions, run_eval

    def options(directory: Path, **changes) -> EvalOptions:
        base = {
            "model": f"hf:{model_dir}",
            "benchmarks": list(BENCHMARKS),
            "output_dir": directory,
            "overrides": {"max_new_tokens": str(new_tokens)},
            "data_dir": DATA,
            "device": "cpu",
            "grader_workers": workers,
            "progress": False,
        }
        return EvalOptions(**(base | changes))

    run_eval(options(output / "run"))
    timing = json.loads((output / "run" / "manifest.json").read_text())["timing"]
    samples = sum(1 for _ in (output / "run" / "samples.jsonl").open())
    return {**timing, "samples": samples}


def fresh_process_run(model_dir: str, output: Path) -> float:
    """Seconds for a one-item ``spiral-arena eval`` in a new process: the imports, model loading and
    grading-worker start-up that every process pays once, whatever the run's size."""
    command = [sys.executable, "-m", "spiral_arena.cli", "eval", "--model", f"hf:{model_dir}", "--benchmarks",
               "math500", "--data-dir", str(DATA), "--limit", "1", "--samples", "1", "--max-new-tokens", "1",
               "--output-dir", str(output), "--no-progress"]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--run-tokens", type=int, default=256, help="max new tokens in the whole run")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from trainers.tiny import create_tiny

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = str(create_tiny(Path(tmp) / "tiny", ["KuhnPoker-v0"]))
        cold = fresh_process_run(model_dir, Path(tmp) / "first")
        rates = generation_rates(model_dir, args.items, args.new_tokens)
        grade_rate, startup, graded = grading_rate(args.workers)
        run = whole_run(model_dir, Path(tmp), args.run_tokens, args.workers)

    outside = 1 - run["generation_s"] / run["wall_time_s"]
    table = Table(title=f"spiral-arena eval throughput ({os.cpu_count()} CPUs, tiny model)")
    for column in ("measure", "value", "target"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    table.add_row(f"generation, {args.new_tokens} tokens, batch 1 (items/s)", f"{rates[1]:.2f}", "")
    table.add_row(f"generation, {args.new_tokens} tokens, batch 32 (items/s)", f"{rates[32]:.2f}", "")
    table.add_row("batch 32 / batch 1", f"{rates[32] / rates[1]:.1f}x", ">= 8x")
    table.add_row(f"grading, {args.workers} workers, {graded} maths items (items/s)", f"{grade_rate:.0f}", ">= 150")
    table.add_row("grading workers' start-up (s)", f"{startup:.1f}", "")
    table.add_row(
        f"whole run: {run['samples']} samples x {args.run_tokens} tokens, wall (s)", f"{run['wall_time_s']:.1f}", ""
    )
    table.add_row("  of which generation (s)", f"{run['generation_s']:.1f}", "")
    table.add_row("  of which grading (s)", f"{run['grading_s']:.1f}", "")
    table.add_row("  share outside generation", f"{100 * outside:.1f}%", "<= 10%")
    table.add_row("one-item run in a fresh process (s: imports, loading, workers)", f"{cold:.1f}", "")
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
