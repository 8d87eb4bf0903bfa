"""benchmarks/negotiation_deals.py reads a negotiation policy's games back move by move: the expert, whose
rules are known (it accepts only offers that gain it items and proposes only such offers), reads as itself."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import negotiation_deals  # noqa: E402


def row(out: str, label: str) -> list[float]:
    """The numbers of the table row that starts with ``label``."""
    line = next(line for line in out.splitlines() if line.startswith(f"│ {label} "))
    return [float(x) for x in re.findall(r"\d+\.\d+", line)]


def test_the_expert_reads_as_the_expert(capsys):
    negotiation_deals.main(["expert", "--games", "20", "--game", "SimpleNegotiation-v0:brief=true"])
    out = capsys.readouterr().out
    draw, win = row(out, "vs random")[:2]  # results: draw, win (no losses: no loss column)
    assert win > 0.5 and "loss" not in out.split("its messages")[0]
    assert row(out, "vs random: an offer where it loses items") == [0.0, 1.0]  # accept 0, deny 1
    assert row(out, "vs random: an offer where it gains items") == [1.0, 0.0]
    gain = float(re.search(r"vs random: [\d.]+ deals per game; mean gain in its own valuation ([+-][\d.]+)", out)[1])
    assert gain > 0
    assert re.search(r"vs expert: 0\.00 deals per game", out)  # two experts never agree


def test_a_game_that_is_not_the_negotiation_is_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        negotiation_deals.main(["random", "--game", "KuhnPoker-v0"])
    assert stop.value.code == 2
    assert "--game must be a SimpleNegotiation-v0 id" in capsys.readouterr().err
