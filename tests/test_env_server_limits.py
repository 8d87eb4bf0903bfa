"""``spiral-arena env-server``'s limits (issue 41), against real servers on 127.0.0.1: the session cap
covers stateless resets, a silent WebSocket session is closed after the idle timeout, closed sessions
leave nothing behind, and a port number that is no port is refused before the server says it serves."""

from __future__ import annotations

import gc
import json
import socket
import subprocess
import sys
import time
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import pytest

httpx = pytest.importorskip("httpx", reason="needs the api extra: pip install 'spiral-arena[api]'")
pytest.importorskip("fastapi", reason="needs the api extra: pip install 'spiral-arena[api]'")
pytest.importorskip("websockets", reason="needs the api extra: pip install 'spiral-arena[api]'")
from test_integrations_env_server import EnvServer, ask, fresh_session  # noqa: E402
from test_serve import SCRIPT, AppServer, Server  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from spiral_arena.integrations.env_server import create_env_app  # noqa: E402

LATENCY_S = 1.5  # the opponent's upstream answers this late: longer than the idle timeout below


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnvServer]:
    """Two sessions at most, a 1 s idle timeout, and a slow API opponent (``serve --latency-ms``) that
    moves first from the server's seat, so every reset waits on it."""
    tmp = tmp_path_factory.mktemp("env-server-limits")
    upstream = Server(tmp, "--agent", "random", "--latency-ms", str(int(LATENCY_S * 1000)))
    opponent = f"openai:m@{upstream.url}#max_retries=0"
    args = ["--env", "KuhnPoker-v0", "--seat", "1", "--opponent", opponent, "--max-sessions", "2"]
    try:
        server = EnvServer(tmp, *args, "--idle-timeout-s", "1")
    except RuntimeError:
        upstream.stop()
        raise
    yield server
    server.stop()
    upstream.stop()


def test_stateless_resets_count_against_the_session_cap_and_the_rest_are_refused_at_once(limited):
    """Before: every POST /reset built a game outside the cap, so 120 of them with a slow opponent all
    ran (and WebSocket sessions waited for threads). Now two play and four get a 503 without waiting."""

    def reset(seed: int) -> tuple[httpx.Response, float]:
        start = time.perf_counter()
        answer = httpx.post(f"{limited.url}/reset", json={"seed": seed}, timeout=60)
        return answer, time.perf_counter() - start

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(reset, range(6)))
    played = [seconds for answer, seconds in answers if answer.status_code == 200]
    refused = [(answer, seconds) for answer, seconds in answers if answer.status_code != 200]
    assert len(played) == 2 and all(answer.status_code == 503 for answer, _ in refused) and len(refused) == 4
    assert all("at its limit of 2 sessions" in answer.json()["detail"] for answer, _ in refused)
    assert max(seconds for _, seconds in refused) < min(played)  # refused while the two still waited


def test_a_silent_session_is_closed_after_the_idle_timeout_and_its_slot_goes_to_a_new_client(limited):
    """Before: clients that answered pings and sent nothing held every slot for ever."""
    with limited.connect({}) as busy, limited.connect({}) as silent:
        with limited.connect({}) as third:
            assert json.loads(third.recv(timeout=30))["data"]["code"] == "CAPACITY_REACHED"
        for _ in range(3):  # a message restarts the clock; the server's own wait (the opponent's) is not idling
            time.sleep(0.4)
            assert ask(busy, {"type": "state"})["type"] == "state"
        assert ask(busy, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"  # took LATENCY_S > 1 s
        for ws in (silent, busy):
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd.code == 1001
            assert closed.value.rcvd.reason == "idle for 1 s: closed to free its slot; connect again to play"
    with fresh_session(limited):  # a new client gets a slot
        pass


def test_closed_sessions_leave_the_session_table_and_nothing_holds_them():
    """Issue 41 measured the server's memory growing with closed sessions: every way a session ends
    (a close frame, the client's close, a dropped connection, a stateless reset) gives its slot back
    and the session itself."""
    app = create_env_app("KuhnPoker-v0", opponent="expert")
    with AppServer(app) as server, ExitStack() as stack:
        base = server.url.removesuffix("/v1")
        url = f"ws{base.removeprefix('http')}/ws"
        clients = [stack.enter_context(connect(url, open_timeout=10)) for _ in range(3)]
        for seed, ws in enumerate(clients):
            assert ask(ws, {"type": "reset", "data": {"seed": seed}})["type"] == "observation"
        assert len(app.state.sessions) == 3
        sessions = [weakref.ref(session) for session in app.state.sessions.values()]
        clients[0].send(json.dumps({"type": "close"}))
        clients[1].close()
        clients[2].socket.shutdown(socket.SHUT_RDWR)  # gone without a close frame
        assert httpx.post(f"{base}/reset", json={"seed": 3}).status_code == 200
        deadline = time.monotonic() + 10
        while app.state.sessions and time.monotonic() < deadline:
            time.sleep(0.05)
        assert app.state.sessions == {}
    gc.collect()
    assert [ref() for ref in sessions] == [None, None, None]


@pytest.mark.parametrize(("command", "port"), [("serve", "-1"), ("env-server", "99999"), ("env-server", "0")])
def test_a_port_that_is_no_port_is_refused_in_one_line_before_the_banner(command, port):
    """Before: the banner said "serving ... at http://127.0.0.1:99999", then an OverflowError traceback."""
    cli = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "spiral_arena.cli"]
    args = ["--agent", "random"] if command == "serve" else ["--env", "KuhnPoker-v0"]
    done = subprocess.run([*cli, command, *args, "--port", port], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"spiral-arena {command}: error: --port: must be a port number from 1 to 65535, got {port}\n"
