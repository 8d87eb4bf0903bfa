"""Synchronous against asynchronous rollouts (``--async-steps 1``) on the tiny recipe, side by side.

For each seed, the default main job (``spiral-arena train``'s recipe) is trained synchronously and then with
``async_steps`` (the two alternate, one run at a time, each in a fresh process), and the table gives:
RL steps per minute (evaluations left out: each step's own seconds), the whole run's wall time (warm start and
evaluations included), where a step's seconds go (rollout, update; for the asynchronous run the learner's wait
for games and the actor's wait for weights), the staleness and importance ratios, and each run's final targets
(``trainers.summary.TARGETS``). The ratio line is the asynchronous mean over the synchronous mean, with the
spread over seeds.

    python benchmarks/async_rollouts.py --seeds 3                    # the measurement in docs/results
    python benchmarks/async_rollouts.py --seeds 1 --set steps=20     # a quick look (any config key)
    python benchmarks/async_rollouts.py --seeds 3 --report           # tables from finished runs only

``--ceiling`` measures how far any overlap of the two halves could go on this machine, from what each half
costs: the recipe's first ``steps`` (30 unless ``--set steps=N``) trained synchronously three ways per seed,
torch's default threads (one a core), one thread, and one thread in each of two identical runs at once (the
cores shared as an actor and a learner in their own processes would share them). A step overlapped on ``C``
cores takes at least the larger of the one-thread halves' sum over ``C`` (no schedule does the work in less
core time than one thread a half needs) and each half's own default-thread time, so the synchronous step over
that is the most any asynchronous trainer could gain here (weights' hand-over and Python's lock left out):

    python benchmarks/async_rollouts.py --seeds 3 --ceiling

A run whose directory holds its final evaluation is read, not repeated.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from learning import final_table, finish, finished, interval, start_fresh, summaries, train_fresh
from rich.console import Console
from rich.table import Table

from trainers.config import TrainConfig
from trainers.flags import read_settings
from trainers.validation import ConfigError

MODES = {"sync": {}, "async1": {"async_steps": 1}}
CEILING_RUNS = {"default": None, "one_thread": 1, "pair_a": 1, "pair_b": 1}  # torch's threads (None: its default)


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
    """``parser``'s arguments, refusing fewer than one seed, and the ``--set`` overrides as config values,
    checked as a training config would check them (an unknown key or a bad value stops here, not in a run)."""
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    try:
        settings = read_settings(args.set)
        TrainConfig.build(settings)
    except ConfigError as error:
        parser.error(str(error))
    return args, settings


def halves(run: Path) -> dict[str, float]:
    """A run's mean rollout and update seconds over its plain steps (``plain_steps``)."""
    plain = plain_steps(run)
    return {key: float(np.mean([r[key] for r, _ in plain])) for key in ("rollout_s", "update_s")}


def ceiling(out: Path, seeds: int, settings: dict[str, str], report: bool) -> None:
    """``--ceiling``: train the four runs of ``CEILING_RUNS`` per seed (the pair at once), then print each
    run's halves and the bound they put on an overlapped step."""
    settings = {"steps": "30", **settings}
    console = Console()
    for seed in range(seeds):
        for names in (["default"], ["one_thread"], ["pair_a", "pair_b"]):
            runs = [out / "ceiling" / name / f"seed{seed}" for name in names]
            if report or all(finished(run) for run in runs):
                continue
            started = [start_fresh(run, {"seed": seed, **settings}, CEILING_RUNS[run.parent.name]) for run in runs]
            for process in started:
                finish(process)
    measured = {
        seed: {name: halves(run) for name in CEILING_RUNS if finished(run := out / "ceiling" / name / f"seed{seed}")}
        for seed in range(seeds)
    }
    measured = {seed: runs for seed, runs in measured.items() if len(runs) == len(CEILING_RUNS)}
    if not measured:
        console.print("no finished ceiling runs under", out / "ceiling")
        return
    cores = os.cpu_count() or 1
    table = Table(title=f"the halves of a step, seconds (mean over each run's plain steps); {cores} cores")
    for col in ("seed", "run", "threads", "rollout s", "update s", "sum s"):
        table.add_column(col, justify="right")
    bounds, default_threads = [], f"default ({torch_threads()})"
    for seed, runs in measured.items():
        for name, h in runs.items():
            threads = str(CEILING_RUNS[name] or default_threads)
            table.add_row(str(seed), name, threads, f"{h['rollout_s']:.2f}", f"{h['update_s']:.2f}",
                          f"{h['rollout_s'] + h['update_s']:.2f}")  # fmt: skip
        bounds.append(overlap_bound(runs, cores))
    console.print(table)
    mean, half = interval(bounds)
    each = ", ".join(f"{b:.2f}" for b in bounds)
    console.print(f"the most an overlapped step could gain here: {mean:.2f}x +- {half:.2f} (per seed {each})")


def overlap_bound(runs: dict[str, dict[str, float]], cores: int) -> float:
    """The synchronous step (default threads) over the shortest an overlapped one could be: the one-thread
    halves' core seconds (the pair's mean, measured with the cores shared) spread over ``cores``, and never
    less than either half on its own at default threads."""
    default = runs["default"]
    core_s = np.mean([runs[name]["rollout_s"] + runs[name]["update_s"] for name in ("pair_a", "pair_b")])
    shortest = max(core_s / cores, default["rollout_s"], default["update_s"])
    return (default["rollout_s"] + default["update_s"]) / shortest


def torch_threads() -> int:
    """Torch's default intra-op threads in a fresh process here (``OMP_NUM_THREADS`` or one a core)."""
    return int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)


def main(argv: list[str] | None = None) -> None:
    parser = modes_parser(__doc__.splitlines()[0], "runs/async_rollouts")
    parser.add_argument("--ceiling", action="store_true", help="measure the most any overlap could gain here")
    args, settings = parse_modes_args(parser, argv)
    out, console = Path(args.out), Console()
    if args.ceiling:
        ceiling(out, args.seeds, settings, args.report)
        return
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
