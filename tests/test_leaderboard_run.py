"""Playing leaderboards for real: duplicate seating, idempotent and resumable runs, worker processes,
agents that fail, and the ``spiral-arena leaderboard`` command."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from leaderboard import store
from leaderboard.entrants import default_entrants, parse_entrants
from leaderboard.runner import run
from leaderboard.standings import compute
from spiral_arena.analysis import KUHN_INFO_STATES, LEDUC_RANK_STATES, kuhn_exploitability, leduc_exploitability
from spiral_arena.cli import main as cli_main


def stored(db):
    """Every stored game by key, with what must never change once written."""
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT env_id, player0, player1, seed, reward0, reward1, payoff0, transcript, finished_at FROM games"
    ).fetchall()
    conn.close()
    return {tuple(r[:4]): r[4:] for r in rows}


def scope(standings, name):
    return next(s for s in standings.scopes if s.name == name)


def rating_of(scope_, label):
    return next(r for r in scope_.agents if r.label == label)


def test_duplicate_seating_cancels_luck(tmp_path):
    """Two copies of one agent: each seed's second game mirrors the first, so seat advantage and card luck
    cancel exactly; without the mirrored games the first seat would look much stronger."""
    db = str(tmp_path / "lb.sqlite")
    entrants = parse_entrants("a=random,b=random")
    run(db, entrants, ["TicTacToe-v0", "KuhnPoker-v0"], games_per_pair=200, progress=False)
    conn = store.connect(db)
    games = store.load_games(conn)
    standings = compute(games)
    for name in ("overall", "TicTacToe-v0", "KuhnPoker-v0"):
        a, b = rating_of(scope(standings, name), "a"), rating_of(scope(standings, name), "b")
        assert a.rating == pytest.approx(b.rating, abs=1e-6)
        assert (a.wins, a.draws, a.losses) == (b.wins, b.draws, b.losses)
    kuhn = scope(standings, "KuhnPoker-v0")
    assert rating_of(kuhn, "a").mean_payoff == pytest.approx(0.0, abs=1e-12)
    # Only the games with "a" in the first seat: TicTacToe's first-mover edge (58.5% vs 28.8%) shows.
    first_seat_only = compute([g for g in games if g.player0 == "a"])
    tictactoe = scope(first_seat_only, "TicTacToe-v0")
    assert rating_of(tictactoe, "a").rating - rating_of(tictactoe, "b").rating > 100


def test_independent_copies_rate_alike(tmp_path):
    """Different seeds, same agent: no real difference, so each interval holds the other's rating."""
    db = str(tmp_path / "lb.sqlite")
    run(db, parse_entrants("random#seed=1,random#seed=2"), ["KuhnPoker-v0"], games_per_pair=300, progress=False)
    kuhn = compute(store.load_games(store.connect(db))).scopes[0]
    one, two = kuhn.agents
    assert one.low < two.rating < one.high and two.low < one.rating < two.high


def test_rerun_is_idempotent_and_extends(tmp_path, capsys):
    db = str(tmp_path / "lb.sqlite")
    entrants = parse_entrants("random,expert,expert#alpha=0")
    games = ["TicTacToe-v0", "KuhnPoker-v0"]
    first = run(db, entrants, games, games_per_pair=4, progress=False)
    assert (first.scheduled, first.already_stored, first.played, first.errors) == (24, 0, 24, [])
    before = stored(db)
    again = run(db, entrants, games, games_per_pair=4, progress=False)
    assert (again.scheduled, again.already_stored, again.played) == (24, 24, 0)
    assert stored(db) == before
    more = run(db, entrants, games, games_per_pair=8, progress=True)
    assert "48/48" in capsys.readouterr().err  # the progress bar
    assert (more.already_stored, more.played) == (24, 24)
    after = stored(db)
    assert len(after) == 48 and all(after[k] == v for k, v in before.items())
    conn = store.connect(db)
    row = conn.execute("SELECT spec0, package_version, transcript, steps FROM games WHERE player0 = 'expert#alpha=0'")
    spec0, version, transcript, steps = row.fetchone()
    assert spec0 == "expert#alpha=0" and version == "0.1.0"
    assert len(json.loads(transcript)["moves"]) == steps > 0
    assert json.loads(transcript)["end"].startswith("Game over")


def test_worker_processes_store_what_one_process_stores(tmp_path):
    """Games are reseeded per game, so who plays them does not matter: 2 workers give the same rows."""
    entrants = parse_entrants("random,expert,random#seed=5,expert#alpha=0.1")
    games = ["KuhnPoker-v0", "SimpleNegotiation-v0"]
    one, two = str(tmp_path / "one.sqlite"), str(tmp_path / "two.sqlite")
    run(one, entrants, games, games_per_pair=10, workers=1, progress=False)
    summary = run(two, entrants, games, games_per_pair=10, workers=2, progress=False)
    assert summary.played == summary.scheduled == 2 * 6 * 10
    strip = {k: v[:-1] for k, v in stored(one).items()}  # all but the timestamp
    assert {k: v[:-1] for k, v in stored(two).items()} == strip
    conn = store.connect(two)
    assert store.load_agents(conn)["expert#alpha=0.1"].kuhn_exploitability == pytest.approx(0.0, abs=1e-12)


