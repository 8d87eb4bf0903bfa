"""The pages under docs/ are executed: every ``python`` and ``bash`` block runs as written.

Python blocks run one at a time in a fresh namespace; a ``print(...)  # TEXT`` comment promises that TEXT
is a printed line. Bash blocks run as one script each, in a scratch directory, with the venv's bin first on
PATH; a ``# prints: TEXT`` comment promises that TEXT appears in what the block writes (stdout and stderr).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
BIN = Path(sys.executable).parent


def blocks(language: str) -> list[tuple[str, str]]:
    """(page:line, text) of every ```language block of every page."""
    found = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        for match in re.finditer(rf"^```{language}\n(.*?)^```", text, re.M | re.S):
            found.append((f"docs/{page.name}:{text.count(chr(10), 0, match.start(1)) + 1}", match.group(1)))
    return found


PYTHON, BASH = blocks("python"), blocks("bash")


@pytest.mark.parametrize(("where", "block"), PYTHON, ids=[where for where, _ in PYTHON])
def test_python_block(where: str, block: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, where, "exec"), {"__name__": "__docs__"})
    printed = out.getvalue().splitlines()
    promised = [m.group(1).strip() for m in re.finditer(r"^\s*print\(.*\)\s+#\s*(.+)$", block, re.M)]
    assert promised, f"{where}: promise what a print shows with a '# TEXT' comment"
    for line in promised:
        assert line in printed, f"{where}: promised {line!r}; printed {printed}"


@pytest.mark.parametrize(("where", "block"), BASH, ids=[where for where, _ in BASH])
def test_bash_block(where: str, block: str, tmp_path) -> None:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    shown = done.stdout + done.stderr
    promised = re.findall(r"# prints: (.+)$", block, re.M)
    assert promised, f"{where}: promise what the block prints with a '# prints: TEXT' comment"
    for text in promised:
        assert text.strip() in shown, f"{where}: promised {text.strip()!r}; got {shown}"
