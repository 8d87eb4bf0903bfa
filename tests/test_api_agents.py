"""API agents against a real HTTP server on 127.0.0.1: retries and their bounds, the one clear
APIError, games interrupted by it, bounded concurrency, key handling, and the spec grammar."""

from __future__ import annotations

import json
import logging
import re
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import spiral_arena
from leaderboard.entrants import parse_entrant
from spiral_arena.agents import (
    SPEC_FORMS,
    AgentSpec,
    APIAgent,
    APIError,
    RandomAgent,
    describe,
    make_agent,
    parse_spec,
    redacted,
)
from spiral_arena.llm import PROVIDERS, ChatClient
from spiral_arena.models.prompting import SYSTEM_PROMPT, chat_messages, single_turn_prompt
from spiral_arena.play import play_game

pytest.importorskip("httpx", reason="needs the api extra")

SECRET = "sk-test-SECRET123"
KEY_ENVS = [p.key_env for p in PROVIDERS.values()]
MESSAGES = [{"role": "user", "content": "Your turn. Legal actions: [check], [bet]."}]


@dataclass
class Seen:
    """One request as the server received it."""

    at: float
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def observation(self) -> str:
        return self.body["messages"][-1]["content"]


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to hold the request before answering


Behaviour = Callable[[Seen], Reply]


def completion(text: str) -> bytes:
    message = {"role": "assistant", "content": text}
    return json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}).encode()


def ok(text: str, delay: float = 0.0) -> Behaviour:
    return lambda seen: Reply(body=completion(text), delay=delay)


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Behaviour:
    body = json.dumps({"error": {"message": message}}).encode()
    return lambda seen: Reply(status, body, headers or {})


def raw(status: int, body: bytes) -> Behaviour:
    return lambda seen: Reply(status, body)


def stall(seconds: float) -> Behaviour:
    return lambda seen: Reply(body=completion("too late"), delay=seconds)


def legal_move(seen: Seen) -> Reply:
    """Play the first legal action listed at the end of the observation (a well-behaved model)."""
    first = re.findall(r"\[[^\]]*\]", seen.observation.rsplit("Legal actions:", 1)[1])[0]
    return Reply(body=completion(f"I pick the first. \\boxed{{{first}}}"))


def echo(delay: float) -> Behaviour:
    return lambda seen: Reply(body=completion(f"echo {seen.observation}"), delay=delay)


class FaultServer:
    """A real HTTP server that answers with a script of behaviours (the last one repeats) and
    records every request, the time it arrived, and how many were in flight at once."""

    def __init__(self, *script: Behaviour) -> None:
        self.script = list(script)
        self.seen: list[Seen] = []
        self.active = self.max_active = 0
        self.lock = threading.Lock()
        self.release = threading.Event()  # ends stalls at teardown
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    def _next(self, seen: Seen) -> Reply:
        with self.lock:
            self.seen.append(seen)
            behaviour = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return behaviour(seen)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.active += 1
                    server.max_active = max(server.max_active, server.active)
                try:
                    reply = server._next(Seen(time.monotonic(), dict(self.headers), body))
                    if reply.delay:
                        server.release.wait(reply.delay)
                    self.send_response(reply.status)
                    for name, value in {"Content-Type": "application/json", **reply.headers}.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)
                finally:
                    with server.lock:
                        server.active -= 1

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def __enter__(self) -> FaultServer:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def gaps(self) -> list[float]:
        return [b.at - a.at for a, b in zip(self.seen, self.seen[1:], strict=False)]


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*KEY_ENVS, "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def fast_client(url: str, **kwargs: Any) -> ChatClient:
    options = {"timeout": 2.0, "max_retries": 2, "backoff": 0.01, "max_backoff": 0.05, **kwargs}
    return ChatClient("test-model", url, **options)


