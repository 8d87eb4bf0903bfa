"""``benchmarks/gpu_check.sh --dry-run``: every check a lent GPU runs, on CPU at small sizes."""

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


def test_gpu_check_dry_run_passes_and_reports_numbers(tmp_path):
    out = tmp_path / "result.json"
    done = subprocess.run(
        ["bash", "benchmarks/gpu_check.sh", "--dry-run", "--out", str(out)],
        cwd=REPO,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["ok"] and result["dry_run"]
    assert result["bf16_update"]["changed_share"] > 0.9
    losses = result["fixed_batch"]["losses"]
    assert losses[-1] < losses[0]
    assert result["generation"]["tokens_per_s"] > 0
    assert result["train"]["steps"] == 2 and max(result["train"]["logprob_gap_mean"]) < 0.05
    assert result["train_async"]["staleness"] == [0, 1, 1] and len(result["train_async"]["step_s"]) == 2
    assert "skipped" in result["vllm"] and result["peak_memory_gib"] > 0


def test_gpu_check_without_a_gpu_says_so():
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and "no CUDA GPU" in done.stderr and "--dry-run" in done.stderr
