"""Whole games between agents, one at a time or many in flight (used by ``spiral-arena play``).

Each seat reads the match in the text its agent knows: a checkpoint (``hf:``, ``vllm:``) the text it was
trained on (``models.checkpoints.Trained``: TicTacToe's board layout, the observation format), every other
agent the match's own; the rules are always the match's. ``seat_texts`` decides it and ``Notes`` says, once
per line, where a checkpoint plays rules it did not train on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from spiral_arena.agents import Agent, HumanAgent
from spiral_arena.core.env import TextGameEnv
from spiral_arena.inflight import Decision, Game, InFlight, own_copy
from spiral_arena.llm import APIError
from spiral_arena.models.checkpoints import Reading
from spiral_arena.registry import ENV_KWARGS, GameSpec, SeatText, make, seat_text_key


class Notes:
    """Lines a command says once each (``say``: one line on stderr by default): a checkpoint playing a match
    whose rules it did not train on, say. Shared by every match of a command, so each line shows once."""

    def __init__(self, say: Callable[[str], None] | None = None) -> None:
        self.said: list[str] = []
        self.say = say or (lambda line: print(f"note: {line}", file=sys.stderr))

    def __call__(self, line: str | None) -> None:
        if line and line not in self.said:
            self.said.append(line)
            self.say(line)


def reading(agent: Agent, game: GameSpec) -> Reading:
    """How ``agent`` reads ``game``: a model agent as its checkpoint records (``Trained.reading``), any other
    agent the match's own text."""
    trained = getattr(agent, "trained", None)
    return trained.reading(game) if trained is not None else Reading()


def seat_texts(game: GameSpec, agents: Sequence[Agent], notes: Callable[[str | None], None]) -> tuple[SeatText, ...]:
    """What each seat of ``game`` is shown (``registry.make``'s ``seat_text``), agent i in seat i; each
    agent's note (if any) goes to ``notes``."""
    readings = [reading(agent, game) for agent in agents]
    for read in readings:
        notes(read.note)
    return tuple(read.text for read in readings)


@dataclass
class GameRecord:
    """What happened in one game: the one record ``spiral-arena play``, the leaderboard (which stores it as a
    row, ``leaderboard.runner.record_row``) and the trainer (inside each ``GameResult``) keep of a game."""

    seed: int | None
    players: tuple[str, ...] = ()  # the env's agent names, in seat order
    returns: tuple[float, ...] = ()  # what the env paid each seat (so far, for a truncated game)
    invalid: dict[str, str] = field(default_factory=dict)  # offender -> reason
    moves: list[tuple[str, str]] = field(default_factory=list)  # (player, answer as given), in order
    ends: tuple[str, ...] = ()  # each seat's last message: the game's verdict as that player read it
    error: str | None = None  # "Type: message" of an agent failure that stopped the game: it is not scored
    error_seat: int | None = None  # whose agent failed
    outcome: dict[str, Any] = field(default_factory=dict)  # the env's ``outcome``: winner (a name or None), reason

    @property
    def steps(self) -> int:
        return len(self.moves)

    @property
    def winner(self) -> str | None:
        return self.outcome.get("winner")

    @property
    def truncated(self) -> bool:
        """Stopped by a cap outside the rules (``TextGameEnv.truncate``), without a result."""
        return self.outcome.get("reason") == "truncation"

    @property
    def invalid_seat(self) -> int | None:
        """The seat of the (first) player whose invalid answer ended the game, or None."""
        return next((self.players.index(name) for name in self.players if name in self.invalid), None)


def read_end(env: TextGameEnv, record: GameRecord) -> GameRecord:
    """``record`` with what the env says of its game once it is over, before its agents step out (stepping
    out clears their infos): the returns, each offender's reason, the outcome and each seat's last message."""
    infos, players = env.infos, env.possible_agents
    record.returns = env.returns
    record.invalid = {a: infos[a]["invalid_move"] for a in players if "invalid_move" in infos[a]}
    record.outcome = infos[players[0]].get("outcome", {})
    record.ends = tuple(env.log.latest(seat).removeprefix("[GAME] ") for seat in range(len(players)))
    return record


def agent_seed(seed: int | None, seat: int) -> int | None:
    """The seed the agent in ``seat`` is reset with for the game of ``seed``."""
    return None if seed is None else seed + 1 + seat