def test_two_runs_at_once_share_one_database(tmp_path):
    db = str(tmp_path / "lb.sqlite")
    command = leaderboard_command(db, "random,expert,random#seed=2", "TicTacToe-v0,KuhnPoker-v0", 60, workers=1)
    runs = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    for process in runs:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()
    rows = stored(db)
    assert len(rows) == 2 * 3 * 60


def leaderboard_command(db, agents, games, per_pair, workers):
    return [
        sys.executable, "-m", "spiral_arena.cli", "leaderboard", "run", "--agents", agents, "--games", games,
        "--games-per-pair", str(per_pair), "--db", db, "--workers", str(workers), "--no-progress",
    ]  # fmt: skip


def count_games(db):
    try:
        conn = sqlite3.connect(db, timeout=30)
        return conn.execute("SELECT count(*) FROM games").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_killed_run_resumes_without_losing_or_repeating_games(tmp_path):
    db = str(tmp_path / "lb.sqlite")
    command = leaderboard_command(db, "random,expert,random#seed=3,expert#alpha=0", "TicTacToe-v0,KuhnPoker-v0", 400, 2)
    total = 2 * 6 * 400
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while count_games(db) < 300 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    # The workers notice their parent is gone and stop after the game in hand.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail("worker processes outlived the killed run")
    finished = stored(db)
    assert 300 <= len(finished) < total, "the run was not killed midway"

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{total} games scheduled: {len(finished)} already stored, {total - len(finished)} played" in resumed.stdout
    final = stored(db)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM games").fetchone()[0] == len(final) == total
    assert all(final[key] == row for key, row in finished.items())  # nothing finished was lost or rewritten


