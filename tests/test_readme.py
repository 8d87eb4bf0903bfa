"""The README is executed: every ``python`` and ``bash`` block runs here as written.

Python blocks run one at a time, each in a fresh namespace, so none leans on another's imports; a
``print(...)  # TEXT`` comment is a promise that TEXT is printed. Shell blocks run command by command,
in README order, in one scratch directory (later examples read what earlier ones wrote: the resumed
run continues the first one, the leaderboard plays their checkpoints), with the venv's bin first on
PATH, as after ``source .venv/bin/activate``. Run the whole module: a shell command picked out alone
misses what the commands before it wrote. Commands that cannot run as such here are in SPECIAL, each
with its reason, and are checked as far as this machine allows.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
BIN = Path(sys.executable).parent  # the venv the suite runs in: its spiral-arena, python and torchrun
LINKED = ("tests", "benchmarks", "scripts")  # the README's relative paths into the checkout
TIMEOUT_S = 420  # per command; the slowest (the default leaderboard) takes about a minute on 2 idle cores
KEY_VARIABLES = ("OPENAI_API_KEY", "GEMINI_API_KEY", "MISTRAL_API_KEY", "OPENROUTER_API_KEY", "OPENAI_BASE_URL")


def fenced_blocks(language: str) -> list[tuple[int, str]]:
    """(README line of the block's first line, text) of every ```language block, in order."""
    text = README.read_text()
    found = re.finditer(rf"^```{language}\n(.*?)^```", text, re.M | re.S)
    return [(text.count("\n", 0, match.start(1)) + 1, match.group(1)) for match in found]


# --- Python blocks -------------------------------------------------------------------------------


def promised_lines(block: str) -> list[str]:
    """The text of every ``print(...)  # TEXT`` comment: what the README says that print shows."""
    return [m.group(1).strip() for m in re.finditer(r"^\s*print\(.*\)\s+#\s*(.+)$", block, re.M)]


def check_kuhn(printed: list[str]) -> None:
    assert printed[0] == "player_0 holds J ['[check]', '[bet]']"  # the seeded deal the comments describe
    endings = [line.split(" ", 2) for line in printed if " holds " not in line]
    assert [agent for agent, _, _ in endings] == ["player_0", "player_1"]
    assert sum(float(reward) for _, reward, _ in endings) == 0
    # every move was legal: an invalid one would end the game with reason "invalid_move"
    assert all(ast.literal_eval(outcome)["reason"] == "normal" for _, _, outcome in endings)
    assert len(printed) - 2 >= 5 * 2  # five rounds of Kuhn Poker, at least two decisions each


def check_textarena(printed: list[str]) -> None:
    assert printed == ["{0: 1.0, 1: -1.0}"]


PYTHON_CHECKS: dict[str, Callable[[list[str]], None]] = {
    'spiral_arena.make("KuhnPoker-v0")': check_kuhn,
    "TextArenaCompat(": check_textarena,
}


PYTHON_BLOCKS = fenced_blocks("python")


@pytest.mark.parametrize(("line", "block"), PYTHON_BLOCKS, ids=[f"line{line}" for line, _ in PYTHON_BLOCKS])
def test_python_block_runs_on_its_own(line: int, block: str) -> None:
    checks = [check for marker, check in PYTHON_CHECKS.items() if marker in block]
    assert len(checks) == 1, f"README.md:{line}: give this block one expectation in PYTHON_CHECKS"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, f"README.md:{line}", "exec"), {"__name__": "__readme__"})
    printed = out.getvalue().splitlines()
    for promised in promised_lines(block):
        assert promised in printed, f"README.md:{line}: a comment promises {promised!r}; printed {printed}"
    checks[0](printed)


def test_the_promise_parser_reads_every_print_comment() -> None:
    """``promised_lines`` is what makes a README comment a checked promise: it must find each one."""
    block = 'x = 1\nprint(x)  # 1\n    print("a", x)   # a 1\nprint(x)\ny = 2  # not printed\n'
    assert promised_lines(block) == ["1", "a 1"]
    for line, block in PYTHON_BLOCKS:  # a print with a comment, counted another way, is a promise read
        commented = [s for s in block.splitlines() if s.lstrip().startswith("print(") and "  #" in s]
        assert len(promised_lines(block)) == len(commented), f"README.md:{line}"
    assert sum(len(promised_lines(block)) for _, block in PYTHON_BLOCKS) >= 3  # the README makes promises