@pytest.fixture
def closed_port_url() -> Iterator[str]:
    """A loopback URL where nothing listens (the port was just freed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    yield f"http://127.0.0.1:{port}/v1"


# ---- retries, backoff and the one clear error -----------------------------------------------


def test_retry_after_is_waited_for_then_the_reply_returned():
    with FaultServer(error(429, "slow down", {"Retry-After": "1"}), ok("\\boxed{[bet]}")) as server:
        text = fast_client(server.url, max_backoff=5.0).chat(MESSAGES)
    assert text == "\\boxed{[bet]}"
    assert len(server.seen) == 2
    assert 1.0 <= server.gaps()[0] < 1.6  # the server's wait, not the 0.01 s backoff


def test_retry_after_is_capped_by_max_backoff():
    with FaultServer(error(503, "maintenance", {"Retry-After": "120"}), ok("fine")) as server:
        assert fast_client(server.url, max_backoff=0.2).chat(MESSAGES) == "fine"
    assert 0.2 <= server.gaps()[0] < 1.0


def test_server_errors_are_retried_with_growing_backoff_then_raise_once():
    with FaultServer(error(500, "internal boom")) as server:
        client = fast_client(server.url, max_retries=3, backoff=0.04, max_backoff=0.1)
        with pytest.raises(APIError) as caught:
            client.chat(MESSAGES)
    assert len(server.seen) == 4 and caught.value.attempts == 4
    assert caught.value.status == 500
    message = str(caught.value)
    assert "HTTP 500" in message and "internal boom" in message and "gave up after 4 attempts" in message
    assert "test-model" in message and server.url in message
    # Waits are drawn from [c/2, c] with c = min(max_backoff, backoff * 2**n): 0.04, 0.08, 0.1.
    for gap, ceiling in zip(server.gaps(), (0.04, 0.08, 0.1), strict=True):
        assert ceiling / 2 <= gap < ceiling + 0.5


def test_malformed_replies_are_retried_then_raise():
    with FaultServer(raw(200, b"{not json"), raw(200, b'{"id": "x"}')) as server:
        with pytest.raises(APIError, match="malformed reply") as caught:
            fast_client(server.url, max_retries=2).chat(MESSAGES)
    assert len(server.seen) == 3 and caught.value.attempts == 3


def test_each_decision_of_a_seeded_game_sends_its_own_seed(monkeypatch):
    """Issue 27: the client sends OpenAI's ``seed``, from the game's seed and the turn only, so a seeded
    server answers a game the same at any concurrency; not to a preset whose API names it otherwise."""
    from spiral_arena.inflight import own_copy
    from spiral_arena.llm import request_seed

    monkeypatch.setenv("MISTRAL_API_KEY", "sk-test-mistral")
    with FaultServer(ok("fine")) as server:
        agent = make_agent(f"openai:m@{server.url}")
        agent.act("unseeded", {})
        game, other = own_copy(agent, 41), own_copy(agent, 42)
        for _ in range(3):
            game.act("x", {})
            other.act("x", {})
        again = own_copy(agent, 41)
        again.act("x", {})
        fixed = own_copy(make_agent(f"openai:m@{server.url}", extra_body={"seed": 5}), 41)
        fixed.act("x", {})
        seeds = [seen.body.get("seed") for seen in server.seen]
    assert seeds[0] is None  # an agent no game was started with sends none
    assert seeds[1:7:2] == [request_seed(41, turn) for turn in range(3)]
    assert seeds[2:7:2] == [request_seed(42, turn) for turn in range(3)]
    assert seeds[7] == seeds[1] and seeds[8] == 5 and len(set(seeds[1:7])) == 6
    preset = own_copy(make_agent("mistral:m"), 41)  # Mistral's own API calls it random_seed: nothing sent
    assert preset.seeded is False and make_agent("mistral:m@https://models.invalid/v1", api_key="sk-x").seeded


def test_content_null_is_an_endpoint_error_not_an_empty_answer():
    """Issue 27: ``content: null`` was read as "", so an eval scored it no-answer and exited 0."""
    null = json.dumps({"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "stop"}]})
    with FaultServer(raw(200, null.encode())) as server:
        with pytest.raises(APIError, match=r"the reply has no content \(content: null\).*gave up after 3") as caught:
            fast_client(server.url, max_retries=2).chat(MESSAGES)
    assert len(server.seen) == 3 and caught.value.attempts == 3
    cut = json.dumps({"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "length"}]})
    with FaultServer(raw(200, cut.encode())) as server:  # a generation cut by its token limit: empty, not an error
        assert fast_client(server.url).chat(MESSAGES) == ""


def test_a_stalled_server_times_out_and_is_retried_within_bounds():
    with FaultServer(stall(3.0)) as server:
        start = time.monotonic()
        with pytest.raises(APIError, match=r"no reply within 0\.2s") as caught:
            fast_client(server.url, timeout=0.2, max_retries=1).chat(MESSAGES)
        elapsed = time.monotonic() - start
    assert len(server.seen) == 2 and caught.value.status is None
    assert 0.4 <= elapsed < 1.5


def test_connection_errors_are_retried_then_raise(closed_port_url):
    with pytest.raises(APIError, match="request failed") as caught:
        fast_client(closed_port_url, max_retries=2).chat(MESSAGES)
    assert caught.value.attempts == 3 and caught.value.status is None


def test_a_client_error_raises_at_once_with_the_servers_message_truncated():
    with FaultServer(error(400, "model 'test-model' does not exist. " + "details " * 200)) as server:
        with pytest.raises(APIError) as caught:
            fast_client(server.url, max_retries=4).chat(MESSAGES)
    assert len(server.seen) == 1 and caught.value.attempts == 1 and caught.value.status == 400
    assert "does not exist" in str(caught.value)
    assert len(str(caught.value)) < 500


def test_mixed_failures_then_success():
    # the timeout leaves a loaded machine room to answer the last request; the stall is well past it
    with FaultServer(error(502, "bad gateway"), raw(200, b"oops"), stall(3.0), ok("done")) as server:
        assert fast_client(server.url, timeout=1.0, max_retries=3).chat(MESSAGES) == "done"
    assert len(server.seen) == 4


def retry_lines(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Every retry warning logged or printed so far."""
    lines = [record.getMessage() for record in caplog.records] + capsys.readouterr().err.splitlines()
    return [line for line in lines if "retry" in line]


