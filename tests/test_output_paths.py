"""Issue 12: every file a command writes is checked for writability before any game is played or any
result read, and refused in one line naming the flag, the path and why; a write that fails anyway is
one line too. Permissions only bind for a non-root process, so the refusals run in a subprocess that
has given up root's permission override (see ``conftest.without_write_permission_bypass``)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import without_write_permission_bypass

from spiral_arena.cli import main as cli_main

NO_WRITE = "this user has no write permission on the"
PLAY = ["--agents", "random,expert", "--games", "KuhnPoker-v0", "--games-per-pair", "2", "--no-progress"]


def spiral_arena(*args: str) -> subprocess.CompletedProcess:
    """``spiral-arena ARGS`` in a process bound by file permissions."""
    command = [*without_write_permission_bypass(), sys.executable, "-m", "spiral_arena.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def refused(result: subprocess.CompletedProcess, *expected: str) -> None:
    """Exit 2, nothing on stdout, and one line of stderr holding every ``expected`` text."""
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert all(text in result.stderr for text in expected), result.stderr


def fingerprint(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()}


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """An empty folder no one may write in (its mode restored afterwards, so pytest can clean up)."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    db = tmp_path / "lb.sqlite"
    assert cli_main(["leaderboard", "run", *PLAY, "--db", str(db)]) == 0
    return db


def test_show_refuses_unwritable_report_paths_before_printing_anything(tmp_path, read_only, database):
    """Before the fix the tables were printed and then a PermissionError traceback."""
    locked = tmp_path / "locked.csv"
    locked.write_text("keep me\n")
    locked.chmod(0o444)
    page = read_only / "x.html"
    result = spiral_arena("leaderboard", "show", "--db", str(database), "--html", str(page), "--csv", str(locked))
    refused(
        result,
        f"--html {page} cannot be made: {NO_WRITE} directory {read_only}",
        f"--csv {locked} cannot be written: {NO_WRITE} file",
    )
    assert list(read_only.iterdir()) == [] and locked.read_text() == "keep me\n"


@pytest.mark.parametrize(
    ("existing", "locked", "reason"),
    [
        (False, "folder", f"cannot be made: {NO_WRITE} directory {{folder}}"),
        (True, "file", f"cannot be written: {NO_WRITE} file"),
        (
            True,
            "folder",
            f"cannot be written: {NO_WRITE} directory {{folder}} (SQLite makes its -wal and -shm files there)",
        ),
    ],
    ids=["new file in a read-only folder", "read-only file", "file in a read-only folder"],
)
def test_run_refuses_an_unwritable_database_before_playing(tmp_path, existing, locked, reason):
    folder = tmp_path / "results"
    folder.mkdir()
    db = folder / "lb.sqlite"
    if existing:
        assert cli_main(["leaderboard", "run", *PLAY, "--db", str(db)]) == 0
    target, mode = (db, 0o444) if locked == "file" else (folder, 0o555)
    before = fingerprint(folder)
    target.chmod(mode)
    try:
        result = spiral_arena("leaderboard", "run", *PLAY, "--db", str(db))
    finally:
        target.chmod(mode | 0o200)
    refused(result, f"spiral-arena leaderboard: error: --db {db} {reason.format(folder=folder)}")
    assert "cannot open the leaderboard database" not in result.stderr
    assert fingerprint(folder) == before  # no game played, nothing made


def test_collect_sft_and_eval_refuse_unwritable_outputs_before_any_work(tmp_path, read_only):
    out = read_only / "t.jsonl"
    reason = f"cannot be made: {NO_WRITE} directory {read_only}"
    refused(
        spiral_arena("collect", "--agent", "random", "--n-games", "2", "--out", str(out)),
        f"spiral-arena collect: error: --out: {out} {reason}",
    )
    data = tmp_path / "data.jsonl"
    data.write_text('{"prompt": "Your turn.", "response": "\\\\boxed{[bet]}"}\n')
    run = read_only / "sft"
    refused(
        spiral_arena("sft", "--data", str(data), "--output-dir", str(run), "--steps", "1"),
        f"spiral-arena sft: error: --output-dir: {run} {reason}",
    )
    evaluation = read_only / "eval"
    model = "openai:m@http://127.0.0.1:9/v1"  # loopback, never asked: the check comes first
    result = spiral_arena("eval", "--model", model, "--benchmarks", "math500", "--output-dir", str(evaluation))
    refused(result, f"spiral-arena eval: error: --output-dir {evaluation} {reason}")
    assert list(read_only.iterdir()) == []


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full, where every write fails")
def test_a_write_that_fails_anyway_is_one_line(database, capsys):
    """/dev/full passes every check (it exists and may be written) and then fails the write itself."""
    assert cli_main(["leaderboard", "show", "--db", str(database), "--json", "/dev/full"]) == 1
    captured = capsys.readouterr()
    assert "KuhnPoker-v0" in captured.out  # the tables came first
    assert captured.err == "spiral-arena leaderboard: --json /dev/full could not be written: No space left on device\n"
    assert cli_main(["collect", "--agent", "random", "--n-games", "2", "--out", "/dev/full"]) == 1
    assert capsys.readouterr().err == (
        "spiral-arena collect: error: --out: /dev/full could not be written: No space left on device\n"
    )
