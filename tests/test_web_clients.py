"""``spiral-arena web`` under hostile clients, as a real subprocess on 127.0.0.1 (issue 56): a client never
chooses where the server's secrets go or what it downloads; a failed start writes nothing; a finished game is
always stored; every request's work is bounded; a broken database is one line and a 503, refused at start."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("uvicorn", reason="needs the api extra")
httpx = pytest.importorskip("httpx", reason="needs the api extra")

from conftest import stored_rows  # noqa: E402
from test_serve import SCRIPT, Server  # noqa: E402

from leaderboard.web import policy  # noqa: E402

SECRET = "ghp-test-SERVER-SECRET-1234567890"


class Web(Server):
    COMMAND, PATH, PROBE = "web", "", "/api/games"


class _Listener(http.server.BaseHTTPRequestHandler):
    """A host a client names: it records every request's headers (and answers as an OpenAI server would not)."""

    heard: list[dict[str, str]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        type(self).heard.append(dict(self.headers))
        self.send_response(500)
        self.end_headers()

    do_GET = do_POST  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[str]:
    _Listener.heard = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Listener)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


@pytest.fixture
def web(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Web]:
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)  # in the server's environment, as on a developer's machine
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a hub download would fail loudly rather than reach out
    (tmp_path / "models").mkdir()
    server = Web(tmp_path, "--db", str(tmp_path / "lb.sqlite"), "--model-root", str(tmp_path / "models"))
    yield server
    server.stop()


def post(web: Web, path: str, body: object) -> httpx.Response:
    return httpx.post(web.url + path, json=body, timeout=120)


def message(reply: httpx.Response) -> str:
    return reply.json()["error"]["message"]


def play_out(web: Web, match: dict) -> dict:
    """Step the agents of a match with no person to its end."""
    while not match["over"]:
        reply = post(web, f"/api/matches/{match['id']}/step", {"at": len(match["moves"])})
        assert reply.status_code == 200, reply.text
        match = reply.json()
    return match


def test_a_client_cannot_send_the_servers_secrets_anywhere(web, listener, tmp_path):
    """Specs naming an API agent, a key variable, a base URL or an LLM oracle are refused before anything is
    built: the listener hears nothing, and nothing is stored."""
    attempts = {
        "key_env": f"openai:m@{listener}#key_env=GITHUB_TOKEN",
        "api agent": f"openai:m@{listener}",
        "api agent by provider": "gemini:gemini-2.5-flash",
        "key_env on a scripted agent": "expert#key_env=GITHUB_TOKEN",
    }
    for what, spec in attempts.items():
        reply = post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["human", spec]})
        assert reply.status_code == 422, (what, reply.text)
        assert "the server's to choose" in message(reply) and "--agents" in message(reply), what
    for game in (
        f"TwentyQuestions-v0:oracle=openai:m;oracle_base_url={listener}",
        "TwentyQuestions-v0:oracle_api_key=GITHUB_TOKEN",
        "TwentyQuestions-v0:words_file=/etc/passwd",
        "TwentyQuestions-v0:words=coca_plus_train",
    ):
        reply = post(web, "/api/matches", {"game": game, "seats": ["human"]})
        assert reply.status_code == 422, (game, reply.text)
        assert "game option" in message(reply) or "looks like a secret" in message(reply), game
    time.sleep(0.5)
    assert _Listener.heard == [], "the server sent a request where a client said"
    assert not (tmp_path / "lb.sqlite").exists()
    assert SECRET not in web.log()


def test_the_servers_own_api_agent_plays_with_the_key_bound_to_its_host(tmp_path, monkeypatch):
    """``--agents`` is how an API agent reaches the page: a client names it by label, and its key goes to the
    host its spec names (here `spiral-arena serve --agent expert` behind the OpenAI protocol)."""
    monkeypatch.setenv("UPSTREAM_API_KEY", "sk-test-UPSTREAM")
    upstream = Server(tmp_path, "--agent", "expert", "--api-key", "sk-test-UPSTREAM")
    web = Web(tmp_path, "--db", str(tmp_path / "lb.sqlite"),
              "--agents", f"gpt=openai:m@{upstream.url}#key_env=UPSTREAM_API_KEY")  # fmt: skip
    try:
        games = httpx.get(web.url + "/api/games").json()
        assert games["agents"] == ["gpt"]
        match = post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["gpt", "random"], "seed": 3}).json()
        match = play_out(web, match)
        assert match["result"]["error"] is None and match["stored"]["new"]
        renamed = post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["gpt=random", "random"]})
        assert renamed.status_code == 422 and "server's own agent" in message(renamed)
    finally:
        web.stop()
        upstream.stop()
    (row,) = stored_rows(tmp_path / "lb.sqlite")
    assert row["player0"] == "gpt" and "sk-test" not in json.dumps(dict(row)) and row["api_moves0"] > 0
    assert "sk-test" not in web.log()


