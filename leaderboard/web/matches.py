"""A game in the browser: the leaderboard's own game (``leaderboard.runner.Player``: the same env, seeds,
agents and stored row), with a person in any seat.

A match is the leaderboard's coroutine for one ``Job`` (env id, the label in each seat, seed), driven one
decision at a time: ``step`` lets the agent whose turn it is answer, ``move`` hands a person's text to the
game once the env says it is a valid move (an invalid one is refused with the env's reason, and the person
tries again, as ``play --p0 human`` re-prompts). Each answer is kept with the observation its seat read, so
the page shows exactly what a model would see. When the game ends its row is stored in the database,
where ``leaderboard show`` rates it and the page's leaderboard lists it, transcript included; a row the
database cannot take at that moment (another writer holds the lock) stays pending and is written on the next
request, so a finished game is never dropped. A match that fails to start (an agent that cannot be built,
a game that cannot begin) is one 422 and writes nothing.

Agents are built on their own threads (``Matches.builder``), once per label, and answer on a thread per agent
(``Matches.actors``: an agent answers one decision at a time), so a slow model or an API agent retrying an
unreachable upstream holds up no other match; everything else runs on one worker thread (``Matches.worker``):
SQLite connections are bound to the thread that opened them. What a client may name is ``policy``'s.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import sqlite3
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leaderboard import store
from leaderboard.entrants import Entrant, build_agent, notes
from leaderboard.runner import Player, charged
from leaderboard.schedule import Job
from leaderboard.web.boards import board
from leaderboard.web.policy import HUMAN, MAX_CLIENT_AGENTS, Policy, Refused, clipped, shown
from spiral_arena.agents import Agent
from spiral_arena.registry import GameSpec

BUILDERS = 4  # agents built at once: a slow model never holds up a scripted agent's build
BUSY_MS = 2000  # how long a write waits for another writer's lock before the row is kept for the next request
MAX_MATCHES = 64  # matches kept in memory; the oldest is forgotten first (finished ones are stored)
STORED_SEEDS = 2**31  # a match without a seed draws one below this


@dataclass
class Move:
    seat: int
    player: str  # the env's name for the seat (player_0, player_1)
    label: str  # who sits there
    text: str  # the answer as given
    observation: str  # what the seat read before answering


@dataclass
class Match:
    id: int
    job: Job
    game: Any  # leaderboard.runner's game in flight (inflight.Game with its env)
    humans: frozenset[int]
    notes: list[str]
    moves: list[Move] = field(default_factory=list)
    stored: dict[str, Any] | None = None  # where the finished game's row went
    pending: str | None = None  # why the finished game's row is not written yet (tried again on each request)
    acting: bool = False  # an agent is answering this match's decision (off the worker thread)

    @property
    def seat_labels(self) -> tuple[str, ...]:
        return self.job.players

    def turn(self) -> dict[str, Any] | None:
        """The decision the game waits on: whose it is and what that seat reads."""
        if self.game.over:
            return None
        seat, observation, info = self.game.decision
        return {
            "seat": seat,
            "player": self.game.env.possible_agents[seat],
            "label": self.seat_labels[seat],
            "human": seat in self.humans,
            "observation": observation,
            "legal_actions": info.get("legal_actions"),
            "action_format": info.get("action_format"),
        }

    def state(self) -> dict[str, Any]:
        """Everything the page shows of the match, as JSON."""
        env = self.game.env
        result = None
        if self.game.over:
            row = self.game.result
            result = {
                "rewards": [row.reward0, row.reward1][: len(self.seat_labels)],
                "invalid": row.invalid_reason,
                "error": row.error,
                "ends": [env.log.latest(seat).removeprefix("[GAME] ") for seat in range(len(self.seat_labels))],
            }
        return {
            "id": self.id,
            "game": self.job.env_id,
            "seed": self.job.seed,
            "seats": [
                {"label": label, "player": env.possible_agents[seat], "human": seat in self.humans}
                for seat, label in enumerate(self.seat_labels)
            ],
            "moves": [vars(move) for move in self.moves],
            "turn": self.turn(),
            "board": board(env, [move.text for move in self.moves]),
            "over": self.game.over,
            "result": result,
            "stored": self.stored,
            "pending": self.pending,
            "notes": self.notes,
        }


class Matches:
    """The matches of one server, and the leaderboard ``Player`` that plays them and stores their rows in
    ``db``. Agents are built on their own thread (``build``), once per label, so a model that takes seconds
    to load never holds up the other matches; everything else runs on the worker thread."""

    def __init__(self, db: str | Path, policy: Policy | None = None) -> None:
        self.db = str(db)
        self.policy = policy or Policy()
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="spiral-arena-web")
        self.builder = ThreadPoolExecutor(BUILDERS, thread_name_prefix="spiral-arena-web-build")
        self.builds: dict[str, tuple[str, Future]] = {}  # label -> (its stored spec, its agent being built)
        self.building = threading.Lock()
        self.actors: dict[str, ThreadPoolExecutor] = {}  # label -> the thread its agent answers on
        self.matches: OrderedDict[int, Match] = OrderedDict()
        self.ids = itertools.count(1)
        self.player: Player | None = None  # made at the first match, on the worker thread
        self.conn: sqlite3.Connection | None = None

    def close(self) -> None:
        def release() -> None:
            self._store_pending()
            for match in self.matches.values():
                if match.pending is not None:
                    print(f"spiral-arena web: match {match.id}'s finished game could not be stored: {match.pending}",
                          file=sys.stderr, flush=True)  # fmt: skip
            if self.player is not None:
                self.player.close()
            if self.conn is not None:
                self.conn.close()

        self.builder.shutdown(cancel_futures=True)
        for actor in self.actors.values():
            actor.shutdown(cancel_futures=True)
        self.worker.submit(release).result()
        self.worker.shutdown()

    def run(self, call: Any, *args: Any) -> Any:
        """``call(*args)`` on the worker thread, waited for; rows still pending are written first."""
        return self.worker.submit(self._pending_first, call, *args).result()

    async def step(self, match_id: int, at: int) -> dict[str, Any]:
        """The agent whose turn it is answers (its error ends the game as an error, as in the leaderboard). It
        answers on its own thread (one per agent: an agent answers one decision at a time), so an API agent
        retrying an unreachable upstream, or a model thinking, holds up no other match or request."""

        def on_worker(call: Any, *args: Any) -> asyncio.Future:
            return asyncio.wrap_future(self.worker.submit(self._pending_first, call, *args))

        match, seat, observation = await on_worker(self._claim, match_id, at)
        try:
            answer = await asyncio.wrap_future(self._actor(match.seat_labels[seat]).submit(_answer, match.game))
        except BaseException:  # the server is stopping: the decision is left waiting
            match.acting = False
            raise
        return await on_worker(self._answered, match, seat, observation, answer)

    def _actor(self, label: str) -> ThreadPoolExecutor:
        with self.building:
            if label not in self.actors:
                self.actors[label] = ThreadPoolExecutor(1, thread_name_prefix="spiral-arena-web-agent")
            return self.actors[label]

    async def build(self, entrants: Sequence[Entrant]) -> dict[str, Agent]:
        """Each non-human entrant's agent, built once per label on the builder threads and awaited there; a
        Refused (422) names the seat whose agent could not be built, and nothing is stored."""
        futures = [(seat, e, self._building(e, seat)) for seat, e in enumerate(entrants) if e.label != HUMAN]
        built = {}
        for seat, entrant, future in futures:
            try:
                built[entrant.label] = await asyncio.wrap_future(future)
            except Exception as error:
                reason = f"{type(error).__name__}: {error}" if not isinstance(error, ValueError) else str(error)
                raise Refused(f"seat {seat}: {shown(entrant.label)} could not be built: {clipped(reason)}") from None
        return built

    def _building(self, entrant: Entrant, seat: int) -> Future:
        """The build of ``entrant``'s agent: the one under way or done for its label, else a new one (a failed
        build is tried again); at most ``MAX_CLIENT_AGENTS`` labels beyond the server's own."""
        with self.building:
            known = self.builds.get(entrant.label)
            if known is not None and known[0] != entrant.stored_spec:
                raise Refused(f"seat {seat}: {shown(entrant.label)} already plays here as {shown(known[0])}")
            if known is not None and not (known[1].done() and known[1].exception() is not None):
                return known[1]
            clients = [label for label in self.builds if label not in self.policy.agents]
            if known is None and entrant.label not in self.policy.agents and len(clients) >= MAX_CLIENT_AGENTS:
                raise Refused(f"seat {seat}: this server has built the {MAX_CLIENT_AGENTS} agents it builds for its "
                              f"clients; choose one of them: {', '.join(sorted(clients))}")  # fmt: skip
            future = self.builder.submit(build_agent, entrant)
            self.builds[entrant.label] = (entrant.stored_spec, future)
            return future

    # -- on the worker thread ---------------------------------------------------------------------------

    def create(
        self, spec: GameSpec, entrants: Sequence[Entrant], seed: int | None, agents: dict[str, Agent]
    ) -> dict[str, Any]:
        """A new match of ``spec`` with ``entrants[i]`` in seat i (``build`` made their ``agents``), played from
        ``seed`` (drawn when None) up to its first decision. Nothing is stored unless it starts."""
        if self.player is None:
            try:
                self.conn = store.connect(self.db)
            except ValueError as error:
                raise Refused(f"cannot store games: {error}", status=503) from None
            self.conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            self.player = Player([], self.conn)
        try:
            store.check_labels(self.conn, {e.label: e.stored_spec for e in entrants if e.label != HUMAN})
            self.player.enter(entrants)
        except ValueError as error:
            raise Refused(clipped(str(error))) from None
        for label, agent in agents.items():
            self.player.agents.setdefault(label, agent)
        seed = secrets.randbelow(STORED_SEEDS) if seed is None else seed
        players = [e.label for e in entrants] + [store.NO_PLAYER] * (2 - len(entrants))
        job = Job(spec.canonical, players[0], players[1], seed)
        try:
            played = self.player.start(job)
            played.begin()
        except Exception as error:  # the env or an agent's reading of it failed before any move
            raise Refused(f"{spec.canonical} could not start: {clipped(f'{type(error).__name__}: {error}')}") from None
        if played.over and played.result.error is not None:
            raise Refused(f"{spec.canonical} could not start: {clipped(played.result.error)}")
        marked = notes(entrants, [job.env_id])
        store.record_notes(self.conn, marked)
        match = Match(next(self.ids), job, played, frozenset(i for i, e in enumerate(entrants) if e.label == HUMAN),
                      list(marked.values()))  # fmt: skip
        self.matches[match.id] = match
        droppable = [i for i, m in self.matches.items() if m.pending is None]  # a row not yet stored stays
        for match_id in droppable[: max(len(self.matches) - MAX_MATCHES, 0)]:
            del self.matches[match_id]
        self._settle(match)
        return match.state()

    def get(self, match_id: int) -> Match:
        match = self.matches.get(match_id)
        if match is None:
            raise Refused(f"no match {match_id} here (matches live while the server runs; the newest "
                          f"{MAX_MATCHES} are kept)", status=404)  # fmt: skip
        return match

    def _pending_first(self, call: Any, *args: Any) -> Any:
        self._store_pending()
        return call(*args)

    def _claim(self, match_id: int, at: int) -> tuple[Match, int, str]:
        """The match whose agent is to answer, marked as answering (a second step meanwhile is a 409), with the
        seat and the observation it answers."""
        match = self._waiting(match_id, at, human=False)
        if match.acting:
            raise Refused("the agent is already answering this decision", status=409)
        match.acting = True
        seat, observation, _ = match.game.decision
        return match, seat, observation

    def _answered(self, match: Match, seat: int, observation: str, answer: str | Exception) -> dict[str, Any]:
        """The agent's answer (or its exception) handed to the game, the game stored if it ended."""
        match.acting = False
        if isinstance(answer, str):
            match.moves.append(Move(seat, match.game.env.possible_agents[seat], match.seat_labels[seat], answer,
                                    observation))  # fmt: skip
        match.game.advance(answer)
        self._settle(match)
        return match.state()

    def move(self, match_id: int, text: str, at: int) -> dict[str, Any]:
        """A person's move, once the env says it is a valid one."""
        match = self._waiting(match_id, at, human=True)
        if (reason := match.game.env.check_action(text)) is not None:
            raise Refused(f"not a valid move: {clipped(reason)}")
        seat, observation, _ = match.game.decision
        match.moves.append(Move(seat, match.game.env.possible_agents[seat], HUMAN, text, observation))
        match.game.advance(text)
        self._settle(match)
        return match.state()

    def _waiting(self, match_id: int, at: int, human: bool) -> Match:
        """The match, checked to wait on a decision of the kind asked for; ``at`` (the number of moves the
        page has seen) makes a repeated request a 409 instead of a second move."""
        match = self.get(match_id)
        if match.game.over:
            where = "stored" if match.stored is not None else "kept to be stored: " + str(match.pending)
            raise Refused(f"the game is over ({where})", status=409)
        if at != len(match.moves):
            raise Refused(f"the game has moved on: {len(match.moves)} moves made, the request expected {at}",
                          status=409)  # fmt: skip
        turn = match.turn()
        if turn["human"] != human:
            whose = "a person's (send a move)" if turn["human"] else f"{turn['label']}'s (ask for a step)"
            raise Refused(f"it is {whose} turn, in seat {turn['seat']}", status=409)
        return match

    def _settle(self, match: Match) -> None:
        """Store the game's row once it is over (a game is stored once; another game with the same players
        and seed is already stored: its id is given instead). A row the database refuses now (locked by
        another writer, say) stays pending on the match, and every later request tries it again."""
        if not match.game.over or match.stored is not None:
            return
        row = charged(match.game.result, match.game.spent)
        try:
            fresh = store.insert_game(self.conn, row)
            match.stored = {"db": self.db, "id": store.game_id(self.conn, row.key), "new": fresh}
            match.pending = None
        except (sqlite3.Error, ValueError, OverflowError) as error:
            match.pending = f"not written yet ({clipped(str(error))}); it is tried again on every request"

    def _store_pending(self) -> None:
        for match in self.matches.values():
            if match.pending is not None:
                self._settle(match)


def _answer(game: Any) -> str | Exception:
    """The waiting seat's answer, or the exception its agent raised (the game records it and ends: never a 500)."""
    try:
        return game.act()
    except Exception as error:
        return error
