"""What to play: a duplicate round robin for two-player games, every agent alone for single-player ones.

Two-player games are played in duplicate format: every pair plays every seed twice, once from each
seat. Playing the same seed from both seats gives both agents the same deals, dice and first-move
advantage, so luck cancels within each pair of games. Single-player games have no seats to swap: every
agent plays the same seeds, so all face the same secrets. Seeds are ``seed, seed + 1, ...`` for every
pair (or agent) and game, so a game is fully named by (env id, player_0, player_1, seed): that is the
database's unique key, with ``player1`` = ``store.NO_PLAYER`` in single-player games.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

from leaderboard.store import NO_PLAYER
from spiral_arena.registry import GameSpec

DEFAULT_GAMES = ("TicTacToe-v0", "KuhnPoker-v0", "SimpleNegotiation-v0")  # the SPIRAL training games
SEED_MAX = 2**63 - 1  # the largest seed a game row can store (an SQLite INTEGER)
# Limits checked before anything is built or played (docs/leaderboard.md): far above any useful run, far
# below what would exhaust memory or time before the first game.
MAX_GAMES_PER_PAIR = 1_000_000  # per pair and game id (per agent in single-player games)
MAX_AGENTS = 1_000
MAX_GAMES = 10_000_000  # scheduled games in one run, every pair and game id together


@dataclass(frozen=True)
class Job:
    """One game to play: ``player0`` sits in seat 0 (``player_0``); ``player1`` is ``NO_PLAYER`` in a
    single-player game."""

    env_id: str
    player0: str
    player1: str
    seed: int

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.env_id, self.player0, self.player1, self.seed)

    @property
    def players(self) -> tuple[str, ...]:
        """The label in each seat the game has."""
        return (self.player0,) if self.player1 == NO_PLAYER else (self.player0, self.player1)


def players(env_id: str) -> int:
    """How many players the (registered) game ``env_id`` seats."""
    return GameSpec.parse(env_id).players


def check_games(env_ids: Sequence[str]) -> list[str]:
    """The env ids in their canonical spelling (options are part of a game's identity:
    ``KuhnPoker-v0:rounds=1`` is another game than ``KuhnPoker-v0``), each checked to be a registered
    one- or two-player game whose options its env accepts; ValueError (or TypeError for options) otherwise."""
    if not env_ids:
        raise ValueError("give at least one game, e.g. --games TicTacToe-v0,KuhnPoker-v0")
    checked = []
    for game in map(GameSpec.parse, env_ids):
        game.make()  # unknown ids and options fail here, before any game is scheduled
        env_id, seated = game.canonical, game.players
        if seated not in (1, 2):
            raise ValueError(f"{env_id} has {seated} players; the leaderboard plays one- and two-player games only")
        if env_id in checked:
            raise ValueError(f"game {env_id} is listed twice")
        checked.append(env_id)
    return checked


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_field(labels: Sequence[str], seed: int, seeds: int) -> None:
    """Distinct labels, not more than ``MAX_AGENTS``, and ``seeds`` seeds from ``seed`` that the store can hold."""
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if seed + seeds - 1 > SEED_MAX:
        last = seed + seeds - 1
        raise ValueError(f"seeds run from {seed} to {last}; the last must be at most {SEED_MAX} (2**63 - 1)")
    if len(set(labels)) != len(labels):
        raise ValueError("agent labels must be distinct")
    if len(labels) > MAX_AGENTS:
        raise ValueError(f"{len(labels)} agents; a run takes at most {MAX_AGENTS:,}")


def _check_games_per_pair(games: object, paired: bool) -> None:
    """``games`` per pair (``paired``: even, >= 2) or per agent (>= 1), at most ``MAX_GAMES_PER_PAIR``."""
    if paired and (not _is_int(games) or games < 2 or games % 2):
        raise ValueError(
            f"games per pair must be an even number >= 2 (each seed is played twice, seats swapped), got {games!r}"
        )
    if not paired and (not _is_int(games) or games < 1):
        raise ValueError(
            f"games per agent (--games-per-pair, in single-player games) must be an integer >= 1, got {games!r}"
        )
    if games > MAX_GAMES_PER_PAIR:
        raise ValueError(f"{games:,} games per pair; a run plays at most {MAX_GAMES_PER_PAIR:,} per pair and game id")


class Schedule:
    """Every game of a run, in order, without holding them: iterating yields the ``Job`` s one by one,
    ``len`` counts them and ``key in schedule`` is arithmetic, so memory does not grow with the number of
    games asked for. Game by game in the order of ``env_ids``; two-player games pair by pair (the two
    seatings of a seed adjacent), single-player games agent by agent, seeds ascending. With ``reference``
    (a reference pool's labels), a pair of two labels outside it is left out."""

    def __init__(
        self,
        labels: Sequence[str],
        env_ids: Sequence[str],
        games: int,
        seed: int = 0,
        reference: Collection[str] | None = None,
    ) -> None:
        self.labels = tuple(labels)
        self.env_ids = tuple(env_ids)
        self.seats = {env_id: players(env_id) for env_id in self.env_ids}
        self.games = games
        self.seed = seed
        self.pool = None if reference is None else frozenset(reference)
        self._labels = frozenset(self.labels)

    def _paired(self, a: str, b: str) -> bool:
        return self.pool is None or a in self.pool or b in self.pool

    def _seeds(self, env_id: str) -> range:
        return range(self.seed, self.seed + (self.games // 2 if self.seats[env_id] == 2 else self.games))

    def __iter__(self) -> Iterator[Job]:
        for env_id in self.env_ids:
            seeds = self._seeds(env_id)
            if self.seats[env_id] == 1:
                yield from (Job(env_id, label, NO_PLAYER, s) for label in self.labels for s in seeds)
                continue
            for a, b in itertools.combinations(self.labels, 2):
                if self._paired(a, b):
                    for s in seeds:
                        yield Job(env_id, a, b, s)
                        yield Job(env_id, b, a, s)

    def __len__(self) -> int:
        n = len(self.labels)
        added = n if self.pool is None else sum(label not in self.pool for label in self.labels)
        pairs = n * (n - 1) // 2 - (0 if self.pool is None else added * (added - 1) // 2)
        return sum((n if self.seats[env_id] == 1 else 2 * pairs) * len(self._seeds(env_id)) for env_id in self.env_ids)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` (env id, player_0, player_1, seed) is one of the schedule's games."""
        if not isinstance(key, tuple) or len(key) != 4:
            return False
        env_id, player0, player1, seed = key
        if env_id not in self.seats or player0 not in self._labels or seed not in self._seeds(env_id):
            return False
        if self.seats[env_id] == 1:
            return player1 == NO_PLAYER
        return player1 in self._labels and player1 != player0 and self._paired(player0, player1)


def round_robin(labels: Sequence[str], env_ids: Sequence[str], games_per_pair: int, seed: int = 0) -> list[Job]:
    """Every unordered pair of ``labels`` on every two-player game, ``games_per_pair`` games each (an even
    number: ``games_per_pair / 2`` seeds, each from both seats). The two seatings of a seed are adjacent."""
    _check_games_per_pair(games_per_pair, paired=True)
    env_ids = check_games(env_ids)
    solo = [env_id for env_id in env_ids if players(env_id) == 1]
    if solo:
        raise ValueError(f"{', '.join(solo)}: single-player, so not for a round robin; schedule it with solo_runs")
    return list(schedule(labels, env_ids, games_per_pair, seed))


def solo_runs(labels: Sequence[str], env_ids: Sequence[str], games_per_agent: int, seed: int = 0) -> list[Job]:
    """Every agent alone on every single-player game, on seeds ``seed .. seed + games_per_agent - 1``:
    the same seeds, hence the same secrets, for every agent, so success rates compare like with like."""
    _check_games_per_pair(games_per_agent, paired=False)
    env_ids = check_games(env_ids)
    paired = [env_id for env_id in env_ids if players(env_id) == 2]
    if paired:
        raise ValueError(f"{', '.join(paired)}: two-player, so not for solo runs; schedule it with round_robin")
    return list(schedule(labels, env_ids, games_per_agent, seed))


def schedule(
    labels: Sequence[str],
    env_ids: Sequence[str],
    games: int,
    seed: int = 0,
    reference: Collection[str] | None = None,
) -> Schedule:
    """Every game of a run (a lazy ``Schedule``): ``games`` per pair in two-player games, per agent in
    single-player ones. With ``reference`` (the labels of a reference pool, ``leaderboard.reference_pool``),
    an added agent plays the pool, never another added agent. Every limit (``MAX_GAMES_PER_PAIR``,
    ``MAX_AGENTS``, ``MAX_GAMES``, the seed range) is checked here, before any game is built: one
    ValueError line."""
    env_ids = check_games(env_ids)
    seated = {players(env_id) for env_id in env_ids}
    for paired in sorted(seated, reverse=True):  # an odd count fails as "even" where a two-player game is asked
        _check_games_per_pair(games, paired=paired == 2)
    _check_field(labels, seed, games // 2 if seated == {2} else games)
    planned = Schedule(labels, env_ids, games, seed, reference)
    if len(planned) > MAX_GAMES:
        raise ValueError(
            f"{len(planned):,} games scheduled ({len(labels)} agents, {len(env_ids)} game id(s), {games:,} games "
            f"per pair); a run plays at most {MAX_GAMES:,}: fewer agents, games or games per pair"
        )
    return planned
