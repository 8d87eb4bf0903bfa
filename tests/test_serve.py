"""``spiral-arena serve`` as a real subprocess on 127.0.0.1, played through the API presets."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import spiral_arena
from spiral_arena.agents import APIAgent, APIError, RandomAgent, make_agent
from spiral_arena.llm import ChatClient
from spiral_arena.play import play_game

httpx = pytest.importorskip("httpx", reason="needs the api extra")
pytest.importorskip("fastapi", reason="needs the api extra")
pytest.importorskip("uvicorn", reason="needs the api extra")

from spiral_arena.serve import create_app, host_names, startup_messages  # noqa: E402 (needs fastapi)

TOKEN = "sk-test-SERVE-TOKEN"
GAMES = ("KuhnPoker-v0", "TicTacToe-v0")
SCRIPT = Path(sys.executable).with_name("spiral-arena")


class Server:
    """One ``spiral-arena serve`` process on a free loopback port (another server command: set
    ``COMMAND``, the ``PATH`` its ``url`` ends with, and the ``PROBE`` under it that answers once up)."""

    COMMAND, PATH, PROBE = "serve", "/v1", "/models"

    def __init__(self, tmp: Path, *args: str) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}{self.PATH}"
        self.log_path = tmp / f"{self.COMMAND}-{port}.log"
        command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "spiral_arena.cli"]
        keys = ("SPIRAL_ARENA_SERVE_KEY", "SPIRAL_ARENA_ENV_SERVER_KEY")  # tests give tokens as --api-key
        env = {k: v for k, v in os.environ.items() if k not in keys}
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                [*command, self.COMMAND, "--port", str(port), *args], stdout=log, stderr=subprocess.STDOUT, env=env
            )
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"spiral-arena {self.COMMAND} exited early:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}{self.PROBE}", timeout=1).status_code in (200, 401):
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"spiral-arena {self.COMMAND} did not answer within 60 s:\n{self.log()}")
            time.sleep(0.1)

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def random_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server(tmp_path_factory.mktemp("serve"), "--agent", "random")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def expert_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server(tmp_path_factory.mktemp("serve"), "--agent", "expert")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def guarded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server(tmp_path_factory.mktemp("serve"), "--agent", "random", "--api-key", TOKEN)
    yield server
    server.stop()


@pytest.fixture
def fake_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "sk-test-gemini")
    monkeypatch.setenv("MISTRAL_API_KEY", "sk-test-mistral")


def play_both_seats(env_id: str, agent: APIAgent, games: int) -> list[tuple[float, ...]]:
    """``games`` games in each seat against random; asserts every game finished with no invalid move."""
    env = spiral_arena.make(env_id)
    results = []
    for seed in range(games):
        for seat in (0, 1):
            players = [agent, RandomAgent()] if seat == 0 else [RandomAgent(), agent]
            record = play_game(env, players, seed=seed)
            assert record.invalid == {}, f"{env_id} seed {seed}: {record.invalid}"
            assert all(env.terminations.values()) and record.steps >= 2
            results.append(record.returns[seat])
    return results


# ---- full games through the server ----------------------------------------------------------


@pytest.mark.parametrize("env_id", GAMES)
@pytest.mark.parametrize("provider", ["gemini", "mistral"])
def test_presets_play_full_games_against_the_served_random_agent(random_server, fake_keys, provider, env_id):
    agent = make_agent(f"{provider}:some-model@{random_server.url}", timeout=10, max_retries=0)
    assert agent.spec == f"{provider}:some-model@{random_server.url}"
    play_both_seats(env_id, agent, games=3)


@pytest.mark.parametrize("env_id", GAMES)
def test_the_served_expert_plays_when_sent_the_info(expert_server, fake_keys, env_id):
    agent = make_agent(f"gemini:expert@{expert_server.url}", send_info=True, timeout=10, max_retries=0)
    returns = play_both_seats(env_id, agent, games=4)
    if env_id == "TicTacToe-v0":  # the expert plays perfectly, so the view really reached it
        assert min(returns) >= 0.0


def test_the_served_expert_plays_plain_chat_and_explains_text_it_cannot_read(expert_server):
    """Without ``spiral_info`` the server reads the position from the observation (more in
    tests/test_serve_any_client.py); text that is no game's turn gets a 422 saying what to send."""
    env = spiral_arena.make("KuhnPoker-v0")
    env.reset(seed=0)
    observation, *_, info = env.last()
    url = f"{expert_server.url}/chat/completions"
    response = httpx.post(url, json={"messages": [{"role": "user", "content": observation}]})
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] in info["legal_actions"]
    response = httpx.post(url, json={"messages": [{"role": "user", "content": "Your move?"}]})
    assert response.status_code == 422
    assert "spiral_info" in response.json()["error"]["message"]


