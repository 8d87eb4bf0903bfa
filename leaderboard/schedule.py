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
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from leaderboard.store import NO_PLAYER
from spiral_arena.registry import canonical_env_id, make, parse_env_id, spec

DEFAULT_GAMES = ("TicTacToe-v0", "KuhnPoker-v0", "SimpleNegotiation-v0")  # the SPIRAL training games
SEED_MAX = 2**63 - 1  # the largest seed a game row can store (an SQLite INTEGER)


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
    return len(spec(parse_env_id(env_id)[0]).game.agents)


def check_games(env_ids: Sequence[str]) -> list[str]:
    """The env ids in their canonical spelling (options are part of a game's identity:
    ``KuhnPoker-v0:rounds=1`` is another game than ``KuhnPoker-v0``), each checked to be a registered
    one- or two-player game whose options its env accepts; ValueError (or TypeError for options) otherwise."""
    if not env_ids:
        raise ValueError("give at least one game, e.g. --games TicTacToe-v0,KuhnPoker-v0")
    checked = []
    for env_id in map(canonical_env_id, env_ids):
        make(env_id)  # unknown ids and options fail here, before any game is scheduled
        seated = players(env_id)
        if seated not in (1, 2):
            raise ValueError(f"{env_id} has {seated} players; the leaderboard plays one- and two-player games only")
        if env_id in checked:
            raise ValueError(f"game {env_id} is listed twice")
        checked.append(env_id)
    return checked


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_field(labels: Sequence[str], seed: int, seeds: int) -> None:
    """Distinct labels, and ``seeds`` seeds from ``seed`` that the store can hold."""
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if seed + seeds - 1 > SEED_MAX:
        last = seed + seeds - 1
        raise ValueError(f"seeds run from {seed} to {last}; the last must be at most {SEED_MAX} (2**63 - 1)")
    if len(set(labels)) != len(labels):
        raise ValueError("agent labels must be distinct")


def round_robin(labels: Sequence[str], env_ids: Sequence[str], games_per_pair: int, seed: int = 0) -> list[Job]:
    """Every unordered pair of ``labels`` on every two-player game, ``games_per_pair`` games each (an even
    number: ``games_per_pair / 2`` seeds, each from both seats). The two seatings of a seed are adjacent."""
    if not _is_int(games_per_pair) or games_per_pair < 2 or games_per_pair % 2:
        raise ValueError(
            "games per pair must be an even number >= 2 (each seed is played twice, seats swapped), "
            f"got {games_per_pair!r}"
        )
    _check_field(labels, seed, games_per_pair // 2)
    env_ids = check_games(env_ids)
    solo = [env_id for env_id in env_ids if players(env_id) == 1]
    if solo:
        raise ValueError(f"{', '.join(solo)}: single-player, so not for a round robin; schedule it with solo_runs")
    return [
        job
        for env_id in env_ids
        for a, b in itertools.combinations(labels, 2)
        for s in range(seed, seed + games_per_pair // 2)
        for job in (Job(env_id, a, b, s), Job(env_id, b, a, s))
    ]


def solo_runs(labels: Sequence[str], env_ids: Sequence[str], games_per_agent: int, seed: int = 0) -> list[Job]:
    """Every agent alone on every single-player game, on seeds ``seed .. seed + games_per_agent - 1``:
    the same seeds, hence the same secrets, for every agent, so success rates compare like with like."""
    if not _is_int(games_per_agent) or games_per_agent < 1:
        raise ValueError(
            "games per agent (--games-per-pair, in single-player games) must be an integer >= 1, "
            f"got {games_per_agent!r}"
        )
    _check_field(labels, seed, games_per_agent)
    env_ids = check_games(env_ids)
    paired = [env_id for env_id in env_ids if players(env_id) == 2]
    if paired:
        raise ValueError(f"{', '.join(paired)}: two-player, so not for solo runs; schedule it with round_robin")
    return [
        Job(env_id, label, NO_PLAYER, s)
        for env_id in env_ids
        for label in labels
        for s in range(seed, seed + games_per_agent)
    ]


def schedule(
    labels: Sequence[str],
    env_ids: Sequence[str],
    games: int,
    seed: int = 0,
    reference: Collection[str] | None = None,
) -> list[Job]:
    """Every game of a run, game by game in the order of ``env_ids``: ``games`` per pair in two-player
    games (``round_robin``), per agent in single-player ones (``solo_runs``). With ``reference`` (the
    labels of a reference pool, ``leaderboard.reference_pool``), a pair of two labels outside it is left out: an
    added agent plays the pool, never another added agent."""
    pool = None if reference is None else set(reference)
    return [
        job
        for env_id in check_games(env_ids)
        for job in (round_robin if players(env_id) == 2 else solo_runs)(labels, [env_id], games, seed)
        if pool is None or job.player1 == NO_PLAYER or job.player0 in pool or job.player1 in pool
    ]
