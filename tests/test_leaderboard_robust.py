"""Issue 12: ``leaderboard run --workers N`` stops promptly when interrupted or when a worker dies, and
the same command resumes (a single-process run, ``--workers 1``, too, on Ctrl-C); ``leaderboard show``
only ever reads its database. Real processes, signals and SQLite files throughout."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import without_write_permission_bypass

from leaderboard import store
from spiral_arena.cli import main as cli_main

AGENTS = "random,expert,random#seed=3,expert#alpha=0"  # 6 pairs: 4,800 games, enough to be stopped midway
GAMES = "TicTacToe-v0,KuhnPoker-v0"
TOTAL = 6 * 2 * 400


def run_command(db: Path, workers: int = 2) -> list[str]:
    return [
        sys.executable, "-m", "spiral_arena.cli", "leaderboard", "run", "--agents", AGENTS, "--games", GAMES,
        "--games-per-pair", "400", "--db", str(db), "--workers", str(workers), "--no-progress",
    ]  # fmt: skip


def stored(db: Path) -> dict[tuple, str]:
    """Each stored game's key and finish time (which a resumed run must leave alone)."""
    conn = sqlite3.connect(db, timeout=30)
    try:
        rows = conn.execute("SELECT env_id, player0, player1, seed, finished_at FROM games").fetchall()
    except sqlite3.OperationalError:  # the run has not made the table yet
        rows = []
    conn.close()
    return {tuple(r[:4]): r[4] for r in rows}


def as_from_a_terminal() -> None:
    """In the child before it runs: Ctrl-C handled by default, as a shell's foreground command has it. A
    test session started in the background (``cmd &`` in a script) ignores SIGINT, and a child would
    inherit that and never see the Ctrl-C these tests send."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def start_run(db: Path, workers: int = 2) -> subprocess.Popen:
    """A run in its own process group (as a terminal would start it), once it has stored some games."""
    process = subprocess.Popen(
        run_command(db, workers), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=as_from_a_terminal,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while len(stored(db)) < 50:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run stored no games"
        time.sleep(0.05)
    return process


def finish(process: subprocess.Popen, within_s: float) -> tuple[str, str]:
    """The output of a run that must exit within ``within_s``, all of its processes with it."""
    try:
        out, err = process.communicate(timeout=within_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"the run did not stop within {within_s} s")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return out, err
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    pytest.fail("worker processes outlived the run")


def resume(db: Path, before: dict[tuple, str], workers: int = 2) -> None:
    """The same command plays exactly the games not stored, and rewrites none of the others."""
    again = subprocess.run(run_command(db, workers), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"{TOTAL} games scheduled: {len(before)} already stored, {TOTAL - len(before)} played" in again.stdout
    after = stored(db)
    assert len(after) == TOTAL == sqlite3.connect(db).execute("SELECT count(*) FROM games").fetchone()[0]
    assert all(after[key] == finished for key, finished in before.items())


def workers_of(pid: int) -> list[int]:
    """The worker processes of ``pid`` (spawned: their command line says so; not the resource tracker)."""
    children = [int(c) for f in Path(f"/proc/{pid}/task").glob("*/children") for c in f.read_text().split()]
    return [c for c in children if b"--multiprocessing-fork" in Path(f"/proc/{c}/cmdline").read_bytes()]


@pytest.mark.parametrize("to_group", [False, True], ids=["parent", "terminal"])
def test_ctrl_c_stops_every_process_and_the_same_command_resumes(tmp_path, to_group):
    """SIGINT to the parent alone, or to the whole group as a terminal's Ctrl-C: before the fix the parent
    hung at exit, joining a queue's feeder thread blocked on a pipe no worker read any more."""
    db = tmp_path / "lb.sqlite"
    process = start_run(db)
    (os.killpg if to_group else os.kill)(process.pid, signal.SIGINT)
    out, err = finish(process, within_s=10)
    assert process.returncode == 130, err
    assert err.count("run the same command again") == 1 and "Traceback" not in err, err
    before = stored(db)
    assert 50 <= len(before) < TOTAL, "the run was not stopped midway"
    resume(db, before)


