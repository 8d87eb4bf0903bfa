"""The README is executed: every ``python`` and ``bash`` block runs here as written.

Python blocks run one at a time, each in a fresh namespace, so none leans on another's imports; a
``print(...)  # TEXT`` comment is a promise that TEXT is printed. Shell blocks run command by command,
in README order, in one scratch directory, with the venv's bin first on
PATH, as after ``source .venv/bin/activate``. Run the whole module: a shell command picked out alone
misses what the commands before it wrote (the leaderboard ranks the run the train example wrote, and the eval
example reads its checkpoint). Commands that cannot run as such here are in SPECIAL, each
with its reason, and are checked as far as this machine allows.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
BIN = Path(sys.executable).parent  # the venv the suite runs in: its spiral-arena, python and torchrun
LINKED = ("tests", "benchmarks", "scripts")  # the README's relative paths into the checkout
TIMEOUT_S = 420  # per command; the slowest (the default leaderboard) takes about a minute on 2 idle cores
KEY_VARIABLES = ("OPENAI_API_KEY", "GEMINI_API_KEY", "MISTRAL_API_KEY", "OPENROUTER_API_KEY", "OPENAI_BASE_URL")


def fenced_blocks(language: str, document: Path = README) -> list[tuple[int, str]]:
    """(line of the block's first line, text) of every ```language block of ``document``, in order."""
    text = document.read_text()
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


def check_text_env(printed: list[str]) -> None:
    assert printed == ["-1.0 normal"]  # always the first legal cell against the expert: a seeded, legal loss


PYTHON_CHECKS: dict[str, Callable[[list[str]], None]] = {
    'spiral_arena.make("KuhnPoker-v0")': check_kuhn,
    "spiral_arena.make_text_env(": check_text_env,
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
    assert sum(len(promised_lines(block)) for _, block in PYTHON_BLOCKS) >= 2  # the README makes promises


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


def shell_commands(document: Path = README) -> list[tuple[int, str]]:
    """(line, command) of every command in the document's bash blocks, continuation lines joined."""
    commands: list[tuple[int, str]] = []
    for first, block in fenced_blocks("bash", document):
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


def run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=environment(),
        input="",
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


def run_as_written(command: str, cwd: Path) -> None:
    """Exit 0 and no traceback; and where the README says what the command gives, that (PROMISES)."""
    result = run(command, cwd)
    assert_ok(command, result)
    promise = promise_for(command)
    if promise is not None:
        promise(command, result, cwd)


# --- what the README says a shell command gives ----------------------------------------------------------


def option(command: str, flag: str) -> str:
    return re.search(rf"{flag} (\S+)", command).group(1)


def metric_rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def plays_the_games_asked(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    """--games 200: a summary of 200 games whose wins and draws add up, no invalid move by scripted agents."""
    assert re.search(r"^200 game\(s\) of KuhnPoker-v0$", result.stdout, re.M), report(command, result)
    wins = [int(n) for n in re.findall(r"wins (\d+), losses", result.stdout)]
    draws = int(re.search(r"draws: (\d+)", result.stdout).group(1))
    assert len(wins) == 2 and sum(wins) + draws == 200 and result.stdout.count("invalid moves 0") == 2


def writes_a_run_directory(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    """ "A run directory holds config.json, metrics.jsonl (step 0: the warm start's loss and evaluation),
    transcripts.jsonl, checkpoints/step_N/ ... and PNG plots"; at the end a table with the README's targets."""
    run_dir, steps = cwd / option(command, "--output-dir"), int(option(command, "--steps"))
    rows = metric_rows(run_dir)
    assert [r["step"] for r in rows] == list(range(steps + 1))
    assert "sft/loss_last" in rows[0] and any(k.startswith("eval/") for k in rows[0])
    assert json.loads((run_dir / "config.json").read_text())["steps"] == steps
    assert (run_dir / "transcripts.jsonl").stat().st_size > 0
    assert (run_dir / "checkpoints" / f"step_{steps:06d}" / "spiral_arena.json").is_file()
    assert (run_dir / "summary.png").read_bytes()[:4] == b"\x89PNG"
    assert f"Final evaluation at step {steps}" in result.stdout and "README targets" in result.stdout


def scores_nothing(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    """ "the demo model answers nonsense, so every score is 0"."""
    out = cwd / option(command, "--output-dir")
    scores = json.loads((out / "results.json").read_text())["benchmarks"]
    assert set(scores) == set(option(command, "--benchmarks").split(","))
    assert all(b["score"]["value"] == 0 for b in scores.values())


def ranks_every_run(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    """ "`random`, `expert` and the latest checkpoint of every run in `./runs`"."""
    runs = [run / "checkpoints" for run in (cwd / "runs").iterdir() if (run / "checkpoints").is_dir()]
    latest = [max(checkpoints.glob("step_*")).relative_to(cwd) for checkpoints in runs]
    assert latest  # the run trained above
    for name in ("random", "expert", *(f"hf:{path}" for path in latest)):
        assert re.search(rf"^\s+\d+\s+{re.escape(name)}\s", result.stdout, re.M), f"{name} not ranked"


def shows_the_board(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    with open(cwd / option(command, "--csv"), newline="") as f:
        overall = [row["agent"] for row in csv.DictReader(f) if row["scope"] == "overall"]
    assert overall[:2] == ["expert", "random"] and len(overall) == 3
    assert (cwd / option(command, "--png")).read_bytes()[:4] == b"\x89PNG"
    assert "</html>" in (cwd / option(command, "--html")).read_text()


PROMISES: dict[str, Callable[[str, subprocess.CompletedProcess[str], Path], None]] = {
    "spiral-arena play KuhnPoker-v0 --p0 expert --p1 random --games 200": plays_the_games_asked,
    "spiral-arena train --output-dir runs/demo": writes_a_run_directory,
    "spiral-arena leaderboard": ranks_every_run,
    "spiral-arena leaderboard show": shows_the_board,
    "spiral-arena eval --model hf:runs/demo/": scores_nothing,
}


def promise_for(command: str) -> Callable[[str, subprocess.CompletedProcess[str], Path], None] | None:
    """The check of the longest PROMISES prefix of ``command``, or None."""
    matches = [prefix for prefix in PROMISES if command.startswith(prefix)]
    return PROMISES[max(matches, key=len)] if matches else None


def covered_by_ci(command: str, cwd: Path) -> None:
    ci = (REPO / "scripts" / "test.sh").read_text()
    for part in command.split(" && ")[:-1]:  # the install; the last part is the default run (about 8 minutes)
        assert part in ci, f"scripts/test.sh no longer runs the README's {part!r}"
    assert "bash scripts/smoke.sh .venv" in ci
    pytest.skip(special_case(command).reason)


def ci_entry_point(command: str, cwd: Path) -> None:
    assert command == "bash scripts/test.sh" and "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()
    pytest.skip(special_case(command).reason)


def gpu_check_without_gpu(command: str, cwd: Path) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU is here: this is the GPU check itself (up to 8 minutes); run it by hand")
    result = run(command, cwd)
    assert result.returncode == 2 and "no CUDA GPU" in result.stderr and "--dry-run" in result.stderr, report(
        command, result
    )
    assert "Traceback" not in result.stderr


def serves_the_page(command: str, cwd: Path) -> None:
    """A server runs until stopped: started on a free port in the README's directory, it must serve the page
    and show the leaderboard the Rank commands above stored there."""
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = cwd / "web.log"
    with log.open("w") as out:
        server = subprocess.Popen(["bash", "-c", f"exec {command} --port {port}"], cwd=cwd, env=environment(),
                                  stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as reply:
                    assert b"spiral-arena" in reply.read()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.3)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/leaderboard", timeout=60) as reply:
            board = json.load(reply)
        if (cwd / "leaderboard.sqlite").exists():  # the Rank section's run
            assert board["games"] > 0 and "TicTacToe-v0" in board["html"], board.get("missing")
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert "Traceback" not in log.read_text()


def not_run(command: str, cwd: Path) -> None:
    pytest.skip(special_case(command).reason)


@dataclass(frozen=True)
class Case:
    reason: str
    check: Callable[[str, Path], None]


SPECIAL: dict[str, Case] = {
    "python3 -m venv .venv": Case(
        "install: CI's scripts/test.sh runs these same commands and scripts/smoke.sh uses that venv; "
        "the 8-minute default train is not run in the suite",
        covered_by_ci,
    ),
    "bash scripts/test.sh": Case(
        "CI's own entry point (.ci/run); here it would run this suite inside itself", ci_entry_point
    ),
    "torchrun --standalone --nproc_per_node 8": Case(
        "needs 8 GPUs, vLLM and real weights; docs/training-gpus.md runs torchrun on 2 CPU ranks and the "
        "missing-weights check of `train --model /models/...`",
        not_run,
    ),
    "spiral-arena web": Case(
        "a server: started on a free port, it serves the page and the leaderboard", serves_the_page
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


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working directory for every shell command, with the checkout's data folders linked in."""
    root = tmp_path_factory.mktemp("readme")
    for name in LINKED:
        (root / name).symlink_to(REPO / name, target_is_directory=True)
    return root


def step_id(step: object) -> str:
    return f"line{step}" if isinstance(step, int) else " ".join(step.split()[:3])


@pytest.mark.parametrize(("line", "command"), shell_commands(), ids=step_id)
def test_shell_command(line: int, command: str, scratch: Path) -> None:
    special_case(command).check(command, scratch)


def test_every_special_case_names_a_readme_command() -> None:
    commands = [command for _, command in shell_commands()]
    for prefix in SPECIAL:
        assert any(c.startswith(prefix) for c in commands), f"SPECIAL[{prefix!r}] matches no README command"


def test_every_promise_is_checked_on_a_readme_command() -> None:
    """A PROMISES entry that matches no command, or one whose command is not run as written, checks nothing."""
    commands = [command for _, command in shell_commands()]
    for prefix, check in PROMISES.items():
        matched = [c for c in commands if promise_for(c) is check]
        assert matched, f"PROMISES[{prefix!r}] matches no README command"
        assert all(special_case(c) is DEFAULT for c in matched), f"PROMISES[{prefix!r}] names a SPECIAL command"


def test_comments_and_continuations_are_parsed(tmp_path: Path) -> None:
    assert cut_comment('spiral-arena play X --p0 "a # b"  # note') == 'spiral-arena play X --p0 "a # b"'
    assert cut_comment("  # a whole-line comment") == ""
    assert cut_comment("--agents random,expert#alpha=0.2") == "--agents random,expert#alpha=0.2"
    page = tmp_path / "page.md"
    page.write_text("```bash\nspiral-arena a \\\n    --b 1  # note\n\n# a comment\nspiral-arena c#d=1\n```\n")
    assert shell_commands(page) == [(2, "spiral-arena a --b 1"), (6, "spiral-arena c#d=1")]
    joined = [c for _, c in shell_commands() if c.startswith("torchrun --standalone --nproc_per_node 8")]
    assert joined and all("\\" not in c and "--gradient-checkpointing" in c for c in joined)
