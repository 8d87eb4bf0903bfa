"""Whether a command can write where it was told to, asked before the work whose result goes there:
a leaderboard run or a transcript collection can take hours and must not end in a traceback because
its output folder is read-only. ``os.access`` answers for the user running the command."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def write_problem(path: str | Path, *, directory: bool = False, make_parents: bool = True) -> str | None:
    """Why ``path`` cannot be written, worded to follow it ("PATH is a directory; ..."); None when it can.

    ``directory``: the command fills a folder there, else it makes or replaces a file. ``make_parents``:
    the command makes missing parent folders, so the nearest existing one must let it; else the parent
    folder must exist already."""
    path = Path(path)
    if path.exists():
        if path.is_dir() != directory:
            return "is a directory; give a file path" if path.is_dir() else "is a file; give a directory"
        if not os.access(path, os.W_OK | (os.X_OK if directory else 0)):
            return f"cannot be written: this user has no write permission on the {'folder' if directory else 'file'}"
        return None
    folder = path.parent
    while make_parents and not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.exists():
        return f"cannot be made: the directory {folder} does not exist"
    if not folder.is_dir():
        return f"cannot be made: {folder} is a file, not a directory"
    problem = folder_problem(folder)
    return None if problem is None else f"cannot be made: {problem}"


def folder_problem(folder: Path) -> str | None:
    """Why nothing can be made in the existing directory ``folder``, or None."""
    return (
        None if os.access(folder, os.W_OK | os.X_OK) else f"this user has no write permission on the directory {folder}"
    )


def write_failure(flag: str, path: str | Path, error: OSError) -> str:
    """One line for a write that failed anyway (a full disk, a folder made read-only meanwhile)."""
    return f"{flag} {path} could not be written: {error.strerror or error}"


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read a megabyte at a time (model weights, GGUF files, benchmark data)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