def test_every_python_check_has_its_block() -> None:
    for marker in PYTHON_CHECKS:
        assert sum(marker in block for _, block in PYTHON_BLOCKS) == 1, (
            f"PYTHON_CHECKS[{marker!r}] must match one block"
        )


# --- shell blocks --------------------------------------------------------------------------------


def cut_comment(line: str) -> str:
    """The line without its trailing ``# comment`` (a '#' inside quotes is kept, as bash keeps it)."""
    if line.lstrip().startswith("#"):
        return ""
    for match in re.finditer(r"\s#", line):
        try:
            shlex.split(line[: match.start()])
        except ValueError:  # an open quote: this '#' is part of an argument
            continue
        return line[: match.start()].rstrip()
    return line.rstrip()


def shell_commands() -> list[tuple[int, str]]:
    """(README line, command) of every command in the bash blocks, continuation lines joined."""
    commands: list[tuple[int, str]] = []
    for first, block in fenced_blocks("bash"):
        pending: list[str] = []
        for offset, raw in enumerate(block.splitlines()):
            if raw.rstrip().endswith("\\"):
                pending.append(raw.rstrip()[:-1].strip())
                continue
            text = " ".join([*pending, cut_comment(raw).strip()]).strip()
            if text:
                commands.append((first + offset - len(pending), text))
            pending = []
    return commands


