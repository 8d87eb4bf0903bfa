"""``spiral-arena serve``: any agent behind an OpenAI-compatible chat endpoint.

``GET /v1/models`` lists one model; ``POST /v1/chat/completions`` answers with the agent's move,
as one JSON completion or, with ``"stream": true``, as server-sent ``chat.completion.chunk`` events
ending with ``data: [DONE]``. The last user message is the observation. Sampling fields of the
request are ignored: the served agent plays with its own settings, except OpenAI's ``seed``: a request
with one is answered by a copy of the agent reset with it (``inflight.own_copy``), so its move depends
on the request alone, not on the requests before it. ``APIAgent`` sends one per decision of a seeded
game (``llm.request_seed``), so a leaderboard through ``serve`` plays the same games at any concurrency.

Where the info comes from. The env's ``info`` may come as an extra request field ``spiral_info``
(``APIAgent(send_info=True)``); when it does, it is used as sent. Other clients (the OpenAI SDK,
TextArena's ``OpenAIAgent``, ``spiral-arena play --p0 openai:M@URL``) send only chat messages, and
then the info is read back from the observation text (``read_info``): every observation, whatever its
format, ends with the acting player's ``[GAME] Your turn.`` message, and each registered game's
``read_position`` (next to its ``turn_message``, the inverse of it) recognises its own turn messages
and rebuilds that player's view from them. So the server finds the game without being told, and
the scripted agents (``random``, ``expert``) play every game id. A reader takes only what the
player's own observation shows (a Kuhn player's own card, a Liar's Dice player's own dice), so the
expert decides exactly as it does from the env's info, hidden information included. The history a
view holds is read from the transcript, and only two games need it: Truth and Deception's
conversation and Twenty Questions' answered questions, which the ``full`` format (their default)
shows, and Twenty Questions' ``recap=true`` too. An observation without it (``first_last`` or
``last``) is answered with a 422 that names the game and what is missing, never with a guess. Where
no game recognises the text, the legal actions are still read from a ``Legal actions: [a], [b].``
line, so ``random`` answers any such prompt. No game needs more than the last user message: no
earlier message of a chat holds what the last one lacks. Messages are read the way the env wrote
them: players' text never holds the blank line that starts a message (``observations.sanitize``), so
no opponent's chat can pass for a game line and void the served agent's turns.

A served checkpoint (``--agent hf:PATH``) reads a game it trained on in the text it trained on: the latest
turn's position is rewritten in its layout where the game can write a position from its view
(``TextGame.view_message``: TicTacToe's ``board``; ``retold``), and it reads only the latest message if it
trained on that. Other text options (Twenty Questions' ``recap``) reach it as the client wrote them.

What is never answered (422, one sentence): a finished game (the observation ends with the env's
``Game over.`` message, or ``spiral_info`` holds an ``outcome``), and a scripted agent's move that the
request's own legal actions do not list (a position and a ``Legal actions`` line that disagree). A
served model's text (an API's, or a local ``hf:``/``vllm:`` model's) is the model's, judged by the env.

Web pages must not be able to use the server (and spend a served API agent's key): a POST must say
``Content-Type: application/json`` (a browser cannot send that cross-site without asking first), an
``Origin`` header must name an allowed host and the port the request went to (a page served from another
port of the same machine is another site), and the ``Host`` header must name the address the server
is bound to (a loopback name on loopback), so DNS rebinding cannot reach it under another name; only a
server bound to a wildcard (0.0.0.0, ::) answers any Host (``host_names``). ``allowed_hosts`` widens
that. Bodies are capped at ``MAX_BODY_BYTES``; malformed JSON, nesting too deep to parse, lone
surrogates and integers too long to read (``NumberTooLong``, which names the field) are 400s, never
500s. Neither the upstream URL of a served API agent nor its upstream's error text is shown to clients.

``latency_s`` (``--latency-ms``) is a benchmarking aid: every accepted chat request waits that long
before it is answered, as a stand-in for a real provider's latency, so that clients which overlap
their requests (``spiral-arena leaderboard run --concurrency``) can be measured on loopback. The waits
of concurrent requests overlap; the checks above come first.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, NoReturn

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from spiral_arena.agents import Agent, APIAgent, APIError, describe, make_agent, split_options
from spiral_arena.agents.model import ModelAgent
from spiral_arena.core.env import SEED_LIMIT
from spiral_arena.core.game import TextGame
from spiral_arena.core.readback import TURN_HEADER, PositionUnreadable, game_over, latest_turn
from spiral_arena.inflight import own_copy
from spiral_arena.llm import is_loopback
from spiral_arena.registry import REGISTRY, GameSpec

_TURN = "Your turn."
_LEGAL_LINE = re.compile(r"Legal actions:([^\n]*)")
_BRACKETED = re.compile(r"\[[^\[\]\n]*\]")
_CHUNK_CHARS = 16  # streamed content is split into pieces of this size
_ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_BODY_BYTES = 1 << 20  # a chat request is an observation: 1 MiB is far more than any game writes
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class RequestError(Exception):
    """A request the server refuses, answered as an OpenAI-style JSON error."""

    def __init__(self, status: int, message: str, param: str | None = None, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.kind = kind

    def response(self) -> JSONResponse:
        error = {"message": self.message, "type": self.kind, "param": self.param, "code": None}
        return JSONResponse({"error": error}, status_code=self.status)


def recover_info(observation: str) -> dict[str, Any]:
    """``{"legal_actions": [...]}`` from the observation's latest turn line, or ``{}`` if it has none."""
    start = observation.rfind(_TURN)
    latest = observation[start:] if start != -1 else observation
    lines = _LEGAL_LINE.findall(latest)
    legal = _BRACKETED.findall(lines[-1]) if lines else []
    return {"legal_actions": legal} if legal else {}


