"""benchmarks/async_rollouts.py: the main job trained synchronously and with --async-steps 1, side by side,
read back as steps per minute, where a step's seconds go, and both modes' final targets."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import async_rollouts  # noqa: E402

SMALL = ["steps=4", "sft_steps=4", "sft_batch=16", "samples_per_step=24", "games_in_flight=8", "eval_games=1",
         "micro_batch=8", "plots=false", "eval_every=10", "eval_tactics=false"]  # fmt: skip


def test_a_small_benchmark_runs_both_modes_and_reports(tmp_path, capsys):
    flags = [f for item in SMALL for f in ("--set", item)]
    async_rollouts.main(["--seeds", "1", "--out", str(tmp_path), *flags])
    out = capsys.readouterr().out
    for text in ("speed: each seed", "final policies", "async1 / sync steps per minute", "whole-run wall time"):
        assert text in out
    sync, ahead = tmp_path / "sync" / "seed0", tmp_path / "async1" / "seed0"
    assert json.loads((sync / "config.json").read_text())["async_steps"] == 0
    assert json.loads((ahead / "config.json").read_text())["async_steps"] == 1
    timing = async_rollouts.timing(ahead)
    assert timing["steps_per_min"] > 0 and timing["wall_min"] > 0 and timing["async/staleness"] == 1.0
    assert timing["tis/ratio_mean"] > 0 and timing["async/learner_idle_s"] >= 0
    assert async_rollouts.timing(sync)["async/staleness"] != async_rollouts.timing(sync)["async/staleness"]  # nan
    written = (ahead / "metrics.jsonl").stat().st_mtime_ns
    async_rollouts.main(["--seeds", "1", "--out", str(tmp_path), *flags])
    assert (ahead / "metrics.jsonl").stat().st_mtime_ns == written  # finished runs are read, not rerun
