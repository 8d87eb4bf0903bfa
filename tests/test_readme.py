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
import csv
import io
import json
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
    """Exit 0 and no traceback; and where the README says what the command gives, that (PROMISES)."""
    (command,) = commands
    result = run(command, cwd)
    assert_ok(command, result)
    promise = promise_for(command)
    if promise is not None:
        promise(command, result, cwd)


# --- what the README says a shell command gives ----------------------------------------------------------

SEEN: dict[str, Any] = {}  # what a check saw, for the check of a later command (README order) that needs it


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
    """"A run directory holds config.json, metrics.jsonl (step 0: the warm start's loss and evaluation),
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
    SEEN[str(run_dir)] = rows


def resumes_where_it_stopped(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    """"same flags, more steps: continues exactly where it stopped"; "--resume says which step it continued
    from": the rows written before stay as they were, and the run goes on to the new last step."""
    name, steps = option(command, "--output-dir"), int(option(command, "--steps"))
    before = SEEN.get(str(cwd / name))
    assert before is not None, "the run this one resumes was not checked: run the whole module"
    stopped = before[-1]["step"]
    assert f"resumed {name} at step {stopped} of {steps} (from step_{stopped:06d})" in result.stdout
    rows = metric_rows(cwd / name)
    assert [r["step"] for r in rows] == list(range(steps + 1)) and rows[: stopped + 1] == before
    assert (cwd / name / "checkpoints" / f"step_{steps:06d}" / "spiral_arena.json").is_file()


