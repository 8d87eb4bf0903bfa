"""benchmarks/leduc_selfplay.py: Leduc self-play runs with either advantage, read back as exploitability curves
and exact chips a hand of the final policy."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import leduc_selfplay  # noqa: E402

from spiral_arena.agents.experts.leduc import expert_policy  # noqa: E402

SMALL = ["steps=2", "sft_steps=4", "sft_batch=16", "samples_per_step=24", "games_in_flight=8", "eval_games=1",
         "micro_batch=8", "plots=false", "eval_every=1"]  # fmt: skip


def test_a_small_benchmark_trains_both_advantages_and_reports(tmp_path, capsys):
    flags = [f for item in SMALL for f in ("--set", item)]
    leduc_selfplay.main(["--seeds", "1", "--out", str(tmp_path), *flags])
    out = capsys.readouterr().out
    for name in ("rae", "marshal", "step 0", "step 2", "vs uniform", "vs expert"):
        assert name in out
    run = tmp_path / "marshal" / "seed0"
    config = json.loads((run / "config.json").read_text())
    assert config["games"] == "LeducHoldem-v0" and config["advantage"] == "marshal"
    assert [r["step"] for r in leduc_selfplay.evaluations(run)] == [0, 1, 2]
    written = (run / "metrics.jsonl").stat().st_mtime_ns
    leduc_selfplay.main(["--seeds", "1", "--advantages", "marshal", "--out", str(tmp_path), *flags])
    assert (run / "metrics.jsonl").stat().st_mtime_ns == written  # finished runs are read, not rerun


def test_chips_a_hand_is_the_mean_of_both_seats():
    expert = expert_policy()
    assert leduc_selfplay.chips_a_hand(expert, expert) == pytest.approx(0.0, abs=1e-12)  # zero-sum, same policy
    uniform = {k: {a: 1 / len(d) for a in d} for k, d in expert.items()}
    assert leduc_selfplay.chips_a_hand(expert, uniform) == pytest.approx((0.5860326276 + 0.8134632901) / 2, abs=1e-9)
