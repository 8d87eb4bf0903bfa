"""benchmarks/twenty_questions.py: the closed-world experiment end to end at a tiny size (one seed, one RL step
per method), and its read-out of what a model knows on the weak questioner's unseen games."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import twenty_questions as bench  # noqa: E402

from spiral_arena.agents.experts.twenty_questions import candidates, information_gain  # noqa: E402


def test_the_read_out_positions_are_the_weak_questioners_games_with_what_fits():
    positions = bench.read_out_positions("last", 6)
    assert len(positions) >= 6 and positions[0].answers == 0 and len(positions[0].fitting) == 32
    for position in positions:
        listed = position.observation.split("Still possible (")[1].split("): ")[1].split(".\n")[0].split(", ")
        assert listed == sorted(position.fitting) and position.secret in position.fitting
        assert 0 <= position.gain_bits <= 1
    view = {"questions": [], "world": sorted(positions[0].fitting)}
    assert sorted(candidates(view)) == sorted(positions[0].fitting)
    assert information_gain(view, "Is it an animal?") > 0.5


def test_the_experiment_runs_end_to_end_and_reports_every_method(tmp_path):
    out = tmp_path / "tq"
    command = [
        sys.executable, "benchmarks/twenty_questions.py", "--seeds", "0", "--out", str(out), "--steps", "1",
        "--sft-steps", "3", "--samples-per-secret", "1", "--read-out-games", "2", "--budgets", "7",
        "--scripted-games", "8", "--set", "kl_coef=0",
    ]  # fmt: skip
    wide = {**os.environ, "COLUMNS": "250"}  # rich wraps the tables' headers at 80 columns otherwise
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900, env=wide)
    assert done.returncode == 0, done.stderr[-3000:]
    text = done.stdout
    assert "splitting expert" in text and "100%" in text  # it finds every secret within 7 questions
    for method in ("warm start", "StarPO", "ΔBelief"):
        assert method in text
    assert "Mean@1" in text and "naming mass on fitting nouns" in text
    results = json.loads((out / "results.json").read_text())["0"]
    assert set(results["methods"]) == {"warm start", "StarPO", "ΔBelief"}
    assert [step for step, _ in results["curves"]["StarPO"]] == [0, 1]
    assert [step for step, _ in results["curves"]["ΔBelief"]] == [0, 1]
    for method in ("StarPO", "ΔBelief"):  # every RL step's training games, beside the evaluations
        assert [step for step, _ in results["train_curves"][method]] == [1]
        assert 0 <= results["train_curves"][method][0][1] <= 1
    for method, known in results["knowledge"].items():
        assert 0 <= known["fit_mass"] <= 1 and 0 < known["fit_chance"] <= 1, method
        assert known["belief_uniform"] == pytest.approx(1 / 32)
    for run in ("starpo", "delta_belief"):  # --set reaches both methods (the recipe's anchor is 0.1)
        assert json.loads((out / "seed0" / run / "config.json").read_text())["kl_coef"] == 0
    assert (out / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    report = [*command[:2], "--out", str(out), "--report"]
    again = subprocess.run(report, cwd=REPO, capture_output=True, text=True, env=wide)
    assert again.returncode == 0 and "ΔBelief - StarPO" in again.stdout