def _readable_games() -> list[type[TextGame]]:
    """Every registered game class that can read its positions back from text, each once."""
    games = {spec.game: None for spec in REGISTRY.values() if hasattr(spec.game, "read_position")}
    return list(games)


def read_info(observation: str) -> dict[str, Any]:
    """The acting player's info as the env gave it, read back from its observation alone: ``game``,
    ``legal_actions``, ``view`` (the game's ``read_position``), ``role`` in games with roles, and on
    free-text turns ``action_format`` and ``action_examples``. ``{}`` when no registered game recognises
    the observation's latest turn message; ``PositionUnreadable`` when one does but the text lacks what
    its view holds (e.g. the history, in an observation format that leaves it out)."""
    turn = latest_turn(observation)
    if turn is None:
        return {}
    for game in _readable_games():
        view = game.read_position(observation)
        if view is None:
            continue
        fixed = turn.action_line.startswith("Legal actions:")
        legal = _BRACKETED.findall(turn.action_line) if fixed else None
        info: dict[str, Any] = {"game": game.name, "legal_actions": legal, "view": view}
        if legal is None:
            examples = getattr(game, "examples_from_view", None)
            info["action_format"] = turn.action_line
            info["action_examples"] = examples(view) if examples is not None else []
        if game.roles:
            info["role"] = view["role"]
        return info
    return {}


def retold(observation: str, info: dict[str, Any], agent: Agent, games: dict[tuple, TextGame]) -> str:
    """``observation`` as a checkpoint agent reads the game its info names: the latest turn's position
    rewritten in the text options the checkpoint trained on (TicTacToe's ``board`` layout), through the
    game's ``view_message``. Unchanged for other agents, for games whose view cannot be rewritten, and
    where the checkpoint reads the game's default text. ``games`` caches one text game per (id, text)."""
    trained, view = getattr(agent, "trained", None), info.get("view")
    env_id = next((s.env_id for s in REGISTRY.values() if s.game.name == info.get("game")), None)
    turn = latest_turn(observation)
    if trained is None or env_id is None or not isinstance(view, dict) or turn is None:
        return observation
    text = {k: v for k, v in trained.reading(GameSpec(env_id)).text.items() if k != "obs_format"}
    if not text:
        return observation
    key = (env_id, *sorted(text.items()))
    if key not in games:
        games[key] = REGISTRY[env_id].game(**text)
    try:
        message = games[key].view_message(view)
    except (KeyError, TypeError, ValueError, IndexError):  # a view sent as spiral_info that is not the game's
        return observation
    written = f"{TURN_HEADER}{turn.action_line}\n{turn.message}"
    start = observation.rfind(written)
    if message is None or start == -1:
        return observation
    return f"{observation[:start]}{TURN_HEADER}{turn.action_line}\n{message}{observation[start + len(written) :]}"


