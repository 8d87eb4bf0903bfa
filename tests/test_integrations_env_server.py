"""``spiral-arena env-server`` spoken to at the wire, with plain HTTP and WebSocket clients (httpx,
websockets), as OpenEnv's protocol defines it; tests/test_integrations_openenv.py plays it with
OpenEnv's own client. Every game played here is replayed on ``make_text_env`` with the same seed and
moves, so what the server sends is what the env gives."""

from __future__ import annotations

import base64
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from spiral_arena.agents import make_agent
from spiral_arena.cli import main
from spiral_arena.integrations.text_env import make_text_env

httpx = pytest.importorskip("httpx", reason="needs the api extra: pip install 'spiral-arena[api]'")
pytest.importorskip("fastapi", reason="needs the api extra: pip install 'spiral-arena[api]'")
websockets = pytest.importorskip("websockets", reason="needs the api extra: pip install 'spiral-arena[api]'")
from test_serve import Server  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

TOKEN = "sk-test-ENV-SERVER-TOKEN"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GAME = "KuhnPoker-v0:rounds=2"


class EnvServer(Server):
    """One ``spiral-arena env-server`` process on a free loopback port; ``url`` is its base URL."""

    COMMAND, PATH, PROBE = "env-server", "", "/health"

    @property
    def ws_url(self) -> str:
        return "ws" + self.url.removeprefix("http") + "/ws"

    def connect(self, headers: dict[str, str] | None = None) -> Any:
        return connect(self.ws_url, additional_headers=AUTH if headers is None else headers, open_timeout=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnvServer]:
    server = EnvServer(tmp_path_factory.mktemp("env-server"), "--env", GAME, "--seat", "1", "--opponent", "expert")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnvServer]:
    """One session at most, a bearer token, and an API opponent whose upstream is a closed port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    args = ["--env", GAME, "--opponent", f"openai:m@{closed}#max_retries=0", "--max-sessions", "1"]
    server = EnvServer(tmp_path_factory.mktemp("env-server"), *args, "--api-key", TOKEN)
    server.upstream = closed
    yield server
    server.stop()


def ask(ws: Any, message: dict[str, Any] | str) -> dict[str, Any]:
    ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(ws.recv(timeout=30))


@contextmanager
def fresh_session(server: EnvServer) -> Iterator[tuple[Any, dict[str, Any]]]:
    """A connection holding a session, and its state, once a slot is free (a session that a client has
    just closed may still hold its slot for a moment)."""
    deadline = time.monotonic() + 10
    while True:
        with server.connect() as ws:
            reply = ask(ws, {"type": "state"})
            if reply["type"] == "state" or time.monotonic() > deadline:
                assert reply["type"] == "state", reply
                yield ws, reply["data"]
                return
        time.sleep(0.05)


def play(ws: Any, seed: int, seat: int) -> tuple[list[str], list[dict[str, Any]], dict[str, Any]]:
    """One game over the socket by a seeded random player: its moves, every observation frame's data,
    and the state at the end."""
    learner = make_agent("random")
    learner.reset(seed=seed)
    reply = ask(ws, {"type": "reset", "data": {"seed": seed, "seat": seat, "episode_id": f"e{seed}"}})
    assert reply["type"] == "observation" and reply["data"]["reward"] is None
    frames, moves = [reply["data"]], []
    while not frames[-1]["done"]:
        observation = frames[-1]["observation"]
        moves.append(learner.act(observation["text"], observation["info"]))
        reply = ask(ws, {"type": "step", "data": {"message": moves[-1]}})
        assert reply["type"] == "observation", reply
        frames.append(reply["data"])
    return moves, frames, ask(ws, {"type": "state"})["data"]


def test_a_client_plays_whole_games_on_the_socket_exactly_as_make_text_env_plays_them(server):
    with server.connect() as ws:
        for seed in range(6):
            for seat in (0, 1):
                moves, frames, state = play(ws, seed, seat)
                local = make_text_env(GAME, seat=seat, opponent="expert")
                text, info = local.reset(seed=seed)
                expected = [(text, info, None, False)]
                for move in moves:
                    text, reward, terminated, truncated, info = local.step(move)
                    expected.append((text, info, reward, terminated or truncated))
                got = [(f["observation"]["text"], f["observation"]["info"], f["reward"], f["done"]) for f in frames]
                assert got == expected
                assert sum(f["reward"] or 0.0 for f in frames) == local.env.returns[seat]
                assert frames[-1]["observation"]["info"]["outcome"]["reason"] == "normal"
                assert state == {
                    "episode_id": f"e{seed}",
                    "step_count": len(moves),
                    "env_id": "KuhnPoker-v0",
                    "seat": seat,
                    "player": f"player_{seat}",
                    "opponent": "expert",
                    "seed": seed,
                    "done": True,
                    "returns": list(local.env.returns),
                }


def test_an_invalid_move_is_the_games_ruling_not_an_error(server):
    with server.connect() as ws:
        ask(ws, {"type": "reset", "data": {"seed": 1}})  # the server's seat, 1: the expert has moved
        end = ask(ws, {"type": "step", "data": {"message": "I fold my arms"}})["data"]
        assert end["done"] and end["reward"] == -1.0
        info = end["observation"]["info"]
        assert info["outcome"]["reason"] == "invalid_move" and info["invalid_move"]
        again = ask(ws, {"type": "step", "data": {"message": "[check]"}})
        assert again["type"] == "error" and "the game is over; send reset" in again["data"]["message"]


def test_http_gives_health_metadata_schemas_and_a_stateless_reset(server):
    assert httpx.get(f"{server.url}/health").json() == {"status": "healthy"}
    metadata = httpx.get(f"{server.url}/metadata").json()
    assert metadata["name"] == "spiral-arena KuhnPoker-v0" and "rounds=2" not in json.dumps(metadata)
    assert "seat 1 of 2 against expert" in metadata["description"]
    schemas = httpx.get(f"{server.url}/schema").json()
    assert schemas["action"]["required"] == ["message"]  # one field: clients may send the raw reply as it
    assert {"text", "info", "done", "reward"} <= set(schemas["observation"]["properties"])
    assert {"episode_id", "step_count"} <= set(schemas["state"]["properties"])
    first = httpx.post(f"{server.url}/reset", json={"seed": 4})
    with server.connect() as ws:
        assert first.json() == ask(ws, {"type": "reset", "data": {"seed": 4}})["data"]
    assert httpx.post(f"{server.url}/reset").json()["done"] is False  # no body: OpenEnv's empty reset
    for method, path in (("POST", "/step"), ("GET", "/state")):
        answer = httpx.request(method, f"{server.url}{path}", json={"action": {"message": "[check]"}})
        assert answer.status_code == 409 and "/ws" in answer.json()["detail"]


@pytest.mark.parametrize(
    ("message", "code", "says"),
    [
        ("not json", "INVALID_JSON", "the message is not valid JSON"),
        ("[" * 100_000 + "]" * 100_000, "INVALID_JSON", "the message is nested too deeply"),
        ('{"type": "reset", "data": {"episode_id": "\\ud800"}}', "INVALID_JSON", "not valid Unicode"),
        ([1, 2], "VALIDATION_ERROR", "a message must be a JSON object with a 'type'"),
        ({"type": "jump"}, "UNKNOWN_TYPE", "unknown message type 'jump'; send reset, step, state or close"),
        ({"type": "reset", "data": {"seed": -1}}, "VALIDATION_ERROR", "reset: 'seed': input should be greater"),
        ({"type": "reset", "data": {"seed": 2**64}}, "VALIDATION_ERROR", "reset: 'seed': input should be less"),
        ({"type": "reset", "data": {"seed": True}}, "VALIDATION_ERROR", "reset: 'seed': input should be a valid"),
        ({"type": "reset", "data": {"seed": "3"}}, "VALIDATION_ERROR", "reset: 'seed': input should be a valid"),
        ('{"type": "reset", "data": {"seed": ' + "9" * 5000 + "}}", "VALIDATION_ERROR", "'seed' is a number of 5000"),
        ({"type": "reset", "data": {"sed": 3}}, "VALIDATION_ERROR", "unknown field 'sed'; valid fields: seed,"),
        ({"type": "reset", "data": {"seat": 2}}, "VALIDATION_ERROR", "'seat' must be in 0..1 for this game, got 2"),
        ({"type": "reset", "data": [3]}, "VALIDATION_ERROR", "reset: 'data' must be a JSON object"),
        ({"type": "reset", "seed": 3}, "VALIDATION_ERROR", "reset: unknown key 'seed'; a message holds 'type'"),
        ({"type": "step", "data": {"message": "[check]"}}, "EXECUTION_ERROR", "no game in progress; send reset"),
        ({"type": "step"}, "VALIDATION_ERROR", "step: 'data' must be a JSON object"),
        ({"type": "step", "data": {"message": 3}}, "VALIDATION_ERROR", "step: 'message': input should be a valid"),
        ({"type": "step", "data": {}}, "VALIDATION_ERROR", "step: 'message' is missing; valid fields: message,"),
    ],
)
def test_a_bad_frame_gets_one_sentence_and_the_session_goes_on(server, message, code, says):
    with server.connect() as ws:
        reply = ask(ws, message if isinstance(message, str) else json.dumps(message))
        assert reply["type"] == "error" and reply["data"]["code"] == code
        assert says in reply["data"]["message"] and "\n" not in reply["data"]["message"]
        assert "Traceback" not in reply["data"]["message"]
        assert ask(ws, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"


def test_binary_and_oversized_frames(server):
    with server.connect() as ws:
        ws.send(b'{"type": "state"}')
        assert "as a JSON text frame" in json.loads(ws.recv(timeout=30))["data"]["message"]
        ws.send(json.dumps({"type": "step", "data": {"message": "x" * (1 << 20)}}))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
        assert closed.value.rcvd.code == 1009  # message too big: the server's frame limit, 1 MiB
    with server.connect() as ws:  # the server is still there
        assert ask(ws, {"type": "state"})["type"] == "state"


def handshake(server: EnvServer, **headers: str) -> httpx.Response:
    """A WebSocket opening handshake sent by hand, so Host and Origin can be anything."""
    key = base64.b64encode(os.urandom(16)).decode()
    upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": key}
    return httpx.get(f"{server.url}/ws", headers={**upgrade, **headers})


def test_the_handshake_and_requests_are_refused_without_the_token_or_from_elsewhere(guarded):
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        with pytest.raises(InvalidStatus) as refused:
            guarded.connect(headers)
        assert refused.value.response.status_code == 401
        assert b"missing or wrong bearer token" in refused.value.response.body
        assert httpx.get(f"{guarded.url}/health", headers=headers).status_code == 401
    elsewhere = handshake(guarded, **AUTH, Host="attacker.example")
    assert elsewhere.status_code == 403 and "--allow-host attacker.example" in elsewhere.json()["detail"]
    cross_site = handshake(guarded, **AUTH, Origin="http://attacker.example")
    assert cross_site.status_code == 403 and "cross-site requests are refused" in cross_site.json()["detail"]
    assert handshake(guarded, **AUTH).status_code == 101  # the same handshake, from here, opens


def test_a_page_on_another_port_of_this_machine_cannot_open_a_session(server):
    """Issue 41: the Origin's port was not checked, so without a token any page served from any local
    port could drive the server. Only the server's own origin (or none, as non-browser clients send) opens."""
    port = int(server.url.rsplit(":", 1)[1])
    other = handshake(server, Origin=f"http://localhost:{port % 65535 + 1}")
    assert other.status_code == 403 and "cross-site requests are refused" in other.json()["detail"]
    assert handshake(server, Origin=f"http://localhost:{port}").status_code == 101
    assert handshake(server).status_code == 101


