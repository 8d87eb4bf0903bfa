"""Issue 56: a leaderboard database that is garbage, cut short, bit-flipped, empty or another program's is
refused in one line naming the file and what is wrong, by every command that reads or writes one and by
every read the web page makes; never a traceback, and another program's file is never written. Real
databases made by a real ``leaderboard run``, then broken, through the real command line."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from leaderboard import store
from spiral_arena.cli import main as cli_main

PLAY = ["--agents", "random,expert", "--games", "KuhnPoker-v0", "--games-per-pair", "2", "--no-progress"]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> bytes:
    """The bytes of a database as a real run leaves it (its WAL merged in at close)."""
    db = tmp_path_factory.mktemp("good") / "lb.sqlite"
    argv = ["leaderboard", "run", "--agents", "random,expert", "--games", "KuhnPoker-v0,TicTacToe-v0"]
    assert cli_main([*argv, "--games-per-pair", "20", "--db", str(db), "--no-progress"]) == 0
    assert not db.with_name("lb.sqlite-wal").exists()
    return db.read_bytes()


def flipped(data: bytes, start: int = 997) -> bytes:
    """Every 997th byte from ``start`` inverted."""
    flips = bytearray(data)
    for i in range(start, len(flips), 997):
        flips[i] ^= 0xFF
    return bytes(flips)


def foreign(path: Path) -> None:
    """A valid SQLite file another program made: its own table, no schema version."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE contacts (name TEXT, phone TEXT)")
    conn.execute("INSERT INTO contacts VALUES ('ada', '555')")
    conn.commit()
    conn.close()


def index_damaged(path: Path, good: bytes) -> None:
    """One bit of the games' unique index flipped: every row still reads, but the index that keeps a game
    from being stored twice no longer matches its table."""
    path.write_bytes(good)
    conn = sqlite3.connect(path)
    query = "SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_games_1'"
    (root,), (size,) = conn.execute(query).fetchone(), conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    data = bytearray(good)
    data[root * size - 1] ^= 1  # the end of the page's last cell: an index entry's row id
    path.write_bytes(bytes(data))