def game_moves(
    env: TextGameEnv,
    seed: int | None,
    on_step: Callable[[str, str], None] | None = None,
    max_moves: int | None = None,
    errors: tuple[type[Exception], ...] = (APIError,),
) -> Generator[Decision, str, GameRecord]:
    """One game in ``env`` as a coroutine (``spiral_arena.inflight``): it yields each decision and is
    sent the seat's answer; a failure of one of ``errors`` thrown in (or an answer that is not a str)
    stops the game (``GameRecord.error``), any other propagates. A game still going after ``max_moves``
    answers is truncated (a cap outside the rules, as a trainer sets)."""
    env.reset(seed=seed)
    record = GameRecord(seed, tuple(env.possible_agents))
    for name in env.agent_iter():
        observation, _, terminated, truncated, info = env.last()
        if not (terminated or truncated) and max_moves is not None and len(record.moves) >= max_moves:
            env.truncate()
            observation, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            if not record.outcome:  # the first player to step out: every info still holds the end
                read_end(env, record)
            env.step(None)
            continue
        seat = env.possible_agents.index(name)
        try:
            action = yield seat, observation, info
            if not isinstance(action, str):
                raise TypeError(f"act() returned {type(action).__name__}, not str")
        except errors as error:
            record.error, record.error_seat = f"{type(error).__name__}: {error}", seat
            return record
        if on_step is not None:
            on_step(name, action)
        env.step(action)
        record.moves.append((name, action))
    return record


def play_game(
    env: TextGameEnv,
    agents: Sequence[Agent],
    seed: int | None = None,
    on_step: Callable[[str, str], None] | None = None,
) -> GameRecord:
    """One game now, agent i in seat i, each reset with ``agent_seed``; an agent's exception propagates.
    Human agents get the env's validator, so typos re-prompt."""
    for seat, agent in enumerate(agents):
        if isinstance(agent, HumanAgent):
            agent.validate = env.check_action
        if hasattr(agent, "reset"):
            agent.reset(seed=agent_seed(seed, seat))
    game = Game(game_moves(env, seed, on_step), list(agents))
    game.begin()
    while not game.over:
        game.advance(game.act())
    return game.result


@dataclass
class _Played(Game[GameRecord]):
    """A game of ``play_games`` in flight: also its place in the list and the env it is played in."""

    index: int = field(kw_only=True)
    env: TextGameEnv = field(kw_only=True)
    key: tuple = field(kw_only=True)  # what each seat reads: the env goes back to the spares of its kind


def play_games(
    env_id: str,
    agents: Sequence[Agent],
    seeds: Sequence[int | None],
    concurrency: int = 1,
    on_step: Callable[[str, str], None] | None = None,
    on_start: Callable[[int, int | None], None] | None = None,
    *,
    env_options: dict[str, Any] | None = None,
    rotate_seats: bool = False,
    max_moves: int | None = None,
    notes: Callable[[str | None], None] | None = None,
) -> Iterator[tuple[int, GameRecord]]:
    """Game i plays ``seeds[i]``, agent j in seat j (``rotate_seats``: in seat (i + j) mod the number of
    seats, so each agent takes every seat in turn), with up to ``concurrency`` games in flight
    (``spiral_arena.inflight``: API requests concurrently, a batched agent's decisions in one call);
    yields (i, its record) as games end. Each game has its own copy of each agent, reset with
    ``agent_seed``, so a game plays what ``play_game`` plays with the same seed, whatever else is in
    flight. ``on_start(i, seed)`` is called as game i begins. ``env_options`` go to ``make``;
    ``max_moves`` caps each game (``game_moves``). Each seat reads the game as its agent knows it
    (``seat_texts``); ``notes`` (default: a ``Notes`` of this call) hears each agent's note."""
    idle: dict[tuple, list[TextGameEnv]] = {}  # by what each seat reads
    flight = InFlight(concurrency)
    n = len(agents)
    rules = {k: v for k, v in (env_options or {}).items() if k not in ENV_KWARGS}
    texts = seat_texts(GameSpec.parse(env_id).with_options(**rules), agents, notes or Notes())

    def start(index: int, seed: int | None) -> _Played:
        order = [(seat - index) % n for seat in range(n)] if rotate_seats else list(range(n))
        seated, text = [agents[i] for i in order], tuple(texts[i] for i in order)
        key = seat_text_key(text)
        spare = idle.setdefault(key, [])
        env = spare.pop() if spare else make(env_id, render_mode="ansi", seat_text=text, **(env_options or {}))
        own = [own_copy(agent, agent_seed(seed, seat)) for seat, agent in enumerate(seated)]
        for agent in own:
            if isinstance(agent, HumanAgent):
                agent.validate = env.check_action
        if on_start is not None:
            on_start(index, seed)
        return _Played(game_moves(env, seed, on_step, max_moves), own, index=index, env=env, key=key)

    try:
        for game in flight.play(start(i, seed) for i, seed in enumerate(seeds)):
            idle[game.key].append(game.env)
            yield game.index, game.result
    finally:
        flight.close()