def trains_on_two_ranks(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    writes_a_run_directory(command, result, cwd)
    assert json.loads((cwd / option(command, "--output-dir") / "config.json").read_text())["rollout_shards"] == 2


def writes_sft_data(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    """The expert's decisions of 200 games, one JSON line each, as many as it says."""
    records = [json.loads(line) for line in (cwd / option(command, "--out")).read_text().splitlines()]
    written = re.search(r"wrote (\d+) decisions from 200 games to expert.jsonl", result.stdout)
    assert written and int(written.group(1)) == len(records) > 200, report(command, result)
    assert all(r["prompt"] and r["response"].startswith("\\boxed{") for r in records)


def trains_delta_belief(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    """One step with the belief statistics logged, no evaluation at the start, the held-out nouns at the end."""
    rows = metric_rows(cwd / option(command, "--output-dir"))
    assert [r["step"] for r in rows] == [0, 1] and not any(k.startswith("eval/") for k in rows[0])
    assert {"belief/gain_mean", "belief/positive_share", "judge/dropped_games", "advantage_s"} <= rows[1].keys()
    assert "eval/TwentyQuestions-v0:recap=true;words=builtin_test/mean_at_1" in rows[1]


def ranks_questioners(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    """"it finds 17-23% of the held-out nouns, the splitting expert 100% in 8.5 questions"; ranked by success."""
    table = {}
    for line in result.stdout.splitlines():
        cells = line.split()
        if len(cells) == 9 and cells[0].isdigit():
            table[cells[1]] = cells
    assert list(table) == ["expert", "expert#guess_prob=0.3", "random"], report(command, result)
    assert table["expert"][2:5] == ["47", "47", "100.0%"] and table["expert"][6] == "8.5"
    assert 17 <= float(table["expert#guess_prob=0.3"][4].rstrip("%")) <= 23


def makes_two_models(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    for name in ("tiny-a", "tiny-b"):
        assert (cwd / "runs" / name / "config.json").is_file() and (cwd / "runs" / name / "tokenizer.json").is_file()


def scores_nothing(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    """"The tiny models answer nonsense, so every score is 0"."""
    out = cwd / option(command, "--output-dir")
    scores = json.loads((out / "results.json").read_text())["benchmarks"]
    assert set(scores) == set(option(command, "--benchmarks").split(","))
    assert all(b["score"]["value"] == 0 for b in scores.values())
    SEEN[str(out)] = json.loads((out / "manifest.json").read_text())["protocol_hash"]


def compares_no_change(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    """Per-benchmark deltas (B - A) with intervals and p-values, drawn: all 0 between two models scoring 0."""
    rows = [[c.strip() for c in line.strip("│ ").split("│")] for line in result.stdout.splitlines() if "│" in line]
    assert {r[0] for r in rows} >= {"math500", "amc23", "mmlu_pro", "gpqa_diamond", "overall"}
    assert all(r[4:] == ["+0.0", "[+0.0, +0.0]", "1.000"] for r in rows), report(command, result)
    assert (cwd / option(command, "--png")).read_bytes()[:4] == b"\x89PNG"


def regrades_with_a_new_hash(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    """"grades the stored responses again with another extraction mode ... and records the new protocol hash"."""
    out = cwd / command.split()[3]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["protocol"]["preset"]["math"]["extraction"] == option(command, "--math-extraction")
    assert manifest["regraded_from_protocol_hash"] == SEEN[str(out)] != manifest["protocol_hash"]


def ranks_every_run(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    """"random, expert and the latest checkpoint of every run in ./runs"."""
    runs = [run / "checkpoints" for run in (cwd / "runs").iterdir() if (run / "checkpoints").is_dir()]
    latest = [max(checkpoints.glob("step_*")).relative_to(cwd) for checkpoints in runs]
    assert len(latest) >= 2  # the trained runs above
    for name in ("random", "expert", *(f"hf:{path}" for path in latest)):
        assert re.search(rf"^\s+\d+\s+{re.escape(name)}\s", result.stdout, re.M), f"{name} not ranked"


def plays_every_pair(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    """Three agents, two games, --games-per-pair 20: 3 pairs x 2 games x 20 games stored."""
    from conftest import stored_rows

    games = stored_rows(cwd / option(command, "--db"))
    agents = set(option(command, "--agents").split(","))
    assert len(games) == 3 * 2 * 20 and {g["env_id"] for g in games} == {"KuhnPoker-v0", "TicTacToe-v0"}
    assert {g["player0"] for g in games} | {g["player1"] for g in games} == agents


def shows_the_board(command: str, result: subprocess.CompletedProcess[str], cwd: Path) -> None:
    with open(cwd / option(command, "--csv"), newline="") as f:
        overall = [row["agent"] for row in csv.DictReader(f) if row["scope"] == "overall"]
    assert overall[:2] == ["expert", "random"] and len(overall) == 3
    assert (cwd / option(command, "--png")).read_bytes()[:4] == b"\x89PNG"
    assert "</html>" in (cwd / option(command, "--html")).read_text()


PROMISES: dict[str, Callable[[str, subprocess.CompletedProcess[str], Path], None]] = {
    "spiral-arena play KuhnPoker-v0 --p0 expert --p1 random --games 200": plays_the_games_asked,
    "spiral-arena train --opponent random --output-dir runs/vs_random --steps 4": writes_a_run_directory,
    "spiral-arena train --opponent random --output-dir runs/vs_random --steps 6": resumes_where_it_stopped,
    "torchrun --standalone --nproc_per_node 2": trains_on_two_ranks,
    "spiral-arena collect --agent expert": writes_sft_data,
    "spiral-arena train --algo delta-belief --output-dir runs/twenty_q": trains_delta_belief,
    "spiral-arena leaderboard run --games TwentyQuestions-v0": ranks_questioners,
    "python -c \"from trainers.tiny import create_tiny": makes_two_models,
    "spiral-arena eval --model hf:runs/tiny-": scores_nothing,
    "spiral-arena eval compare": compares_no_change,
    "spiral-arena eval regrade": regrades_with_a_new_hash,
    "spiral-arena leaderboard": ranks_every_run,
    "spiral-arena leaderboard run --agents": plays_every_pair,
    "spiral-arena leaderboard show": shows_the_board,
}


def promise_for(command: str) -> Callable[[str, subprocess.CompletedProcess[str], Path], None] | None:
    """The check of the longest PROMISES prefix of ``command``, or None."""
    matches = [prefix for prefix in PROMISES if command.startswith(prefix)]
    return PROMISES[max(matches, key=len)] if matches else None


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


def test_every_promise_is_checked_on_a_readme_command() -> None:
    """A PROMISES entry that matches no command, or one whose command is not run as written, checks nothing."""
    commands = [command for _, command in shell_commands()]
    for prefix, check in PROMISES.items():
        matched = [c for c in commands if promise_for(c) is check]
        assert matched, f"PROMISES[{prefix!r}] matches no README command"
        assert all(special_case(c) is DEFAULT for c in matched), f"PROMISES[{prefix!r}] names a SPECIAL command"


def test_comments_and_continuations_are_parsed() -> None:
    assert cut_comment('spiral-arena play X --p0 "a # b"  # note') == 'spiral-arena play X --p0 "a # b"'
    assert cut_comment("  # a whole-line comment") == ""
    assert cut_comment("--agents random,expert#alpha=0.2") == "--agents random,expert#alpha=0.2"
    joined = [c for _, c in shell_commands() if c.startswith("spiral-arena leaderboard run")]
    assert joined and all("\\" not in c and "--games-per-pair" in c for c in joined)