def info_from_text(observation: str) -> tuple[dict[str, Any], str | None]:
    """``read_info``, and where it has no answer the legal actions alone (``recover_info``) with the
    reason the position could not be read, for the error a failing agent gets."""
    try:
        info = read_info(observation)
    except PositionUnreadable as error:
        return recover_info(observation), str(error)
    except (ValueError, LookupError, TypeError):  # text no game wrote (a 5,000-digit "number")
        return recover_info(observation), "the position could not be read: the message holds text no game writes"
    if info:
        return info, None
    return recover_info(observation), "no registered game's turn was recognised in the last user message"


def _text(content: Any, where: str) -> str:
    """A message's content as text: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        if all(isinstance(p.get("text"), str) for p in content):
            return "".join(p["text"] for p in content)
    raise RequestError(400, f"{where}.content must be a string or a list of text parts", where)


@dataclass
class ChatRequest:
    model: str
    observation: str
    info: dict[str, Any]
    stream: bool
    unread: str | None = None  # why the position could not be read from the observation, if it could not
    seed: int | None = None  # OpenAI's seed field: the agent answers from a copy reset with it
    sent_info: bool = False  # the info came as 'spiral_info', not read from the text


def parse_chat_request(body: Any, default_model: str) -> ChatRequest:
    """Check a chat-completions body and pull out what the agent needs; RequestError if malformed."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "'messages' must be a non-empty list of {role, content} objects", "messages")
    observation = None
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise RequestError(400, f"{where} must be an object whose role is one of {', '.join(_ROLES)}", where)
        if message["role"] == "user":
            observation = _text(message.get("content"), where)
    if observation is None:
        raise RequestError(400, "'messages' has no user message; the last user message is the observation", "messages")
    model = body.get("model", default_model)
    if not isinstance(model, str) or not model:
        raise RequestError(400, "'model' must be a non-empty string", "model")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(400, "'stream' must be true or false", "stream")
    if body.get("n", 1) != 1:
        raise RequestError(400, "only n=1 is supported: the agent gives one answer per request", "n")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT):
        raise RequestError(400, "'seed' must be a whole number from 0 to 2**64 - 1", "seed")
    info, unread = body.get("spiral_info"), None
    if info is None:
        if game_over(observation):
            raise RequestError(422, "The game in the last user message is over, so there is no move to make.")
        info, unread = info_from_text(observation)
    elif not isinstance(info, dict):
        raise RequestError(400, "'spiral_info' must be a JSON object (the env's info dict)", "spiral_info")
    elif "outcome" in info:
        raise RequestError(422, "The game is over ('spiral_info' holds its outcome), so there is no move to make.")
    return ChatRequest(model, observation, info, stream, unread, seed, sent_info="spiral_info" in body)


def _completion(completion_id: str, created: int, model: str, text: str) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }


def _events(completion_id: str, created: int, model: str, text: str) -> Iterator[str]:
    """The completion as SSE chunks: the role, the content in pieces, the stop reason, [DONE]."""
    head = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}
    deltas: list[tuple[dict[str, str], str | None]] = [({"role": "assistant", "content": ""}, None)]
    deltas += [({"content": text[i : i + _CHUNK_CHARS]}, None) for i in range(0, len(text), _CHUNK_CHARS)]
    deltas.append(({}, "stop"))
    for delta, finish in deltas:
        chunk = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