def test_closing_the_client_ends_its_requests_without_a_retry(caplog, capsys):
    """Issue 41, the mechanism a stopping run uses: a request out when its client is closed fails at once,
    quietly, and is not sent again (it used to log "ReadError ...; retry 1 of 4" and try again)."""
    with FaultServer(stall(30.0)) as server:
        client = fast_client(server.url, timeout=30.0, max_retries=4, backoff=5.0, max_backoff=5.0)
        failed: list[BaseException] = []

        def ask() -> None:
            try:
                client.chat(MESSAGES)
            except BaseException as error:
                failed.append(error)

        asking = threading.Thread(target=ask)
        with caplog.at_level(logging.WARNING, logger="spiral_arena.llm"):
            asking.start()
            while not server.seen:
                time.sleep(0.01)
            client.close()
            server.release.set()  # the reply comes, to a closed connection
            asking.join(timeout=3.0)
        assert not asking.is_alive(), "the request outlived the close of its client"
        assert len(server.seen) == 1
    assert len(failed) == 1 and isinstance(failed[0], APIError), failed
    assert "the client was closed" in str(failed[0])
    assert retry_lines(caplog, capsys) == []


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Python's own SIGINT handler (KeyboardInterrupt) for one test: Python installs it only where SIGINT was not
    ignored at start, and a suite started in the background (``cmd &`` in a script) inherits SIGINT ignored."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_ctrl_c_of_a_leaderboard_run_with_api_games_in_flight_logs_no_retry(
    tmp_path, caplog, capsys, no_keys, python_sigint
):
    """Issue 41: Ctrl-C of a run with 8 API requests out printed 8 "Bad file descriptor; retry 1 of 4" lines
    after "stopped.". Here a real SIGINT reaches the run while every request hangs on the server; the run
    closes its clients as on any Ctrl-C, the replies then come to closed connections, and the request
    threads end at once, without a word."""
    from leaderboard.runner import run

    before = set(threading.enumerate())
    with FaultServer(stall(30.0)) as server:
        entrants = [parse_entrant(f"api=openai:m@{server.url}"), parse_entrant("random")]
        requests: list[threading.Thread] = []  # the request threads out at the Ctrl-C

        def ctrl_c_once_requests_are_out() -> None:
            while server.active < 4:
                time.sleep(0.01)
            requests.extend(t for t in set(threading.enumerate()) - before if t.name.startswith("spiral-arena-api"))
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # a terminal's Ctrl-C

        threading.Thread(target=ctrl_c_once_requests_are_out, daemon=True).start()
        with caplog.at_level(logging.WARNING), pytest.raises(KeyboardInterrupt):
            run(str(tmp_path / "lb.sqlite"), entrants, ["KuhnPoker-v0"], 8, concurrency=8, progress=False)
        server.release.set()  # the replies come, to closed connections
        for thread in requests:
            thread.join(timeout=3.0)
        assert requests and not any(t.is_alive() for t in requests)
    assert retry_lines(caplog, capsys) == []