def test_models_lists_the_served_agent(random_server):
    data = httpx.get(f"{random_server.url}/models").json()
    assert data["object"] == "list" and [m["id"] for m in data["data"]] == ["random"]


def test_streaming_and_plain_replies_agree(random_server):
    offer = "[Offer: 3 Wood -> 2 Gold]"  # longer than one streamed piece
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "spiral_info": {"legal_actions": [offer]}}
    plain = httpx.post(f"{random_server.url}/chat/completions", json=body).json()
    assert plain["object"] == "chat.completion" and plain["model"] == "m"
    assert plain["choices"][0]["message"] == {"role": "assistant", "content": offer}

    with httpx.stream("POST", f"{random_server.url}/chat/completions", json={**body, "stream": True}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert len(chunks) >= 4 and len({chunk["id"] for chunk in chunks}) == 1
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks) == offer


def test_legal_actions_are_read_back_from_plain_observations(random_server):
    env = spiral_arena.make("TicTacToe-v0")
    env.reset(seed=1)
    env.step("[4]")
    observation, _, _, _, info = env.last()
    response = httpx.post(
        f"{random_server.url}/chat/completions", json={"messages": [{"role": "user", "content": observation}]}
    )
    assert response.json()["choices"][0]["message"]["content"] in info["legal_actions"]


def test_a_seeded_request_gets_the_same_move_whatever_came_before(random_server):
    """Issue 27: ``serve --agent random`` drew from one server-side generator, so a move depended on every
    request before it. A request with OpenAI's ``seed`` is answered by a copy of the agent reset with it."""
    observation = drive_observation()

    def move(**extra: object) -> str:
        body = {"messages": [{"role": "user", "content": observation}], **extra}
        return httpx.post(f"{random_server.url}/chat/completions", json=body).json()["choices"][0]["message"]["content"]

    first = [move(seed=seed) for seed in range(12)]
    for _ in range(5):
        move()  # unseeded requests move the shared generator
    assert [move(seed=seed) for seed in reversed(range(12))] == first[::-1]
    assert len(set(first)) > 2  # the seed does choose


def drive_observation() -> str:
    env = spiral_arena.make("TicTacToe-v0")
    env.reset(seed=0)
    return env.last()[0]


def test_a_leaderboard_through_serve_plays_the_same_games_at_any_concurrency(random_server, tmp_path, monkeypatch):
    """The client sends a seed per decision (from the game's seed and the turn), so 8 games in flight store
    what one at a time stores."""
    from conftest import stored_rows

    from spiral_arena.cli import main as cli_main

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    games = {}
    for concurrency in (1, 8):
        db = tmp_path / f"lb-{concurrency}.sqlite"
        args = ["leaderboard", "run", "--agents", f"expert,served=openai:any@{random_server.url}", "--games"]
        args += ["TicTacToe-v0,KuhnPoker-v0", "--games-per-pair", "8", "--concurrency", str(concurrency)]
        assert cli_main([*args, "--db", str(db), "--no-progress"]) == 0
        rows = stored_rows(db)
        games[concurrency] = {(r["env_id"], r["player0"], r["seed"]): (r["transcript"], r["reward0"]) for r in rows}
    assert len(games[1]) == 16 and games[1] == games[8]


