"""``spiral-arena web``: the page and its JSON API.

``GET /`` is the page (``static/``: one HTML file, its script and its style, served from the package, so it
works without internet). The API under ``/api``:

- ``GET /api/games``: every registered game with its options and their defaults.
- ``POST /api/matches`` ``{"game", "seats": ["human", "expert"], "seed"?}``: a new match (``matches``);
  ``GET /api/matches/{id}``: its state; ``POST /api/matches/{id}/step`` ``{"at"}``: the agent whose turn it is
  answers; ``POST /api/matches/{id}/move`` ``{"text", "at"}``: a person's move. ``at`` is the number of moves
  the page has seen, so a repeated request is refused, never played twice.
- ``GET /api/leaderboard``: the standings of ``--db`` as ``leaderboard show`` computes them, as the HTML
  sections of its report page (``leaderboard.report.html_sections``), with the number of stored games;
  ``GET /api/stored?game=&agent=``: the latest stored games; ``GET /api/stored/{id}``: one, with its transcript.

Who may use it: the rules of ``serve`` and ``env-server`` (``serve.refusal``: the Host must be a name the
server answers, an Origin must be this server, on its port; with ``--api-key`` a bearer token), on every
request. The page itself and its two assets hold no data and are served without the token, so a browser can
load them; the page then asks for the token and sends it with each API call. POST bodies must be JSON
(``serve.read_json``). The page allows only its own scripts and styles (Content-Security-Policy).
"""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from leaderboard import report, store
from leaderboard.standings import compute
from leaderboard.web.matches import HUMAN, MatchError, Matches
from spiral_arena.registry import REGISTRY, GameSpec
from spiral_arena.serve import LOOPBACK_NAMES, RequestError, host_names, read_json, refusal, startup_messages

ASSETS = {  # path -> (file under static/, its type)
    "/": ("index.html", "text/html"),
    "/app.js": ("app.js", "text/javascript"),
    "/app.css": ("app.css", "text/css"),
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
    conn = store.open_readonly(db)
    try:
        count = store.count_games(conn)
        standings = compute(store.load_games(conn), store.load_agents(conn), notes=store.load_notes(conn))
    finally:
        conn.close()
    return {"db": db, "games": count, "html": report.html_sections(standings)}


def stored(db: str, game: str | None, agent: str | None, row_id: int | None = None) -> Any:
    if not Path(db).is_file():
        raise MatchError(404, f"no database at {db}")
    conn = store.open_readonly(db)
    try:
        if row_id is None:
            return {"games": store.recent_games(conn, game or None, agent or None, LISTED)}
        found = store.load_transcript(conn, row_id)
    finally:
        conn.close()
    if found is None:
        raise MatchError(404, f"no game {row_id} in {db}")
    return found


def _whole(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise MatchError(422, f"'{name}' must be a whole number")
    return value


def create_app(
    db: str | Path = "leaderboard.sqlite",
    api_key: str | None = None,
    allowed_hosts: frozenset[str] | None = LOOPBACK_NAMES,
) -> FastAPI:
    """The page and its API, storing the games played here in ``db`` and showing its standings."""
    db = str(db)
    matches = Matches(db)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        yield
        await run_in_threadpool(matches.close)

    app = FastAPI(title="spiral-arena web", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)

    @app.exception_handler(RequestError)
    async def request_error(request: Request, error: RequestError) -> JSONResponse:
        return error.response()

    @app.exception_handler(MatchError)
    async def match_error(request: Request, error: MatchError) -> JSONResponse:
        return JSONResponse({"error": {"message": error.message}}, status_code=error.status)

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Response:
        token = api_key if request.url.path.startswith("/api/") else None  # the page and its assets hold no data
        refused = refusal(request.headers, allowed_hosts, token)
        response = refused.response() if refused is not None else await call_next(request)
        response.headers.update(HEADERS)
        return response

    for path, (name, kind) in ASSETS.items():
        content = files(__package__).joinpath("static", name).read_bytes()

        def asset(content: bytes = content, kind: str = kind) -> Response:
            return Response(content, media_type=kind)

        app.get(path, include_in_schema=False)(asset)

    @app.get("/api/games")
    async def list_games() -> dict[str, Any]:
        return {"games": games(), "human": HUMAN, "db": db}

    @app.post("/api/matches", status_code=201)
    async def new_match(request: Request) -> dict[str, Any]:
        body = await read_json(request)
        if not isinstance(body, dict):
            raise MatchError(422, 'the body must be an object: {"game", "seats", "seed"}')
        seats = body.get("seats")
        if not isinstance(seats, list):
            raise MatchError(422, "'seats' must be a list with one player per seat: 'human' or an agent spec")
        seed = _whole(body.get("seed"), "seed")
        return await run_in_threadpool(matches.run, matches.create, body.get("game"), seats, seed)

    @app.get("/api/matches/{match_id}")
    async def get_match(match_id: int) -> dict[str, Any]:
        return await run_in_threadpool(matches.run, lambda: matches.get(match_id).state())

    @app.post("/api/matches/{match_id}/step")
    async def step(match_id: int, request: Request) -> dict[str, Any]:
        body = await read_json(request)
        at = _whole(body.get("at") if isinstance(body, dict) else None, "at")
        return await run_in_threadpool(matches.run, matches.step, match_id, at)

    @app.post("/api/matches/{match_id}/move")
    async def move(match_id: int, request: Request) -> dict[str, Any]:
        body = await read_json(request)
        if not isinstance(body, dict):
            raise MatchError(422, 'the body must be an object: {"text", "at"}')
        at = _whole(body.get("at"), "at")
        return await run_in_threadpool(matches.run, matches.move, match_id, body.get("text"), at)

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
) -> None:
    """Serve the page until interrupted (uvicorn, one process)."""
    import uvicorn

    allowed = host_names(host, allow_hosts)
    app = create_app(db, api_key=api_key, allowed_hosts=allowed)
    for message in startup_messages(host, port, f"the arena's page (games stored in {os.fspath(db)})", api_key,
                                    allowed, path="/"):  # fmt: skip
        print(message, file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
