"""docs/integrations.md is executed: each python block runs in a fresh namespace, and a
``print(...)  # TEXT`` comment promises that TEXT is printed (the README test's rule). The page's
``spiral-arena env-server`` command is started, as written, for the blocks that talk to it."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "integrations.md"
TEXT = PAGE.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)
NEEDS = {  # text in a block -> the package it needs, and the install that brings it
    "integrations.verifiers": ("verifiers", "pip install 'spiral-arena[integrations-verifiers]'"),
    "integrations.trl": ("trl", "pip install 'spiral-arena[integrations-trl]'"),
    "from openenv": ("openenv", "pip install 'spiral-arena[integrations-openenv]' in a venv of its own"),
    "websockets": ("websockets", "pip install 'spiral-arena[api]'"),
}
SERVER = re.search(r"^spiral-arena env-server .*$", TEXT, re.M)
ADDRESS = "127.0.0.1:8001"  # where the page's env-server listens: its default port


@pytest.fixture(scope="module")
def env_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The page's env-server command, run with this venv's spiral-arena, until the module ends."""
    from test_readme import environment, port_is_taken

    assert SERVER is not None, "the page shows no spiral-arena env-server command"
    port = int(ADDRESS.split(":")[1])
    if port_is_taken(port):
        pytest.skip(f"port {port} is already in use on this machine; the page's env-server example needs it")
    log = tmp_path_factory.mktemp("env-server") / "env-server.log"
    command = ["bash", "-c", f"exec {SERVER.group(0)}"]
    with log.open("w") as sink:
        server = subprocess.Popen(command, env=environment(), stdout=sink, stderr=sink)
    deadline = time.monotonic() + 60
    while not port_is_taken(port):
        assert server.poll() is None, f"the env-server exited with {server.returncode}:\n{log.read_text()}"
        assert time.monotonic() < deadline, "the env-server did not listen within 60 s"
        time.sleep(0.1)
    yield
    server.terminate()
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    assert "Traceback" not in log.read_text(), log.read_text()


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_the_pages_python_examples_run_and_print_what_they_promise(block, request):
    for needle, (package, install) in NEEDS.items():
        if needle in block:
            pytest.importorskip(package, reason=f"needs {package}: {install}")
    if ADDRESS in block:
        request.getfixturevalue("env_server")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(PAGE), "exec"), {})
    printed = out.getvalue()
    for promise in re.findall(r"^print\(.*\)\s+# (.+)$", block, re.M):
        assert promise.strip() in printed, f"promised {promise!r}, printed {printed!r}"