def test_http_bodies_are_checked_like_serves(server):
    url, json_type = f"{server.url}/reset", {"Content-Type": "application/json"}
    cases = [
        (httpx.post(url, content=b'{"seed": 1}', headers={"Content-Type": "text/plain"}), 415, "Content-Type"),
        (httpx.post(url, json={"x": "y" * (1 << 20)}), 413, "larger than 1048576 bytes"),
        (httpx.post(url, content=b"{", headers=json_type), 400, "not valid JSON"),
        (httpx.post(url, json={"seed": -3}), 422, "reset: 'seed': input should be greater than or equal to 0"),
        (httpx.post(url, content=b'{"seed": ' + b"9" * 5000 + b"}", headers=json_type), 422, "5000 digits, too large"),
    ]
    for answer, status, says in cases:
        assert answer.status_code == status and says in answer.json()["detail"]


def test_a_session_over_the_limit_is_refused_and_a_failing_opponent_keeps_its_upstream_to_itself(guarded):
    with guarded.connect() as ws:
        with guarded.connect() as second:
            refused = json.loads(second.recv(timeout=30))
            assert refused["data"]["code"] == "CAPACITY_REACHED" and "limit of 1 sessions" in refused["data"]["message"]
            with pytest.raises(ConnectionClosed) as closed:
                second.recv(timeout=30)
            assert closed.value.rcvd.code == 1013
        assert ask(ws, {"type": "reset", "data": {"seed": 0, "seat": 0}})["type"] == "observation"
        failed = ask(ws, {"type": "step", "data": {"message": "[check]"}})["data"]
        assert failed["message"] == "the opponent's upstream failed; the game was abandoned, send reset"
        assert "no game in progress" in ask(ws, {"type": "step", "data": {"message": "[bet]"}})["data"]["message"]
        assert "upstream failed" in ask(ws, {"type": "reset", "data": {"seed": 0, "seat": 1}})["data"]["message"]
    metadata = httpx.get(f"{guarded.url}/metadata", headers=AUTH).text
    assert guarded.upstream.split("//")[1] not in metadata and "against openai:m" in metadata
    assert guarded.upstream.split("//")[1] not in guarded.log()
    with fresh_session(guarded):  # the closed session's slot comes back
        pass


