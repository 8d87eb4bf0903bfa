"""benchmarks/connect_four_selfplay.py: Connect Four self-play runs read back as win-or-draw rates and the
tactics read-out of the warm start and the final checkpoint."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import connect_four_selfplay  # noqa: E402

SMALL = ["steps=2", "sft_steps=4", "sft_batch=16", "samples_per_step=24", "games_in_flight=8", "eval_games=1",
         "micro_batch=8", "plots=false", "eval_every=2"]  # fmt: skip


def test_a_small_benchmark_trains_reads_tactics_and_reports(tmp_path, capsys):
    flags = [f for item in SMALL for f in ("--set", item)]
    connect_four_selfplay.main(["--seeds", "1", "--stride", "30", "--out", str(tmp_path), *flags])
    out = capsys.readouterr().out
    for name in ("uniform", "warm start", "final", "P(blocks)", "0.185"):
        assert name in out
    run = tmp_path / "seed0"
    assert json.loads((run / "config.json").read_text())["games"] == "ConnectFour-v0:board=threats"
    assert [r["step"] for r in connect_four_selfplay.evaluations(run)] == [0, 2]
    read = connect_four_selfplay.tactics(run, 30)
    for policy in read.values():  # every 30th of the 600 positions, both kinds
        assert policy["win_positions"] + policy["block_positions"] == 20 and policy["win_positions"] > 0
    assert all(0 <= read[p][k] <= 1 for p in read for k in ("takes_win", "blocks", "invalid_mass"))
