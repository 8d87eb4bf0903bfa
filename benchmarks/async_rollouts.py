"""Synchronous against asynchronous rollouts (``--async-steps 1``) on the tiny recipe, side by side.

For each seed, the default main job (``spiral-arena train``'s recipe) is trained synchronously and then with
``async_steps`` (the two alternate, one run at a time, each in a fresh process), and the table gives:
RL steps per minute (evaluations left out: each step's own seconds), the whole run's wall time (warm start and
evaluations included), where a step's seconds go (rollout, update; for the asynchronous run the learner's wait
for games and the actor's wait for weights), the staleness and importance ratios, and each run's final targets
(``trainers.evaluate.TARGETS``). The ratio line is the asynchronous mean over the synchronous mean, with the
spread over seeds.

    python benchmarks/async_rollouts.py --seeds 3                    # the measurement in docs/results
    python benchmarks/async_rollouts.py --seeds 1 --set steps=20     # a quick look (any config key)
    python benchmarks/async_rollouts.py --seeds 3 --report           # tables from finished runs only

A run whose directory holds its final evaluation is read, not repeated.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from learning import final_table, finished, interval, summaries, train_fresh
from rich.console import Console
from rich.table import Table

from trainers.flags import read_settings
from trainers.validation import ConfigError

MODES = {"sync": {}, "async1": {"async_steps": 1}}


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def plain_steps(run: Path) -> list[tuple[dict, float]]:
    """Each RL step after the first that ran no evaluation, with its own seconds: its ``time_s`` less the
    previous step's (the first step's would hold the warm start's evaluation)."""
    rows = [r for r in metrics(run) if r["step"] > 0]
    return [
        (r, r["time_s"] - before["time_s"])
        for before, r in zip(rows, rows[1:], strict=False)
        if not any(k.startswith("eval/") for k in r)
    ]


def finished_runs(
    out: Path, modes: Iterable[str], seeds: int, timing: Callable[[Path], dict]
) -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    """Each mode's finished runs under ``out/MODE/seedN`` (seeds 0..seeds-1): ``timing`` of each, and its final
    evaluation's summary; a mode none of whose runs finished is left out."""
    timings: dict[str, list[dict]] = {}
    finals: dict[str, list[dict]] = {}
    for mode in modes:
        runs = [run for seed in range(seeds) if finished(run := out / mode / f"seed{seed}")]
        if runs:
            timings[mode] = [timing(run) for run in runs]
            finals[mode] = [summaries(run)[-1] for run in runs]
    return timings, finals


def timing(run: Path) -> dict[str, float]:
    """Steps per minute over the RL steps after the first that ran no evaluation (``plain_steps``), the whole
    run's wall time, and the per-step means of where the time went."""
    plain = plain_steps(run)
    seconds = [s for _, s in plain]
    out = {
        "steps_per_min": 60 * len(seconds) / sum(seconds),
        "wall_min": json.loads((run / "wall.json").read_text())["seconds"] / 60 if (run / "wall.json").exists() else 0,
    }
    for key in ("rollout_s", "update_s", "async/learner_idle_s", "async/actor_idle_s", "async/staleness",
                "tis/ratio_mean", "tis/capped_share", "logprob_gap/mean"):  # fmt: skip
        values = [r[key] for r, _ in plain if key in r]
        out[key] = float(np.mean(values)) if values else float("nan")
    return out


def speed_table(timings: dict[str, list[dict]]) -> Table:
    table = Table(title="speed: each seed's run (mean over its RL steps without an evaluation)")
    for col in ("mode", "seed", "steps/min", "wall (min)", "rollout s", "update s", "learner waits s",
                "actor waits s", "staleness", "IS ratio mean", "capped", "log-prob gap"):  # fmt: skip
        table.add_column(col, justify="right")
    for mode, rows in timings.items():
        for seed, t in enumerate(rows):
            table.add_row(
                mode, str(seed), f"{t['steps_per_min']:.1f}", f"{t['wall_min']:.1f}", f"{t['rollout_s']:.2f}",
                f"{t['update_s']:.2f}", f"{t['async/learner_idle_s']:.2f}", f"{t['async/actor_idle_s']:.2f}",
                f"{t['async/staleness']:.2f}", f"{t['tis/ratio_mean']:.4f}", f"{t['tis/capped_share']:.4f}",
                f"{t['logprob_gap/mean']:.4f}",
            )  # fmt: skip
    return table


def modes_parser(description: str, out: str) -> argparse.ArgumentParser:
    """The arguments of a benchmark that trains several modes per seed: ``--out``, ``--seeds``, ``--set``,
    ``--report`` (``parse_modes_args`` reads them)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", default=out)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override, all runs")
    parser.add_argument("--report", action="store_true", help="only print the tables of runs already finished")
    return parser


def parse_modes_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> tuple[argparse.Namespace, dict]:
    """``parser``'s arguments, refusing fewer than one seed, and the ``--set`` overrides as config values."""
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    try:
        return args, read_settings(args.set)
    except ConfigError as error:
        parser.error(str(error))


def main(argv: list[str] | None = None) -> None:
    args, settings = parse_modes_args(modes_parser(__doc__.splitlines()[0], "runs/async_rollouts"), argv)
    out, console = Path(args.out), Console()
    for seed in range(args.seeds):  # alternating: sync then async for each seed, so drift hits both alike
        for mode, overrides in MODES.items():
            run = out / mode / f"seed{seed}"
            if args.report or finished(run):
                continue
            began = time.monotonic()
            train_fresh(run, {"seed": seed, **overrides, **settings})
            (run / "wall.json").write_text(json.dumps({"seconds": time.monotonic() - began}))
    timings, finals = finished_runs(out, MODES, args.seeds, timing)
    if not timings:
        console.print("no finished runs under", out)
        return
    console.print(speed_table(timings))
    console.print(final_table(finals))
    if {"sync", "async1"} <= set(timings):
        pairs = list(zip(timings["sync"], timings["async1"], strict=False))  # seeds both modes finished
        ratios = [a["steps_per_min"] / s["steps_per_min"] for s, a in pairs]
        mean, half = interval(ratios)
        each = ", ".join(f"{r:.2f}" for r in ratios)
        console.print(f"async1 / sync steps per minute: {mean:.2f} +- {half:.2f} (per seed {each})")
        walls = [a["wall_min"] / s["wall_min"] for s, a in pairs if s["wall_min"]]
        if walls:
            console.print(f"async1 / sync whole-run wall time: {', '.join(f'{r:.2f}' for r in walls)} per seed")


if __name__ == "__main__":
    main()