def environment() -> dict[str, str]:
    """This environment with the venv first on PATH and no provider keys: what a README command
    needs must be written in the command."""
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def run(command: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=environment(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def report(command: str, result: subprocess.CompletedProcess[str]) -> str:
    return (
        f"{command}\nexit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
    )


def assert_ok(command: str, result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0 and "Traceback" not in result.stderr, report(command, result)


def run_as_written(commands: list[str], cwd: Path) -> None:
    (command,) = commands
    assert_ok(command, run(command, cwd))


def covered_by_ci(commands: list[str], cwd: Path) -> None:
    (command,) = commands
    ci = (REPO / "scripts" / "test.sh").read_text()
    for part in command.split(" && ")[:-1]:  # the install; the last part is the 9-minute default run
        assert part in ci, f"scripts/test.sh no longer runs the README's {part!r}"
    assert "bash scripts/smoke.sh .venv" in ci
    pytest.skip(special_case(command).reason)


def ci_entry_point(commands: list[str], cwd: Path) -> None:
    assert commands == ["bash scripts/test.sh"] and "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()
    pytest.skip(special_case(commands[0]).reason)


def human_types_moves(commands: list[str], cwd: Path) -> None:
    (command,) = commands
    moves = "".join(f"{cell}\n" for cell in range(9)) * 2  # an occupied cell re-prompts; each pass finds a free one
    result = run(command, cwd, stdin=moves)
    assert_ok(command, result)
    assert "1 game(s) of TicTacToe-v0" in result.stdout, report(command, result)
    assert re.search(r"player_0 \(human\):.* invalid moves 0", result.stdout), report(command, result)


def port_is_taken(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def serve_for_next(commands: list[str], cwd: Path) -> None:
    serve, client = commands
    port = int(re.search(r"--port (\d+)", serve).group(1))
    if port_is_taken(port):
        pytest.skip(f"port {port} is already in use on this machine; the README's serve/play pair needs it")
    log = cwd / "serve.log"
    with log.open("w") as sink:
        server = subprocess.Popen(["bash", "-c", f"exec {serve}"], cwd=cwd, env=environment(), stdout=sink, stderr=sink)
    try:
        deadline = time.monotonic() + 60
        while not port_is_taken(port):
            assert server.poll() is None, f"{serve} exited with {server.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"{serve} did not listen on port {port} within 60 s"
            time.sleep(0.2)
        assert_ok(client, run(client, cwd))
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


def fails_fast_on_missing_model(commands: list[str], cwd: Path) -> None:
    (command,) = commands
    path = re.search(r"--model (\S+)", command).group(1)
    started = time.monotonic()
    result = run(command, cwd)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and path in lines[0], report(command, result)
    assert time.monotonic() - started < 60, "the model path should be checked before anything loads"


def fails_fast_without_its_judge(commands: list[str], cwd: Path) -> None:
    """The 4B recipe's judge endpoint is checked before anything loads: with no OPENAI_BASE_URL (this
    suite clears provider keys) the run stops at once and says what to set."""
    (command,) = commands
    result = run(command, cwd)
    assert result.returncode == 2 and "Traceback" not in result.stderr, report(command, result)
    assert "the LLM judge openai:Qwen/Qwen3-14B needs an API key" in result.stderr, report(command, result)
    assert "OPENAI_BASE_URL" in result.stderr, report(command, result)


def gpu_check_without_gpu(commands: list[str], cwd: Path) -> None:
    (command,) = commands
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU is here: this is the GPU check itself (up to 8 minutes); run it by hand")
    result = run(command, cwd)
    assert result.returncode == 2 and "no CUDA GPU" in result.stderr and "--dry-run" in result.stderr, report(
        command, result
    )
    assert "Traceback" not in result.stderr


def not_run(commands: list[str], cwd: Path) -> None:
    pytest.skip(special_case(commands[0]).reason)


@dataclass(frozen=True)
class Case:
    reason: str
    check: Callable[[list[str], Path], None]
    commands: int = 1  # how many README commands, from this one on, the check takes


SPECIAL: dict[str, Case] = {
    "python3 -m venv .venv": Case(
        "install: CI's scripts/test.sh runs these same commands and scripts/smoke.sh uses that venv; "
        "the 9-minute default train is not run in the suite",
        covered_by_ci,
    ),
    "bash scripts/test.sh": Case(
        "CI's own entry point (.ci/run); here it would run this suite inside itself", ci_entry_point
    ),
    "spiral-arena play TicTacToe-v0 --p0 human": Case("a human player: moves are typed on stdin", human_types_moves),
    "spiral-arena serve": Case(
        "a server: started in the background for the next command, then stopped", serve_for_next, 2
    ),
    "spiral-arena train --model /models/": Case(
        "needs real weights: must fail at once naming the path", fails_fast_on_missing_model
    ),
    "spiral-arena sft --data expert.jsonl --model /models/": Case(
        "needs real weights: must fail at once naming the path", fails_fast_on_missing_model
    ),
    "spiral-arena train --recipe delta-belief-4b": Case(
        "needs GPUs, vLLM, real weights and a served judge: must fail at once naming what to set",
        fails_fast_without_its_judge,
    ),
    "torchrun --standalone --nproc_per_node 8": Case(
        "needs 8 GPUs, vLLM and real weights; its model check is the `train --model /models/...` case", not_run
    ),
    "bash benchmarks/gpu_check.sh": Case(
        "needs a GPU: without one it must say so and point to --dry-run, which tests/test_gpu_check.py runs",
        gpu_check_without_gpu,
    ),
}
DEFAULT = Case("runs as written: exit 0, no traceback", run_as_written)


def special_case(command: str) -> Case:
    matches = [prefix for prefix in SPECIAL if command.startswith(prefix)]
    return SPECIAL[max(matches, key=len)] if matches else DEFAULT


def shell_steps() -> list[tuple[int, list[str]]]:
    """The commands in README order, each with the ones its check takes after it."""
    commands = shell_commands()
    steps, i = [], 0
    while i < len(commands):
        line, command = commands[i]
        taken = special_case(command).commands
        steps.append((line, [c for _, c in commands[i : i + taken]]))
        i += taken
    return steps


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working directory for every shell command, with the checkout's data folders linked in."""
    root = tmp_path_factory.mktemp("readme")
    for name in LINKED:
        (root / name).symlink_to(REPO / name, target_is_directory=True)
    return root


def step_id(step: object) -> str:
    return f"line{step}" if isinstance(step, int) else " ".join(step[0].split()[:3])


@pytest.mark.parametrize(("line", "commands"), shell_steps(), ids=step_id)
def test_shell_command(line: int, commands: list[str], scratch: Path) -> None:
    special_case(commands[0]).check(commands, scratch)


def test_every_special_case_names_a_readme_command() -> None:
    commands = [command for _, command in shell_commands()]
    for prefix in SPECIAL:
        assert any(c.startswith(prefix) for c in commands), f"SPECIAL[{prefix!r}] matches no README command"


def test_comments_and_continuations_are_parsed() -> None:
    assert cut_comment('spiral-arena play X --p0 "a # b"  # note') == 'spiral-arena play X --p0 "a # b"'
    assert cut_comment("  # a whole-line comment") == ""
    assert cut_comment("--agents random,expert#alpha=0.2") == "--agents random,expert#alpha=0.2"
    joined = [c for _, c in shell_commands() if c.startswith("spiral-arena leaderboard run")]
    assert joined and all("\\" not in c and "--games-per-pair" in c for c in joined)