@pytest.mark.parametrize(
    ("body", "status", "problem"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b"[]", 400, "must be a JSON object"),
        (b'{"messages": []}', 400, "'messages' must be a non-empty list"),
        (b'{"messages": [{"role": "robot", "content": "x"}]}', 400, "role is one of"),
        (b'{"messages": [{"role": "system", "content": "x"}]}', 400, "no user message"),
        (b'{"messages": [{"role": "user", "content": 5}]}', 400, "content must be a string"),
        (b'{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}', 400, "'stream' must be"),
        (b'{"messages": [{"role": "user", "content": "x"}], "n": 2}', 400, "only n=1"),
        (b'{"messages": [{"role": "user", "content": "x"}], "spiral_info": [1]}', 400, "'spiral_info' must be"),
        (b'{"messages": [{"role": "user", "content": "x"}], "seed": "7"}', 400, "'seed' must be a whole number"),
        (b'{"messages": [{"role": "user", "content": "x"}], "seed": -1}', 400, "'seed' must be a whole number"),
        (
            b'{"messages": [{"role": "user", "content": "x"}], "seed": ' + b"9" * 5000 + b"}",
            400,
            "'seed' is a number of 5000 digits, too large",
        ),
        (b'{"messages": [{"role": "user", "content": "hello"}]}', 422, "Legal actions: [a], [b]."),
    ],
)
def test_malformed_requests_get_clear_json_errors(random_server, body, status, problem):
    response = httpx.post(
        f"{random_server.url}/chat/completions", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == status
    assert problem in response.json()["error"]["message"]


# ---- the bearer token -----------------------------------------------------------------------


def test_a_token_guarded_server_refuses_requests_without_it(guarded_server):
    chat = {"messages": [{"role": "user", "content": "Your turn. Legal actions: [a]."}]}
    # "Bearer" is the scheme with an empty token ("Bearer " with its trailing space is no valid header value)
    near_misses = ("Bearer wrong", TOKEN, "Bearer", f"Bearer {TOKEN[:-1]}", f"Bearer {TOKEN[:3]}")
    near_misses += (f"Bearer {TOKEN}x", f"Bearer {TOKEN} x", f"Bearer {TOKEN.lower()}", f"Basic {TOKEN}")
    for headers in ({}, *({"Authorization": value} for value in near_misses)):
        for response in (
            httpx.get(f"{guarded_server.url}/models", headers=headers),
            httpx.post(f"{guarded_server.url}/chat/completions", json=chat, headers=headers),
        ):
            assert response.status_code == 401, headers
            assert response.json()["error"]["type"] == "authentication_error"
    good = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(f"{guarded_server.url}/models", headers=good).status_code == 200
    reply = httpx.post(f"{guarded_server.url}/chat/completions", json=chat, headers=good)
    assert reply.json()["choices"][0]["message"]["content"] == "[a]"
    assert TOKEN not in guarded_server.log()


def test_a_preset_with_the_right_key_plays_and_a_wrong_key_fails_at_once(guarded_server, monkeypatch):
    monkeypatch.setenv("MISTRAL_API_KEY", TOKEN)
    play_both_seats("KuhnPoker-v0", make_agent(f"mistral:m@{guarded_server.url}", max_retries=0), games=1)
    client = ChatClient("m", guarded_server.url, api_key="sk-test-wrong", max_retries=3, backoff=0.01)
    with pytest.raises(APIError, match="HTTP 401: missing or wrong bearer token") as caught:
        client.chat([{"role": "user", "content": "Your turn. Legal actions: [a]."}])
    assert caught.value.attempts == 1 and caught.value.status == 401


# ---- reading legal actions back from text ---------------------------------------------------


@pytest.mark.parametrize("env_id", spiral_arena.list_envs())
@pytest.mark.parametrize("obs_format", ["full", "first_last"])
def test_recover_info_matches_the_envs_info_at_every_turn(env_id, obs_format):
    from spiral_arena.serve import recover_info

    env = spiral_arena.make(env_id, obs_format=obs_format)
    agents = [RandomAgent(seed=0), RandomAgent(seed=1)]
    env.reset(seed=7)
    checked = 0
    for name in env.agent_iter():
        observation, _, term, trunc, info = env.last()
        if term or trunc:
            env.step(None)
            continue
        expected = {"legal_actions": info["legal_actions"]} if info.get("legal_actions") else {}
        assert recover_info(observation) == expected
        checked += 1
        env.step(agents[env.possible_agents.index(name)].act(observation, info))
    assert checked >= 1


# ---- hostile or clumsy clients ----------------------------------------------------------------

PLAY = {"messages": [{"role": "user", "content": "Your turn. Legal actions: [a], [b]."}]}


def post(server: Server, content: bytes, **headers: str) -> httpx.Response:
    return httpx.post(f"{server.url}/chat/completions", content=content, headers=headers)


def test_web_pages_cannot_use_the_server(random_server):
    """A cross-site form or fetch (text/plain, a foreign Origin, a page on another port of this machine)
    and DNS rebinding (a foreign Host) are refused; the server's own clients (JSON, loopback Host, no
    Origin or its own) are answered."""
    body = json.dumps(PLAY).encode()
    assert post(random_server, body, **{"Content-Type": "application/json"}).status_code == 200
    refused = post(random_server, body, **{"Content-Type": "text/plain"})
    assert refused.status_code == 415 and "application/json" in refused.json()["error"]["message"]
    cross_site = post(random_server, body, **{"Content-Type": "application/json", "Origin": "https://evil.example"})
    assert cross_site.status_code == 403 and "cross-site" in cross_site.json()["error"]["message"]
    rebound = post(random_server, body, **{"Content-Type": "application/json", "Host": "evil.example:8000"})
    assert rebound.status_code == 403 and "--allow-host evil.example" in rebound.json()["error"]["message"]
    port = int(random_server.url.split(":")[2].split("/")[0])
    other_port = {"Content-Type": "application/json", "Origin": f"http://localhost:{port % 65535 + 1}"}
    assert post(random_server, body, **other_port).status_code == 403  # issue 41: the port was not checked
    same_site = post(random_server, body, **{"Content-Type": "application/json", "Origin": f"http://localhost:{port}"})
    assert same_site.status_code == 200


def test_bodies_that_break_parsers_are_400s_or_413s(random_server):
    json_headers = {"Content-Type": "application/json"}
    too_big = json.dumps({**PLAY, "pad": "x" * (1 << 20)}).encode()
    assert post(random_server, too_big, **json_headers).status_code == 413
    deep = b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    answer = post(random_server, deep, **json_headers)
    assert answer.status_code == 400 and "nested too deeply" in answer.json()["error"]["message"]
    surrogate = b'{"model": "\\ud800", "messages": [{"role": "user", "content": "Legal actions: [a]."}]}'
    answer = post(random_server, surrogate, **json_headers)
    assert answer.status_code == 400 and "lone surrogate" in answer.json()["error"]["message"]
    assert post(random_server, json.dumps(PLAY).encode(), **json_headers).status_code == 200  # still serving
    assert "Traceback" not in random_server.log()


def test_an_allowed_host_is_answered(tmp_path):
    server = Server(tmp_path, "--agent", "random", "--allow-host", "arena.lan")
    try:
        headers = {"Content-Type": "application/json", "Host": "arena.lan:8000", "Origin": "http://arena.lan:8000"}
        assert post(server, json.dumps(PLAY).encode(), **headers).status_code == 200
        assert post(server, json.dumps(PLAY).encode(), **{**headers, "Host": "other.lan"}).status_code == 403
    finally:
        server.stop()


class AppServer:
    """An app of ``create_app`` served by uvicorn in a thread, on a free loopback port."""

    def __init__(self, app: object) -> None:
        import uvicorn

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}/v1"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> AppServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.socket.close()


