"""The spiral-arena command as a user runs it: a real subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import spiral_arena

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "spiral_arena.cli"]


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=REPO, input=stdin, capture_output=True, text=True, timeout=300)


def test_envs_lists_every_id_with_a_description():
    out = run("envs")
    assert out.returncode == 0
    lines = out.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == spiral_arena.list_envs()
    assert all(len(line.split(maxsplit=1)[1]) > 20 for line in lines)


def test_play_prints_moves_and_a_summary():
    out = run("play", "TicTacToe-v0", "--p0", "expert", "--p1", "random", "--games", "4", "--seed", "0")
    assert out.returncode == 0, out.stderr
    assert "--- game 1 (seed 0) ---" in out.stdout and "player_0: [" in out.stdout
    assert "4 game(s) of TicTacToe-v0" in out.stdout
    summary = out.stdout.split("4 game(s) of TicTacToe-v0")[1]
    assert "player_1 (random): wins 0" in summary  # the expert never loses


def test_a_human_typo_re_prompts_instead_of_losing():
    # cell 9 does not exist and cell 4 is taken after the first move: both are re-asked
    moves = "9\n4\n4\n0\n1\n2\n3\n5\n6\n7\n8\n"
    out = run("play", "TicTacToe-v0", "--p0", "human", "--p1", "random", "--seed", "3", stdin=moves)
    assert out.returncode == 0, out.stderr
    assert "Not accepted: [9] is not a legal action now" in out.stdout
    assert "invalid moves 0" in out.stdout.split("player_0 (human)")[1]


def test_bad_input_is_a_clear_error():
    out = run("play", "TicTacToe-v1", "--p0", "random")
    assert out.returncode == 2 and "unknown env id 'TicTacToe-v1'" in out.stderr and "TicTacToe-v0" in out.stderr
    out = run("play", "TicTacToe-v0", "--p0", "nonsense")
    assert out.returncode == 2 and "unknown agent spec" in out.stderr
