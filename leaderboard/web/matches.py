"""A game in the browser: the leaderboard's own game (``leaderboard.runner.Player``: the same env, seeds,
agents and stored row), with a person in any seat.

A match is the leaderboard's coroutine for one ``Job`` (env id, the label in each seat, seed), driven one
decision at a time: ``step`` lets the agent whose turn it is answer, ``move`` hands a person's text to the
game once the env says it is a valid move (an invalid one is refused with the env's reason, and the person
tries again, as ``play --p0 human`` re-prompts). Each answer is kept with the observation its seat read, so
the page shows exactly what a model would see. When the game ends its row is stored in the database,
where ``leaderboard show`` rates it and the page's leaderboard lists it, transcript included.

Every call runs on one thread (``Matches.worker``): agents (an ``hf:`` model) are not shared across threads,
and SQLite connections are bound to the thread that opened them.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leaderboard import store
from leaderboard.entrants import Entrant, notes, parse_entrant
from leaderboard.runner import Player, charged
from leaderboard.schedule import Job
from spiral_arena.core.env import SEED_LIMIT
from spiral_arena.registry import GameSpec

HUMAN = "human"  # the seat a person plays from the page
MAX_MATCHES = 64  # matches kept in memory; the oldest is forgotten first (finished ones are stored)
STORED_SEEDS = 2**31  # a match without a seed draws one below this


class MatchError(Exception):
    """A request about a match that cannot be carried out: ``status`` is its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


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
    lock: threading.Lock = field(default_factory=threading.Lock)

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
            "over": self.game.over,
            "result": result,
            "stored": self.stored,
            "notes": self.notes,
        }