class FlakyChatServer(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that answers the first legal action when the number of legal
    actions is even and fails with HTTP 500 when it is odd. In TicTacToe the first player always faces
    an odd number of empty cells and the second an even one, so the agent fails exactly in seat 0."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        legal = re.findall(r"Legal actions: (.*)\.", body["messages"][-1]["content"])[-1].split(", ")
        if len(legal) % 2:
            self.send_response(500)
            payload = {"error": {"message": "overloaded"}}
        else:
            self.send_response(200)
            payload = {"choices": [{"message": {"role": "assistant", "content": f"\\boxed{{{legal[0]}}}"}}]}
        data = json.dumps(payload).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky_server():
    pytest.importorskip("httpx", reason="API agents need the api extra")
    server = ThreadingHTTPServer(("127.0.0.1", 0), FlakyChatServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_agent_errors_are_recorded_and_never_rated(tmp_path, flaky_server, monkeypatch):
    db = str(tmp_path / "lb.sqlite")
    api = f"openai:flaky@{flaky_server}"
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)  # so "broken" cannot be built: it has no key
    entrants = parse_entrants(f"{api}#max_retries=1#backoff=0,random,expert,broken=mistral:some-model")
    summary = run(db, entrants, ["TicTacToe-v0"], games_per_pair=6, progress=False)
    assert summary.played == summary.scheduled == 6 * 6
    api_label, broken = entrants[0].label, "broken"
    conn = store.connect(db)
    games = store.load_games(conn)
    errors = [g for g in games if g.error is not None]
    # The API agent fails whenever it opens; "broken" cannot even be built, so every game of it fails.
    others = (api_label, "random", "expert")
    assert {(g.player0, g.player1) for g in errors} == {(api_label, "random"), (api_label, "expert")} | {
        pair for other in others for pair in ((broken, other), (other, broken))
    }
    expected_errors = 3 * 2 + 3 * 6
    assert len(errors) == len(summary.errors) == expected_errors
    assert all(g.reward0 is None and g.reward1 is None for g in errors)
    assert all("APIError" in g.error for g in errors if broken not in (g.player0, g.player1))
    for g in errors:
        if broken in (g.player0, g.player1):
            assert (g.player0, g.player1)[g.error_seat] == broken
            assert "could not be built" in g.error and "MISTRAL_API_KEY" in g.error
    standings = compute(games)
    table = standings.scopes[0]
    api_row, broken_row = rating_of(table, api_label), rating_of(table, broken)
    assert api_row.games == 6 and api_row.errors == 6  # its games from the second seat count, the others failed
    assert api_row.rating is not None
    assert broken_row.games == 0 and broken_row.rating is None and broken_row.errors == 18
    assert table.games == 36 - expected_errors
    for label in ("random", "expert"):
        row = rating_of(table, label)
        assert row.games == 3 * 2 + 3  # 6 games vs each other, 3 finished vs the API agent
        assert row.errors == 0

    kept = {k: v for k, v in stored(db).items() if v[0] is not None}
    retried = run(db, entrants, ["TicTacToe-v0"], games_per_pair=6, retry_errors=True, progress=False)
    assert (retried.already_stored, retried.played, len(retried.errors)) == (
        36 - expected_errors,
        expected_errors,
        expected_errors,
    )
    assert all(stored(db)[k] == v for k, v in kept.items())


def test_leaderboard_command_without_arguments(tmp_path, monkeypatch, capsys):
    """The default: random and expert (no ./runs here) on the three training games, 100 games per pair, then
    the table."""
    monkeypatch.chdir(tmp_path)
    assert cli_main(["leaderboard"]) == 0
    out = capsys.readouterr().out
    assert "300 games scheduled: 0 already stored, 300 played" in out
    for title in ("Overall", "TicTacToe-v0", "KuhnPoker-v0", "SimpleNegotiation-v0"):
        assert title in out
    assert (tmp_path / "leaderboard.sqlite").is_file()

    assert cli_main(["leaderboard", "show", "--game", "KuhnPoker-v0", "--csv", "k.csv", "--json", "k.json"]) == 0
    out = capsys.readouterr().out
    assert "ranked by mean chips per game" in out and "TicTacToe-v0" not in out
    assert json.loads((tmp_path / "k.json").read_text())["scopes"][0]["name"] == "KuhnPoker-v0"

    assert cli_main(["leaderboard", "show", "--game", "Snake-v0"]) == 2
    assert "no games of Snake-v0" in capsys.readouterr().err
    assert cli_main(["leaderboard", "show", "--db", "missing.sqlite"]) == 2
    assert "no leaderboard database" in capsys.readouterr().err
    assert cli_main(["leaderboard", "run", "--agents", "random,expert", "--games-per-pair", "3"]) == 2
    assert "even" in capsys.readouterr().err


def test_checkpoints_play_and_state_their_kuhn_policy(tmp_path, monkeypatch, capsys):
    """The latest checkpoint of a run joins the default round robin as hf:PATH; it plays, and its Kuhn
    policy (read from the model) gives the exploitability column."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from trainers.tiny import create_tiny

    runs = tmp_path / "runs" / "tiny-run" / "checkpoints"
    (runs / "step_000001").mkdir(parents=True)
    (runs / "step_000001" / "spiral_arena.json").write_text(json.dumps({"step": 1}))
    create_tiny(runs / "step_000002", env_ids=["KuhnPoker-v0"])
    (runs / "step_000002" / "spiral_arena.json").write_text(json.dumps({"step": 2}))
    monkeypatch.chdir(tmp_path)
    label = "hf:runs/tiny-run/checkpoints/step_000002"
    assert [e.label for e in default_entrants()] == ["random", "expert", label]
    # Short answers keep the untrained model fast; the spec is the one the default run would use.
    agents = f"random,{label}#max_new_tokens=4"
    args = ["leaderboard", "run", "--agents", agents, "--games", "KuhnPoker-v0", "--games-per-pair", "2"]
    assert cli_main([*args, "--no-progress"]) == 0
    assert f"{label}#max_new_tokens=4" in capsys.readouterr().out
    conn = store.connect("leaderboard.sqlite")
    games = store.load_games(conn)
    assert len(games) == 2 and all(g.error is None for g in games)
    record = store.load_agents(conn)[f"{label}#max_new_tokens=4"]
    assert set(record.kuhn_policy) == set(KUHN_INFO_STATES)
    assert record.kuhn_exploitability == pytest.approx(kuhn_exploitability(record.kuhn_policy))
    row = rating_of(compute(games, store.load_agents(conn)).scopes[0], f"{label}#max_new_tokens=4")
    assert row.exploitability == record.kuhn_exploitability > 0
    assert record.leduc_policy is None  # a run without Leduc does not pay for reading its 288 states
    leduc = ["leaderboard", "run", "--agents", agents, "--games", "LeducHoldem-v0", "--games-per-pair", "2"]
    assert cli_main([*leduc, "--no-progress"]) == 0
    record = store.load_agents(conn)[f"{label}#max_new_tokens=4"]
    assert set(record.leduc_policy) == set(LEDUC_RANK_STATES)  # read from the model once it plays Leduc
    assert record.leduc_exploitability == pytest.approx(leduc_exploitability(record.leduc_policy))
    assert set(record.kuhn_policy) == set(KUHN_INFO_STATES)  # kept


def test_leduc_tables_show_each_agents_exact_leduc_exploitability(tmp_path, monkeypatch):
    """Random's uniform policy and the expert's CFR+ policy are recorded with their exact exploitability
    (OpenSpiel's numbers: tests/test_leduc.py), shown on the Leduc table and only there."""
    monkeypatch.chdir(tmp_path)
    args = ["leaderboard", "run", "--agents", "random,expert", "--games", "LeducHoldem-v0,TicTacToe-v0"]
    assert cli_main([*args, "--games-per-pair", "4", "--no-progress"]) == 0
    conn = store.connect("leaderboard.sqlite")
    agents = store.load_agents(conn)
    assert agents["random"].leduc_exploitability == pytest.approx(2.3736111111, abs=1e-9)
    assert agents["expert"].leduc_exploitability == pytest.approx(0.000202, abs=1e-6)
    assert set(agents["random"].leduc_policy) == set(agents["expert"].leduc_policy) == set(LEDUC_RANK_STATES)
    scopes = {s.name: s for s in compute(store.load_games(conn), agents).scopes}
    assert rating_of(scopes["LeducHoldem-v0"], "expert").exploitability == agents["expert"].leduc_exploitability
    assert rating_of(scopes["TicTacToe-v0"], "expert").exploitability is None


def test_a_game_spelled_with_its_default_options_is_the_plain_game(tmp_path, monkeypatch, capsys):
    """``LeducHoldem-v0:reward=chips`` is LeducHoldem-v0: its games are stored under the plain id, in the
    same table, with the exact exploitability; a database holding the old spelling is migrated to it."""
    monkeypatch.chdir(tmp_path)
    spelled = ["leaderboard", "run", "--agents", "random,expert", "--games", "LeducHoldem-v0:reward=chips"]
    assert cli_main([*spelled, "--games-per-pair", "2", "--no-progress"]) == 0
    conn = store.connect("leaderboard.sqlite")
    stored = store.load_games(conn)
    assert {g.env_id for g in stored} == {"LeducHoldem-v0"} and len(stored) == 2
    plain = ["leaderboard", "run", "--agents", "random,expert", "--games", "LeducHoldem-v0", "--games-per-pair", "2"]
    capsys.readouterr()
    assert cli_main([*plain, "--no-progress"]) == 0
    assert "2 already stored, 0 played" in capsys.readouterr().out  # the same games, not new ones
    scopes = {s.name: s for s in compute(store.load_games(conn), store.load_agents(conn)).scopes}
    assert set(scopes) - {"overall"} == {"LeducHoldem-v0"}
    assert rating_of(scopes["LeducHoldem-v0"], "random").exploitability == pytest.approx(2.3736111111, abs=1e-9)
    assert rating_of(scopes["LeducHoldem-v0"], "expert").exploitability < 0.001
    # a database written before: its rows under the spelled-out id, schema version 6
    conn.execute("UPDATE games SET env_id = 'LeducHoldem-v0:reward=chips'")
    conn.execute("INSERT INTO notes VALUES ('random', 'LeducHoldem-v0:reward=chips', 'n', 't', 'v')")
    conn.execute("PRAGMA user_version = 6")
    conn.close()
    conn = store.connect("leaderboard.sqlite")
    assert {g.env_id for g in store.load_games(conn)} == {"LeducHoldem-v0"} and len(store.load_games(conn)) == 2
    assert conn.execute("SELECT env_id FROM notes").fetchall() == [("LeducHoldem-v0",)]


def test_run_checks_its_inputs_before_playing_and_fails_when_games_failed(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    assert cli_main(["leaderboard", "run", "--agents", "random,expert", "--db", str(folder)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"spiral-arena leaderboard: error: --db {folder} is a directory; give a database file, "
        f"e.g. {folder / 'leaderboard.sqlite'}"
    )
    db = tmp_path / "lb.sqlite"
    agents = "random#bogus=1,expert#alpha=2,openai:m@http://127.0.0.1:9/v1#temprature=0"
    assert cli_main(["leaderboard", "run", "--agents", agents, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert not db.exists() and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "'random#bogus=1': RandomAgent.__init__() got an unexpected keyword argument 'bogus'" in err
    assert "'expert#alpha=2': alpha must be a number in [0, 1/3], got 2" in err
    assert "unknown option(s) temprature; valid: temperature" in err
    # an agent that cannot be built at game time: stored as errors, shown, and the command fails
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)
    args = ["leaderboard", "run", "--agents", "random,mistral:m", "--games", "TicTacToe-v0", "--games-per-pair", "2"]
    assert cli_main([*args, "--db", str(db), "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert "2 game(s) ended by an agent error; fix the agent and play them again with --retry-errors" in captured.err
    assert cli_main(["leaderboard", "show", "--db", str(db), "--html", str(folder)]) == 2
    assert f"--html {folder} is a directory" in capsys.readouterr().err
