"""The results database: SQLite in WAL mode, one row per game, safe for several writer processes.

Every game is committed on its own, so a killed run loses only the games in flight; the unique key
(env id, player_0, player_1, seed) makes writes idempotent (``INSERT OR IGNORE``), so a re-run or two
runs at once never duplicate a game. A single-player game has no seat 1: its ``player1`` is
``NO_PLAYER`` (the empty string, never a label), so the key needs no change. The schema version lives in
``PRAGMA user_version``; opening a database applies the missing steps of ``MIGRATIONS`` inside one
transaction, except ``open_readonly`` (for ``leaderboard show``), which never writes the file.

A file that is not a usable leaderboard database (garbage, cut short, damaged, another program's SQLite file,
a newer schema) is a ``StoreError`` of one line naming it, from opening it and from every read or write of its
rows (damage may show only there), never a ``sqlite3`` error; ``check_database`` finds it all up front. Another
program's file is refused before anything is written to it; an empty (0-byte) file is a new database.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import astuple, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import spiral_arena
from spiral_arena import outputs
from spiral_arena.registry import GameSpec

BUSY_TIMEOUT_S = 60.0
NO_PLAYER = ""  # player1 and spec1 of a single-player game
WHY_CHARS = 300  # of SQLite's reason in an error line: it may quote a whole damaged row
_P = ParamSpec("_P")
_R = TypeVar("_R")


class StoreError(ValueError):
    """A leaderboard database that cannot be used (a directory, missing, another program's, newer, damaged,
    unwritable), as one line naming the file. A ValueError, so the commands print it as their one error line;
    the web server answers 503 with it."""


class _Connection(sqlite3.Connection):
    """A connection that knows the file it reads, to name it in errors (an in-memory copy names the file)."""

    path = ""


def _connect(target: str | Path, path: str | Path, **options: Any) -> sqlite3.Connection:
    """``sqlite3.connect(target, **options)`` in autocommit mode, the connection naming ``path`` in errors."""
    conn = cast(_Connection, sqlite3.connect(target, isolation_level=None, factory=_Connection, **options))
    conn.path = str(path)
    return conn


def _name(conn: sqlite3.Connection) -> str:
    """The file ``conn`` reads, for error lines (a connection made elsewhere: SQLite's own record of it)."""
    return getattr(conn, "path", "") or conn.execute("PRAGMA database_list").fetchone()[2]


def _failure(path: str | Path, error: Exception, doing: str = "read") -> StoreError:
    """``error`` (SQLite's, or a stored JSON text that does not parse) as one line naming the file."""
    if (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF == sqlite3.SQLITE_READONLY:  # os.access said it could
        return StoreError(f"--db {path} cannot be written: SQLite found the file or its folder read-only")
    why = " ".join(str(error).split())  # one line, whatever text of a damaged row SQLite quotes
    if isinstance(error, json.JSONDecodeError):
        why = f"a stored JSON text does not parse ({why})"
    why = why if len(why) <= WHY_CHARS else f"{why[:WHY_CHARS]}..."
    return StoreError(f"cannot {doing} the leaderboard database {path}: {why}")


def _guarded(
    doing: str,
) -> Callable[[Callable[Concatenate[sqlite3.Connection, _P], _R]], Callable[Concatenate[sqlite3.Connection, _P], _R]]:
    """Make a function of a connection raise ``StoreError`` where SQLite fails or stored JSON does not parse:
    a damaged file may open and fail only when its rows are read (or written)."""

    def guard(
        function: Callable[Concatenate[sqlite3.Connection, _P], _R],
    ) -> Callable[Concatenate[sqlite3.Connection, _P], _R]:
        @functools.wraps(function)
        def guarded(conn: sqlite3.Connection, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return function(conn, *args, **kwargs)
            except sqlite3.ProgrammingError:  # a mistake in the code (a closed connection), not in the file
                raise
            except (sqlite3.DatabaseError, json.JSONDecodeError) as error:
                raise _failure(_name(conn), error, doing) from error

        return guarded

    return guard


_reads, _writes = _guarded("read"), _guarded("write")


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, rolled back on any error (unless SQLite already rolled it back, as it does on
    some: then a ROLLBACK would fail and hide the error)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _create_v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        """CREATE TABLE games (
            id INTEGER PRIMARY KEY,
            env_id TEXT NOT NULL,
            env_version TEXT NOT NULL,
            player0 TEXT NOT NULL,
            player1 TEXT NOT NULL,
            seed INTEGER NOT NULL,
            reward0 REAL,
            reward1 REAL,
            payoff0 REAL,
            payoff1 REAL,
            invalid0 INTEGER NOT NULL DEFAULT 0,
            invalid1 INTEGER NOT NULL DEFAULT 0,
            invalid_reason TEXT,
            error TEXT,
            error_seat INTEGER,
            transcript TEXT NOT NULL,
            steps INTEGER NOT NULL,
            duration_s REAL NOT NULL,
            started_at TEXT NOT NULL,
            finished_at TEXT NOT NULL,
            package_version TEXT NOT NULL,
            UNIQUE (env_id, player0, player1, seed)
        )"""
    )


def _add_specs_and_agents(conn: sqlite3.Connection) -> None:
    """v2: the spec behind each seat's label (names may alias specs), and what is known of each agent.
    Version 1 labels were always the specs themselves, so they fill the new columns."""
    conn.execute("ALTER TABLE games ADD COLUMN spec0 TEXT")
    conn.execute("ALTER TABLE games ADD COLUMN spec1 TEXT")
    conn.execute("UPDATE games SET spec0 = player0, spec1 = player1")
    conn.execute(
        """CREATE TABLE agents (
            label TEXT PRIMARY KEY,
            spec TEXT NOT NULL,
            kuhn_policy TEXT,
            kuhn_exploitability REAL,
            recorded_at TEXT NOT NULL,
            package_version TEXT NOT NULL
        )"""
    )


def _add_success(conn: sqlite3.Connection) -> None:
    """v3: whether the lone player of a single-player game succeeded; its rewards cannot say (Twenty
    Questions' penalties can put a win below zero). NULL for two-player games and errors."""
    conn.execute("ALTER TABLE games ADD COLUMN success INTEGER")


USAGE_COLUMNS = tuple(
    f"{name}{seat}" for name in ("prompt_tokens", "completion_tokens", "api_moves", "latency_s") for seat in (0, 1)
)


def _add_usage(conn: sqlite3.Connection) -> None:
    """v4: what each seat's API requests cost in the game: the provider's prompt and completion tokens
    summed over its moves (NULL when a reply did not state them), its number of API moves and their
    summed latency in seconds. NULL for scripted and ``hf:`` seats, and for every game stored before."""
    for column, kind in zip(USAGE_COLUMNS, ("INTEGER",) * 6 + ("REAL",) * 2, strict=True):
        conn.execute(f"ALTER TABLE games ADD COLUMN {column} {kind}")


def _add_notes(conn: sqlite3.Connection) -> None:
    """v5: why an agent's games of one env id are marked in the standings, one line per (label, env id): it
    plays rules it was not trained on, or a game it never trained on, or it is a checkpoint without a record
    of its training games. Written by the run that plays it; a later run replaces the line."""
    conn.execute(
        """CREATE TABLE notes (
            label TEXT NOT NULL,
            env_id TEXT NOT NULL,
            note TEXT NOT NULL,
            recorded_at TEXT NOT NULL,
            package_version TEXT NOT NULL,
            PRIMARY KEY (label, env_id)
        )"""
    )


def _add_leduc(conn: sqlite3.Connection) -> None:
    """v6: an agent's Leduc Hold'em policy (at the rank information states of
    ``spiral_arena.analysis.LEDUC_RANK_STATES``) and its exact exploitability, as for Kuhn; NULL for agents
    recorded before."""
    conn.execute("ALTER TABLE agents ADD COLUMN leduc_policy TEXT")
    conn.execute("ALTER TABLE agents ADD COLUMN leduc_exploitability REAL")


def _canonical_ids(conn: sqlite3.Connection) -> None:
    """v7: every game id in its canonical spelling, options at their default left out
    (``LeducHoldem-v0:reward=chips`` is ``LeducHoldem-v0``), so one game has one table. A game stored under
    both spellings with the same players and seed is the same game played twice: the canonical row stays.
    Ids no longer registered keep their spelling."""
    stored = conn.execute("SELECT DISTINCT env_id FROM games UNION SELECT DISTINCT env_id FROM notes").fetchall()
    for (env_id,) in stored:
        try:
            canonical = GameSpec.parse(env_id).canonical
        except ValueError:
            continue
        if canonical != env_id:
            conn.execute("UPDATE OR IGNORE games SET env_id = ? WHERE env_id = ?", (canonical, env_id))
            conn.execute("DELETE FROM games WHERE env_id = ?", (env_id,))
            conn.execute("UPDATE OR REPLACE notes SET env_id = ? WHERE env_id = ?", (canonical, env_id))


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _create_v1,
    _add_specs_and_agents,
    _add_success,
    _add_usage,
    _add_notes,
    _add_leduc,
    _canonical_ids,
)
SCHEMA_VERSION = len(MIGRATIONS)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring the schema to ``target`` (one transaction; concurrent openers wait and then see it done)."""
    with _transaction(conn):
        version = _schema_version(conn)  # checked again under the write lock: the file may have changed
        for step in MIGRATIONS[version:target]:
            step(conn)
        if version < target:
            conn.execute(f"PRAGMA user_version = {int(target)}")
    return max(version, target)


# the tables a database holds, SQLite's own (sqlite_sequence, sqlite_stat1) left out
_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite!_%' ESCAPE '!' ORDER BY name"


def _version_and_tables(conn: sqlite3.Connection) -> tuple[int, list[str]]:
    return conn.execute("PRAGMA user_version").fetchone()[0], [name for (name,) in conn.execute(_TABLES)]


def _schema_version(conn: sqlite3.Connection) -> int:
    """The schema version of the database ``conn`` reads (0: a new, empty one). A StoreError for a newer schema
    than this code's, and for another program's SQLite file: tables but no schema version, or a version but no
    games table (a leaderboard database gets both in one transaction, so no run in progress looks like that)."""
    if conn.in_transaction:
        version, tables = _version_and_tables(conn)
    else:  # one read snapshot: another process may create the schema between two autocommit reads
        conn.execute("BEGIN")
        try:
            version, tables = _version_and_tables(conn)
        finally:
            if conn.in_transaction:  # a read only: nothing to keep
                conn.execute("ROLLBACK")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the leaderboard database {_name(conn)} has schema version {version}, newer than this spiral-arena "
            f"({spiral_arena.__version__}) understands ({SCHEMA_VERSION}); upgrade spiral-arena"
        )
    if (version == 0 and tables) or (version > 0 and "games" not in tables):
        shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "") or "none"
        raise StoreError(
            f"{_name(conn)} is not a leaderboard database but another program's SQLite file (its tables: {shown}), "
            "left as it is: give --db a new file"
        )
    return version


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL. SQLite answers "locked" at once, without waiting, when several processes open a new
    file together and one is switching it, so this waits here instead."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _a_directory(path: Path) -> str:
    return f"is a directory; give a database file, e.g. {path / 'leaderboard.sqlite'}"


def _database_file(path: str | Path, must_exist: bool) -> Path:
    path = Path(path)
    if path.is_dir():
        raise StoreError(f"--db {path} {_a_directory(path)}")
    if must_exist and not path.is_file():
        raise StoreError(f"no leaderboard database at {path}; make one with: spiral-arena leaderboard run --db {path}")
    return path


def database_problem(path: str | Path) -> str | None:
    """Why a run could not write the database at ``path``, worded to follow it, or None. A missing
    file's nearest existing folder must let it be made; an existing file, its -wal and -shm files and
    its folder (where SQLite makes and removes those) must all be writable."""
    path = Path(path)
    if path.is_dir():
        return _a_directory(path)
    problem = outputs.write_problem(path)
    if problem is not None or not path.exists():
        return problem
    for side in (path.with_name(f"{path.name}-{suffix}") for suffix in ("wal", "shm")):
        if side.exists() and outputs.write_problem(side) is not None:
            return f"cannot be written: this user has no write permission on {side.name} beside it"
    problem = outputs.folder_problem(path.parent)
    return None if problem is None else f"cannot be written: {problem} (SQLite makes its -wal and -shm files there)"


def connect(path: str | Path, create: bool = True) -> sqlite3.Connection:
    """Open (or with ``create``, make) the database at ``path`` and migrate it to the current schema. A
    missing or empty file becomes a new database; another program's file is refused unwritten."""
    path = _database_file(path, must_exist=not create)
    if (problem := database_problem(path)) is not None:
        raise StoreError(f"--db {path} {problem}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = _connect(path, path, timeout=BUSY_TIMEOUT_S)
    except (OSError, sqlite3.OperationalError) as error:
        raise StoreError(f"cannot open the leaderboard database {path}: {error}") from None
    try:
        _schema_version(conn)  # before WAL mode rewrites the header of another program's file
        _use_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a commit survives a killed process
        migrate(conn)
    except BaseException as error:
        conn.close()
        if isinstance(error, sqlite3.DatabaseError):
            raise _failure(path, error, "open") from error
        raise
    return conn


def open_readonly(path: str | Path) -> sqlite3.Connection:
    """Open an existing database for reading only (``leaderboard show``): results one may not write (a
    read-only file or directory, a shared copy) must still show, and the file stays byte for byte as it
    was."""
    conn = _open_current(path)
    if conn is None:
        raise StoreError(f"{path} is not a leaderboard database (no schema version: no leaderboard run made it)")
    return conn


_STORED_TYPES = {"INTEGER": "integer", "REAL": "real", "TEXT": "text"}  # a column's declared type -> its values'


def check_database(path: str | Path) -> None:
    """A StoreError, one line naming the file, unless ``path`` is missing or empty (a run makes the database
    there) or a whole leaderboard database: opened as ``open_readonly`` opens it (SQLite, ours, not newer),
    then every page read (``PRAGMA integrity_check``: damage that shows only when rows are read, and an index
    that disagrees with its table, which no read shows but which would let a game be stored twice) and every
    stored value's type (a damaged record may read as text where a reward belongs: integrity_check passes it).
    Commands call it first, so a broken file fails at once, not after hours of games. Writes nothing; reads
    the whole file."""
    path = Path(path)
    if not path.is_dir() and not (path.is_file() and path.stat().st_size):
        return
    conn, _ = _open_reading(path)
    try:
        _check_rows(conn)
    finally:
        conn.close()


@_reads
def _check_rows(conn: sqlite3.Connection) -> None:
    """``check_database``'s reading of every page and every stored value's type."""
    damage = [" ".join(line.split()) for (line,) in conn.execute("PRAGMA integrity_check(3)")]  # the first 3
    if damage != ["ok"]:
        raise StoreError(f"{_name(conn)} is damaged (SQLite's integrity_check: {'; '.join(damage)[:WHY_CHARS]})")
    for (table,) in conn.execute(_TABLES).fetchall():
        info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
        columns = [(name, _STORED_TYPES[kind]) for _, name, kind, *_ in info if kind in _STORED_TYPES]
        types = ", ".join(f'typeof("{name}")' for name, _ in columns)
        wrong = " OR ".join(f"typeof(\"{name}\") NOT IN ('null', '{kind}')" for name, kind in columns)
        held = conn.execute(f'SELECT {types} FROM "{table}" WHERE {wrong} LIMIT 1').fetchone()
        if held is not None:
            name, kind, found = next((n, k, h) for (n, k), h in zip(columns, held, strict=True) if h not in ("null", k))
            raise StoreError(f"{_name(conn)} is damaged: a value of {table}.{name} holds {found}, not {kind}")


def read_specs(path: str | Path, labels: Sequence[str]) -> dict[str, set[str]]:
    """``stored_specs`` of the database at ``path``, read without writing anything. A file with no schema
    version stores no agent yet: another ``leaderboard run`` may be making it this moment (it migrates
    under a write lock that this run's own ``connect`` then waits on)."""
    conn = _open_current(path)
    if conn is None:
        return {}
    try:
        return stored_specs(conn, labels)
    finally:
        conn.close()


def _open_current(path: str | Path) -> sqlite3.Connection | None:
    """A read-only connection to the database at ``path`` at the current schema, or None for a file with
    no schema version. An older schema is migrated in a copy in memory (the whole file is read in;
    ``leaderboard run`` migrates the file itself)."""
    conn, version = _open_reading(path)
    try:
        if version == 0:
            conn.close()
            return None
        if version < SCHEMA_VERSION:
            copy = _connect(":memory:", path)
            conn.backup(copy)
            conn.close()
            conn = copy
            migrate(conn)
        return conn
    except BaseException as error:
        conn.close()
        if isinstance(error, sqlite3.DatabaseError):
            raise _failure(path, error) from error
        raise


def _open_reading(path: str | Path) -> tuple[sqlite3.Connection, int]:
    """A read-only connection to the existing database at ``path`` and its schema version. SQLite's
    ``mode=ro`` reads a WAL database through its -shm and -wal side files, making them where the directory
    allows, as any reader does (the next writer to close removes them); where it cannot, in a read-only
    directory, the file is opened ``immutable``, which is right only while no WAL holds commits the file
    lacks, so a non-empty -wal there is refused. A schema newer than this code's, and another program's
    file, are refused (``_schema_version``)."""
    path = _database_file(path, must_exist=True)
    conn: sqlite3.Connection | None = None
    try:
        try:
            conn, version = _read(path, immutable=False)
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN):
                raise
            wal = path.with_name(f"{path.name}-wal")
            if wal.is_file() and wal.stat().st_size:
                raise StoreError(
                    f"cannot read {path}: its {wal.name} holds commits not yet in the file and the directory is "
                    "read-only; open it once where it can be written (leaderboard run does)"
                ) from None
            conn, version = _read(path, immutable=True)
        return conn, version
    except BaseException as error:
        if conn is not None:
            conn.close()
        if isinstance(error, sqlite3.DatabaseError):
            raise _failure(path, error) from error
        raise


def _read(path: Path, immutable: bool) -> tuple[sqlite3.Connection, int]:
    """A read-only connection to ``path`` and its schema version (reading it is what can fail)."""
    query = "mode=ro&immutable=1" if immutable else "mode=ro"
    uri = f"{path.resolve().as_uri()}?{query}"  # as_uri escapes '?', '#' and '%' in the path
    conn = _connect(uri, path, uri=True, timeout=BUSY_TIMEOUT_S)
    try:
        return conn, _schema_version(conn)
    except BaseException:
        conn.close()
        raise


@dataclass(frozen=True)
class StoredGame:
    """What the standings read of a stored game (no transcript). Rewards are None for games ended by an
    agent's error."""

    env_id: str
    player0: str
    player1: str
    seed: int
    reward0: float | None
    reward1: float | None
    payoff0: float | None  # chips, for games that keep chips (Kuhn); None otherwise
    payoff1: float | None
    invalid0: bool
    invalid1: bool
    error: str | None
    error_seat: int | None
    steps: int = 0  # defaults for games written by hand (tests, synthetic benchmarks)
    success: bool | None = None  # single-player games: the env's outcome named the player the winner
    # per seat, what its API requests cost (``_add_usage``); None for scripted and hf: seats
    prompt_tokens0: int | None = None
    prompt_tokens1: int | None = None
    completion_tokens0: int | None = None
    completion_tokens1: int | None = None
    api_moves0: int | None = None
    api_moves1: int | None = None
    latency_s0: float | None = None
    latency_s1: float | None = None

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.env_id, self.player0, self.player1, self.seed)