def _host_port(value: str) -> tuple[str, str]:
    """The host of a Host header or an Origin URL, lower case, without brackets, and its port as
    written ("" when none is: browsers leave the scheme's default port out of both)."""
    value = value.strip().lower().split("://", 1)[-1].split("/", 1)[0]
    if value.startswith("["):  # [::1]:8000
        host, _, rest = value[1:].partition("]")
        return host, rest.removeprefix(":")
    host, _, port = value.rpartition(":") if value.count(":") == 1 else (value, "", "")
    return host, port


def _hostname(value: str) -> str:
    """The host of a Host header or an Origin URL, lower case, without port or brackets."""
    return _host_port(value)[0]


def agent_label(agent: str | Agent) -> str:
    """The served agent's name, safe to show: its spec without ``#options`` (``expert#seed=3`` ->
    ``expert``), credentials or query."""
    return describe(split_options(agent)[0] if isinstance(agent, str) else agent)


def public_label(agent: str | Agent) -> str:
    """``agent_label`` without an API agent's upstream address (``openai:m@URL`` -> ``openai:m``): what
    clients may see."""
    return agent_label(agent).split("@", 1)[0]


class NumberTooLong(RequestError):
    """Valid JSON holding an integer with more digits than Python reads (``sys.get_int_max_str_digits``,
    4300 by default): no field here takes a number that large, so it is refused by name, not as bad JSON."""

    def __init__(self, where: str, digits: int) -> None:
        super().__init__(
            400,
            f"{where} a number of {digits} digits, too large for any field here "
            "(the largest, a seed, is a whole number from 0 to 2**64 - 1)",
        )


class _LongNumber:
    """Where ``parse_body`` met an integer too long to read: its digit count, until its field is known."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _read_int(text: str) -> int | _LongNumber:
    try:
        return int(text)
    except ValueError:  # Python's guard against quadratic conversion refused it
        return _LongNumber(len(text.lstrip("-")))


def _fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, or NumberTooLong naming the field that holds an integer too long to read, or a 400 for a
    key given twice (parsers disagree on which value wins, so neither is guessed)."""
    seen: set[str] = set()
    for key, value in pairs:
        if isinstance(value, _LongNumber):
            raise NumberTooLong(f"{key[:40]!r} is", value.digits)
        if key in seen:
            raise RequestError(400, f"the key {key[:40]!r} is given twice in one object; give each key once")
        seen.add(key)
    return dict(pairs)


def parse_body(raw: bytes, what: str = "the request body") -> Any:
    """The JSON of a request body (``what`` names it in errors: a WebSocket message, say), or
    RequestError: too large, not UTF-8, not JSON, too deeply nested, a key given twice, text that cannot be
    encoded back (a lone surrogate such as "\ud800"), or (``NumberTooLong``) an integer with too many digits
    to read."""
    if len(raw) > MAX_BODY_BYTES:
        raise RequestError(413, f"{what} is larger than {MAX_BODY_BYTES} bytes")

    def long_number(value: _LongNumber) -> NoReturn:  # one in no object's field: in a list, or the whole body
        raise NumberTooLong(f"{what} holds", value.digits)

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError(400, f"{what} is not valid UTF-8 text") from None
    try:
        body = json.loads(text, parse_int=_read_int, object_pairs_hook=_fields)
        json.dumps(body, ensure_ascii=False, default=long_number).encode("utf-8")
    except RecursionError:
        raise RequestError(400, f"{what} is nested too deeply") from None
    except UnicodeError:
        raise RequestError(400, f"{what} holds text that is not valid Unicode (a lone surrogate)") from None
    except ValueError:
        raise RequestError(400, f"{what} is not valid JSON") from None
    return body