def test_after_a_failed_reset_or_step_the_state_shows_no_episode(guarded):
    """Issue 41: after a failed reset ``state`` still named its episode id and seed, not done, while
    ``step`` answered that no game was in progress."""
    with fresh_session(guarded) as (ws, no_episode):
        failed = ask(ws, {"type": "reset", "data": {"seed": 5, "seat": 1, "episode_id": "e5"}})  # the opponent first
        assert "upstream failed" in failed["data"]["message"]
        assert ask(ws, {"type": "state"})["data"] == no_episode
        assert no_episode["episode_id"] is None and no_episode["seed"] is None and no_episode["done"] is False
        assert "no game in progress" in ask(ws, {"type": "step", "data": {"message": "[bet]"}})["data"]["message"]
        ask(ws, {"type": "reset", "data": {"seed": 6, "seat": 0, "episode_id": "e6"}})  # the seat moves first
        assert ask(ws, {"type": "state"})["data"]["episode_id"] == "e6"
        assert "upstream failed" in ask(ws, {"type": "step", "data": {"message": "[bet]"}})["data"]["message"]
        assert ask(ws, {"type": "state"})["data"] == no_episode


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--env", "Kuhn-v0"], "--env: unknown env id 'Kuhn-v0'"),
        (["--env", "KuhnPoker-v0", "--seat", "2"], "--seat: KuhnPoker-v0 has seats 0..1, got 2"),
        (["--env", "TwentyQuestions-v0", "--seat", "1"], "--seat: TwentyQuestions-v0 has seats 0..0, got 1"),
        (["--env", "KuhnPoker-v0", "--opponent", "nobody"], "--opponent: unknown agent spec"),
        (["--env", "KuhnPoker-v0", "--max-sessions", "0"], "--max-sessions: must be at least 1, got 0"),
        (["--env", "KuhnPoker-v0", "--idle-timeout-s", "-1"], "--idle-timeout-s: must be a number of seconds >= 0"),
        (["--env", "KuhnPoker-v0", "--api-key", " "], "--api-key: is empty"),
    ],
)
def test_the_command_refuses_bad_arguments_before_serving(args, says, capsys):
    assert main(["env-server", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and err.startswith("spiral-arena env-server: error:") and err.count("\n") == 1


def test_a_one_player_game_is_served_without_an_opponent_and_its_options_stay_out_of_sight():
    from starlette.testclient import TestClient

    from spiral_arena.integrations.env_server import create_env_app

    app = create_env_app("TwentyQuestions-v0:secret=cat;max_questions=2", opponent="expert", allowed_hosts=None)
    with TestClient(app) as client:
        metadata = client.get("/metadata").json()
        assert "seat 0 of 1." in metadata["description"] and "against" not in metadata["description"]
        with client.websocket_connect("/ws") as ws:
            ws.send_json({"type": "reset", "data": {"seed": 0}})
            assert ws.receive_json()["data"]["done"] is False
            ws.send_json({"type": "step", "data": {"message": "Is it a cat?"}})
            end = ws.receive_json()["data"]
            ws.send_json({"type": "state"})
            state = ws.receive_json()["data"]
    assert end["done"] and end["reward"] > 0 and end["observation"]["info"]["outcome"]["winner"] == state["player"]
    assert state["opponent"] is None and state["env_id"] == "TwentyQuestions-v0"
    assert "cat" not in json.dumps(metadata) + json.dumps(state)
