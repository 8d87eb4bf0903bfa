"""``spiral-arena env-server``: one seat of a game (``make_text_env``, the opponent inside) as an
OpenEnv environment server, so OpenEnv's own ``EnvClient`` (and what builds on it: TRL's and
verifiers' OpenEnv support) plays our games. Written to OpenEnv's wire protocol (openenv 0.10.0),
without importing openenv, so it runs in the base install with the ``api`` extra.

The protocol. An episode lives on a WebSocket, ``/ws``: one session (its own game and opponent) per
connection. The client sends JSON text frames ``{"type": "reset", "data": {"seed": 3}}`` (``data``
may also hold ``episode_id`` and ``seat``), ``{"type": "step", "data": {"message": "[check]"}}``,
``{"type": "state"}`` or ``{"type": "close"}``; the server answers ``{"type": "observation", "data":
{"observation": {"text", "info", "metadata"}, "reward", "done"}}``, ``{"type": "state", "data":
{...}}`` or ``{"type": "error", "data": {"message", "code"}}``, and the session goes on after an
error. ``text`` is what the game shows the seat (its ``obs_format``), ``info`` the env's info
(``legal_actions``; at the end ``outcome`` and, after an invalid move, ``invalid_move``); ``reward``
is what the seat received since its previous move (None at reset), so an episode's rewards add up to
the seat's return. An invalid move is no error: the game rules on it (``invalid_move``). Over HTTP:
``GET /health``, ``/metadata``, ``/schema`` (the JSON schemas of action, observation and state; the
action has one required field, ``message``) and ``POST /reset`` (stateless: the first observation of
a fresh game). OpenEnv's HTTP ``/step`` and ``/state`` step a freshly built env, which means nothing
for a game, so here they answer 409 naming ``/ws``. No MCP endpoint and no ``/openapi.json``, so
``openenv validate --url`` passes its health, metadata and schema checks only; its clients use neither.

Hardening, as ``serve``: loopback by default; the Host and Origin checks (the Origin's port included)
and the optional bearer token (constant-time compare) apply to every request and to the WebSocket
handshake (refused with 403/401 before it opens); bodies and frames are capped at ``MAX_BODY_BYTES``.
At most ``max_sessions`` sessions at once, WebSocket episodes and stateless resets alike, each with a
thread of its own (more get a ``CAPACITY_REACHED`` error frame and close 1013, or an HTTP 503); a
WebSocket session that sends nothing for ``idle_timeout_s`` is closed (1001, saying why) to free its
slot. Bad input is answered with one sentence (HTTP: a 4xx ``{"detail": ...}``; WebSocket: an error
frame), never a traceback. ``/metadata`` and ``state`` name the bare env id, never its options (Twenty Questions'
``secret`` is the answer), and a served API opponent's upstream address and error text stay out.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import math
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from anyio import CapacityLimiter, to_thread
from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

import spiral_arena
from spiral_arena.agents import APIError
from spiral_arena.integrations.text_env import is_over, make_text_env
from spiral_arena.registry import GameSpec
from spiral_arena.serve import (
    LOOPBACK_NAMES,
    MAX_BODY_BYTES,
    NumberTooLong,
    RequestError,
    host_names,
    parse_body,
    public_label,
    read_json,
    refusal,
    startup_messages,
)
from spiral_arena.wrappers.gym import OpponentEnv

MAX_SESSIONS = 32
IDLE_TIMEOUT_S = 300.0  # a WebSocket session silent this long is closed, so idle clients cannot hold every slot
NO_HTTP_EPISODE = (
    "HTTP requests carry no episode (OpenEnv's HTTP /step and /state act on a fresh env); play over the "
    "WebSocket at /ws, as OpenEnv's EnvClient does: reset, then step"
)
_log = logging.getLogger("uvicorn.error")


class ArenaAction(BaseModel):
    """A move: the text a model answers, as the game reads it (e.g. ``[check]``)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    message: str = Field(description="the move, as text (a bracketed action such as [check], or free text)")
    metadata: dict[str, Any] = Field(default_factory=dict)


