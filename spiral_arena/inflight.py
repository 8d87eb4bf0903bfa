"""Many games in flight at once, each played exactly as it would be alone.

A game is a coroutine over its own rules: it yields each decision ``(seat, observation, info)``, is sent
the seat's answer (or thrown the agent's exception) and returns its result when it is over.
``InFlight.play`` keeps up to ``concurrency`` such games going, in waves: every game moves to its next
decision (scripted seats answer at once), then the decisions waiting on models go out together: API
agents' requests concurrently, on threads; the decisions of copies of one batched agent in one call of
its ``act_together`` (an ``hf:`` model: one generate; the trainer's learner, ``trainers.evaluate``: one
engine call). A game still plays what it would alone, so the results are those of a sequential run
(timing aside):

- each game has its own shallow copy of each of its agents, reset with that game's seed: built-in agents
  rebind their generator on reset, so a copy's random stream is the game's alone, while the heavy parts
  (a loaded model, an HTTP client) stay shared;
- an ``hf:`` batch samples each row from its own copy's generator (``HFAgent.act_together``), so a row
  draws what it would draw alone (only the last bits of batched logits may differ); a batched agent that
  samples a whole batch from one stream (the trainer's learner) is reproducible run to run, not row by row;
- every decision has its own outcome: an agent's exception goes to the game it was acting in, and to no
  other game of the wave;
- an API agent keeps no state between requests but its game's seed: each request of a seeded game carries
  OpenAI's ``seed`` from that seed and the turn (``APIAgent.reset``), so a seeded server (``spiral-arena
  serve`` with a scripted agent) answers it the same at any concurrency; other servers answer as they do.

What an API seat's moves cost is charged to the game they were made in: each decision is one request
(``APIAgent.answer``), whose reply carries its own token counts and latency, added to that game's
``Spent`` for that seat by the thread that sent it. The leaderboard (``leaderboard.runner``),
``spiral-arena play --games N`` and the trainer's evaluation matches (``trainers.evaluate``) play
through here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from spiral_arena.agents import MODEL_KINDS, Agent, APIAgent, parse_spec, split_options
from spiral_arena.llm import PROVIDERS, ChatReply

MODEL_CONCURRENCY = 32  # the default games in flight when an agent waits on a network or a model

Decision = tuple[int, str, dict[str, Any]]  # seat, observation, info
Result = TypeVar("Result")


class Batched(Protocol):
    """An agent whose copies answer a wave's decisions in one call: those of copies sharing a
    ``batch_key`` (the loaded model) go to ``act_together``, row i answered by ``agents[i]``."""

    batch_key: object

    @staticmethod
    def act_together(agents: Sequence[Any], observations: list[str]) -> list[str]: ...


def batched(agent: Agent) -> bool:
    """Whether ``agent`` answers in batches (``Batched``)."""
    return getattr(agent, "batch_key", None) is not None


def default_concurrency(specs: Iterable[str]) -> int:
    """1 (one game at a time: scripted agents need nothing more) unless an agent spec names an API or
    ``hf:``/``vllm:`` agent: then ``MODEL_CONCURRENCY`` games in flight, to overlap requests and batch generation."""
    waits = any(parse_spec(split_options(spec)[0]).kind in (*PROVIDERS, *MODEL_KINDS) for spec in specs)
    return MODEL_CONCURRENCY if waits else 1


def check_concurrency(concurrency: object) -> int:
    """``concurrency`` if it is an integer >= 1, else ValueError."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    return concurrency


@dataclass
class Spent:
    """What one seat's API requests cost in one game: its moves (successful requests), the provider's
    token counts summed over them (None once a reply did not state its count: the sum is unknown, not
    smaller) and their latencies summed, in seconds (``spiral_arena.llm.ChatReply``)."""

    moves: int = 0
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0
    latency_s: float = 0.0

    def add(self, reply: ChatReply) -> None:
        self.moves += 1
        self.prompt_tokens = _plus(self.prompt_tokens, reply.prompt_tokens)
        self.completion_tokens = _plus(self.completion_tokens, reply.completion_tokens)
        self.latency_s += reply.latency_s


def _plus(total: int | None, count: int | None) -> int | None:
    return None if total is None or count is None else total + count


def own_copy(agent: Agent, seed: int | None) -> Agent:
    """A game's own copy of an agent, reset with its seed: it shares what the agent loaded (a model, an
    HTTP client) but not its random stream, which built-in agents rebind on reset."""
    own = copy.copy(agent)
    reset = getattr(own, "reset", None)
    if reset is not None:
        reset(seed=seed)
    return own


