"""The round robin in duplicate format: every pair plays every seed twice, once from each seat.

Playing the same seed from both seats gives both agents the same deals, dice and first-move advantage,
so luck cancels within each pair of games. Seeds are ``seed, seed + 1, ...`` for every pair and game, so
a game is fully named by (env id, player_0, player_1, seed): that is the database's unique key.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from spiral_arena.registry import canonical_env_id, make, parse_env_id, spec

DEFAULT_GAMES = ("TicTacToe-v0", "KuhnPoker-v0", "SimpleNegotiation-v0")  # the SPIRAL training games


@dataclass(frozen=True)
class Job:
    """One game to play: ``player0`` sits in seat 0 (``player_0``)."""

    env_id: str
    player0: str
    player1: str
    seed: int

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.env_id, self.player0, self.player1, self.seed)


def check_games(env_ids: Sequence[str]) -> list[str]:
    """The env ids in their canonical spelling (options are part of a game's identity:
    ``KuhnPoker-v0:rounds=1`` is another game than ``KuhnPoker-v0``), each checked to be a registered
    two-player game whose options its env accepts; ValueError (or TypeError for options) otherwise."""
    if not env_ids:
        raise ValueError("give at least one game, e.g. --games TicTacToe-v0,KuhnPoker-v0")
    checked = []
    for env_id in map(canonical_env_id, env_ids):
        make(env_id)  # unknown ids and options fail here, before any game is scheduled
        players = len(spec(parse_env_id(env_id)[0]).game.agents)
        if players != 2:
            raise ValueError(f"{env_id} has {players} player(s); the leaderboard plays two-player games only")
        if env_id in checked:
            raise ValueError(f"game {env_id} is listed twice")
        checked.append(env_id)
    return checked


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def round_robin(labels: Sequence[str], env_ids: Sequence[str], games_per_pair: int, seed: int = 0) -> list[Job]:
    """Every unordered pair of ``labels`` on every game, ``games_per_pair`` games each (an even number:
    ``games_per_pair / 2`` seeds, each from both seats). The two seatings of a seed are adjacent."""
    if not _is_int(games_per_pair) or games_per_pair < 2 or games_per_pair % 2:
        raise ValueError(
            "games per pair must be an even number >= 2 (each seed is played twice, seats swapped), "
            f"got {games_per_pair!r}"
        )
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if len(set(labels)) != len(labels):
        raise ValueError("agent labels must be distinct")
    return [
        job
        for env_id in check_games(env_ids)
        for a, b in itertools.combinations(labels, 2)
        for s in range(seed, seed + games_per_pair // 2)
        for job in (Job(env_id, a, b, s), Job(env_id, b, a, s))
    ]
