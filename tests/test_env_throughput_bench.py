"""benchmarks/env_throughput.py: each target's ratio comes with its value in every repeat (the noise's spread)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import env_throughput  # noqa: E402


def test_each_ratio_is_also_given_per_repeat_from_the_slices_of_that_repeat(tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = ["--games", "TicTacToe-v0", "--seconds", "0.15", "--repeats", "3", "--warmup", "0", "--json", str(out)]
    assert env_throughput.main(argv) == 0
    result = json.loads(out.read_text())
    rows = {r["key"]: r for r in result["rows"]}
    ratio = next(r for r in result["ratios"] if r["label"] == "AEC vs PettingZoo raw_env, TicTacToe")
    ours, peer = rows["ours-aec:TicTacToe-v0"]["samples"], rows["pz-raw"]["samples"]
    assert len(ours) == len(peer) == 3
    expected = [(a[0] / a[2]) / (b[0] / b[2]) for a, b in zip(ours, peer, strict=True)]
    assert ratio["ratio_per_repeat"] == expected
    shown = f"{min(expected):.2f}-{max(expected):.2f}x"
    assert shown in capsys.readouterr().out