def test_ctrl_c_stops_a_single_process_run_with_the_same_hint_and_it_resumes(tmp_path):
    """``--workers 1`` (the default) plays in the command's own process; before the fix Ctrl-C there printed
    only "stopped.", without saying that the same command resumes the run."""
    db = tmp_path / "lb.sqlite"
    process = start_run(db, workers=1)
    os.killpg(process.pid, signal.SIGINT)  # a terminal's Ctrl-C
    out, err = finish(process, within_s=10)
    assert process.returncode == 130, err
    assert err.count("interrupted: the games finished so far are stored; run the same command again") == 1, err
    assert "Traceback" not in err, err
    before = stored(db)
    assert 50 <= len(before) < TOTAL, "the run was not stopped midway"
    resume(db, before, workers=1)


def ignores_sigint(pid: int) -> bool:
    """Whether process ``pid`` ignores SIGINT now (Linux's /proc/PID/status), False once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1]
    return bool(int(mask, 16) >> (signal.SIGINT - 1) & 1)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the workers through Linux's /proc")
def test_ctrl_c_while_the_workers_start_prints_no_traceback(tmp_path):
    """Issue 27: a terminal's Ctrl-C that reached a worker still starting (before its code ignored SIGINT)
    printed a traceback from multiprocessing's spawn_main, and failed the Ctrl-C test above at random.
    Here every worker gets a SIGINT every few milliseconds from the moment it exists until it ignores
    SIGINT: workers now ignore it from their first instruction, so none dies and the run goes on."""
    db = tmp_path / "lb.sqlite"
    process = subprocess.Popen(
        run_command(db), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=as_from_a_terminal,
    )  # fmt: skip
    deadline, seen = time.monotonic() + 60, set()
    while len(seen) < 2 or not all(ignores_sigint(pid) for pid in seen):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the workers did not start"
        seen.update(workers_of(process.pid))
        for pid in seen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)  # what a terminal's Ctrl-C does to a worker
        time.sleep(0.005)
    os.killpg(process.pid, signal.SIGINT)  # and now to everyone: the run stops as usual
    out, err = finish(process, within_s=20)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.count("run the same command again") == 1, err


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the workers through Linux's /proc")
def test_a_killed_worker_stops_the_run_at_once(tmp_path):
    """Before the fix the surviving worker played on to the end (hours, with model agents) and a worker
    killed while reading the shared queue could hold its lock forever."""
    db = tmp_path / "lb.sqlite"
    process = start_run(db)
    workers = workers_of(process.pid)
    assert len(workers) == 2
    os.kill(workers[0], signal.SIGKILL)
    out, err = finish(process, within_s=10)
    assert process.returncode == 1, err
    assert f"worker process {workers[0]} died (killed by SIGKILL)" in err
    assert "run the same command again" in err and "Traceback" not in err, err
    before = stored(db)
    assert len(before) < TOTAL, "the other worker played on"
    resume(db, before)


# -- show -----------------------------------------------------------------------------------


def game_fields(**changes) -> dict:
    """The columns of one game of a (seat 0) against b."""
    row = dict(
        env_id="KuhnPoker-v0", env_version="v0", player0="a", player1="b", spec0="random", spec1="expert", seed=0,
        reward0=1.0, reward1=-1.0, payoff0=1.0, payoff1=-1.0, invalid0=False, invalid1=False, invalid_reason=None,
        error=None, error_seat=None, transcript='{"moves": [], "end": ""}', steps=3, duration_s=0.01,
        started_at=store.now(), finished_at=store.now(), package_version="0.1.0", success=None,
    )  # fmt: skip
    return {**row, **changes}


def make_database(db: Path, version: int = store.SCHEMA_VERSION) -> None:
    """A WAL database, as runs make them, at schema ``version``, holding four games of a against b."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    store.migrate(conn, target=version)
    # the game columns each version added (5 added a table, 6 columns of agents, 7 respelled ids: no game column)
    added = {2: {"spec0", "spec1"}, 3: {"success"}, 4: set(store.USAGE_COLUMNS), 5: set(), 6: set(), 7: set()}
    later = {c for v in range(version + 1, store.SCHEMA_VERSION + 1) for c in added[v]}
    columns = [c for c in store.GameRow.__dataclass_fields__ if c not in later]
    for seed in range(4):
        row = store.GameRow(**game_fields(seed=seed // 2, **({} if seed % 2 else {"player0": "b", "player1": "a"})))
        conn.execute(
            f"INSERT INTO games ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            [getattr(row, c) for c in columns],
        )
    conn.close()


def fingerprint(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file in ``folder``: its content hash and modification time."""
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in folder.iterdir()}


def test_show_reads_without_writing_and_sees_a_running_writer(tmp_path, capsys):
    db = tmp_path / "lb.sqlite"
    make_database(db)
    before = fingerprint(tmp_path)["lb.sqlite"]
    assert cli_main(["leaderboard", "show", "--db", str(db)]) == 0
    assert "KuhnPoker-v0" in capsys.readouterr().out
    assert fingerprint(tmp_path)["lb.sqlite"] == before  # a reader's -wal and -shm may appear beside it

    writer = store.connect(db)  # a run in progress: its commits wait in the WAL, not yet in the file
    store.insert_game(writer, store.GameRow(**game_fields(seed=99)))
    reader = store.open_readonly(db)
    assert store.count_games(reader) == 5
    reader.close()
    assert cli_main(["leaderboard", "show", "--db", str(db)]) == 0
    assert fingerprint(tmp_path)["lb.sqlite"] == before
    writer.close()


def test_show_never_creates_a_database(tmp_path, capsys):
    missing = tmp_path / "sub" / "lb.sqlite"
    assert cli_main(["leaderboard", "show", "--db", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no leaderboard database at {missing}" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_show_reads_an_older_schema_without_migrating_it(tmp_path, capsys, version):
    """Shown from a copy migrated in memory; the file keeps its version until a run migrates it."""
    db = tmp_path / "old.sqlite"
    make_database(db, version=version)
    before = fingerprint(tmp_path)["old.sqlite"]
    assert cli_main(["leaderboard", "show", "--db", str(db)]) == 0
    assert "KuhnPoker-v0" in capsys.readouterr().out
    assert fingerprint(tmp_path)["old.sqlite"] == before
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == version


def test_show_refuses_what_it_cannot_read(tmp_path, capsys):
    empty, newer, garbage = tmp_path / "empty.sqlite", tmp_path / "newer.sqlite", tmp_path / "garbage.sqlite"
    empty.touch()
    sqlite3.connect(newer).execute("PRAGMA user_version = 99")
    garbage.write_bytes(b"this is not a database" * 100)
    for db, message in [
        (empty, "is not a leaderboard database"),
        (newer, "newer than this spiral-arena"),
        (garbage, "cannot read the leaderboard database"),
        (tmp_path, "is a directory"),
    ]:
        before = fingerprint(tmp_path)
        assert cli_main(["leaderboard", "show", "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert fingerprint(tmp_path) == before


def show(db: Path) -> subprocess.CompletedProcess:
    command = [*without_write_permission_bypass(), sys.executable, "-m", "spiral_arena.cli"]
    return subprocess.run(
        [*command, "leaderboard", "show", "--db", str(db)], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("read_only", ["file", "directory"])
def test_show_reads_a_read_only_file_or_directory(tmp_path, read_only):
    """A WAL database needs its -shm file even to be read; in a read-only directory that cannot be made,
    so the file is read as immutable there (nothing can be writing it)."""
    folder = tmp_path / "shared"
    folder.mkdir()
    db = folder / "lb.sqlite"
    make_database(db)
    before = fingerprint(folder)
    (db if read_only == "file" else folder).chmod(0o444 if read_only == "file" else 0o555)
    try:
        shown = show(db)
    finally:
        (db if read_only == "file" else folder).chmod(0o644 if read_only == "file" else 0o755)
    assert shown.returncode == 0 and "KuhnPoker-v0" in shown.stdout, shown.stderr
    assert fingerprint(folder)["lb.sqlite"] == before["lb.sqlite"]
    if read_only == "directory":
        assert fingerprint(folder) == before


def test_show_refuses_a_read_only_directory_whose_wal_holds_commits(tmp_path):
    """Read as immutable, such a file would silently show the results before those commits."""
    folder = tmp_path / "shared"
    folder.mkdir()
    db = folder / "lb.sqlite"
    make_database(db)
    writer = subprocess.run(  # a run killed before it could checkpoint: its last game is only in the WAL
        [sys.executable, "-c", WRITE_AND_DIE, str(db)], capture_output=True, text=True, timeout=60
    )
    assert writer.returncode == 0, writer.stderr
    (folder / "lb.sqlite-shm").unlink()
    assert (folder / "lb.sqlite-wal").stat().st_size > 0
    folder.chmod(0o555)
    try:
        shown = show(db)
    finally:
        folder.chmod(0o755)
    assert shown.returncode == 2
    assert "lb.sqlite-wal holds commits not yet in the file and the directory is read-only" in shown.stderr


WRITE_AND_DIE = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA wal_autocheckpoint = 0")
conn.execute("UPDATE games SET steps = 4 WHERE seed = 0")
os._exit(0)
"""
