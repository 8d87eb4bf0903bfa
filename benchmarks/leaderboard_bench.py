"""Leaderboard speed: a round robin of fast agents in worker processes, then ratings on 50,000 stored games;
or, with ``--latency-ms``, API agents behind a slow network played one game at a time vs many at once.

    python benchmarks/leaderboard_bench.py [--workers 2] [--games-per-pair 200] [--rated-games 50000] [--json OUT]
    python benchmarks/leaderboard_bench.py --latency-ms 300 [--games-per-pair 100] [--sequential-games-per-pair N]
        [--concurrency 32] [--repeats 1] [--json OUT]
    python benchmarks/leaderboard_bench.py --hf [--hf-models A,B] [--games-per-pair 40] [--concurrency 32] [--repeats 1]

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

With ``--latency-ms MS`` (e.g. 300) only this runs instead: four ``spiral-arena serve`` processes on free
loopback ports serve two random and two expert agents (the experts get the env's info as ``spiral_info``),
each answer delayed by MS (``serve --latency-ms``, a stand-in for a provider's latency). Those four API
agents (``openai:served@http://127.0.0.1:PORT/v1``, no key needed on loopback) and a local random and
expert play TicTacToe-v0 and KuhnPoker-v0, ``--games-per-pair`` games per pair, in one process:
sequentially (``concurrency=1``) and with ``--concurrency`` games in flight (default: the runner's default
for API entrants, 32), each into a fresh database, ``--repeats`` times. The table gives wall time and
games/s of each (median, and the range when repeated) and the speed-up: the ratio of games/s. A
sequential game takes the same time whatever the schedule's size, so ``--sequential-games-per-pair``
may shrink the slow baseline (every pair and game stay equally represented). Target: >= 20x at 300 ms.
Served random agents answer in the order requests arrive, so the two runs' games differ (the
equality of results is the tests' business); only time is compared.

With ``--hf`` only this runs instead: two local model checkpoints (``--hf-models``; by default two tiny
models built and warm-started here, 150 SFT steps each on random play, seeds 0 and 1, so they answer
in the game's format) and ``random`` play TicTacToe-v0 and KuhnPoker-v0 as ``hf:`` entrants, one game at a
time (each decision its own ``act``) and with ``--concurrency`` games in flight (each wave's decisions of
one model in one batched generate), the same schedule into fresh databases. Target: >= 5x the games/s.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import numpy as np
from rich.console import Console
from rich.table import Table
from scipy.special import expit

import spiral_arena
from leaderboard import store
from leaderboard.entrants import parse_entrants
from leaderboard.runner import run
from leaderboard.standings import compute
from spiral_arena.inflight import MODEL_CONCURRENCY

AGENTS = (
    "random", "random#seed=1", "random#seed=2", "random#seed=3", "random#seed=4",
    "expert", "expert#seed=1", "expert#alpha=0", "expert#alpha=0.1", "expert#alpha=0.2",
)  # fmt: skip
GAMES = ("TicTacToe-v0", "KuhnPoker-v0")
ROUND_ROBIN_TARGET_S = 60.0
RATINGS_TARGET_S = 10.0
SERVED = ("random", "random", "expert", "expert")  # the agents behind the four API entrants
SPEED_UP_TARGET = 20.0
HF_SPEED_UP_TARGET = 5.0
SERVER_START_S = 60.0


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
                            env_id=env_id, env_version="v0", player0=labels[i], player1=labels[j], spec0=labels[i],
                            spec1=labels[j], seed=s, reward0=r0, reward1=-r0, payoff0=chips,
                            payoff1=None if chips is None else -chips, invalid0=False, invalid1=False,
                            invalid_reason=None, error=None, error_seat=None, transcript='{"moves": [], "end": ""}',
                            steps=5, duration_s=0.001, started_at=stamp, finished_at=stamp,
                            package_version=spiral_arena.__version__,
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def served(agents: Sequence[str], latency_ms: float) -> Iterator[list[str]]:
    """A ``spiral-arena serve --latency-ms`` process per agent on a free loopback port; yields their base URLs
    once every one answers, and stops them all on the way out."""
    processes, urls = [], []
    try:
        for agent in agents:
            port = free_port()
            command = [sys.executable, "-m", "spiral_arena.cli", "serve", "--agent", agent, "--port", str(port)]
            command += ["--latency-ms", str(latency_ms)]
            processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            urls.append(f"http://127.0.0.1:{port}/v1")
        deadline = time.monotonic() + SERVER_START_S
        for process, url in zip(processes, urls, strict=True):
            while not _answers(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"spiral-arena serve at {url} did not start (exit code {process.poll()})")
                time.sleep(0.1)
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=10)


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/models", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def api_entrants(urls: Sequence[str]) -> list[str]:
    """The four served agents as API entrants (an expert needs the env's info), then a local random and expert."""
    specs = [
        f"api-{agent}-{i}=openai:served@{url}" + ("#send_info=true" if agent == "expert" else "")
        for i, (agent, url) in enumerate(zip(SERVED, urls, strict=True))
    ]
    return [*specs, "random", "expert"]


def bench_api_run(db: Path, urls: Sequence[str], games_per_pair: int, concurrency: int) -> dict:
    entrants = parse_entrants(api_entrants(urls))
    wall = time.perf_counter()
    summary = run(str(db), entrants, GAMES, games_per_pair, concurrency=concurrency, progress=False)
    wall = time.perf_counter() - wall
    if summary.played != summary.scheduled or summary.errors:
        raise RuntimeError(f"API round robin incomplete: {summary}")
    return {"games": summary.played, "concurrency": concurrency, "wall_s": wall, "games_per_s": summary.played / wall}


def bench_latency(
    directory: Path, latency_ms: float, games_per_pair: int, sequential_games: int, concurrency: int, repeats: int
) -> dict:
    """Sequential and concurrent runs of the API round robin, alternating, ``repeats`` times each."""
    runs: dict[str, list[dict]] = {"sequential": [], "concurrent": []}
    with served(SERVED, latency_ms) as urls:
        for k in range(repeats):
            runs["sequential"].append(bench_api_run(directory / f"seq{k}.sqlite", urls, sequential_games, 1))
            runs["concurrent"].append(bench_api_run(directory / f"conc{k}.sqlite", urls, games_per_pair, concurrency))
    ratios = [c["games_per_s"] / s["games_per_s"] for s, c in zip(runs["sequential"], runs["concurrent"], strict=True)]
    return {"latency_ms": latency_ms, **runs, "speed_up": ratios}


def tiny_checkpoints(directory: Path) -> list[str]:
    """Two tiny models, each warm-started for 150 SFT steps on random play (seeds 0 and 1)."""
    from trainers.config import TrainConfig
    from trainers.loop import train

    paths = []
    for seed in (0, 1):
        out = directory / f"tiny{seed}"
        config = {
            "output_dir": str(out), "seed": seed, "steps": 1, "sft_steps": 150, "samples_per_step": 32,
            "eval_games": 2, "eval_env_ids": "KuhnPoker-v0:rounds=1", "eval_opponents": "random", "plots": False,
            "time_limit_s": 0,
        }  # fmt: skip
        train(TrainConfig.build(config), progress=False)
        paths.append(str(out / "checkpoints" / "step_000001"))
    return paths


def bench_hf(directory: Path, models: Sequence[str], games_per_pair: int, concurrency: int, repeats: int) -> dict:
    """Sequential and concurrent runs of ``hf:`` models and random, alternating, ``repeats`` times each."""
    specs = [f"model{i}=hf:{path}" for i, path in enumerate(models)] + ["random"]
    runs: dict[str, list[dict]] = {"sequential": [], "concurrent": []}
    for k in range(repeats):
        for name, games_in_flight in (("sequential", 1), ("concurrent", concurrency)):
            wall = time.perf_counter()
            summary = run(
                str(directory / f"{name}{k}.sqlite"), parse_entrants(specs), GAMES, games_per_pair,
                concurrency=games_in_flight, progress=False,
            )  # fmt: skip
            wall = time.perf_counter() - wall
            if summary.played != summary.scheduled or summary.errors:
                raise RuntimeError(f"hf: round robin incomplete: {summary}")
            games = summary.played
            runs[name].append(
                {"games": games, "concurrency": games_in_flight, "wall_s": wall, "games_per_s": games / wall}
            )
    ratios = [c["games_per_s"] / s["games_per_s"] for s, c in zip(runs["sequential"], runs["concurrent"], strict=True)]
    return {"models": list(models), **runs, "speed_up": ratios}


def _spread(values: Sequence[float], digits: int) -> str:
    """The median, with the range when there are several values."""
    text = f"{statistics.median(values):.{digits}f}"
    return text if len(values) == 1 else f"{text} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def latency_table(result: dict, title: str = "", target: float = SPEED_UP_TARGET) -> Table:
    title = title or f"Leaderboard with API agents at {result['latency_ms']:g} ms per request"
    table = Table(title=f"{title} ({os.cpu_count()} CPUs)")
    for header in ("run", "games", "wall s", "games/s", "speed-up", "target", "ok"):
        table.add_column(header, justify="left" if header == "run" else "right")
    for name, runs in (("sequential", result["sequential"]), ("concurrent", result["concurrent"])):
        table.add_row(
            f"{name} (concurrency {runs[0]['concurrency']})",
            str(runs[0]["games"]),
            _spread([r["wall_s"] for r in runs], 1),
            _spread([r["games_per_s"] for r in runs], 2),
            "",
            "",
            "",
        )
    speed_up = statistics.median(result["speed_up"])
    ok = "yes" if speed_up >= target else "NO"
    table.add_row("speed-up", "", "", "", _spread(result["speed_up"], 1) + "x", f">= {target:.0f}x", ok)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--games-per-pair", type=int, default=None, help="default: 200 (100 with --latency-ms)")
    parser.add_argument("--rated-games", type=int, default=50_000)
    parser.add_argument("--latency-ms", type=float, help="instead: API agents served with this latency (see above)")
    parser.add_argument("--sequential-games-per-pair", type=int, help="with --latency-ms (default: --games-per-pair)")
    parser.add_argument("--concurrency", type=int, default=MODEL_CONCURRENCY, help="with --latency-ms (default: 32)")
    parser.add_argument("--repeats", type=int, default=1, help="with --latency-ms: runs of each kind (default: 1)")
    parser.add_argument("--hf", action="store_true", help="instead: hf: checkpoints, sequential vs batched")
    parser.add_argument("--hf-models", help="with --hf: two comma-separated checkpoints (default: built here)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    console = Console()
    console = console if console.is_terminal else Console(width=160)
    if args.hf:
        with tempfile.TemporaryDirectory() as tmp:
            models = args.hf_models.split(",") if args.hf_models else tiny_checkpoints(Path(tmp))
            result = bench_hf(Path(tmp), models, args.games_per_pair or 40, args.concurrency, args.repeats)
        console.print(latency_table(result, "Leaderboard with two hf: models and random", HF_SPEED_UP_TARGET))
        if args.json:
            args.json.write_text(json.dumps({"hf": result}, indent=2))
        return
    if args.latency_ms is not None:
        games = args.games_per_pair or 100
        with tempfile.TemporaryDirectory() as tmp:
            result = bench_latency(
                Path(tmp),
                args.latency_ms,
                games,
                args.sequential_games_per_pair or games,
                args.concurrency,
                args.repeats,
            )
        console.print(latency_table(result))
        if args.json:
            args.json.write_text(json.dumps({"latency": result}, indent=2))
        return
    args.games_per_pair = args.games_per_pair or 200
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
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps({"round_robin": tournament, "ratings": ratings}, indent=2))


if __name__ == "__main__":
    main()