def test_a_client_names_only_local_models_the_server_allows(web, tmp_path):
    def refused(spec: str) -> str:
        reply = post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["human", spec]})
        assert reply.status_code == 422, (spec, reply.text)
        return message(reply)

    for spec in ("hf:HuggingFaceTB/SmolLM2-135M-Instruct", "vllm:Qwen/Qwen3-4B", "hf:org/model#temperature=0"):
        assert "--allow-hub" in refused(spec), spec
    # outside the model folder: the same sentence whether the path exists, is a folder or a file (no probing)
    outside = {spec: refused(spec) for spec in ("hf:/etc", "hf:/nonexistent", "vllm:/etc/passwd", "hf:../..")}
    for spec, text in outside.items():
        assert "not under the folders this server plays models from" in text, spec
        assert "does not exist" not in text and "config.json" not in text, spec
    (tmp_path / "models" / "empty").mkdir()
    (tmp_path / "models" / "out").symlink_to("/etc")
    assert "holds no config.json" in refused(f"hf:{tmp_path / 'models' / 'empty'}")
    assert "not under the folders" in refused(f"hf:{tmp_path / 'models' / 'out'}"), "a link out leads out"
    assert "does not exist" in refused(f"hf:{tmp_path / 'models' / 'nothing'}")
    assert "Traceback" not in web.log() and "huggingface.co" not in web.log()


def test_a_failed_start_is_one_line_and_writes_nothing(web, tmp_path):
    """Agents that cannot be built (bad options) and games that cannot begin: a 422 naming the seat, no row,
    no agent, no note in the database, and no traceback."""
    for spec in ("expert#alpha=nan", "random#seed=-1", "expert#nonsense=1", "hf:" + "x" * 400):
        reply = post(web, "/api/matches", {"game": "KuhnPoker-v0", "seats": ["human", spec]})
        assert reply.status_code == 422, (spec, reply.text)
        assert message(reply).startswith("seat 1: ") and "\n" not in message(reply) and len(message(reply)) < 420
    reply = post(web, "/api/matches", {"game": "KuhnPoker-v0", "seats": ["human", "z" * 100_000]})
    assert reply.status_code == 422 and len(reply.text) < 1000, "a long spec is not echoed whole"
    board = httpx.get(web.url + "/api/leaderboard").json()
    assert board["games"] == 0 and not (tmp_path / "lb.sqlite").exists()
    good = post(web, "/api/matches", {"game": "KuhnPoker-v0", "seats": ["human", "expert"], "seed": 1})
    assert good.status_code == 201
    conn = sqlite3.connect(tmp_path / "lb.sqlite")
    assert conn.execute("SELECT count(*) FROM games").fetchone() == (0,)
    assert sorted(r[0] for r in conn.execute("SELECT label FROM agents")) == ["expert", "human"]
    conn.close()
    assert "Traceback" not in web.log()


def test_seeds_are_checked_at_the_door_and_stored_exactly(web, tmp_path):
    for seed in (2**63, 2**64 - 1, -1, "12345678901234567891", "1e3", "0x10", 1.5, True):
        reply = post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["random", "random"], "seed": seed})
        assert reply.status_code == 422 and "2**63 - 1" in message(reply), seed
    largest = str(2**63 - 1)
    match = post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["random", "random"], "seed": largest})
    assert match.status_code == 201
    finished = play_out(web, match.json())
    assert finished["stored"] is not None and finished["pending"] is None
    (row,) = stored_rows(tmp_path / "lb.sqlite")
    assert row["seed"] == 2**63 - 1


