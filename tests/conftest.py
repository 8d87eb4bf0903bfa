"""Shared test helpers."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def play_random_game(env, agents, seed=None):
    """Play one game with ``agents`` (one per seat); returns the env's final returns."""
    env.reset(seed=seed)
    for agent in env.agent_iter():
        obs, _, term, trunc, info = env.last()
        if term or trunc:
            env.step(None)
        else:
            env.step(agents[env.possible_agents.index(agent)].act(obs, info))
    return env.returns


class _LoopbackHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # every connection of a wave at once (the default backlog, 5, resets some)


class JSONEndpoint:
    """A real HTTP endpoint on 127.0.0.1 for tests that stand in for a chat provider: each POST's JSON
    body (and its headers) go to ``reply``, whose (status, payload) is sent back as JSON. ``url`` is the
    base URL (``.../v1``); ``stop()`` shuts it down."""

    def __init__(self, reply: Callable[[dict[str, Any], Message], tuple[int, dict[str, Any]]]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                status, payload = reply(json.loads(self.rfile.read(int(self.headers["Content-Length"]))), self.headers)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = _LoopbackHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def stored_rows(db: str | Path) -> list[dict[str, Any]]:
    """Every row of a leaderboard database's games table, in the order stored, read with plain sqlite3."""
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM games ORDER BY id")]
    finally:
        conn.close()