class Matches:
    """The matches of one server, and the leaderboard ``Player`` (agents built once per label) that plays
    them and stores their rows in ``db``."""

    def __init__(self, db: str | Path) -> None:
        self.db = str(db)
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="spiral-arena-web")
        self.matches: OrderedDict[int, Match] = OrderedDict()
        self.ids = itertools.count(1)
        self.player: Player | None = None  # made at the first match, on the worker thread
        self.conn = None

    def close(self) -> None:
        def release() -> None:
            if self.player is not None:
                self.player.close()
            if self.conn is not None:
                self.conn.close()

        self.worker.submit(release).result()
        self.worker.shutdown()

    def run(self, call: Any, *args: Any) -> Any:
        """``call(*args)`` on the worker thread, waited for."""
        return self.worker.submit(call, *args).result()

    # -- on the worker thread ---------------------------------------------------------------------------

    def create(self, game: str, seats: Sequence[str], seed: int | None = None) -> dict[str, Any]:
        """A new match of ``game`` (an env id with options) with ``seats[i]`` in seat i (``human`` or an agent
        spec), played from ``seed`` (drawn when None) up to its first decision."""
        spec = _game(game)
        if len(seats) != spec.players:
            raise MatchError(422, f"{spec.env_id} has {spec.players} seat(s); got {len(seats)} player(s)")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT):
            raise MatchError(422, "seed must be a whole number from 0 to 2**64 - 1, or left out")
        entrants = [_entrant(text, seat) for seat, text in enumerate(seats)]
        if self.player is None:
            try:
                self.conn = store.connect(self.db)
            except ValueError as error:
                raise MatchError(503, f"cannot store games: {error}") from None
            self.player = Player([], self.conn)
        try:
            store.check_labels(self.conn, {e.label: e.stored_spec for e in entrants if e.label != HUMAN})
            self.player.enter(entrants)
        except ValueError as error:
            raise MatchError(422, str(error)) from None
        seed = secrets.randbelow(STORED_SEEDS) if seed is None else seed
        players = [e.label for e in entrants] + [store.NO_PLAYER] * (2 - len(entrants))
        job = Job(spec.canonical, players[0], players[1], seed)
        marked = notes(entrants, [job.env_id])
        store.record_notes(self.conn, marked)
        played = self.player.start(job)
        played.begin()
        match = Match(next(self.ids), job, played, frozenset(i for i, e in enumerate(entrants) if e.label == HUMAN),
                      list(marked.values()))  # fmt: skip
        self.matches[match.id] = match
        while len(self.matches) > MAX_MATCHES:
            self.matches.popitem(last=False)
        self._settle(match)
        return match.state()

    def get(self, match_id: int) -> Match:
        match = self.matches.get(match_id)
        if match is None:
            raise MatchError(404, f"no match {match_id} here (matches live while the server runs; the newest "
                                  f"{MAX_MATCHES} are kept)")  # fmt: skip
        return match

    def step(self, match_id: int, at: int | None) -> dict[str, Any]:
        """The agent whose turn it is answers (its error ends the game as an error, as in the leaderboard)."""
        match = self._waiting(match_id, at, human=False)
        seat, observation, _ = match.game.decision
        try:
            answer: str | Exception = match.game.act()
        except Exception as error:  # the game records it and ends, never a 500
            answer = error
        if isinstance(answer, str):
            match.moves.append(Move(seat, match.game.env.possible_agents[seat], match.seat_labels[seat], answer,
                                    observation))  # fmt: skip
        match.game.advance(answer)
        self._settle(match)
        return match.state()

    def move(self, match_id: int, text: Any, at: int | None) -> dict[str, Any]:
        """A person's move, once the env says it is a valid one."""
        if not isinstance(text, str) or not text.strip():
            raise MatchError(422, "'text' must be the move as text, e.g. [4] or [check]")
        match = self._waiting(match_id, at, human=True)
        if (reason := match.game.env.check_action(text)) is not None:
            raise MatchError(422, f"not a valid move: {reason}")
        seat, observation, _ = match.game.decision
        match.moves.append(Move(seat, match.game.env.possible_agents[seat], HUMAN, text, observation))
        match.game.advance(text)
        self._settle(match)
        return match.state()

    def _waiting(self, match_id: int, at: int | None, human: bool) -> Match:
        """The match, checked to wait on a decision of the kind asked for; ``at`` (the number of moves the
        page has seen) makes a repeated request a 409 instead of a second move."""
        match = self.get(match_id)
        if match.game.over:
            raise MatchError(409, "the game is over")
        if at is not None and at != len(match.moves):
            raise MatchError(409, f"the game has moved on: {len(match.moves)} moves made, the request expected {at}")
        turn = match.turn()
        if turn["human"] != human:
            whose = "a person's (send a move)" if turn["human"] else f"{turn['label']}'s (ask for a step)"
            raise MatchError(409, f"it is {whose} turn, in seat {turn['seat']}")
        return match

    def _settle(self, match: Match) -> None:
        """Store the game's row once it is over (a game is stored once; another game with the same players
        and seed is already stored: its id is given instead)."""
        if not match.game.over or match.stored is not None:
            return
        row = charged(match.game.result, match.game.spent)
        fresh = store.insert_game(self.conn, row)
        match.stored = {"db": self.db, "id": store.game_id(self.conn, row.key), "new": fresh}


def _game(text: Any) -> GameSpec:
    if not isinstance(text, str) or not text.strip():
        raise MatchError(422, "'game' must be an env id, e.g. TicTacToe-v0 or KuhnPoker-v0:rounds=1")
    try:
        spec = GameSpec.parse(text)
        spec.registered  # noqa: B018 (raises, naming the registered ids, for an unknown one)
    except ValueError as error:
        raise MatchError(422, f"game: {error}") from None
    return spec


def _entrant(text: Any, seat: int) -> Entrant:
    """A seat's player: a person, or an agent spec as the leaderboard reads it (``[NAME=]SPEC[#OPTION=...]``)."""
    if not isinstance(text, str) or not text.strip():
        raise MatchError(422, f"seat {seat}: give 'human' or an agent spec such as expert, random or hf:PATH")
    if text.strip() == HUMAN:
        return Entrant(HUMAN, HUMAN)
    try:
        return parse_entrant(text)  # the spec is parsed there: an unknown kind is a ValueError naming the valid ones
    except ValueError as error:
        raise MatchError(422, f"seat {seat}: {error}") from None