class ArenaObservation(BaseModel):
    """What the seat sees after a reset or a move."""

    model_config = ConfigDict(extra="forbid")
    done: bool = False
    reward: float | None = Field(default=None, description="the seat's reward since its previous move")
    metadata: dict[str, Any] = Field(default_factory=dict)
    text: str = Field(description="the game's messages to the seat, in the env's obs_format")
    info: dict[str, Any] = Field(description="the env's info: legal_actions; at the end outcome (and invalid_move)")


class ArenaState(BaseModel):
    """The session's episode."""

    model_config = ConfigDict(extra="allow")
    episode_id: str | None = None
    step_count: int = Field(default=0, ge=0, description="moves the seat has made this episode")
    env_id: str = Field(description="the game's id, without its options")
    seat: int
    player: str = Field(description="the seat's agent name in the game (player_0, player_1, questioner)")
    opponent: str | None = Field(description="the agent in the other seat, None in one-player games")
    seed: int | None = None
    done: bool = False
    returns: list[float] | None = Field(default=None, description="every seat's return, once the game is over")


class ResetData(BaseModel):
    """The fields a reset may carry."""

    model_config = ConfigDict(extra="forbid", strict=True)
    seed: int | None = Field(default=None, ge=0, lt=2**64)
    episode_id: str | None = Field(default=None, max_length=255)
    seat: int | None = None


def validation_sentence(what: str, error: ValidationError, model: type[BaseModel]) -> str:
    """The first problem of ``error`` as one sentence naming the field and what is valid."""
    problem = error.errors()[0]
    field = ".".join(str(part) for part in problem["loc"]) or "data"
    valid = ", ".join(model.model_fields)
    if problem["type"] == "extra_forbidden":
        return f"{what}: unknown field {field!r}; valid fields: {valid}"
    if problem["type"] == "missing":
        return f"{what}: {field!r} is missing; valid fields: {valid}"
    return f"{what}: {field!r}: {problem['msg'][:1].lower()}{problem['msg'][1:]}"


class EpisodeError(Exception):
    """A request the session cannot carry out: an error frame with ``code`` over the WebSocket, an
    HTTP ``status`` with the message as ``detail`` over HTTP."""

    def __init__(self, message: str, code: str = "EXECUTION_ERROR", status: int = 409) -> None:
        super().__init__(message)
        self.message, self.code, self.status = message, code, status


def invalid(message: str) -> EpisodeError:
    return EpisodeError(message, "VALIDATION_ERROR", 422)


