"""benchmarks/real_model_recipe.py, for real on SmolLM2 (untrained, 8-token answers): one agent's row, read in a
process of its own, counts every game and answer it played; the table's targets and bad flags."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REAL_MODEL

pytestmark = pytest.mark.real_model
pytest.importorskip("torch", reason="needs the train extra")
pytest.importorskip("transformers", reason="needs the train extra")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "real_model_recipe.py"
sys.path.insert(0, str(SCRIPT.parent))

import real_model_recipe  # noqa: E402


def test_one_agents_row_counts_its_games_answers_and_kuhn_samples(real_model):
    row = real_model_recipe.read_fresh(f"hf:{REAL_MODEL}#max_new_tokens=8", games=2, samples=1, concurrency=2)
    assert row["agent"] == f"hf:{REAL_MODEL}#max_new_tokens=8"
    assert 0 <= row["kuhn_exploitability"] <= 11 / 12 and 0 <= row["kuhn_invalid"] <= 1
    for game in ("tictactoe", "negotiation"):
        counts = row[game]
        assert counts["games"] == 2 and 0 <= counts["wins"] + counts["draws"] <= 2
        assert counts["answers"] >= 2 and 0 <= counts["refused"] <= counts["answers"]  # each seat once at least
    json.dumps(row)  # what the parent process reads back
    table = real_model_recipe.table([row], baseline=1, games=2)
    assert "Kuhn exploitability (<= 0.20)" in [c.header for c in table.columns]


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--games", "0"], "must be at least 1"),
        (["--set", "steps"], "--set takes KEY=VALUE"),
        (["--first-seed", "-1"], "--first-seed must be 0 or more"),
    ],
)
def test_bad_flags_are_refused_saying_what_is_valid(flags, error):
    done = subprocess.run([sys.executable, str(SCRIPT), *flags], capture_output=True, text=True)
    assert done.returncode == 2 and error in done.stderr