def test_a_game_interrupted_by_an_api_failure_raises_out_of_play_game(no_keys):
    """Two good answers, then the endpoint breaks: the game must end in an error, not a result."""
    with FaultServer(legal_move, legal_move, error(503, "overloaded")) as server:
        agent = APIAgent(provider="gemini", model="m", base_url=server.url, max_retries=1, backoff=0.01)
        env = spiral_arena.make("TicTacToe-v0")
        with pytest.raises(APIError, match="HTTP 503") as caught:
            play_game(env, [agent, RandomAgent()], seed=3)
    assert caught.value.attempts == 2 and len(server.seen) == 4
    # The first two answers were played (each request shows a board with more marks) ...
    assert server.seen[0].observation != server.seen[1].observation != server.seen[2].observation
    # ... and the game was left unfinished: nothing to score.
    assert not any(env.terminations.values()) and env.returns == (0.0, 0.0)


# ---- what is sent ---------------------------------------------------------------------------


def test_requests_carry_the_prompt_settings_and_optionally_the_info(no_keys):
    env = spiral_arena.make("KuhnPoker-v0")
    env.reset(seed=5)
    observation, _, _, _, info = env.last()
    with FaultServer(legal_move) as server:
        plain = APIAgent("mistral:m@" + server.url)
        assert plain.act(observation, info).endswith("\\boxed{[check]}")
        tuned = APIAgent(
            provider="mistral",
            model="m",
            base_url=server.url,
            temperature=0.3,
            top_p=0.9,
            max_tokens=64,
            system_prompt="Be brief.",
            send_info=True,
            extra_body={"top_k": 20},
        )
        tuned.act(observation, info)
    first, second = (seen.body for seen in server.seen)
    assert first == {"model": "m", "messages": chat_messages(observation)}
    assert first["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert second["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": observation}]
    assert (second["temperature"], second["top_p"], second["max_tokens"], second["top_k"]) == (0.3, 0.9, 64, 20)
    assert second["spiral_info"] == json.loads(json.dumps(info))
    assert "Authorization" not in server.seen[0].headers  # loopback, no key set: none sent


def test_prompt_wording_is_shared_and_complete():
    messages = chat_messages("OBS")
    assert messages[-1] == {"role": "user", "content": "OBS"}
    assert "zero-sum" in SYSTEM_PROMPT and "\\boxed{}" in SYSTEM_PROMPT
    assert chat_messages("OBS", system_prompt="") == [{"role": "user", "content": "OBS"}]
    single = single_turn_prompt("OBS")
    assert single.index("zero-sum") < single.index("OBS") < single.index("\\boxed{}")


def test_act_batch_runs_concurrently_up_to_the_bound_and_keeps_order(no_keys):
    observations = [f"obs {i}" for i in range(6)]
    with FaultServer(echo(0.25)) as server:
        agent = APIAgent(provider="openai", model="m", base_url=server.url, concurrency=3)
        start = time.monotonic()
        answers = agent.act_batch(observations, [{}] * 6)
        elapsed = time.monotonic() - start
    assert answers == [f"echo {o}" for o in observations]
    assert server.max_active == 3
    assert elapsed < 6 * 0.25  # two waves, not six turns


def test_act_batch_with_concurrency_one_is_sequential(no_keys):
    with FaultServer(echo(0.05)) as server:
        agent = APIAgent(provider="openai", model="m", base_url=server.url, concurrency=1)
        assert agent.act_batch(["a", "b", "c"], [{}, {}, {}]) == ["echo a", "echo b", "echo c"]
    assert server.max_active == 1


def test_act_batch_raises_the_api_error(no_keys):
    with FaultServer(ok("fine"), error(401, "bad key")) as server:
        agent = APIAgent(provider="openai", model="m", base_url=server.url, concurrency=2, max_retries=0)
        with pytest.raises(APIError, match="HTTP 401: bad key"):
            agent.act_batch(["a", "b", "c"], [{}, {}, {}])


# ---- keys -----------------------------------------------------------------------------------


def test_the_key_never_appears_in_logs_errors_or_reprs(monkeypatch, caplog, capsys, closed_port_url):
    """The key is sent (the server sees it) but no text we produce contains it, on every path."""
    caplog.set_level(logging.DEBUG)  # our logger, httpx and httpcore at their most verbose
    monkeypatch.setenv("GEMINI_API_KEY", SECRET)

    def leaky(seen: Seen) -> Reply:  # a server that quotes the credentials it got
        quoted = f"Incorrect API key provided: {seen.headers['Authorization']} (key {SECRET})"
        return Reply(401, json.dumps({"error": {"message": quoted}}).encode())

    texts: list[str] = []
    with FaultServer(ok("hello"), error(500, f"upstream rejected {SECRET}"), legal_move, leaky, stall(2.0)) as server:
        agent = make_agent(f"gemini:m@{server.url}", timeout=0.3, max_retries=1, backoff=0.01)
        texts += [repr(agent), repr(agent.client), describe(agent), agent.spec]
        assert agent.act("hi", {}) == "hello"
        assert agent.act("Your turn. Legal actions: [4].", {}) == "I pick the first. \\boxed{[4]}"  # after a 500
        for _ in range(2):  # the quoting 401, then a stall past the timeout
            with pytest.raises(APIError) as caught:
                agent.act("hi", {})
            texts += [str(caught.value), repr(caught.value), "".join(traceback.format_exception(caught.value))]
    assert {seen.headers.get("Authorization") for seen in server.seen} == {f"Bearer {SECRET}"}
    unreachable = APIAgent(provider="gemini", model="m", base_url=closed_port_url, max_retries=0)
    with pytest.raises(APIError) as caught:
        unreachable.act("hi", {})
    texts += [str(caught.value), "".join(traceback.format_exception(caught.value))]
    with pytest.raises(ValueError) as bad_key:
        ChatClient("m", closed_port_url, api_key=SECRET + " extra")
    texts.append(str(bad_key.value))
    out, err = capsys.readouterr()
    texts += [caplog.text, out, err]
    assert "HTTP 401: Incorrect API key provided: Bearer ***" in "".join(texts)  # the error still reads well
    assert any("httpx" in record.name or "httpcore" in record.name for record in caplog.records)
    assert not [text for text in texts if "SECRET123" in text]


def test_a_key_read_with_a_trailing_newline_is_cleaned(no_keys):
    with FaultServer(ok("fine")) as server:
        assert fast_client(server.url, api_key=SECRET + "\n").chat(MESSAGES) == "fine"
    assert server.seen[0].headers["Authorization"] == f"Bearer {SECRET}"


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_a_missing_key_names_its_variable(provider, no_keys):
    preset = PROVIDERS[provider]
    for spec in (f"{provider}:some-model", f"{provider}:some-model@https://llm.example.com/v1"):
        with pytest.raises(ValueError, match=preset.key_env):
            make_agent(spec)
    assert make_agent(f"{provider}:some-model@http://localhost:9/v1").spec.endswith("@http://localhost:9/v1")


def test_openai_base_url_is_honoured(monkeypatch, no_keys):
    with FaultServer(ok("from the local server")) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
        agent = make_agent("openai:m")
        assert agent.act("hi", {}) == "from the local server"
    assert agent.spec == f"openai:m@{server.url}"
    assert server.seen[0].headers["Authorization"] == "Bearer sk-local"


# ---- the spec grammar -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("random", AgentSpec("random")),
        ("expert", AgentSpec("expert")),
        ("hf:runs/kuhn/step-100", AgentSpec("hf", "runs/kuhn/step-100")),
        ("gemini:gemini-2.5-flash-lite", AgentSpec("gemini", "gemini-2.5-flash-lite")),
        (
            "openrouter:meta-llama/llama-3.3-8b-instruct:free",
            AgentSpec("openrouter", "meta-llama/llama-3.3-8b-instruct:free"),
        ),
        (
            "openai:Qwen/Qwen3-4B@http://127.0.0.1:8000/v1",
            AgentSpec("openai", "Qwen/Qwen3-4B", "http://127.0.0.1:8000/v1"),
        ),
        ("mistral:m@https://u:pw@host.example/v1", AgentSpec("mistral", "m", "https://u:pw@host.example/v1")),
        ("openai:claude@20240620", AgentSpec("openai", "claude@20240620")),
    ],
)
def test_parse_spec(spec, parsed):
    assert parse_spec(spec) == parsed
    assert str(parsed) == spec


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("randm", "valid forms: random, expert, human, hf:PATH, vllm:PATH, openai:MODEL, gemini:MODEL"),
        ("anthropic:claude", "unknown agent spec 'anthropic:claude'"),
        ("gemini:", "needs a model id"),
        ("openai:m@127.0.0.1:8000/v1", "needs http:// or https://"),
        ("openai:m@ftp://host/v1", "must be an http:// or https:// URL"),
        ("openai:@http://127.0.0.1:8000/v1", "needs a model id before '@'"),
    ],
)
def test_bad_specs_say_what_is_valid(spec, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        make_agent(spec)


def test_unknown_spec_lists_every_form():
    with pytest.raises(ValueError) as caught:
        parse_spec("nope")
    assert all(form in str(caught.value) for form in SPEC_FORMS)


def test_redacted_specs_are_safe_to_store(no_keys):
    spec = "openai:m@https://user:pw@host.example:8443/v1?token=abc"
    assert redacted(spec) == "openai:m@https://host.example:8443/v1"
    assert redacted("random") == describe("random") == "random"
    assert describe(RandomAgent()) == "random"
    with pytest.raises(ValueError) as caught:
        parse_spec("openai:m@ftp://user:pw@host/v1")
    assert "pw" not in str(caught.value)


def test_make_agent_builds_expert_lazily():
    expert = make_agent("expert", seed=0)
    assert type(expert).__name__ == "ExpertAgent" and describe(expert) == "expert"


@pytest.fixture
def env_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """OPENAI_API_KEY set, and neither a base URL nor trusted hosts in the environment."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret")
    for name in ("SPIRAL_ARENA_TRUST_HOSTS", "OPENAI_BASE_URL", "MY_GATEWAY_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return "sk-env-secret"


def refusal(spec: str) -> str:
    """The error of building ``spec``, which must come before any request: ``.invalid`` names never
    resolve, so a request would end in an APIError after a lookup, not in this ValueError at once."""
    started = time.monotonic()
    with pytest.raises(ValueError) as refused:
        make_agent(spec)
    assert time.monotonic() - started < 1.0
    return str(refused.value)


def test_an_environment_key_only_goes_to_hosts_chosen_for_it(env_key, monkeypatch, capsys):
    """OPENAI_API_KEY must not follow a URL written in a spec to any server, nor travel in clear text
    off this machine: refused before any request, naming the host and the way to allow it."""
    foreign = refusal("openai:m@https://models.invalid/v1")
    assert "refusing to send $OPENAI_API_KEY to models.invalid: it is not openai's host or loopback" in foreign
    assert "SPIRAL_ARENA_TRUST_HOSTS=models.invalid" in foreign and "#key_env=VAR" in foreign
    plain = refusal("openai:m@http://models.invalid:8000/v1")
    assert "refusing to send $OPENAI_API_KEY to models.invalid over plain http" in plain and "clear text" in plain
    assert "https://" in plain and "SPIRAL_ARENA_TRUST_HOSTS=models.invalid" in plain and "#key_env=VAR" in plain
    own_host = refusal("openai:m@http://api.openai.com/v1")  # its own host, but in clear text
    assert "to api.openai.com over plain http" in own_host and "SPIRAL_ARENA_TRUST_HOSTS" not in own_host
    monkeypatch.setenv("SPIRAL_ARENA_TRUST_HOSTS", "other.invalid, Models.Invalid")
    trusted_plain = refusal("openai:m@http://models.invalid/v1")
    assert "over plain http: the key would travel in clear text" in trusted_plain and "#key_env=VAR" in trusted_plain
    assert all(env_key not in text for text in (foreign, plain, own_host, trusted_plain))
    # allowed: loopback in any scheme, the provider's own host and a trusted host over https, a key in code
    assert make_agent("openai:m@https://models.invalid/v1").spec == "openai:m@https://models.invalid/v1"
    for spec in (
        "openai:m@http://127.0.0.1:9/v1",
        "openai:m@http://localhost:9/v1",
        "openai:m@https://api.openai.com/v1",
    ):
        assert make_agent(spec).spec.startswith("openai:m")
    assert make_agent("openai:m@http://models.invalid:8000/v1", api_key="sk-explicit")
    assert capsys.readouterr().err == ""  # nothing here sends a key in clear text off this machine


def test_a_base_url_set_with_its_key_in_the_environment_is_used_and_clear_text_is_warned(env_key, monkeypatch, capsys):
    """OPENAI_BASE_URL + OPENAI_API_KEY (the OpenAI SDK's convention, both the user's choice) stay
    allowed to any host; over plain http off this machine a one-line warning says the key is exposed."""
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gateway.invalid/v1")
    assert make_agent("openai:m").spec == "openai:m@https://gateway.invalid/v1"
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gateway.invalid:8080/v1")
    assert make_agent("openai:m").spec == "openai:m@http://gateway.invalid:8080/v1"
    assert make_agent("openai:m@http://gateway.invalid:8080/v1")  # the same URL written in the spec
    warning = (
        "spiral-arena: warning: $OPENAI_API_KEY is sent to gateway.invalid over plain http: the key travels in "
        "clear text (use https to protect it)\n"
    )
    assert capsys.readouterr().err == warning * 2


def test_a_spec_with_its_own_key_variable_sends_that_key_to_its_url(env_key, monkeypatch, capsys):
    """``#key_env=VAR``: the key in $VAR goes to the spec's URL (the user paired them), the provider's
    own variable does not; the name may be shown and stored, the key never."""
    gateway_key = "sk-gateway-SECRET456"
    monkeypatch.setenv("MY_GATEWAY_API_KEY", gateway_key)
    with FaultServer(ok("fine")) as server:
        agent = make_agent(f"openai:m@{server.url}#key_env=MY_GATEWAY_API_KEY")
        assert agent.act("hi", {}) == "fine"
    assert server.seen[0].headers["Authorization"] == f"Bearer {gateway_key}"
    remote = make_agent("openai:m@https://models.invalid/v1#key_env=MY_GATEWAY_API_KEY")  # any host, no warning
    assert capsys.readouterr().err == ""
    plain = make_agent("openai:m@http://models.invalid:8000/v1#key_env=MY_GATEWAY_API_KEY")
    assert capsys.readouterr().err == (
        "spiral-arena: warning: $MY_GATEWAY_API_KEY is sent to models.invalid over plain http: the key travels in "
        "clear text (use https to protect it)\n"
    )
    texts = [repr(a) for a in (agent, remote, plain)] + [repr(a.client) for a in (agent, remote, plain)]
    texts += [a.spec for a in (agent, remote, plain)]
    assert not [text for text in texts if gateway_key in text or env_key in text]

    monkeypatch.setenv("MY_GATEWAY_API_KEY", "  ")
    assert "names $MY_GATEWAY_API_KEY, which is blank" in refusal(
        "openai:m@https://models.invalid/v1#key_env=MY_GATEWAY_API_KEY"
    )
    monkeypatch.delenv("MY_GATEWAY_API_KEY")
    unset = refusal("openai:m@https://models.invalid/v1#key_env=MY_GATEWAY_API_KEY")  # no fall back to OPENAI_API_KEY
    assert (
        "openai:m: #key_env=MY_GATEWAY_API_KEY names $MY_GATEWAY_API_KEY, which is not set; set MY_GATEWAY_API_KEY"
        in unset
    )


@pytest.mark.parametrize("value", ["sk-live-abc123", "AIzaSyMixedCase", "my_key", "1KEY", ""])
def test_a_key_variable_that_is_no_variable_name_is_refused_without_an_echo(value, env_key):
    """Capitals only, as variables are written: a key pasted there instead of its variable's name must
    not reach an error message, a label or a database."""
    for check in (lambda spec: make_agent(spec), lambda spec: parse_entrant(spec)):
        with pytest.raises(ValueError) as refused:
            check(f"openai:m@https://models.invalid/v1#key_env={value}")
        message = str(refused.value)
        assert "#key_env must name an environment variable: capitals, digits and _" in message
        assert not value or value not in message


@pytest.mark.parametrize("variable", ["AWS_SECRET_ACCESS_KEY", "PATH", "HOME", "MY_GATEWAY_KEY"])
def test_key_env_names_only_variables_named_like_api_keys_or_listed(variable, env_key, endpoint, tmp_path, monkeypatch):
    """Issue 27: ``#key_env=PATH`` (any variable) sent its value to the spec's URL, so a shared reference-pool
    file could name $AWS_SECRET_ACCESS_KEY. Refused before any request, without the value in the message."""
    from spiral_arena.cli import main as cli_main

    value = "aws-SECRET-value-123"
    monkeypatch.setenv(variable, value)
    monkeypatch.delenv("SPIRAL_ARENA_KEY_VARS", raising=False)
    server = endpoint()
    spec = f"openai:m@{server.url}#key_env={variable}"
    for check in (make_agent, parse_entrant):
        with pytest.raises(ValueError) as refused:
            check(spec)
        message = str(refused.value)
        assert f"#key_env={variable}: only a variable named like an API key's (ending in _API_KEY or _TOKEN)" in message
        assert f"run with SPIRAL_ARENA_KEY_VARS={variable}" in message and value not in message
    pool = tmp_path / "pool.toml"
    pool.write_text(f'agents = ["{spec}", "random"]\ngames = ["KuhnPoker-v0"]\ngames_per_pair = 2\nseed = 0\n')
    assert cli_main(["leaderboard", "run", "--reference-pool", str(pool), "--db", str(tmp_path / "lb.sqlite")]) == 2
    assert server.requests == {}
    monkeypatch.setenv("SPIRAL_ARENA_KEY_VARS", f"OTHER, {variable}")  # the user says this one holds a key
    assert make_agent(spec).act("Your turn. Legal actions: [a], [b].", {}) in ("\\boxed{[a]}", "\\boxed{[b]}")
    assert server.requests["m"] == 1


@pytest.mark.parametrize("variable", ["GATEWAY_API_KEY", "HF_TOKEN", "X_API_KEY"])
def test_key_env_takes_api_key_and_token_names(variable, monkeypatch):
    monkeypatch.setenv(variable, "sk-some-key")
    assert (
        make_agent(f"openai:m@https://models.invalid/v1#key_env={variable}").spec
        == "openai:m@https://models.invalid/v1"
    )


def test_a_key_variable_is_checked_before_any_game_and_only_its_name_is_stored(
    env_key, endpoint, tmp_path, monkeypatch, capsys
):
    from leaderboard import store
    from spiral_arena.cli import main as cli_main

    server = endpoint()
    db = tmp_path / "lb.sqlite"
    entry = f"openai:m@{server.url}#key_env=MY_GATEWAY_API_KEY"
    args = ["leaderboard", "run", "--agents", f"{entry},random", "--games", "KuhnPoker-v0", "--games-per-pair", "2"]
    assert cli_main([*args, "--db", str(db), "--no-progress"]) == 2  # the variable is unset: refused at once
    assert capsys.readouterr().err == (
        f"spiral-arena leaderboard: error: '{entry}': #key_env=MY_GATEWAY_API_KEY names $MY_GATEWAY_API_KEY, "
        "which is not set; "
        "set MY_GATEWAY_API_KEY to the API key for this endpoint\n"
    )
    assert not db.exists() and server.requests == {}
    monkeypatch.setenv("MY_GATEWAY_API_KEY", "sk-gateway-SECRET456")
    assert cli_main([*args, "--db", str(db), "--no-progress"]) == 0
    assert server.requests["m"] > 0
    conn = store.connect(db)
    assert f"openai:m@{server.url}#key_env=MY_GATEWAY_API_KEY" in store.load_agents(conn)
    conn.close()
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"SECRET456" not in stored and b"sk-env-secret" not in stored


def test_key_env_is_an_option_of_api_agents_only():
    from spiral_arena.agents import options_problem, split_options

    spec, options = split_options("random#key_env=MY_API_KEY")
    assert "unexpected keyword argument 'key_env'" in options_problem(spec, options)
    spec, options = split_options("hf:some/model#key_env=MY_API_KEY")
    assert "unknown option(s) key_env" in options_problem(spec, options)
    spec, options = split_options("openai:m#keyenv=MY_API_KEY")
    assert "unknown option(s) keyenv; valid: " in options_problem(spec, options) and "key_env" in options_problem(
        spec, options
    )


def test_a_base_url_with_a_query_is_joined_properly_and_its_secrets_never_echo():
    """Azure-style endpoints put the API version in the query: the request must go to
    {path}/chat/completions?{query}, and a secret in that query is scrubbed from error text even when
    the server echoes the URL back."""
    from spiral_arena.llm import APIError, ChatClient

    seen: list[str] = []

    class Echo(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            seen.append(self.path)
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"error": {"message": f"bad request to {self.path}"}}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/v1?api-version=2024-06&sig=s3cr3t-sig"
        with ChatClient("m", url, max_retries=0) as client, pytest.raises(APIError) as error:
            client.chat([{"role": "user", "content": "hi"}])
    finally:
        server.shutdown()
    assert seen == ["/v1/chat/completions?api-version=2024-06&sig=s3cr3t-sig"]
    assert "s3cr3t-sig" not in str(error.value) and "bad request to /v1/chat/completions" in str(error.value)
