"""Leaderboard speed: a round robin of fast agents in worker processes, then ratings on 50,000 stored games.

    python benchmarks/leaderboard_bench.py [--workers 2] [--games-per-pair 200] [--rated-games 50000] [--json OUT]

Rows:

- round robin: 10 agents (RandomAgent with five seeds, ExpertAgent with two seeds and three Kuhn bluff
  rates) x TicTacToe-v0 and KuhnPoker-v0 x ``--games-per-pair`` games per pair (200: 18,000 games), played
  by ``--workers`` processes into a fresh SQLite file, from the call to ``leaderboard.runner.run`` until
  every game is stored (worker start-up included). Target: under 60 s on 2 cores.
- ratings: ``--rated-games`` games drawn from a Bradley-Terry model with known strengths (10 agents, the
  same two games, duplicate seeds) are stored, then loaded and turned into standings: overall and per game,
  each with 1,000 bootstrap resamples. Target: under 10 s.

Wall time is what the targets are about; CPU time (this process and its workers) is printed too, since
on a shared machine other work stretches wall time but not CPU time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy.special import expit

import spiral_arena
from leaderboard import store
from leaderboard.entrants import parse_entrants
from leaderboard.runner import run
from leaderboard.standings import compute

AGENTS = (
    "random", "random#seed=1", "random#seed=2", "random#seed=3", "random#seed=4",
    "expert", "expert#seed=1", "expert#alpha=0", "expert#alpha=0.1", "expert#alpha=0.2",
)  # fmt: skip
GAMES = ("TicTacToe-v0", "KuhnPoker-v0")
ROUND_ROBIN_TARGET_S = 60.0
RATINGS_TARGET_S = 10.0


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def bench_round_robin(directory: Path, workers: int, games_per_pair: int) -> dict:
    db = str(directory / "round_robin.sqlite")
    entrants = parse_entrants(list(AGENTS))
    wall, cpu = time.perf_counter(), cpu_seconds()
    summary = run(db, entrants, GAMES, games_per_pair, workers=workers, progress=False)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    if summary.played != summary.scheduled or summary.errors:
        raise RuntimeError(f"round robin incomplete: {summary}")
    return {"games": summary.played, "workers": workers, "wall_s": wall, "cpu_s": cpu}


def synthetic_rows(total: int, seed: int = 0) -> list[store.GameRow]:
    """``total`` (rounded up to whole duplicate seeds) games whose outcomes follow known strengths."""
    rng = np.random.default_rng(seed)
    labels = [f"agent{k}" for k in range(len(AGENTS))]
    strengths = np.linspace(-1.5, 1.5, len(labels))
    pairs = list(itertools.combinations(range(len(labels)), 2))
    seeds = -(-total // (len(GAMES) * len(pairs) * 2))
    stamp = store.now()
    rows = []
    for env_id in GAMES:
        for a, b in pairs:
            for s in range(seeds):
                for i, j in ((a, b), (b, a)):
                    u = rng.random()
                    win = 0.9 * expit(strengths[i] - strengths[j])
                    r0 = 1.0 if u < win else 0.0 if u < win + 0.1 else -1.0
                    chips = r0 * float(rng.integers(1, 6)) if env_id == "KuhnPoker-v0" else None
                    rows.append(
                        store.GameRow(
                            env_id,
                            "v0",
                            labels[i],
                            labels[j],
                            labels[i],
                            labels[j],
                            s,
                            r0,
                            -r0,
                            chips,
                            None if chips is None else -chips,
                            False,
                            False,
                            None,
                            None,
                            None,
                            '{"moves": [], "end": ""}',
                            5,
                            0.001,
                            stamp,
                            stamp,
                            spiral_arena.__version__,
                        )  # fmt: skip
                    )
    return rows


def bench_ratings(directory: Path, total: int) -> dict:
    conn = store.connect(directory / "ratings.sqlite")
    rows = synthetic_rows(total)
    conn.execute("BEGIN")
    for row in rows:
        store.insert_game(conn, row)
    conn.execute("COMMIT")
    wall, cpu = time.perf_counter(), cpu_seconds()
    games = store.load_games(conn)
    load_s = time.perf_counter() - wall
    standings = compute(games, store.load_agents(conn), resamples=1000)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    return {
        "games": len(games),
        "resamples": standings.resamples,
        "fits": len(standings.scopes),
        "load_s": load_s,
        "wall_s": wall,
        "cpu_s": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--games-per-pair", type=int, default=200)
    parser.add_argument("--rated-games", type=int, default=50_000)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        tournament = bench_round_robin(directory, args.workers, args.games_per_pair)
        ratings = bench_ratings(directory, args.rated_games)
    table = Table(title=f"Leaderboard benchmark ({os.cpu_count()} CPUs)")
    for header in ("task", "size", "wall s", "CPU s", "rate", "target", "ok"):
        table.add_column(header, justify="left" if header in ("task", "size") else "right")
    table.add_row(
        "round robin",
        f"{tournament['games']} games, {len(AGENTS)} agents x {len(GAMES)} games, {tournament['workers']} workers",
        f"{tournament['wall_s']:.1f}",
        f"{tournament['cpu_s']:.1f}",
        f"{tournament['games'] / tournament['wall_s']:.0f} games/s",
        f"< {ROUND_ROBIN_TARGET_S:.0f} s",
        "yes" if tournament["wall_s"] < ROUND_ROBIN_TARGET_S else "NO",
    )
    table.add_row(
        "ratings",
        f"{ratings['games']} stored games, {ratings['fits']} fits x {ratings['resamples']} resamples",
        f"{ratings['wall_s']:.2f}",
        f"{ratings['cpu_s']:.2f}",
        f"load {ratings['load_s']:.2f} s",
        f"< {RATINGS_TARGET_S:.0f} s",
        "yes" if ratings["wall_s"] < RATINGS_TARGET_S else "NO",
    )
    console = Console()
    (console if console.is_terminal else Console(width=160)).print(table)
    if args.json:
        args.json.write_text(json.dumps({"round_robin": tournament, "ratings": ratings}, indent=2))


if __name__ == "__main__":
    main()
