"""Twenty Questions on the CPU: warm start, StarPO and ΔBelief-RL from the same warm start.

Per seed: ``spiral-arena train --algo starpo`` on the embedded tiny recipe (its warm start imitates a
weak scripted questioner, then StarPO trains), and ``--algo delta-belief`` from that run's saved warm
start with the same RL budget. The warm start's numbers are the StarPO run's step-0 evaluation. All
scores are on the 47 held-out nouns, every noun played 8 times: Mean@8 and Pass@8 with 95% bootstrap
intervals over the nouns, questions per game, invalid and repeated question rates, at 20 questions
and at 50. Targets (issue 11): each method <= 10 minutes on 2 cores; StarPO >= warm start + 10 points
Mean@8; ΔBelief >= StarPO.

    python benchmarks/twenty_questions.py [--seeds 0,1,2] [--out runs/twenty_questions] [--steps N]
        [--long-seeds 0]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from trainers.config import TrainConfig
from trainers.loop import train

HELD_OUT = "TwentyQuestions-v0:recap=true;words=builtin_test"
LONG = f"{HELD_OUT};max_questions=50"
T_95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78}  # Student t, two-sided 95%, by degrees of freedom


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def scores(row: dict, minutes: float) -> dict[str, float]:
    def get(label: str, name: str) -> float:
        return row.get(f"eval/{label}/{name}", float("nan"))

    return {
        "mean8": get(HELD_OUT, "mean_at_8"),
        "mean8_low": get(HELD_OUT, "mean_at_8_low"),
        "mean8_high": get(HELD_OUT, "mean_at_8_high"),
        "pass8": get(HELD_OUT, "pass_at_8"),
        "pass8_low": get(HELD_OUT, "pass_at_8_low"),
        "pass8_high": get(HELD_OUT, "pass_at_8_high"),
        "questions": get(HELD_OUT, "questions_mean"),
        "invalid": get(HELD_OUT, "invalid_rate"),
        "repeated": get(HELD_OUT, "repeated_rate"),
        "mean8_at50": get(LONG, "mean_at_8"),
        "minutes": minutes,
    }


def run_seed(seed: int, out: Path, steps: int | None, long_questions: int) -> dict[str, dict[str, float]]:
    # no time limit: a busy machine must not cut the RL budget short (wall times are reported instead)
    common = {"seed": seed, "eval_long_questions": long_questions, "time_limit_s": 0}
    common |= {"steps": steps, "eval_every": steps} if steps else {}
    starpo_dir = out / f"seed{seed}" / "starpo"
    began = time.monotonic()
    train(TrainConfig.build({"algo": "starpo", "output_dir": str(starpo_dir), **common}), progress=False)
    starpo_wall = time.monotonic() - began
    belief_dir = out / f"seed{seed}" / "delta_belief"
    warm = {"model": str(starpo_dir / "warm_start"), "recipe": "tiny", "sft_steps": 0, "eval_at_start": False}
    began = time.monotonic()
    train(TrainConfig.build({"algo": "delta-belief", "output_dir": str(belief_dir), **warm, **common}), progress=False)
    belief_wall = time.monotonic() - began
    start, *_, starpo_end = [r for r in rows(starpo_dir) if f"eval/{HELD_OUT}/mean_at_8" in r]
    belief_end = [r for r in rows(belief_dir) if f"eval/{HELD_OUT}/mean_at_8" in r][-1]
    starpo_rl = starpo_end["time_s"] - start["time_s"]  # the clock starts after the warm start's SFT
    return {  # minutes of wall time: the warm start (SFT, its data, its evaluation), each RL run whole
        "warm start": scores(start, (starpo_wall - starpo_rl) / 60),
        "StarPO": scores(starpo_end, starpo_rl / 60),
        "ΔBelief": scores(belief_end, belief_wall / 60),
    }


def spread(values: list[float]) -> str:
    values = [v for v in values if math.isfinite(v)]  # the 50-question budget is measured on some seeds only
    if not values:
        return "-"
    if len(values) < 2:
        return f"{100 * values[0]:.1f} (one seed: a hint)"
    return f"{100 * statistics.mean(values):.1f} ± {100 * statistics.stdev(values):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", default="runs/twenty_questions")
    parser.add_argument("--steps", type=int, default=None, help="RL steps (default: the tiny recipe's)")
    parser.add_argument(
        "--long-seeds",
        default="0",
        help="seeds whose evaluations also play every noun with 50 questions (each such evaluation takes "
        "minutes; empty = none)",
    )
    parser.add_argument("--report", action="store_true", help="only print the tables of OUT/results.json")
    args = parser.parse_args()
    out = Path(args.out)
    console = Console()
    results = {}
    if args.report:
        results = {int(seed): methods for seed, methods in json.loads((out / "results.json").read_text()).items()}
        args.seeds = ",".join(map(str, results))
    for seed in [] if args.report else [int(s) for s in args.seeds.split(",")]:
        long_questions = 50 if str(seed) in args.long_seeds.split(",") else 0
        results[seed] = run_seed(seed, out, args.steps, long_questions)
        (out / "results.json").write_text(json.dumps(results, indent=2))

    table = Table(title="Twenty Questions, 47 held-out nouns x 8 games (95% intervals over nouns)")
    for column in (
        "seed",
        "method",
        "Mean@8 %",
        "Pass@8 %",
        "questions",
        "invalid %",
        "repeated %",
        "Mean@8 @50q %",
        "minutes",
    ):
        table.add_column(column, justify="right")
    for seed, methods in results.items():
        for method, s in methods.items():
            table.add_row(
                str(seed),
                method,
                f"{100 * s['mean8']:.1f} [{100 * s['mean8_low']:.1f}, {100 * s['mean8_high']:.1f}]",
                f"{100 * s['pass8']:.1f} [{100 * s['pass8_low']:.1f}, {100 * s['pass8_high']:.1f}]",
                f"{s['questions']:.1f}",
                f"{100 * s['invalid']:.1f}",
                f"{100 * s['repeated']:.1f}",
                f"{100 * s['mean8_at50']:.1f}",
                f"{s['minutes']:.1f}",
            )
    console.print(table)

    summary = Table(title=f"Across seeds {args.seeds} (mean ± sd, percentage points)")
    for column in ("method", "Mean@8", "Pass@8", "Mean@8 @50q"):
        summary.add_column(column, justify="right")
    for method in ("warm start", "StarPO", "ΔBelief"):
        per_seed = [m[method] for m in results.values()]
        summary.add_row(method, *(spread([s[k] for s in per_seed]) for k in ("mean8", "pass8", "mean8_at50")))
    console.print(summary)
    gains = {
        "StarPO - warm start": [m["StarPO"]["mean8"] - m["warm start"]["mean8"] for m in results.values()],
        "ΔBelief - StarPO": [m["ΔBelief"]["mean8"] - m["StarPO"]["mean8"] for m in results.values()],
    }
    for name, diffs in gains.items():
        if len(diffs) < 2:
            console.print(f"{name}: {100 * diffs[0]:+.1f} points Mean@8 (one seed: a hint)")
            continue
        mean, half = statistics.mean(diffs), T_95[len(diffs) - 1] * statistics.stdev(diffs) / len(diffs) ** 0.5
        console.print(
            f"{name}: {100 * mean:+.1f} points Mean@8, 95% interval over seeds "
            f"[{100 * (mean - half):+.1f}, {100 * (mean + half):+.1f}]"
        )


if __name__ == "__main__":
    main()