def answered(server: AppServer, host: str) -> httpx.Response:
    return post(server, json.dumps(PLAY).encode(), **{"Content-Type": "application/json", "Host": host})


def test_a_server_bound_to_one_address_answers_only_that_name_and_the_allowed_ones():
    """Before the fix a server bound to a LAN address answered any Host unless --allow-host was given,
    so a web page could reach it by DNS rebinding under a name of its own."""
    allowed = host_names("192.0.2.10", ("arena.lan",))
    assert allowed == {"192.0.2.10", "arena.lan"} and host_names("192.0.2.10") == {"192.0.2.10"}
    with AppServer(create_app("random", allowed_hosts=host_names("192.0.2.10"))) as server:
        assert answered(server, "192.0.2.10:8000").status_code == 200
        foreign = answered(server, "rebound.example:8000")
        assert foreign.status_code == 403 and foreign.json()["error"]["message"] == (
            "Host 'rebound.example' is not served here; start the server with --allow-host rebound.example to allow it"
        )
        assert answered(server, "127.0.0.1").status_code == 403  # not bound to loopback
    with AppServer(create_app("random", allowed_hosts=host_names("fe80::1", ("arena.lan",)))) as server:
        assert (
            answered(server, "[fe80::1]:8000").status_code == 200 and answered(server, "arena.lan").status_code == 200
        )
        assert answered(server, "other.lan").status_code == 403