async def read_json(request: Request) -> Any:
    """The JSON body of a POST, or RequestError: not sent as ``application/json`` (a web page cannot
    send that cross-site without asking first), larger than ``MAX_BODY_BYTES`` (counted as it arrives,
    whatever Content-Length said), or not JSON that ``parse_body`` accepts."""
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind != "application/json":
        raise RequestError(415, "send the body as JSON with Content-Type: application/json")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise RequestError(413, f"the request body is larger than {MAX_BODY_BYTES} bytes")
    raw = b""
    async for piece in request.stream():
        raw += piece
        if len(raw) > MAX_BODY_BYTES:
            raise RequestError(413, f"the request body is larger than {MAX_BODY_BYTES} bytes")
    return parse_body(raw)


def refusal(
    headers: Mapping[str, str], allowed_hosts: frozenset[str] | None, api_key: str | None
) -> RequestError | None:
    """Why a request (or a WebSocket handshake) with these headers is refused, or None: a Host that is
    not served here; an Origin that is not an allowed host or names another port than the Host does (a
    page served from any other port of the machine is another site, so it may not drive the server); a
    missing or wrong bearer token (compared in constant time). ``headers`` must look names up
    case-insensitively (Starlette's ``Headers`` do)."""
    host, port = _host_port(headers.get("host", ""))
    if allowed_hosts is not None and host not in allowed_hosts:
        message = f"Host {host!r} is not served here; start the server with --allow-host {host} to allow it"
        return RequestError(403, message, kind="permission_error")
    origin = headers.get("origin")
    if origin is not None:
        origin_host, origin_port = _host_port(origin)
        if origin_host not in (allowed_hosts or {host}) or origin_port != port:
            message = (
                "cross-site requests are refused: the Origin is not this server (an allowed host, on the port "
                "the request was sent to; see --allow-host)"
            )
            return RequestError(403, message, kind="permission_error")
    if api_key is not None:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), api_key.encode()):
            message = "missing or wrong bearer token; send it in the Authorization header"
            return RequestError(401, message, kind="authentication_error")
    return None


