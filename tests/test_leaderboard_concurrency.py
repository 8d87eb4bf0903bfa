"""Games in flight (``leaderboard run --concurrency``): the rows stored are those of a sequential run, an
agent's failure ends only its own games, a wave's API requests overlap, and bad values fail before any
game. Real SQLite files, a real chat endpoint on 127.0.0.1 (a threaded HTTP server in this process, so
it can count the requests in flight), real subprocesses for the command."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from leaderboard.entrants import parse_entrants
from leaderboard.runner import run
from spiral_arena.cli import main as cli_main
from spiral_arena.inflight import MODEL_CONCURRENCY, default_concurrency

pytest.importorskip("httpx", reason="API agents need the api extra")

TIMING = ("id", "duration_s", "started_at", "finished_at", "latency_s0", "latency_s1")  # may differ between runs
GAMES = ["TicTacToe-v0", "KuhnPoker-v0"]


def rows(db: str) -> dict[tuple, dict]:
    """Every stored game by key, all columns but the timing ones."""
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        games = [dict(r) for r in conn.execute("SELECT * FROM games")]
    finally:
        conn.close()
    return {
        (g["env_id"], g["player0"], g["player1"], g["seed"]): {k: v for k, v in g.items() if k not in TIMING}
        for g in games
    }


def api(name: str, url: str) -> str:
    return f"{name}=openai:{name}@{url}#max_retries=0"


def test_scripted_agents_store_the_same_rows_at_any_concurrency(tmp_path):
    entrants = parse_entrants("random,expert,random#seed=3,expert#alpha=0.1")
    games = [*GAMES, "SimpleNegotiation-v0", "TwentyQuestions-v0:max_questions=20"]
    one, many = str(tmp_path / "one.sqlite"), str(tmp_path / "many.sqlite")
    run(one, entrants, games, 6, concurrency=1, progress=False)
    summary = run(many, entrants, games, 6, concurrency=5, progress=False)
    assert summary.played == summary.scheduled == 3 * 6 * 6 + 4 * 6 and not summary.errors
    assert rows(many) == rows(one)


def test_api_agents_in_flight_store_what_a_sequential_run_stores(tmp_path, endpoint):
    """Two API agents, one that fails whenever it opens a TicTacToe game (an odd number of legal moves),
    and two scripted ones: the same games, moves, errors and transcripts whatever the concurrency."""
    server = endpoint(fails=lambda model, nth, legal: model == "flaky" and len(legal) % 2 == 1)
    agents = [api("alpha", server.url), api("beta", server.url), api("flaky", server.url), "random", "expert"]
    one, many = str(tmp_path / "one.sqlite"), str(tmp_path / "many.sqlite")
    run(one, parse_entrants(agents), GAMES, 4, concurrency=1, progress=False)
    summary = run(many, parse_entrants(agents), GAMES, 4, concurrency=7, progress=False)
    assert summary.played == summary.scheduled == 2 * 10 * 4
    expected = rows(one)
    assert rows(many) == expected
    errors = [g for g in expected.values() if g["error"] is not None]
    assert errors and all(g["player0"] == "flaky" and g["env_id"] == "TicTacToe-v0" for g in errors)
    assert all("APIError" in g["error"] and g["error_seat"] == 0 for g in errors)
    assert len(summary.errors) == len(errors)


def test_worker_processes_keep_games_in_flight_too(tmp_path, endpoint):
    """--workers 2 --concurrency 3: each worker keeps its own games in flight (more requests at once than
    workers), and the rows are still those of the sequential run."""
    server = endpoint(delay_s=0.05)
    agents = [api("alpha", server.url), api("beta", server.url), "random"]
    one, many = str(tmp_path / "one.sqlite"), str(tmp_path / "many.sqlite")
    run(one, parse_entrants(agents), ["TicTacToe-v0"], 6, concurrency=1, progress=False)
    server.max_in_flight = 0
    run(many, parse_entrants(agents), ["TicTacToe-v0"], 6, workers=2, concurrency=3, progress=False)
    assert rows(many) == rows(one)
    assert 2 < server.max_in_flight <= 2 * 3


def test_a_server_going_down_mid_run_ends_only_its_own_games(tmp_path, endpoint):
    """Its agent's later games end as errors; every other game of the same waves is stored as it would be
    in a sequential run."""
    server = endpoint(fails=lambda model, nth, legal: model == "down" and nth > 40)
    healthy = endpoint()
    agents = [api("down", server.url), api("alpha", healthy.url), "random", "expert"]
    db = str(tmp_path / "lb.sqlite")
    summary = run(db, parse_entrants(agents), GAMES, 6, concurrency=8, progress=False)
    assert summary.played == summary.scheduled == 2 * 6 * 6
    stored = rows(db)
    errors = [g for g in stored.values() if g["error"] is not None]
    down_games = [g for g in stored.values() if "down" in (g["player0"], g["player1"])]
    assert 0 < len(errors) < len(down_games)  # it played, then failed
    for g in errors:
        assert (g["player0"], g["player1"])[g["error_seat"]] == "down"
        assert "APIError" in g["error"] and "HTTP 500" in g["error"] and g["reward0"] is None
    others = {key: g for key, g in stored.items() if "down" not in key[1:3]}
    assert others and all(g["error"] is None for g in others.values())

    alone = str(tmp_path / "alone.sqlite")  # the other games, played one by one without "down"
    run(alone, parse_entrants(agents[1:]), GAMES, 6, concurrency=1, progress=False)
    assert rows(alone) == others


def test_the_requests_of_a_wave_overlap_up_to_the_concurrency(tmp_path, endpoint):
    agents = lambda url: [api("alpha", url), api("beta", url), api("gamma", url), "random"]  # noqa: E731
    busy = endpoint(delay_s=0.02)
    run(str(tmp_path / "many.sqlite"), parse_entrants(agents(busy.url)), ["TicTacToe-v0"], 4, concurrency=4)
    assert 1 < busy.max_in_flight <= 4
    quiet = endpoint(delay_s=0.02)
    run(str(tmp_path / "one.sqlite"), parse_entrants(agents(quiet.url)), ["TicTacToe-v0"], 4, concurrency=1)
    assert quiet.max_in_flight == 1


def test_the_default_concurrency_follows_the_entrants():
    assert default_concurrency(["random", "expert#alpha=0.1"]) == 1
    assert default_concurrency(["random", "openai:m@http://127.0.0.1:9/v1"]) == MODEL_CONCURRENCY
    assert default_concurrency(["random", "hf:runs/x/checkpoints/step_000120#temperature=0"]) == MODEL_CONCURRENCY


@pytest.mark.parametrize("value", ["0", "-1", "x", "2.5"])
def test_a_bad_concurrency_is_one_line_and_plays_nothing(tmp_path, capsys, value):
    db = tmp_path / "lb.sqlite"
    args = ["leaderboard", "run", "--agents", "random,expert", "--games", "TicTacToe-v0", "--db", str(db)]
    assert cli_main([*args, f"--concurrency={value}", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"spiral-arena leaderboard: error: --concurrency: must be a whole number of games >= 1, got {value!r}"
    assert not db.exists()
    with pytest.raises(ValueError, match="concurrency must be an integer >= 1"):
        run(str(db), parse_entrants("random,expert"), ["TicTacToe-v0"], 2, concurrency=0)


def test_a_run_killed_with_games_in_flight_resumes_to_the_sequential_result(tmp_path, endpoint):
    """kill -9 loses only the games in flight: the same command then stores the rest, once each, and the
    database ends as a sequential run's."""
    server = endpoint(delay_s=0.01)
    agents = ",".join([api("alpha", server.url), api("beta", server.url), "random"])
    db = str(tmp_path / "lb.sqlite")
    command = [
        sys.executable, "-m", "spiral_arena.cli", "leaderboard", "run", "--agents", agents, "--games",
        "TicTacToe-v0", "--games-per-pair", "40", "--concurrency", "8", "--db", db, "--no-progress",
    ]  # fmt: skip
    total = 3 * 40
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _count(db) < 30 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    before = rows(db)
    assert 30 <= len(before) < total, "the run was not killed midway"

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{total} games scheduled: {len(before)} already stored, {total - len(before)} played" in resumed.stdout
    after = rows(db)
    assert len(after) == total == _count(db)
    assert all(after[key] == row for key, row in before.items())
    sequential = str(tmp_path / "sequential.sqlite")
    run(sequential, parse_entrants(agents), ["TicTacToe-v0"], 40, concurrency=1, progress=False)
    assert rows(sequential) == after


def _count(db: str) -> int:
    try:
        conn = sqlite3.connect(db, timeout=30)
        try:
            return conn.execute("SELECT count(*) FROM games").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_hf_agents_in_flight_store_what_a_sequential_run_stores(tmp_path):
    """Two sampled copies of a tiny model (different seeds) and a random agent: each game's copy samples
    from its own generator, so batching games changes nothing."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from trainers.tiny import create_tiny

    model = create_tiny(tmp_path / "tiny", env_ids=["KuhnPoker-v0"])
    options = "#temperature=1#max_new_tokens=6"
    entrants = parse_entrants(f"a=hf:{model}{options},b=hf:{model}{options}#seed=1,random")
    one, many = str(tmp_path / "one.sqlite"), str(tmp_path / "many.sqlite")
    run(one, entrants, ["KuhnPoker-v0:rounds=1"], 4, concurrency=1, progress=False)
    run(many, entrants, ["KuhnPoker-v0:rounds=1"], 4, concurrency=12, progress=False)
    expected = rows(one)
    assert rows(many) == expected and len(expected) == 12
    transcripts = {g["transcript"] for g in expected.values() if g["player0"] in "ab" and g["player1"] in "ab"}
    assert len(transcripts) > 1  # the copies do sample