def test_a_finished_game_is_stored_once_the_lock_clears(web, tmp_path):
    """Another writer holds the database as the game ends: the last step answers, the row is kept pending, a
    repeated step cannot drop it, and the next request after the lock clears writes it."""
    first = post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["random", "random"], "seed": 5}).json()
    holder = sqlite3.connect(tmp_path / "lb.sqlite", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        match = first
        while not match["over"]:
            reply = post(web, f"/api/matches/{match['id']}/step", {"at": len(match["moves"])})
            assert reply.status_code == 200, reply.text
            match = reply.json()
        assert match["stored"] is None and "locked" in match["pending"]
        again = post(web, f"/api/matches/{match['id']}/step", {"at": len(match["moves"])})
        assert again.status_code == 409 and "kept to be stored" in message(again)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    state = httpx.get(f"{web.url}/api/matches/{first['id']}").json()
    assert state["stored"] is not None and state["pending"] is None
    (row,) = stored_rows(tmp_path / "lb.sqlite")
    assert row["seed"] == 5 and row["steps"] == len(state["moves"])
    assert "Traceback" not in web.log()


def test_every_request_does_bounded_work(web, tmp_path):
    match = post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["random", "random"], "seed": 2}).json()
    missing = post(web, f"/api/matches/{match['id']}/step", {})
    assert missing.status_code == 422 and "'at' is required" in message(missing)
    with ThreadPoolExecutor(10) as pool:  # ten copies of one step: one move is made
        replies = list(pool.map(lambda _: post(web, f"/api/matches/{match['id']}/step", {"at": 0}), range(10)))
    assert sorted(r.status_code for r in replies) == [200] + [409] * 9
    assert len(httpx.get(f"{web.url}/api/matches/{match['id']}").json()["moves"]) == 1
    talk = post(web, "/api/matches", {"game": "TruthAndDeception-v0", "seats": ["human", "random"], "seed": 1}).json()
    huge = post(web, f"/api/matches/{talk['id']}/move", {"text": "x" * 900_000, "at": 0})
    assert huge.status_code == 413 and str(policy.MAX_MOVE_CHARS) in message(huge)
    long_game = post(web, "/api/matches", {"game": "TicTacToe-v0:" + "board=grid;" * 100, "seats": ["human", "human"]})
    assert long_game.status_code == 422 and len(long_game.text) < 1000
    for game in ("Snake-v0:width=3000;height=3000", "LiarsDice-v0:dice=1000000"):  # seconds and 100s of MB a turn
        reply = post(web, "/api/matches", {"game": game, "seats": ["random", "random"]})
        assert reply.status_code == 422 and ("at most 20" in message(reply) or "from 1 to 20" in message(reply)), game
    # no more than MAX_CLIENT_AGENTS labels per server run: each new one is an agent built and a stored row
    built = {"random"}
    for n in range(policy.MAX_CLIENT_AGENTS + 1):
        spec = f"random#seed={n + 1}"
        reply = post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["human", spec]})
        if len(built) < policy.MAX_CLIENT_AGENTS:
            assert reply.status_code == 201, reply.text
            built.add(spec)
        else:
            assert reply.status_code == 422 and "choose one of them" in message(reply)
    assert post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["human", "random#seed=1"]}).status_code == 201
    stored = sqlite3.connect(tmp_path / "lb.sqlite")
    assert stored.execute("SELECT count(*) FROM agents").fetchone()[0] == policy.MAX_CLIENT_AGENTS + 1  # and human
    stored.close()


def test_request_bodies_are_read_strictly(web):
    headers = {"Content-Type": "application/json"}
    twice = httpx.post(web.url + "/api/matches", content=b'{"game": "TicTacToe-v0", "game": "Chess"}', headers=headers)
    assert twice.status_code == 400 and "given twice" in message(twice)
    latin = httpx.post(web.url + "/api/matches", content='{"game": "é"}'.encode("latin-1"), headers=headers)
    assert latin.status_code == 400 and "UTF-8" in message(latin) and "surrogate" not in message(latin)
    assert httpx.get(web.url + "/api/stored/99999999999999999999999").status_code == 404


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(8192))


def _flipped(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in range(100, len(data), 997):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("damage", [_garbage, _flipped, _foreign, "directory"])
def test_a_broken_database_is_refused_at_start_in_one_line(tmp_path, damage):
    db = tmp_path / "lb.sqlite"
    if damage == "directory":
        db.mkdir()
    elif damage is _foreign:
        damage(db)
    else:
        _made_database(db)
        damage(db)
    before = db.read_bytes() if db.is_file() else None
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "spiral_arena.cli"]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = subprocess.run([*command, "web", "--db", str(db), "--port", str(port)], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and str(db) in out.stderr
    assert before is None or db.read_bytes() == before


def test_a_database_broken_while_serving_is_a_503_on_every_read(tmp_path):
    db = tmp_path / "lb.sqlite"
    _made_database(db)
    web = Web(tmp_path, "--db", str(db))
    try:
        assert httpx.get(web.url + "/api/leaderboard").json()["games"] == 4
        _flipped(db)
        for path in ("/api/leaderboard", "/api/stored", "/api/stored/1"):
            reply = httpx.get(web.url + path)
            assert reply.status_code == 503 and str(db) in message(reply) and "\n" not in message(reply), path
    finally:
        web.stop()
    assert "Traceback" not in web.log()


def test_an_agent_against_itself_rates_no_one_and_breaks_nothing(web, tmp_path):
    """The page lets one agent sit in both seats; such a game is stored, and the standings leave it out."""
    match = post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["random", "random"], "seed": 1}).json()
    assert play_out(web, match)["stored"]["new"]
    board = httpx.get(web.url + "/api/leaderboard").json()
    assert board["games"] == 1 and "against itself" in board["missing"]
    match = post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["expert", "random"], "seed": 1}).json()
    play_out(web, match)
    board = httpx.get(web.url + "/api/leaderboard").json()
    assert board["games"] == 2 and "expert" in board["html"]


