"""Shared test helpers."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


# a training run of the tiny model in seconds: 4 steps of 24 turns, evaluated at steps 0, 2 and 4 on one-round Kuhn
TINY_RUN = {
    "steps": 4,
    "sft_steps": 4,
    "sft_batch": 16,
    "samples_per_step": 24,
    "games_in_flight": 8,
    "eval_every": 2,
    "eval_games": 2,
    "eval_env_ids": "KuhnPoker-v0:rounds=1",
    "eval_opponents": "random,expert",
    "time_limit_s": 0,
    "save_every": 2,
    "micro_batch": 8,
    "eval_tactics": False,  # the TicTacToe read-out (seconds an evaluation) is tested in test_ttt_tactics.py
}

# The real pretrained model (SmolLM2-135M-Instruct) by the name users give it; its tests are marked real_model (a
# developer may skip them with -m "not real_model"; CI runs them). Fetched and dequantized once into the cache.
REAL_MODEL = "smollm2-135m"


@pytest.fixture(scope="session")
def real_model() -> Path:
    """The directory ``smollm2-135m`` resolves to, built on first use (``spiral_arena.models.named``)."""
    pytest.importorskip("transformers", reason="needs the train extra")
    from spiral_arena.models.named import local_dir

    return Path(local_dir(REAL_MODEL))


# what a training run's metrics hold that differs between two runs of the same games (wall-clock seconds)
VOLATILE = ("time_s", "rollout_s", "advantage_s", "update_s", "sync_s", "generated_tokens_per_s")
VOLATILE += ("async/learner_idle_s", "async/actor_idle_s")


def run_rows(run: Path) -> list[dict]:
    """A training run's metrics.jsonl, one dict per step."""
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def stable(row: dict) -> dict:
    """A metrics row without its wall-clock numbers: what an exact replay of the run reproduces."""
    return {k: v for k, v in row.items() if k not in VOLATILE}


def weights(path: Path) -> dict:
    """The state dict of the model saved at ``path`` (a checkpoint)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path).state_dict()


def without_write_permission_bypass() -> list[str]:
    """A command prefix under which file permissions bind: root ignores them unless it gives up the
    capabilities that override them."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv, which can make file permissions bind")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--"]


def cli_flags(settings: dict) -> list[str]:
    """A trainer config's fields as the command line spells them (a bool as ``--name`` or ``--no-name``)."""
    flags = []
    for key, value in settings.items():
        name = key.replace("_", "-")
        flags.append(f"--{name}" if value is True else f"--no-{name}" if value is False else f"--{name}={value}")
    return flags


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


class HashingEndpoint:
    """A chat endpoint whose answer depends on the request alone (a legal action picked by a hash of model
    and observation, read back from the text), so a sequential and a concurrent run play the same games.
    ``fails(model, nth request of that model, legal actions)`` makes a request an HTTP 500 instead. It
    records the most requests it was ever answering at once."""

    def __init__(self, delay_s: float = 0.0, fails: Callable[[str, int, list[str]], bool] | None = None) -> None:
        self.delay_s, self.fails = delay_s, fails or (lambda model, nth, legal: False)
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = 0
        self.requests: Counter[str] = Counter()
        self.http = JSONEndpoint(lambda body, headers: self.reply(body))
        self.url = self.http.url

    def reply(self, body: dict) -> tuple[int, dict]:
        from spiral_arena.serve import recover_info

        model, observation = body["model"], body["messages"][-1]["content"]
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.requests[model] += 1
            nth = self.requests[model]
        try:
            time.sleep(self.delay_s)
            legal = recover_info(observation)["legal_actions"]
            if self.fails(model, nth, legal):
                return 500, {"error": {"message": f"{model} is down"}}
            move = legal[zlib.crc32(f"{model}\n{observation}".encode()) % len(legal)]
            return 200, {"choices": [{"message": {"role": "assistant", "content": f"\\boxed{{{move}}}"}}]}
        finally:
            with self.lock:
                self.in_flight -= 1

    def stop(self) -> None:
        self.http.stop()


@pytest.fixture
def endpoint() -> Iterator[Callable[..., HashingEndpoint]]:
    started: list[HashingEndpoint] = []

    def start(**kwargs: object) -> HashingEndpoint:
        started.append(HashingEndpoint(**kwargs))
        return started[-1]

    yield start
    for server in started:
        server.stop()
