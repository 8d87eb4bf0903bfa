"""Whole games between agents, one at a time or many in flight (used by ``spiral-arena play``)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field

from spiral_arena.agents import Agent, HumanAgent
from spiral_arena.core.env import TextGameEnv
from spiral_arena.inflight import Decision, Game, InFlight, own_copy
from spiral_arena.llm import APIError
from spiral_arena.registry import make


@dataclass
class GameRecord:
    seed: int | None
    returns: tuple[float, ...] = ()
    invalid: dict[str, str] = field(default_factory=dict)  # offender -> reason
    moves: list[tuple[str, str]] = field(default_factory=list)  # (player, answer as given), in order
    ends: tuple[str, ...] = ()  # each seat's last message: the game's verdict as that player read it
    error: str | None = None  # an API failure that stopped the game: it is not scored

    @property
    def steps(self) -> int:
        return len(self.moves)


def agent_seed(seed: int | None, seat: int) -> int | None:
    """The seed the agent in ``seat`` is reset with for the game of ``seed``."""
    return None if seed is None else seed + 1 + seat


def game_moves(
    env: TextGameEnv, seed: int | None, on_step: Callable[[str, str], None] | None = None
) -> Generator[Decision, str, GameRecord]:
    """One game in ``env`` as a coroutine (``spiral_arena.inflight``): it yields each decision and is
    sent the seat's answer; an API failure thrown in stops the game (``GameRecord.error``)."""
    env.reset(seed=seed)
    record = GameRecord(seed)
    for name in env.agent_iter():
        observation, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            if "invalid_move" in info:
                record.invalid[name] = info["invalid_move"]
            env.step(None)
            continue
        try:
            action = yield env.possible_agents.index(name), observation, info
        except APIError as error:
            record.error = str(error)
            return record
        if on_step is not None:
            on_step(name, action)
        env.step(action)
        record.moves.append((name, action))
    record.returns = env.returns
    record.ends = tuple(env.log.latest(seat).removeprefix("[GAME] ") for seat in range(len(env.possible_agents)))
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


def play_games(
    env_id: str,
    agents: Sequence[Agent],
    seeds: Sequence[int | None],
    concurrency: int = 1,
    on_step: Callable[[str, str], None] | None = None,
    on_start: Callable[[int, int | None], None] | None = None,
) -> Iterator[tuple[int, GameRecord]]:
    """Game i plays ``seeds[i]``, agent j in seat j, with up to ``concurrency`` games in flight
    (``spiral_arena.inflight``: API requests concurrently, an ``hf:`` model's decisions in one batch);
    yields (i, its record) as games end. Each game has its own copy of each agent, reset with
    ``agent_seed``, so a game plays what ``play_game`` plays with the same seed, whatever else is in
    flight. ``on_start(i, seed)`` is called as game i begins."""
    idle: list[TextGameEnv] = []
    flight = InFlight(concurrency)

    def start(index: int, seed: int | None) -> _Played:
        env = idle.pop() if idle else make(env_id, render_mode="ansi")
        own = [own_copy(agent, agent_seed(seed, seat)) for seat, agent in enumerate(agents)]
        for agent in own:
            if isinstance(agent, HumanAgent):
                agent.validate = env.check_action
        if on_start is not None:
            on_start(index, seed)
        return _Played(game_moves(env, seed, on_step), own, index=index, env=env)

    try:
        for game in flight.play(start(i, seed) for i, seed in enumerate(seeds)):
            idle.append(game.env)
            yield game.index, game.result
    finally:
        flight.close()