def _made_database(db: Path) -> None:
    """A real leaderboard database with a few games in it."""
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "spiral_arena.cli"]
    run = [*command, "leaderboard", "run", "--agents", "random,expert", "--games", "TicTacToe-v0"]
    subprocess.run([*run, "--games-per-pair", "4", "--db", str(db), "--no-progress"], check=True, timeout=300,
                   capture_output=True)  # fmt: skip


def test_a_slow_agent_build_holds_up_no_other_request(tmp_path, monkeypatch):
    """An agent takes as long as it takes to build (a real model: tens of seconds) on its own thread: meanwhile
    the page's other requests and another match's moves are answered. The build is held by an event here, in a
    real server on loopback, so the test knows it is still under way."""
    import uvicorn

    from leaderboard.web import matches as matches_module
    from leaderboard.web.app import create_app

    release = threading.Event()
    real_build = matches_module.build_agent

    def held(entrant, *args):
        if entrant.label == "expert#alpha=0.3":
            release.wait(60)
        return real_build(entrant, *args)

    monkeypatch.setattr(matches_module, "build_agent", held)
    app = create_app(tmp_path / "lb.sqlite")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    while not server.started:
        time.sleep(0.05)
    try:
        with ThreadPoolExecutor(1) as pool:
            slow = pool.submit(httpx.post, url + "/api/matches", timeout=120,
                               json={"game": "KuhnPoker-v0", "seats": ["human", "expert#alpha=0.3"]})  # fmt: skip
            time.sleep(0.5)
            started = time.monotonic()
            other = httpx.post(url + "/api/matches", json={"game": "TicTacToe-v0", "seats": ["random", "random"]})
            step = httpx.post(f"{url}/api/matches/{other.json()['id']}/step", json={"at": 0})
            games = httpx.get(url + "/api/games")
            waited = time.monotonic() - started
            assert (other.status_code, step.status_code, games.status_code) == (201, 200, 200)
            assert not slow.done() and waited < 20
            release.set()
            assert slow.result().status_code == 201
    finally:
        release.set()
        server.should_exit = True
        thread.join(30)


def test_an_agent_that_takes_long_to_answer_holds_up_no_other_match(tmp_path):
    """An API agent whose upstream answers after 6 s (`spiral-arena serve --latency-ms`, a stand-in for a slow
    or retrying provider) answers on its own thread: meanwhile another match starts and plays, and a second
    step of the waiting match is a 409, not a second request."""
    upstream = Server(tmp_path, "--agent", "expert", "--latency-ms", "6000")
    web = Web(tmp_path, "--db", str(tmp_path / "lb.sqlite"), "--agents", f"slow=openai:m@{upstream.url}")
    try:
        waiting = post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["slow", "random"], "seed": 1}).json()
        with ThreadPoolExecutor(1) as pool:
            slow = pool.submit(post, web, f"/api/matches/{waiting['id']}/step", {"at": 0})
            time.sleep(1.0)
            started = time.monotonic()
            again = post(web, f"/api/matches/{waiting['id']}/step", {"at": 0})
            other = post(web, "/api/matches", {"game": "TicTacToe-v0", "seats": ["expert", "random"], "seed": 2})
            finished = play_out(web, other.json())
            waited = time.monotonic() - started
            assert again.status_code == 409 and "already answering" in message(again)
            assert finished["stored"] is not None and not slow.done() and waited < 4, waited
            answered = slow.result()
        assert answered.status_code == 200 and len(answered.json()["moves"]) == 1
    finally:
        web.stop()
        upstream.stop()
    assert "Traceback" not in web.log()
