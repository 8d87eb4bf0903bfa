"""benchmarks/async_rollouts.py: the main job trained synchronously and with --async-steps 1, side by side,
read back as steps per minute, where a step's seconds go, and both modes' final targets."""

from __future__ import annotations

import json
import os
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


def test_ceiling_measures_the_halves_four_ways_and_bounds_the_overlap(tmp_path, capsys):
    flags = [f for item in SMALL for f in ("--set", item)]
    async_rollouts.main(["--seeds", "1", "--out", str(tmp_path), "--ceiling", *flags])
    out = capsys.readouterr().out
    assert "the halves of a step" in out and "the most an overlapped step could gain here" in out
    runs = {name: tmp_path / "ceiling" / name / "seed0" for name in async_rollouts.CEILING_RUNS}
    assert all(async_rollouts.finished(run) for run in runs.values())
    assert all(json.loads((run / "config.json").read_text())["steps"] == 4 for run in runs.values())
    # the pair ran at once: each started before the other wrote its last metrics
    a, b = runs["pair_a"], runs["pair_b"]
    assert (b / "config.json").stat().st_mtime < (a / "metrics.jsonl").stat().st_mtime
    assert (a / "config.json").stat().st_mtime < (b / "metrics.jsonl").stat().st_mtime
    halves = {name: async_rollouts.halves(run) for name, run in runs.items()}
    bound = async_rollouts.overlap_bound(halves, os.cpu_count() or 1)  # the cores the benchmark divides by
    default = halves["default"]["rollout_s"] + halves["default"]["update_s"]
    assert 0 < bound <= default / max(halves["default"].values())  # never past the longer half's own time
    assert f"{bound:.2f}x" in out


def test_an_unknown_set_key_stops_before_any_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        async_rollouts.main(["--seeds", "1", "--out", str(tmp_path), "--set", "stepz=3"])
    assert stop.value.code == 2
    assert "stepz: unknown config field; did you mean steps?" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