class Session:
    """One client's episodes: a text env per seat it played, built on first use."""

    def __init__(self, env_id: str, seat: int, opponent: str | None) -> None:
        self.env_id, self.seat, self.opponent = env_id, seat, opponent
        self.envs = {seat: make_text_env(env_id, seat=seat, opponent=opponent)}
        self.text_env: OpponentEnv | None = None
        self.episode_id: str | None = None
        self.seed: int | None = None
        self.steps = 0

    def reset(self, data: ResetData) -> dict[str, Any]:
        seat = self.seat if data.seat is None else data.seat
        seats = len(self.envs[self.seat].env.possible_agents)
        if not 0 <= seat < seats:
            raise invalid(f"reset: 'seat' must be in 0..{seats - 1} for this game, got {seat}")
        if seat not in self.envs:
            self.envs[seat] = make_text_env(self.env_id, seat=seat, opponent=self.opponent)
        self.text_env = self.envs[seat]
        self.seed, self.steps = data.seed, 0
        self.episode_id = data.episode_id or uuid.uuid4().hex
        text, info = self._play(lambda env: env.reset(seed=data.seed))
        return observation_payload(text, info, None, is_over(self.text_env))

    def step(self, action: ArenaAction) -> dict[str, Any]:
        if self.text_env is None:
            raise EpisodeError("step: no game in progress; send reset first")
        if is_over(self.text_env):
            raise EpisodeError("step: the game is over; send reset to start another")
        text, reward, terminated, truncated, info = self._play(lambda env: env.step(action.message))
        self.steps += 1
        return observation_payload(text, info, reward, terminated or truncated)

    def state(self) -> dict[str, Any]:
        env = self.text_env if self.text_env is not None else self.envs[self.seat]
        over = self.text_env is not None and is_over(env)
        state = ArenaState(
            episode_id=self.episode_id,
            step_count=self.steps,
            env_id=GameSpec.parse(self.env_id).env_id,
            seat=env.env.possible_agents.index(env.learner),
            player=env.learner,
            opponent=public_label(self.opponent) if self.opponent is not None else None,
            seed=self.seed,
            done=over,
            returns=[float(r) for r in env.env.returns] if over else None,
        )
        return state.model_dump()

    def close(self) -> None:
        """Close the opponents' connections (an API opponent's HTTP client) now, not when collected."""
        for env in self.envs.values():
            close = getattr(env.opponent, "close", None)
            if close is not None:
                close()

    def _play(self, move: Any) -> Any:
        """``move(text_env)``; a failure abandons the episode (the opponent may be mid-turn), so ``state``
        then shows none, as ``step`` answers."""
        try:
            return move(self.text_env)
        except APIError as error:  # its text may hold the upstream's address and words: not for clients
            self._abandon()
            status = f" (HTTP {error.status})" if error.status else ""
            message = f"the opponent's upstream failed{status}; the game was abandoned, send reset"
            raise EpisodeError(message, status=502) from None
        except Exception as error:
            self._abandon()
            _log.exception("env-server: a game failed")
            message = f"the game failed ({type(error).__name__}); it was abandoned, send reset (see the server log)"
            raise EpisodeError(message, status=500) from None

    def _abandon(self) -> None:
        self.text_env, self.episode_id, self.seed, self.steps = None, None, None, 0


def observation_payload(text: str, info: dict[str, Any], reward: float | None, done: bool) -> dict[str, Any]:
    """OpenEnv's serialised observation: the observation's own fields, with reward and done beside it."""
    return {"observation": {"text": text, "info": info, "metadata": {}}, "reward": reward, "done": done}


def reset_data(data: Any) -> ResetData:
    if not isinstance(data, dict):
        raise invalid("reset: 'data' must be a JSON object (seed, episode_id, seat)")
    try:
        return ResetData.model_validate(data)
    except ValidationError as error:
        raise invalid(validation_sentence("reset", error, ResetData)) from None


def step_action(data: Any) -> ArenaAction:
    if not isinstance(data, dict):
        raise invalid('step: \'data\' must be a JSON object such as {"message": "[check]"}')
    try:
        return ArenaAction.model_validate(data)
    except ValidationError as error:
        raise invalid(validation_sentence("step", error, ArenaAction)) from None


def frame(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "data": data}


def error_frame(message: str, code: str) -> dict[str, Any]:
    return frame("error", {"message": message, "code": code})


class Guard:
    """ASGI middleware: ``serve``'s Host, Origin and token checks on every HTTP request and WebSocket
    handshake; a refused handshake gets the same 4xx JSON answer an HTTP request would."""

    def __init__(self, app: ASGIApp, allowed_hosts: frozenset[str] | None, api_key: str | None) -> None:
        self.app, self.allowed_hosts, self.api_key = app, allowed_hosts, api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            refused = refusal(Headers(scope=scope), self.allowed_hosts, self.api_key)
            if refused is not None:
                response = JSONResponse({"detail": refused.message}, status_code=refused.status)
                if scope["type"] == "http" or "websocket.http.response" in scope.get("extensions", {}):
                    await response(scope, receive, send)
                else:  # a server without the denial extension answers the close with a bare 403
                    await send({"type": "websocket.close", "code": 1008})
                return
        await self.app(scope, receive, send)