def test_a_wildcard_server_answers_any_host_unless_told_which_and_says_so():
    assert host_names("0.0.0.0") is None and host_names("::") is None
    with AppServer(create_app("random", allowed_hosts=host_names("0.0.0.0"))) as server:
        assert answered(server, "anything.example").status_code == 200
    with AppServer(create_app("random", allowed_hosts=host_names("::", ("arena.lan",)))) as server:
        assert answered(server, "arena.lan:8000").status_code == 200 and answered(server, "[::1]").status_code == 403
    warning = (
        "warning: serving on 0.0.0.0 answers requests under any Host name, so a web page may reach it through DNS "
        "rebinding; restrict it with --allow-host NAME for each name clients use"
    )
    assert startup_messages("0.0.0.0", 8000, "random", "token", None) == [
        warning,
        "serving random at http://0.0.0.0:8000/v1",
    ]
    for host, allowed in (("0.0.0.0", ("arena.lan",)), ("192.0.2.10", ()), ("127.0.0.1", ())):
        messages = startup_messages(host, 8000, "random", "token", host_names(host, allowed))
        assert messages == [f"serving random at http://{host}:8000/v1"]


def test_a_served_api_agent_keeps_its_upstream_to_itself(tmp_path):
    with socket.socket() as sock:  # a loopback port where nothing listens
        sock.bind(("127.0.0.1", 0))
        closed_port_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    server = Server(tmp_path, "--agent", f"openai:m@{closed_port_url}#max_retries=0")
    try:
        assert httpx.get(f"{server.url}/models").json()["data"][0]["id"] == "openai:m"
        answer = post(server, json.dumps(PLAY).encode(), **{"Content-Type": "application/json"})
        message = answer.json()["error"]["message"]
        assert answer.status_code == 502 and message == "the served agent's upstream failed"
        assert closed_port_url.split("//")[1].split("/")[0] not in answer.text
    finally:
        server.stop()


def test_injected_latency_delays_each_answer_and_concurrent_requests_wait_together(tmp_path):
    """``--latency-ms`` (a benchmarking aid) holds every answer that long; requests in flight overlap."""
    from concurrent.futures import ThreadPoolExecutor

    server = Server(tmp_path, "--agent", "random", "--latency-ms", "400")
    try:
        body = json.dumps(PLAY).encode()

        def timed() -> tuple[int, float]:
            start = time.perf_counter()
            status = post(server, body, **{"Content-Type": "application/json"}).status_code
            return status, time.perf_counter() - start

        with ThreadPoolExecutor(4) as pool:
            start = time.perf_counter()
            answers = list(pool.map(lambda _: timed(), range(4)))
            total = time.perf_counter() - start
        assert all(status == 200 and seconds >= 0.4 for status, seconds in answers)
        assert total < 4 * 0.4  # together, not one after another
    finally:
        server.stop()


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_a_bad_latency_is_refused_before_serving(value, capsys):
    from spiral_arena.cli import main as cli_main

    assert cli_main(["serve", "--agent", "random", f"--latency-ms={value}"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"spiral-arena serve: error: --latency-ms: must be a number of milliseconds >= 0, got {float(value)}"
    )
