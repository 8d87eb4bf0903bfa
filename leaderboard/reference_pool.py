"""A reference pool: a frozen benchmark, so that ratings from different days are comparable.

A TOML file fixes the entrants, the games, the games per pair and the first seed::

    agents = ["random", "expert", "cautious=expert#alpha=0.3"]  # entries as in --agents: [NAME=]SPEC[#OPTION=VALUE...]
    games = ["TicTacToe-v0", "KuhnPoker-v0"]                    # env ids, with options if any
    games_per_pair = 20                                         # even: seeds seed .. seed + 9, each from both seats
    seed = 0

All four keys are required (a default that changed later would change the benchmark) and no other is
allowed. ``leaderboard run --reference-pool FILE --agents NEW`` schedules the pool's own round robin and
every added agent against every pool entrant on the pool's games and seeds, never two added agents
against each other: each is measured against the same opponents on the same deals.

Reuse: a game is stored once per key (game id, seat-0 label, seat-1 label, seed), and a run plays only
the keys not stored yet (``store.stored_keys``; ``INSERT OR IGNORE`` besides). So the pool's games are
played by the first run that needs them, by a pool run or by a plain run of the same labels, games and
seeds, and are never replayed or rewritten; adding an agent on another day plays only its own games.
Labels being the identity of stored games, every run (a pool run or a plain one) refuses a database
holding another spec under one of its labels (``stored_problems``). Everything in the file is checked
before any game is played.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from leaderboard import store
from leaderboard.entrants import Entrant, parse_entrants
from leaderboard.schedule import check_games, schedule
from spiral_arena.agents import options_problem, spec_problem

KEYS = ("agents", "games", "games_per_pair", "seed")


@dataclass(frozen=True)
class ReferencePool:
    path: Path
    entrants: tuple[Entrant, ...]
    games: tuple[str, ...]  # canonical env ids
    games_per_pair: int
    seed: int

    @property
    def labels(self) -> list[str]:
        return [e.label for e in self.entrants]

    def with_agents(self, added: Sequence[Entrant]) -> list[Entrant]:
        """The pool's entrants, then each added one. An added entry that is a pool entrant (the same label
        and spec) is the pool's already; one that takes a pool label for another agent is a ValueError."""
        pool = {e.label: e for e in self.entrants}
        entrants = list(self.entrants)
        for entrant in added:
            known = pool.get(entrant.label)
            if known is not None and known != entrant:
                raise ValueError(
                    f"--agents: {entrant.label!r} is the reference pool's label for {known.stored_spec!r}, not "
                    f"{entrant.stored_spec!r}; give the added agent another name, e.g. new={entrant.stored_spec}"
                )
            if entrant.label in [e.label for e in entrants[len(pool) :]]:
                raise ValueError(f"--agents: {entrant.label!r} is listed twice; give each entry once")
            if known is None:
                entrants.append(entrant)
        return entrants


def load_pool(path: str | Path) -> ReferencePool:
    """The reference pool in the TOML file ``path``, fully checked, or one ValueError line naming the file."""
    try:
        return _load(Path(path))
    except (ValueError, TypeError) as error:
        raise ValueError(f"--reference-pool {path}: {error}") from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _load(path: Path) -> ReferencePool:
    if not path.is_file():
        raise ValueError("no such file" if not path.exists() else "not a file")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"cannot read it: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text; write it as TOML (see leaderboard/reference_pool.example.toml)") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"not valid TOML: {error}") from None
    problems = []
    unknown = [key for key in data if key not in KEYS]
    if unknown:
        problems.append(f"unknown key(s) {', '.join(unknown)}; valid: {', '.join(KEYS)}")
    missing = [key for key in KEYS if key not in data]
    if missing:
        problems.append(f"missing key(s) {', '.join(missing)}; a reference pool states all of {', '.join(KEYS)}")
    if problems:
        raise ValueError("; ".join(problems))
    agents, games, per_pair, seed = (data[key] for key in KEYS)
    if not _strings(agents):
        problems.append('agents must be a list of entries such as ["random", "expert#alpha=0.2"]')
    if not _strings(games) or not games:
        problems.append('games must be a list of env ids such as ["TicTacToe-v0", "KuhnPoker-v0"]')
    if not _is_int(per_pair):
        problems.append(f"games_per_pair must be a whole number, got {per_pair!r}")
    if not _is_int(seed):
        problems.append(f"seed must be a whole number, got {seed!r}")
    if problems:
        raise ValueError("; ".join(problems))
    entrants = parse_entrants(agents)  # at least 2, distinct labels
    problems = [
        p for e in entrants if (p := spec_problem(e.spec, human=False) or options_problem(e.stored_spec, e.kwargs))
    ]
    if problems:
        raise ValueError("; ".join(problems))
    games = check_games(games)
    schedule([e.label for e in entrants], games, per_pair, seed)  # games per pair and seed range, as a run would
    return ReferencePool(path, tuple(entrants), tuple(games), per_pair, seed)


def stored_problems(db: str | Path, entrants: Sequence[Entrant]) -> list[str]:
    """The labels under which the database at ``db`` already stores another spec than the entrant's: its
    games would be reused as if the entrant had played them. Read without writing anything."""
    path = Path(db)
    if not path.is_file() or not path.stat().st_size:  # a run makes it
        return []
    specs = store.read_specs(path, [e.label for e in entrants])
    return [
        store.label_conflict(db, e.label, other, e.stored_spec)
        for e in entrants
        if (other := specs.get(e.label, set()) - {e.stored_spec})
    ]
