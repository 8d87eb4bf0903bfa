"""``spiral-arena web``: the page and its JSON API.

``GET /`` is the page (``static/``: one HTML file, its script and its style, served from the package, so it
works without internet). The API under ``/api``:

- ``GET /api/games``: every registered game with its options and their defaults, and the server's own agents.
- ``POST /api/matches`` ``{"game", "seats": ["human", "expert"], "seed"?}``: a new match (``matches``), its
  players as ``policy`` allows them (the seed a number or a decimal string); ``GET /api/matches/{id}``: its
  state; ``POST /api/matches/{id}/step`` ``{"at"}``: the agent whose turn it is answers;
  ``POST /api/matches/{id}/move`` ``{"text", "at"}``: a person's move. ``at``, required, is the number of moves
  the page has seen, so a repeated request is refused, never played twice.
- ``GET /api/leaderboard``: the standings of ``--db`` as ``leaderboard show`` computes them, as the HTML
  sections of its report page (``leaderboard.report.html_sections``), with the number of stored games;
  ``GET /api/stored?game=&agent=``: the latest stored games; ``GET /api/stored/{id}``: one, with its transcript.
  A database that cannot be read (corrupt, foreign, gone unreadable) is a 503 naming it, on every endpoint;
  ``web`` refuses to start on one.

Who may use it: the rules of ``serve`` and ``env-server`` (``serve.refusal``: the Host must be a name the
server answers, an Origin must be this server, on its port; with ``--api-key`` a bearer token), on every
request. The page itself and its two assets hold no data and are served without the token, so a browser can
load them; the page then asks for the token and sends it with each API call. POST bodies must be JSON
(``serve.read_json``). The page allows only its own scripts and styles (Content-Security-Policy).
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from leaderboard import report, store
from leaderboard.schedule import SEED_MAX
from leaderboard.standings import compute
from leaderboard.web.matches import Matches
from leaderboard.web.policy import HUMAN, Policy, Refused, move_text, moves_seen, seed_of
from spiral_arena.registry import REGISTRY, GameSpec
from spiral_arena.serve import LOOPBACK_NAMES, RequestError, host_names, read_json, refusal, startup_messages

ASSETS = {  # path -> (the package data file, its type)
    "/": (files(__package__) / "static" / "index.html", "text/html"),
    "/app.js": (files(__package__) / "static" / "app.js", "text/javascript"),
    "/app.css": (files(__package__) / "static" / "app.css", "text/css"),
    "/heat.css": (files("leaderboard.report") / "heat.css", "text/css"),  # the head-to-head colours of the report
}
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
LISTED = 50  # stored games listed at once


def games() -> list[dict[str, Any]]:
    """The registered games, each with its seats, its options' defaults and which options only change the
    text a player reads."""
    listed = []
    for env_id, spec in REGISTRY.items():
        listed.append({
            "id": env_id,
            "players": len(spec.game.agents),
            "options": GameSpec(env_id).complete().options,  # the plain-valued options, defaults filled in
            "text_options": sorted(spec.game.text_options),
        })  # fmt: skip
    return listed


def leaderboard(db: str) -> dict[str, Any]:
    """The standings of ``db`` as ``leaderboard show`` has them (default rating options), as HTML sections."""
    if not Path(db).is_file():
        return {"db": db, "games": 0, "html": "", "missing": f"no database at {db} yet: games played here go there"}
    with _reading(db) as conn:
        count = store.count_games(conn)
        games, agents, notes = store.load_games(conn), store.load_agents(conn), store.load_notes(conn)
    try:
        standings = compute(games, agents, notes=notes)
    except ValueError as nothing_to_rate:  # no games yet, or none between two agents
        return {"db": db, "games": count, "html": "", "missing": str(nothing_to_rate)}
    return {"db": db, "games": count, "html": report.html_sections(standings)}


def stored(db: str, game: str | None, agent: str | None, row_id: int | None = None) -> Any:
    if not Path(db).is_file():
        raise Refused(f"no database at {db}", status=404)
    with _reading(db) as conn:
        if row_id is None:
            return {"games": store.recent_games(conn, game or None, agent or None, LISTED)}
        found = store.load_transcript(conn, row_id) if 0 < row_id <= SEED_MAX else None
    if found is None:
        raise Refused(f"no game {row_id} in {db}", status=404)
    return found


@contextmanager
def _reading(db: str) -> Iterator[sqlite3.Connection]:
    """A read-only connection to ``db``; a database that cannot be read is a 503 naming it (``StoreError``)."""
    try:
        conn = store.open_readonly(db)
    except ValueError as error:
        raise Refused(f"cannot read the database: {error}", status=503) from None
    try:
        yield conn
    except store.StoreError as error:
        raise Refused(f"cannot read the database: {error}", status=503) from None
    finally:
        conn.close()


def create_app(
    db: str | Path = "leaderboard.sqlite",
    api_key: str | None = None,
    allowed_hosts: frozenset[str] | None = LOOPBACK_NAMES,
    rules: Policy | None = None,
) -> FastAPI:
    """The page and its API, storing the games played here in ``db`` and showing its standings; ``rules``: what
    clients may name (``policy.Policy``: by default the scripted agents, named models and models under the
    current folder, no API agents, no hub)."""
    db = str(db)
    rules = rules or Policy()
    matches = Matches(db, rules)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        yield
        await run_in_threadpool(matches.close)

    app = FastAPI(title="spiral-arena web", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)

    @app.exception_handler(RequestError)
    async def request_error(request: Request, error: RequestError) -> JSONResponse:
        return error.response()

    @app.exception_handler(Refused)
    async def refused(request: Request, error: Refused) -> JSONResponse:
        return JSONResponse({"error": {"message": str(error)}}, status_code=error.status)

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Response:
        token = api_key if request.url.path.startswith("/api/") else None  # the page and its assets hold no data
        refused = refusal(request.headers, allowed_hosts, token)
        response = refused.response() if refused is not None else await call_next(request)
        response.headers.update(HEADERS)
        return response

    for path, (source, kind) in ASSETS.items():
        content = source.read_bytes()

        def asset(content: bytes = content, kind: str = kind) -> Response:
            return Response(content, media_type=kind)

        app.get(path, include_in_schema=False)(asset)

    @app.get("/api/games")
    async def list_games() -> dict[str, Any]:
        return {"games": games(), "human": HUMAN, "db": db, "agents": rules.offered()}

    @app.post("/api/matches", status_code=201)
    async def new_match(request: Request) -> dict[str, Any]:
        body = await read_json(request)
        if not isinstance(body, dict):
            raise Refused('the body must be an object: {"game", "seats", "seed"}')
        spec = rules.game(body.get("game"))
        seats = body.get("seats")
        if not isinstance(seats, list) or len(seats) != spec.players:
            raise Refused(f"'seats' must be a list with one player per seat ({spec.env_id} has {spec.players}): "
                          "'human' or an agent spec")  # fmt: skip
        entrants = [rules.seat(text, seat) for seat, text in enumerate(seats)]
        seed = seed_of(body.get("seed"))
        agents = await matches.build(entrants)
        return await run_in_threadpool(matches.run, matches.create, spec, entrants, seed, agents)

    @app.get("/api/matches/{match_id}")
    async def get_match(match_id: int) -> dict[str, Any]:
        return await run_in_threadpool(matches.run, lambda: matches.get(match_id).state())

    @app.post("/api/matches/{match_id}/step")
    async def step(match_id: int, request: Request) -> dict[str, Any]:
        body = await read_json(request)
        at = moves_seen(body.get("at") if isinstance(body, dict) else None)
        return await matches.step(match_id, at)

    @app.post("/api/matches/{match_id}/move")
    async def move(match_id: int, request: Request) -> dict[str, Any]:
        body = await read_json(request)
        if not isinstance(body, dict):
            raise Refused('the body must be an object: {"text", "at"}')
        text, at = move_text(body.get("text")), moves_seen(body.get("at"))
        return await run_in_threadpool(matches.run, matches.move, match_id, text, at)

    @app.get("/api/leaderboard")
    async def standings() -> dict[str, Any]:
        return await run_in_threadpool(leaderboard, db)

    @app.get("/api/stored")
    async def stored_games(game: str | None = None, agent: str | None = None) -> dict[str, Any]:
        return await run_in_threadpool(stored, db, game, agent)

    @app.get("/api/stored/{row_id}")
    async def stored_game(row_id: int) -> dict[str, Any]:
        return await run_in_threadpool(stored, db, None, None, row_id)

    return app


def web(
    db: str = "leaderboard.sqlite",
    host: str = "127.0.0.1",
    port: int = 8002,
    api_key: str | None = None,
    allow_hosts: tuple[str, ...] = (),
    rules: Policy | None = None,
) -> None:
    """Serve the page until interrupted (uvicorn, one process); a database that exists and cannot be used
    is refused before the server starts (``store.check_database``, a ValueError naming it)."""
    import uvicorn

    store.check_database(db)
    allowed = host_names(host, allow_hosts)
    app = create_app(db, api_key=api_key, allowed_hosts=allowed, rules=rules)
    for message in startup_messages(host, port, f"the arena's page (games stored in {os.fspath(db)})", api_key,
                                    allowed, path="/"):  # fmt: skip
        print(message, file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
