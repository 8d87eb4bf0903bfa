"""benchmarks/real_model_levers.py, for real on the tiny model: each lever trains in its own process and the table
compares their update seconds per turn; a lever it does not know is refused, naming those it knows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft", reason="the LoRA levers need peft (the train extra)")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "real_model_levers.py"


def test_two_levers_train_and_compare_on_the_tiny_model(tmp_path):
    out = tmp_path / "levers.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--model", "tiny", "--levers", "fp32,lora16-bf16", "--steps", "2",
         "--json", str(out)], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [row["lever"] for row in rows] == ["fp32", "lora16-bf16"]
    for row in rows:  # step 2 is the one repeat: its own trained turns, its own seconds
        assert len(row["update_s_per_turn"]) == 1 and row["update_s_per_turn"][0] > 0 and row["peak_gib"] > 0
    assert "1.00x" in done.stdout and "lora16-bf16" in done.stdout


def test_an_unknown_lever_is_refused_with_the_known_ones():
    done = subprocess.run([sys.executable, str(SCRIPT), "--levers", "fp8"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "fp8" in done.stderr and "lora16-bf16" in done.stderr