def create_env_app(
    env_id: str,
    seat: int = 0,
    opponent: str | None = "random",
    api_key: str | None = None,
    allowed_hosts: frozenset[str] | None = LOOPBACK_NAMES,
    max_sessions: int = MAX_SESSIONS,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
) -> FastAPI:
    """The ASGI app serving ``env_id`` from ``seat`` with ``opponent`` (an agent spec; each session
    builds its own) in the other seat; one-player games take none. ``api_key``, ``allowed_hosts``: as
    ``serve.create_app``. ``max_sessions``: WebSocket sessions and stateless resets under way at once;
    ``idle_timeout_s``: how long a WebSocket session may send nothing before it is closed (0: no limit).
    The open sessions are ``app.state.sessions``. ValueError/TypeError if the game, seat or opponent is
    refused."""
    if max_sessions < 1:
        raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
    if not (math.isfinite(idle_timeout_s) and idle_timeout_s >= 0):
        raise ValueError(f"idle_timeout_s must be a number of seconds >= 0 (0: no limit), got {idle_timeout_s!r}")
    probe = make_text_env(env_id, seat=seat, opponent=opponent)  # refuses a bad id, seat or opponent now
    opponent = opponent if probe.opponent is not None else None
    game_spec = GameSpec.parse(env_id)
    name = game_spec.env_id
    seats = len(probe.env.possible_agents)
    game = game_spec.registered.game
    against = f" against {public_label(opponent)}" if opponent is not None else ""
    metadata = {
        "name": f"spiral-arena {name}",
        "description": f"{game.description} Played from seat {seat} of {seats}{against}.",
        "version": spiral_arena.__version__,
    }
    schemas = {
        "action": ArenaAction.model_json_schema(),
        "observation": ArenaObservation.model_json_schema(),
        "state": ArenaState.model_json_schema(),
    }
    app = FastAPI(title="spiral-arena env-server", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(Guard, allowed_hosts=allowed_hosts, api_key=api_key)
    sessions: dict[int, Session | None] = {}  # open now, by number; None while it is being built
    app.state.sessions = sessions
    numbers = itertools.count()
    idle = f"idle for {idle_timeout_s:g} s: closed to free its slot; connect again to play"

    @functools.cache
    def threads() -> CapacityLimiter:  # made on first use, in the event loop (anyio before 4.2 needs one)
        return CapacityLimiter(max_sessions)  # a session uses one thread at a time: none waits for another's

    async def in_thread(function: Callable[..., Any], *args: Any) -> Any:
        return await to_thread.run_sync(function, *args, limiter=threads())

    @asynccontextmanager
    async def open_session() -> AsyncIterator[Session]:
        """A new session in a free slot, closed and its slot given back on leaving; EpisodeError
        ``CAPACITY_REACHED`` (HTTP 503: the server's capacity, not this client's rate) when all are taken."""
        if len(sessions) >= max_sessions:
            message = f"the server is at its limit of {max_sessions} sessions; close one or try again later"
            raise EpisodeError(message, "CAPACITY_REACHED", 503)
        number, session = next(numbers), None
        sessions[number] = None
        try:
            session = sessions[number] = await in_thread(Session, env_id, seat, opponent)
            yield session
        finally:
            del sessions[number]
            if session is not None:
                session.close()

    @app.exception_handler(RequestError)
    async def request_error(request: Request, error: RequestError) -> JSONResponse:
        status = 422 if isinstance(error, NumberTooLong) else error.status  # valid JSON, a field out of range
        return JSONResponse({"detail": error.message}, status_code=status)

    @app.exception_handler(EpisodeError)
    async def episode_error(request: Request, error: EpisodeError) -> JSONResponse:
        return JSONResponse({"detail": error.message}, status_code=error.status)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    @app.get("/metadata")
    async def get_metadata() -> dict[str, Any]:
        return metadata

    @app.get("/schema")
    async def get_schema() -> dict[str, Any]:
        return schemas

    @app.post("/reset")
    async def http_reset(request: Request) -> dict[str, Any]:
        """Stateless, as in OpenEnv: the first observation of a fresh game (an empty body is {}). It holds
        a session slot while it plays, so resets with a slow opponent cannot crowd out the WebSocket."""
        data = reset_data({} if request.headers.get("content-length") == "0" else await read_json(request))
        async with open_session() as session:
            return await in_thread(session.reset, data)

    @app.post("/step")
    @app.get("/state")
    async def no_http_episode() -> JSONResponse:
        return JSONResponse({"detail": NO_HTTP_EPISODE}, status_code=409)

    @app.websocket("/ws")
    async def play(websocket: WebSocket) -> None:
        await websocket.accept()
        try:
            async with open_session() as session:
                while True:
                    try:
                        message = await asyncio.wait_for(websocket.receive(), idle_timeout_s or None)
                    except TimeoutError:
                        await websocket.close(code=1001, reason=idle)  # going away, as proxies close idle sockets
                        return
                    if message["type"] == "websocket.disconnect":
                        return
                    reply = await answer(session, message)
                    if reply is None:
                        await websocket.close(code=1000)
                        return
                    await websocket.send_json(reply)
        except EpisodeError as error:  # open_session's CAPACITY_REACHED (answer() turns the others into frames)
            await websocket.send_json(error_frame(error.message, error.code))
            await websocket.close(code=1013)  # try again later
        except WebSocketDisconnect:  # the client left while we answered
            return

    async def answer(session: Session, message: dict[str, Any]) -> dict[str, Any] | None:
        """The reply to one frame (None for ``close``)."""
        text = message.get("text")
        if text is None:
            return error_frame("send each message as a JSON text frame, not binary", "INVALID_JSON")
        try:
            body = parse_body(text.encode(), "the message")
        except RequestError as error:
            return error_frame(
                error.message, "VALIDATION_ERROR" if isinstance(error, NumberTooLong) else "INVALID_JSON"
            )
        valid = "send reset, step, state or close"
        if not isinstance(body, dict):
            why = f"a message must be a JSON object with a 'type' and its 'data'; {valid}"
            return error_frame(why, "VALIDATION_ERROR")
        kind = body.get("type")
        if kind not in ("reset", "step", "state", "close"):
            return error_frame(f"unknown message type {repr(kind)[:40]}; {valid}", "UNKNOWN_TYPE")
        extra = sorted(set(body) - {"type", "data"})
        try:
            if extra:
                raise invalid(f"{kind}: unknown key {extra[0]!r}; a message holds 'type' and 'data'")
            if kind == "reset":
                data = reset_data(body.get("data", {}))
                return frame("observation", await in_thread(session.reset, data))
            if kind == "step":
                action = step_action(body.get("data"))
                return frame("observation", await in_thread(session.step, action))
            if kind == "state":
                return frame("state", session.state())
        except EpisodeError as error:
            return error_frame(error.message, error.code)
        return None

    return app


def env_serve(
    env_id: str,
    seat: int = 0,
    opponent: str | None = "random",
    host: str = "127.0.0.1",
    port: int = 8001,
    api_key: str | None = None,
    allow_hosts: tuple[str, ...] = (),
    max_sessions: int = MAX_SESSIONS,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
) -> None:
    """Run the env server until interrupted (uvicorn, one process), answering the Host names of
    ``host_names``; WebSocket frames over ``MAX_BODY_BYTES`` close the connection (1009)."""
    import uvicorn

    allowed = host_names(host, allow_hosts)
    app = create_env_app(
        env_id, seat, opponent, api_key, allowed, max_sessions=max_sessions, idle_timeout_s=idle_timeout_s
    )
    label = f"{GameSpec.parse(env_id).env_id} (seat {seat})"
    for message in startup_messages(host, port, label, api_key, allowed, path=""):
        print(message, file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="info", ws_max_size=MAX_BODY_BYTES)