def create_app(
    agent: str | Agent,
    api_key: str | None = None,
    model_id: str | None = None,
    allowed_hosts: frozenset[str] | None = LOOPBACK_NAMES,
    latency_s: float = 0.0,
) -> FastAPI:
    """The ASGI app serving ``agent``. With ``api_key``, every request needs that bearer token.
    ``allowed_hosts``: the names the Host header (and an Origin header) may carry; None = any Host,
    and an Origin only when it names the Host it was sent to. An Origin must name the Host's port too.
    ``latency_s``: the injected wait before each chat answer (benchmarks only)."""
    if not 0 <= latency_s < float("inf"):
        raise ValueError(f"latency must be a number of seconds >= 0, got {latency_s!r}")
    player = make_agent(agent)
    served_model = model_id or public_label(agent)
    texts: dict[tuple, TextGame] = {}  # the text games a served checkpoint reads positions in (``retold``)
    # Scripted agents answer in microseconds and may keep state, and a local model holds one engine, so they
    # answer one at a time; API agents are thread-safe and slow, so their requests overlap.
    local = not isinstance(player, APIAgent)
    guard = threading.Lock() if local else nullcontext()
    # a scripted agent answers with a legal action of the position it read, so any other answer means the
    # position and the request's legal actions disagree; a model writes free text that may be invalid, as a
    # model's move may be: the client's game judges it
    scripted = local and not isinstance(player, ModelAgent)
    app = FastAPI(title="spiral-arena", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(RequestError)
    async def request_error(request: Request, error: RequestError) -> JSONResponse:
        return error.response()

    @app.middleware("http")
    async def require_token(request: Request, call_next: Any) -> Response:
        refused = refusal(request.headers, allowed_hosts, api_key)
        return refused.response() if refused is not None else await call_next(request)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        entry = {"id": served_model, "object": "model", "created": 0, "owned_by": "spiral-arena"}
        return {"object": "list", "data": [entry]}

    def answer(request: ChatRequest) -> str:
        try:
            with guard:
                agent = player if request.seed is None else own_copy(player, request.seed)
                text = agent.act(retold(request.observation, request.info, player, texts), request.info)
        except APIError as error:  # its text may hold the upstream's own words and address: not for clients
            status = f" (HTTP {error.status})" if error.status else ""
            raise RequestError(502, f"the served agent's upstream failed{status}", kind="upstream_error") from None
        except (ValueError, KeyError, IndexError, TypeError):  # the agent's own words name Python internals
            if request.sent_info:
                message = (
                    "'spiral_info' does not hold the game, legal actions and view of a turn, so the served agent "
                    "cannot answer it; send the env's info for the turn as the env gave it."
                )
            else:
                why = request.unread or "the position read from the last user message is not one it can play"
                message = (
                    f"{why}, so the served agent cannot answer it; send the env's info as 'spiral_info', "
                    "or end the user message with a 'Legal actions: [a], [b].' line."
                )
            raise RequestError(422, message, "spiral_info") from None
        if not isinstance(text, str):
            raise RequestError(500, f"the agent returned {type(text).__name__}, not text", kind="server_error")
        legal = request.info.get("legal_actions")
        if scripted and isinstance(legal, list) and legal and text.strip() not in legal:
            raise RequestError(
                422,
                f"The position and the legal actions of this request disagree: the served agent would play "
                f"{text.strip()[:40]}, which is not among {', '.join(map(str, legal))[:200]}.",
                "messages",
            )
        return text

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        chat = parse_chat_request(await read_json(request), served_model)
        if latency_s:
            await asyncio.sleep(latency_s)  # outside the agent's lock: concurrent requests wait together
        text = await run_in_threadpool(answer, chat)
        completion_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if chat.stream:
            events = _events(completion_id, created, chat.model, text)
            return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        return JSONResponse(_completion(completion_id, created, chat.model, text))

    return app


def host_names(host: str, allow_hosts: tuple[str, ...] = ()) -> frozenset[str] | None:
    """The Host names a server bound to ``host`` answers, plus ``allow_hosts``; None means any name.
    Bound to loopback: the loopback names. Bound to one other address: that address, so a web page
    cannot reach it through DNS rebinding under a name of its own. Bound to a wildcard (0.0.0.0, ::),
    reachable under every address the machine has: any name, unless ``allow_hosts`` lists them."""
    extra = frozenset(_hostname(h) for h in allow_hosts)
    bound = _hostname(host)
    if _is_wildcard(bound):
        return extra or None
    return (LOOPBACK_NAMES if _is_loopback(bound) else frozenset()) | {bound} | extra


def _is_wildcard(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_unspecified
    except ValueError:
        return address == ""


def _is_loopback(address: str) -> bool:
    return is_loopback(f"http://[{address}]" if ":" in address else f"http://{address}")


def startup_messages(
    host: str, port: int, label: str, api_key: str | None, allowed: frozenset[str] | None, path: str = "/v1"
) -> list[str]:
    """What a server prints before it listens: warnings about who can use it, then where it serves
    (``path``: under which the API lives, ``/v1`` for ``serve``)."""
    messages = []
    if api_key is None and not _is_loopback(_hostname(host)):
        messages.append(f"warning: serving on {host} without --api-key: anyone who can reach it can use it")
    if allowed is None:
        messages.append(
            f"warning: serving on {host} answers requests under any Host name, so a web page may reach it "
            "through DNS rebinding; restrict it with --allow-host NAME for each name clients use"
        )
    messages.append(f"serving {label} at http://{host}:{port}{path}")
    return messages


def serve(
    agent: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_key: str | None = None,
    allow_hosts: tuple[str, ...] = (),
    latency_s: float = 0.0,
) -> None:
    """Run the server until interrupted (uvicorn, one process), answering the Host names of
    ``host_names``. ``latency_s`` delays every chat answer (a benchmarking aid, see the module docstring)."""
    import uvicorn

    allowed = host_names(host, allow_hosts)
    app = create_app(agent, api_key=api_key, allowed_hosts=allowed, latency_s=latency_s)
    for message in startup_messages(host, port, agent_label(agent), api_key, allowed):
        print(message, file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="info")