BROKEN: dict[str, tuple[Callable[[Path, bytes], None], str]] = {  # name -> (how the file is made, what is said)
    "garbage": (lambda path, good: path.write_bytes(b"this is not a database" * 2000), "file is not a database"),
    "truncated": (lambda path, good: path.write_bytes(good[: len(good) // 2]), "malformed"),
    "flipped": (lambda path, good: path.write_bytes(flipped(good)), "malformed"),
    "flipped rows": (lambda path, good: path.write_bytes(flipped(good, 3 * 4096)), "leaderboard database"),
    "index": (index_damaged, "missing from index"),
    "foreign": (lambda path, good: foreign(path), "another program"),
}


def broken(tmp_path: Path, good: bytes, kind: str) -> Path:
    path = tmp_path / f"{kind.replace(' ', '-')}.sqlite"
    BROKEN[kind][0](path, good)
    return path


def spiral_arena(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spiral_arena.cli", *args], capture_output=True, text=True, timeout=120
    )


def files(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder`` and its bytes, but the -wal and -shm files SQLite's readers may leave beside a
    database (``store.open_readonly``)."""
    return {p.name: p.read_bytes() for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm"))}


@pytest.mark.parametrize("command", ["show", "run"])
@pytest.mark.parametrize("kind", list(BROKEN))
def test_every_command_refuses_a_broken_database_in_one_line_and_leaves_it_alone(tmp_path, good, kind, command):
    """Before the fix ``show`` ended in a sqlite3.DatabaseError traceback on a bit-flipped file, and ``run``
    added its tables to another program's file."""
    db = broken(tmp_path, good, kind)
    before = files(tmp_path)
    result = spiral_arena("leaderboard", command, *(PLAY if command == "run" else []), "--db", str(db))
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert str(db) in result.stderr and BROKEN[kind][1] in result.stderr, result.stderr
    assert files(tmp_path) == before  # nothing written


def test_the_default_board_refuses_another_programs_file_too(tmp_path, capsys, monkeypatch):
    """``spiral-arena leaderboard`` alone runs into ./leaderboard.sqlite."""
    monkeypatch.chdir(tmp_path)
    foreign(tmp_path / "leaderboard.sqlite")
    before = files(tmp_path)
    assert cli_main(["leaderboard"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "leaderboard.sqlite is not a leaderboard database" in err, err
    assert files(tmp_path) == before


def test_an_empty_file_is_still_made_a_new_database_by_a_run(tmp_path, capsys):
    """A 0-byte file holds nothing to lose: a run makes its database there, as before; show says it holds none."""
    db = tmp_path / "lb.sqlite"
    db.touch()
    assert cli_main(["leaderboard", "show", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{db} is not a leaderboard database" in err, err
    store.check_database(db)
    assert cli_main(["leaderboard", "run", *PLAY, "--db", str(db)]) == 0
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION


@pytest.mark.parametrize("kind", list(BROKEN))
def test_check_database_refuses_each_broken_file(tmp_path, good, kind):
    db = broken(tmp_path, good, kind)
    before = files(tmp_path)
    with pytest.raises(store.StoreError) as refused:
        store.check_database(db)
    assert isinstance(refused.value, ValueError)
    assert str(db) in str(refused.value) and "\n" not in str(refused.value)
    assert files(tmp_path) == before


def test_check_database_passes_what_a_run_may_use(tmp_path, good):
    db = tmp_path / "lb.sqlite"
    db.write_bytes(good)
    store.check_database(db)
    store.check_database(tmp_path / "missing.sqlite")  # a run makes it
    (tmp_path / "empty.sqlite").touch()
    store.check_database(tmp_path / "empty.sqlite")
    with pytest.raises(store.StoreError, match="is a directory"):
        store.check_database(tmp_path)


def test_a_value_of_the_wrong_type_is_damage(tmp_path, good):
    """A flipped type in a record reads as a value of another kind (text where a reward is): quick_check
    passes it, the ratings would fail on it."""
    db = tmp_path / "lb.sqlite"
    db.write_bytes(good)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE games SET reward0 = 'x' WHERE id = 3")
    conn.commit()
    conn.close()
    with pytest.raises(store.StoreError, match=r"games\.reward0 holds text"):
        store.check_database(db)


def test_connect_refuses_another_programs_file_without_writing_it(tmp_path):
    db = tmp_path / "theirs.sqlite"
    foreign(db)
    before = files(tmp_path)
    with pytest.raises(store.StoreError, match="is not a leaderboard database"):
        store.connect(db)
    assert files(tmp_path) == before
    with pytest.raises(store.StoreError, match="is not a leaderboard database"):
        store.open_readonly(db)


READS: dict[str, Callable[[sqlite3.Connection], object]] = {  # every read the web page makes
    "count_games": store.count_games,
    "load_games": store.load_games,
    "load_agents": store.load_agents,
    "load_notes": store.load_notes,
    "recent_games": store.recent_games,
    "load_transcript": lambda conn: [store.load_transcript(conn, row_id) for row_id in range(1, 90)],
}


@pytest.mark.parametrize("kind", [kind for kind in BROKEN if kind != "index"])  # (its rows all read)
def test_every_read_of_the_web_page_raises_store_error(tmp_path, good, kind):
    """The web server answers 503 on StoreError; before the fix these reads raised sqlite3.DatabaseError."""
    db = broken(tmp_path, good, kind)
    try:
        conn = store.open_readonly(db)
    except store.StoreError as error:
        assert str(db) in str(error)
        return
    try:
        failed = 0
        for read in READS.values():
            try:
                read(conn)
            except store.StoreError as error:
                assert str(db) in str(error) and "\n" not in str(error)
                failed += 1
        assert failed, "a broken file read whole"
    finally:
        conn.close()