@dataclass(frozen=True, kw_only=True)
class GameRow(StoredGame):
    """Everything stored about one game: the standings' columns, and what a game's page and a re-run read."""

    env_version: str
    spec0: str
    spec1: str
    invalid_reason: str | None
    transcript: str  # JSON: {"moves": [[seat, text], ...], "end": final message}
    duration_s: float
    started_at: str
    finished_at: str
    package_version: str


_COLUMNS = tuple(f.name for f in fields(GameRow))
_INSERT = f"INSERT OR IGNORE INTO games ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"


@_writes
def insert_game(conn: sqlite3.Connection, row: GameRow) -> bool:
    """Store one game in its own transaction; False if that game was already stored."""
    return conn.execute(_INSERT, astuple(row)).rowcount == 1


@_reads
def count_games(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT count(*) FROM games").fetchone()[0]


@_reads
def stored_env_ids(conn: sqlite3.Connection) -> list[str]:
    """Every env id with a stored game, sorted."""
    return [env_id for (env_id,) in conn.execute("SELECT DISTINCT env_id FROM games ORDER BY env_id")]


@_reads
def game_id(conn: sqlite3.Connection, key: tuple[str, str, str, int]) -> int | None:
    """The row id of the game stored under ``key`` (env id, player_0, player_1, seed), or None."""
    query = "SELECT id FROM games WHERE env_id = ? AND player0 = ? AND player1 = ? AND seed = ?"
    found = conn.execute(query, key).fetchone()
    return None if found is None else found[0]


_LISTED = ("id", "env_id", "player0", "player1", "seed", "reward0", "reward1", "invalid_reason", "error", "steps",
           "finished_at")  # fmt: skip


@_reads
def recent_games(
    conn: sqlite3.Connection, env_id: str | None = None, label: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    """The latest ``limit`` stored games, newest first, optionally of one env id and one agent (either seat),
    as column -> value (no transcript)."""
    clauses, params = [], []
    if env_id is not None:
        clauses.append("env_id = ?")
        params.append(env_id)
    if label is not None:
        clauses.append("(player0 = ? OR player1 = ?)")
        params += [label, label]
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    query = f"SELECT {', '.join(_LISTED)} FROM games{where} ORDER BY id DESC LIMIT ?"
    return [dict(zip(_LISTED, row, strict=True)) for row in conn.execute(query, [*params, limit])]


@_reads
def load_transcript(conn: sqlite3.Connection, row_id: int) -> dict[str, Any] | None:
    """One stored game, transcript included (``transcript``: its moves as [seat, text] and the end message),
    or None if no game has that id."""
    columns = (*_LISTED, "transcript", "payoff0", "payoff1", "duration_s")
    row = conn.execute(f"SELECT {', '.join(columns)} FROM games WHERE id = ?", (row_id,)).fetchone()
    if row is None:
        return None
    game = dict(zip(columns, row, strict=True))
    game["transcript"] = json.loads(game["transcript"])
    return game


@_reads
def stored_keys(conn: sqlite3.Connection, env_ids: Iterable[str]) -> set[tuple[str, str, str, int]]:
    ids = list(env_ids)
    query = f"SELECT env_id, player0, player1, seed FROM games WHERE env_id IN ({', '.join('?' * len(ids))})"
    return {tuple(r) for r in conn.execute(query, ids)}


@_reads
def stored_specs(conn: sqlite3.Connection, labels: Sequence[str]) -> dict[str, set[str]]:
    """The stored specs under each of ``labels`` that has any: in its agent record and in its games' seats."""
    marks = ", ".join("?" * len(labels))
    query = (
        f"SELECT label, spec FROM agents WHERE label IN ({marks}) "
        f"UNION SELECT player0, spec0 FROM games WHERE player0 IN ({marks}) "
        f"UNION SELECT player1, spec1 FROM games WHERE player1 IN ({marks})"
    )
    specs: dict[str, set[str]] = {}
    for label, spec in conn.execute(query, [*labels, *labels, *labels]):
        if spec is not None:
            specs.setdefault(label, set()).add(spec)
    return specs


@_reads
def error_keys(conn: sqlite3.Connection, env_ids: Iterable[str]) -> list[tuple[str, str, str, int]]:
    """The keys of the games of ``env_ids`` stored as errors."""
    ids = list(env_ids)
    marks = ", ".join("?" * len(ids))
    query = f"SELECT env_id, player0, player1, seed FROM games WHERE error IS NOT NULL AND env_id IN ({marks})"
    return [tuple(r) for r in conn.execute(query, ids)]


@_writes
def delete_errors(conn: sqlite3.Connection, keys: Iterable[tuple[str, str, str, int]]) -> int:
    """Forget the error games among ``keys`` so that they are played again."""
    with _transaction(conn):
        cursor = conn.executemany(
            "DELETE FROM games WHERE error IS NOT NULL AND env_id = ? AND player0 = ? AND player1 = ? AND seed = ?",
            list(keys),
        )
    return cursor.rowcount


def label_conflict(db: str | Path, label: str, stored: Iterable[str], spec: str) -> str:
    """Why a run may not play ``spec`` under ``label``: the database already stores ``stored`` under it."""
    return (
        f"{db} stores {label!r} as {', '.join(sorted(stored))}, not {spec}: a label names one agent; "
        "give this one another name or use another --db"
    )


@_reads
def check_labels(conn: sqlite3.Connection, specs: dict[str, str]) -> None:
    """A ValueError (``label_conflict``) if the database stores another spec under one of the labels of ``specs``
    (label -> the spec a run plays under it)."""
    if not specs:
        return
    stored = stored_specs(conn, list(specs))
    for label, spec in specs.items():
        if other := stored.get(label, set()) - {spec}:
            raise ValueError(label_conflict(_name(conn), label, other, spec))


@dataclass(frozen=True)
class StatedPolicy:
    """A policy an agent states for exact analysis (Kuhn's or Leduc's), and that policy's exploitability."""

    policy: dict
    exploitability: float


@_writes
def record_agent(
    conn: sqlite3.Connection, label: str, spec: str, kuhn: StatedPolicy | None = None, leduc: StatedPolicy | None = None
) -> None:
    """Store what is known of the agent under ``label`` (the Kuhn and Leduc policies it states), unless the
    database holds another spec under that label (``label_conflict``, as a ValueError; nothing written). A run
    checks its labels before any game, but another run may store one between that check and this first write of
    the label: the check here and the write are one transaction, so of two runs that give one label two specs at
    once, the second to write stops."""
    with _transaction(conn):
        check_labels(conn, {label: spec})
        conn.execute(
            "INSERT OR REPLACE INTO agents (label, spec, kuhn_policy, kuhn_exploitability, recorded_at, "
            "package_version, leduc_policy, leduc_exploitability) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                label,
                spec,
                None if kuhn is None else json.dumps(kuhn.policy),
                None if kuhn is None else kuhn.exploitability,
                now(),
                spiral_arena.__version__,
                None if leduc is None else json.dumps(leduc.policy),
                None if leduc is None else leduc.exploitability,
            ),
        )


@_reads
def load_games(
    conn: sqlite3.Connection, env_ids: Sequence[str] | None = None, labels: Sequence[str] | None = None
) -> list[StoredGame]:
    """Stored games, optionally only of ``env_ids`` and only between ``labels`` (or of one of ``labels``
    alone, in single-player games)."""
    query = f"SELECT {', '.join(f.name for f in fields(StoredGame))} FROM games"
    clauses, params = [], []
    if env_ids is not None:
        clauses.append(f"env_id IN ({', '.join('?' * len(env_ids))})")
        params += list(env_ids)
    if labels is not None:
        marks = ", ".join("?" * len(labels))
        clauses.append(f"player0 IN ({marks}) AND player1 IN ({marks}, ?)")
        params += [*labels, *labels, NO_PLAYER]
    if clauses:
        query += " WHERE " + " AND ".join(clauses)
    query += " ORDER BY id"
    return [StoredGame(*r) for r in conn.execute(query, params)]


@dataclass(frozen=True)
class AgentRecord:
    label: str
    spec: str
    kuhn_policy: dict[str, float] | None
    kuhn_exploitability: float | None
    leduc_policy: dict[str, dict[str, float]] | None = None
    leduc_exploitability: float | None = None


@_writes
def record_policy(conn: sqlite3.Connection, label: str, family: str, stated: StatedPolicy) -> None:
    """Add to an agent already stored the policy it states of one game family ("kuhn" or "leduc"): one UPDATE,
    atomic on its own (the connection is in autocommit mode)."""
    if family not in ("kuhn", "leduc"):
        raise ValueError(f"family must be kuhn or leduc, got {family!r}")
    conn.execute(
        f"UPDATE agents SET {family}_policy = ?, {family}_exploitability = ? WHERE label = ?",
        (json.dumps(stated.policy), stated.exploitability, label),
    )


@_reads
def load_agents(conn: sqlite3.Connection) -> dict[str, AgentRecord]:
    rows = conn.execute(
        "SELECT label, spec, kuhn_policy, kuhn_exploitability, leduc_policy, leduc_exploitability FROM agents"
    )

    def read(text: str | None) -> Any:
        return None if text is None else json.loads(text)

    return {
        label: AgentRecord(label, spec, read(kuhn), kuhn_exploitability, read(leduc), leduc_exploitability)
        for label, spec, kuhn, kuhn_exploitability, leduc, leduc_exploitability in rows
    }


@_writes
def record_notes(conn: sqlite3.Connection, notes: Mapping[tuple[str, str], str]) -> None:
    """Store ``notes``, (label, env id) -> the line saying why that agent's games of that env id are marked,
    in one transaction, replacing an earlier line of the same key; an empty mapping writes nothing."""
    if not notes:
        return
    stamp, version = now(), spiral_arena.__version__
    with _transaction(conn):
        conn.executemany(
            "INSERT OR REPLACE INTO notes VALUES (?, ?, ?, ?, ?)",
            [(label, env_id, note, stamp, version) for (label, env_id), note in notes.items()],
        )


@_reads
def load_notes(conn: sqlite3.Connection) -> dict[tuple[str, str], str]:
    """Every stored note by (label, env id). An older database read by ``open_readonly`` is migrated in
    memory first, so it has the table, empty."""
    return {(label, env_id): note for label, env_id, note in conn.execute("SELECT label, env_id, note FROM notes")}
