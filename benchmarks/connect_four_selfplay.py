"""The tiny model trained by self-play on Connect Four: win-or-draw against ``random`` and the tactics read-out
(takes a win in one, blocks the opponent's), from the warm start to the end, over seeds.

Each run is the tiny recipe on ``ConnectFour-v0:board=threats`` alone (the layout that puts each four next
to the column that makes it, as TicTacToe's ``lines`` does), 100 steps of 256 turns (a third of the recipe's
768: a Connect Four turn's prompt is several times a TicTacToe one's, and a step of 768 took 15 s on one
thread here), evaluated before the first step and at the end, 100 games per seat against ``random`` and
``expert``. The tactics are read exactly at the evaluation temperature on every ``--stride``-th
of the 600 positions of ``spiral_arena.analysis.connect_four``, for the warm start and the final checkpoint.

    OMP_NUM_THREADS=1 python benchmarks/connect_four_selfplay.py --seeds 3 --out DIR
    python benchmarks/connect_four_selfplay.py --seeds 3 --out DIR --report   # the tables of finished runs only
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from learning import eval_rows, finished, interval, scorer_of, train_fresh
from rich.console import Console
from rich.table import Table

from spiral_arena.analysis.connect_four import tactics_from_scores, uniform_tactics
from trainers.flags import read_settings
from trainers.summary import match_key
from trainers.validation import ConfigError

GAME = "ConnectFour-v0:board=threats"
SETTINGS = {"games": GAME, "steps": 100, "samples_per_step": 256, "eval_games": 100, "eval_every": 100,
            "eval_at_start": True, "time_limit_s": 0}  # fmt: skip
KEY = match_key(GAME, "random", "win")  # logged by every evaluation


def evaluations(run: Path) -> list[dict]:
    return eval_rows(run, KEY)


def win_or_draw(row: dict, opponent: str) -> float:
    return row[match_key(GAME, opponent, "win")] + row[match_key(GAME, opponent, "draw")]


def tactics(run: Path, stride: int) -> dict[str, dict[str, float]]:
    """The read-out of the warm start and of the last checkpoint, each prompted as the run prompted."""
    config = json.loads((run / "config.json").read_text())
    last = max((run / "checkpoints").glob("step_*"))
    return {
        name: tactics_from_scores(scorer_of(path, config), config["obs_format"], stride, game=GAME)
        for name, path in (("warm start", run / "warm_start"), ("final", last))
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/connect_four_selfplay")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--seed-from", type=int, default=0, help="start at this seed (split seeds over processes)")
    parser.add_argument("--stride", type=int, default=1, help="read every N-th tactics position only (1: all 600)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override, all runs")
    parser.add_argument("--report", action="store_true", help="only print the tables of runs already finished")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.stride < 1:
        parser.error("--seeds and --stride must be at least 1")
    try:
        settings = read_settings(args.set)
    except ConfigError as error:
        parser.error(str(error))
    runs = []
    for seed in range(args.seed_from, args.seed_from + args.seeds):
        run = Path(args.out) / f"seed{seed}"
        if not args.report and not finished(run, KEY):
            train_fresh(run, {**SETTINGS, "seed": seed, **settings})
        if finished(run, KEY):
            runs.append(run)
    console = Console()
    if not runs:
        console.print("no finished runs under", args.out)
        return
    read = [tactics(run, args.stride) for run in runs]
    table = Table(title=f"{GAME}: mean +- 95% t-interval over {len(runs)} seed(s)")
    for column in ("policy", "W+D vs random", "W+D vs expert", "P(takes a win)", "P(blocks)", "invalid mass"):
        table.add_column(column, justify="right")
    chance = uniform_tactics()
    table.add_row("uniform over legal columns", "-", "-", f"{chance['takes_win']:.3f}", f"{chance['blocks']:.3f}", "-")
    for index, policy in ((0, "warm start"), (-1, "final")):
        rows = [evaluations(run)[index] for run in runs]
        cells = [_cell([win_or_draw(r, opponent) for r in rows]) for opponent in ("random", "expert")]
        cells += [_cell([t[policy][key] for t in read]) for key in ("takes_win", "blocks", "invalid_mass")]
        table.add_row(policy, *cells)
    console.print(table)


def _cell(values: list[float]) -> str:
    mean, half = interval(values)
    return f"{mean:.3f}" if len(values) < 2 else f"{mean:.3f} +- {half:.3f}"


if __name__ == "__main__":
    main()
