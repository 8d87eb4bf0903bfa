"""benchmarks/real_model_trl.py, for real on the tiny model: our trainer and TRL's GRPOTrainer each train from the
same base model in a process of their own, and the table compares their turns per second."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl", reason="needs the integrations-trl extra: pip install 'spiral-arena[integrations-trl]'")
pytest.importorskip("datasets", reason="needs the integrations-trl extra")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "real_model_trl.py"


def test_ours_and_trl_train_the_same_turns_and_compare(tmp_path):
    out = tmp_path / "trl.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--model", "tiny", "--steps", "2", "--json", str(out)],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert list(results) == ["ours", "trl"]
    for mode, result in results.items():  # step 2 is the one repeat: its own seconds and turns
        (step,) = result["steps"]
        assert step["step_s"] > 0 and step["turns"] > 0 and result["peak_gib"] > 0, mode
    trl_turns = results["trl"]["steps"][0]["turns"]  # as many as ours played a step, in whole groups of 16
    assert trl_turns % 16 == 0 and trl_turns >= 64
    assert "ours / trl, turns per second:" in done.stdout


def test_fewer_than_two_steps_is_refused():
    done = subprocess.run([sys.executable, str(SCRIPT), "--steps", "1"], capture_output=True, text=True)
    assert done.returncode == 2 and "--steps must be at least 2" in done.stderr