@dataclass
class Game(Generic[Result]):
    """A game in flight: its coroutine, its own copy of each seat's agent (``own_copy``), and once it has
    begun, the decision it waits on; once over, its result. ``spent`` holds a ``Spent`` per API seat."""

    play: Generator[Decision, str, Result]
    agents: list[Agent]
    spent: list[Spent | None] = field(init=False)
    decision: Decision | None = field(default=None, init=False)
    result: Result | None = field(default=None, init=False)
    over: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.spent = [Spent() if isinstance(agent, APIAgent) else None for agent in self.agents]

    @property
    def waits_on(self) -> Agent:
        """The agent of the seat whose decision the game waits on."""
        return self.agents[self.decision[0]]

    def begin(self) -> None:
        """Run the game to its first decision (or to its end, if it has none)."""
        self._resume(lambda: next(self.play))

    def act(self) -> str:
        """The waiting seat's agent answers the decision; an API seat's request is charged to this game
        (one thread acts for a game at a time, so its tally needs no lock)."""
        seat, observation, info = self.decision
        tally = self.spent[seat]
        if tally is None:
            return self.agents[seat].act(observation, info)
        reply = self.agents[seat].answer(observation, info)
        tally.add(reply)
        return reply.text

    def advance(self, outcome: str | Exception) -> None:
        """Hand the waiting seat its answer (or its agent's exception)."""
        if isinstance(outcome, Exception):
            self._resume(lambda: self.play.throw(outcome))
        else:
            self._resume(lambda: self.play.send(outcome))

    def _resume(self, step: Callable[[], Decision]) -> None:
        try:
            self.decision = step()
        except StopIteration as end:
            self.decision, self.result, self.over = None, end.value, True


class InFlight:
    """Plays games with up to ``concurrency`` of them in flight (see the module docstring). Holds the
    threads that send a wave's API requests; ``close`` lets them go."""

    def __init__(self, concurrency: int = 1) -> None:
        self.concurrency = check_concurrency(concurrency)
        self.requests: ThreadPoolExecutor | None = None  # made at the first wave that needs it

    def play(self, games: Iterable[Game[Result]]) -> Iterator[Game[Result]]:
        """Every game, over, in the order they end; ``games`` is read only as games start, so a lazy
        iterable keeps feeding the waves. An exception a game's coroutine does not handle propagates."""
        pending = iter(games)
        flying: list[Game[Result]] = []
        while True:
            while len(flying) < self.concurrency and (game := next(pending, None)) is not None:
                game.begin()
                _settle(game)
                if game.over:
                    yield game
                else:
                    flying.append(game)
            if not flying:
                return
            ongoing = []
            for game, outcome in zip(flying, self._answers(flying), strict=True):
                game.advance(outcome)
                _settle(game)
                if game.over:
                    yield game
                else:
                    ongoing.append(game)
            flying = ongoing

    def close(self) -> None:
        """Let the request threads go, without waiting for requests still out (a run stopped midway)."""
        if self.requests is not None:
            self.requests.shutdown(wait=False, cancel_futures=True)
            self.requests = None

    def _answers(self, games: Sequence[Game]) -> list[str | Exception]:
        """One wave: the answer to each game's decision, or the exception its agent raised for it. Every
        API request goes out at once, and is awaited once each batched agent has answered its batch."""
        api = [i for i, game in enumerate(games) if isinstance(game.waits_on, APIAgent)]
        if api and self.requests is None:
            self.requests = ThreadPoolExecutor(self.concurrency, thread_name_prefix="spiral-arena-api")
        requests = {i: self.requests.submit(games[i].act) for i in api}
        by_model: dict[int, list[int]] = {}
        for i, game in enumerate(games):
            if batched(game.waits_on):
                by_model.setdefault(id(game.waits_on.batch_key), []).append(i)
        outcomes: dict[int, str | Exception] = {}
        for members in by_model.values():
            outcomes.update(zip(members, _generated([games[i] for i in members]), strict=True))
        outcomes.update((i, _answer(future.result)) for i, future in requests.items())
        return [outcomes[i] for i in range(len(games))]


def _settle(game: Game) -> None:
    """Let the game's scripted seats answer until it waits on an API or batched agent, or ends."""
    while not game.over and not (isinstance(game.waits_on, APIAgent) or batched(game.waits_on)):
        game.advance(_answer(game.act))


def _answer(act: Callable[[], str]) -> str | Exception:
    """What ``act`` returns, or the exception it raised: the outcome of one decision."""
    try:
        return act()
    except Exception as exc:  # goes to that decision's game, in the game's coroutine
        return exc


def _generated(games: list[Game]) -> list[str | Exception]:
    """One batched model's decisions of a wave in one call, each row answered by its game's copy; a failed
    batch (out of memory, say) goes to every game in it."""
    agents = [game.waits_on for game in games]
    try:
        return list(agents[0].act_together(agents, [game.decision[1] for game in games]))
    except Exception as exc:
        return [exc] * len(games)
