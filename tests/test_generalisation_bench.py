"""benchmarks/generalisation.py: each configuration trains its own games of the recipe at the same number of RL
turns from one shared warm start that knows all six games, and every policy is played on all six."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import generalisation  # noqa: E402

from trainers.recipes import RECIPES  # noqa: E402

SMALL = ["steps=2", "sft_steps=4", "sft_batch=16", "samples_per_step=24", "games_in_flight=8", "eval_games=1",
         "time_limit_s=0", "micro_batch=8", "plots=false"]  # fmt: skip


def test_configurations_restrict_the_recipe_and_share_the_warm_start():
    tiny = RECIPES["tiny"]
    kuhn, mix = generalisation.config_of("kuhn"), generalisation.config_of("mix")
    assert kuhn["games"] == tiny["games"].split(",")[0] and kuhn["game_kl_coefs"] == "0.3"
    assert mix["games"] == tiny["games"] and mix["game_weights"] == tiny["game_weights"]
    assert kuhn["sft_games"] == mix["sft_games"] == kuhn["eval_env_ids"]  # one warm start, one evaluation
    played = [g.split(":")[0] for g in mix["eval_env_ids"].split(",")]
    assert played == ["KuhnPoker-v0", "TicTacToe-v0", "SimpleNegotiation-v0", "PigDice-v0", "Snake-v0",
                      "TruthAndDeception-v0"]  # fmt: skip


def test_a_small_benchmark_trains_evaluates_everything_and_reports(tmp_path, capsys):
    flags = [f for item in SMALL for f in ("--set", item)]
    generalisation.main(["--seeds", "1", "--configs", "kuhn,mix", "--out", str(tmp_path), *flags])
    out = capsys.readouterr().out
    for name in ("warm start", "kuhn", "mix", "PigDice (OOD)", "Snake (OOD)", "score against random"):
        assert name in out
    runs = {name: tmp_path / name / "seed0" for name in ("kuhn", "mix")}
    first = {name: json.loads((run / "metrics.jsonl").read_text().splitlines()[0]) for name, run in runs.items()}
    shared = [k for k in first["kuhn"] if k.startswith("eval/") and "PigDice" in k]
    assert shared and all(first["kuhn"][k] == first["mix"][k] for k in shared)  # the same warm start
    config = json.loads((runs["kuhn"] / "config.json").read_text())
    assert config["games"].startswith("KuhnPoker-v0") and "," not in config["games"]
    written = (runs["kuhn"] / "metrics.jsonl").stat().st_mtime_ns
    generalisation.main(["--seeds", "1", "--configs", "kuhn", "--out", str(tmp_path), *flags])
    assert (runs["kuhn"] / "metrics.jsonl").stat().st_mtime_ns == written  # finished runs are read, not rerun
