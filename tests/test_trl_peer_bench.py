"""benchmarks/trl_peer.py: our trainer (synchronous and --async-steps 1) and TRL's GRPOTrainer from the same warm
start, for real on the tiny model: all three finish and are reported, TRL trained and read our prompts, and finished
runs are read, not repeated."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("trl", reason="needs the integrations-trl extra: pip install 'spiral-arena[integrations-trl]'")
pytest.importorskip("datasets", reason="needs the integrations-trl extra")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import trl_peer  # noqa: E402
from conftest import weights  # noqa: E402
from learning import summaries  # noqa: E402

# 100 warm-start steps: with fewer, every answer is invalid, each TRL group's rewards are equal and nothing trains
SMALL = ["steps=3", "sft_steps=100", "sft_batch=16", "samples_per_step=24", "games_in_flight=8", "eval_games=1",
         "micro_batch=8", "plots=false", "eval_every=10", "eval_tactics=false", "eval_kuhn_samples=4"]  # fmt: skip


def test_the_three_modes_run_small_and_report(tmp_path, capsys):
    flags = ["--seeds", "1", "--out", str(tmp_path), "--group-size", "4", *(f for s in SMALL for f in ("--set", s))]
    trl_peer.main(flags)
    out = capsys.readouterr().out
    for text in ("speed: mean", "final policies", "trl: groups of 4 a step"):
        assert text in out
    sync, trl = tmp_path / "sync" / "seed0", tmp_path / "trl" / "seed0"
    runs = {mode: tmp_path / mode / "seed0" for mode in trl_peer.MODES}
    assert all(trl_peer.finished(run) for run in runs.values())
    table = trl_peer.speed_table({mode: [trl_peer.timing(run)] for mode, run in runs.items()})
    assert table.columns[0]._cells == ["sync", "async1", "trl"]
    # TRL trains as many turns a step as ours played (ours finishes every game in flight: more than asked for)
    played = [row["samples"] for row in trl_peer.metrics(sync) if "samples" in row]
    per_step = 4 * round(sum(played) / len(played) / 4)
    assert per_step > 24
    timing = trl_peer.timing(trl)
    assert timing["step_s"] > 0 and timing["turns_per_s"] > 0 and timing["wall_min"] > 0
    assert timing["samples"] == per_step
    assert timing["played_per_trained"] >= 1.0
    assert summaries(trl)[-1]["step"] == 3  # the project's evaluation of TRL's final model

    # TRL trained: from our warm start, to other weights, with the recipe's settings where TRL has them
    start, end = weights(sync / "warm_start"), weights(trl / "final")
    assert start.keys() == end.keys() and any(not start[k].equal(end[k]) for k in start)
    used = json.loads((trl / "grpo.json").read_text())
    assert used["settings"]["beta"] == 0.3 and used["settings"]["scale_rewards"] == "none"
    assert used["settings"]["lr_scheduler_type"] == "cosine_with_min_lr"
    assert sum(used["groups"].values()) * 4 == per_step and all(n >= 1 for n in used["groups"].values())
    # its final model reads the games as ours does: the same record as our checkpoints
    recorded = json.loads((trl / "final" / "spiral_arena.json").read_text())
    ours = json.loads(max((sync / "checkpoints").glob("step_*")).joinpath("spiral_arena.json").read_text())
    assert recorded == ours and recorded["prompt_template"] == "bare" and recorded["obs_format"] == "last"

    # TRL's model read the prompt ids our trainer's Policy gives the same observations, each the latest message
    from transformers import AutoTokenizer

    from spiral_arena.models.policy import Policy
    from spiral_arena.registry import GameSpec

    first = json.loads((trl / "first_prompts.json").read_text())
    assert first["generated_from"] == first["prompt_ids"]
    config = json.loads((sync / "config.json").read_text())
    policy = Policy(None, AutoTokenizer.from_pretrained(sync / "warm_start"), config["prompt_template"])
    assert policy.prompt_ids_batch(first["observations"]) == first["prompt_ids"]
    # the first game our rollouts (collect) start: drawn in proportion to the turns each game needs, its reset seed
    # from the generator seeded with first_seed (seed 0's: 0)
    games = sorted(used["groups"])
    lacking = np.array([4 * used["groups"][game] for game in games], dtype=float)
    rng = np.random.default_rng(config["seed"] * 10**8)
    game = games[int(rng.choice(len(games), p=lacking / lacking.sum()))]
    env = GameSpec.parse(game).make()
    env.reset(seed=int(rng.integers(2**31)))
    assert game.endswith("obs_format=last") and first["observations"][0] == env.observe(env.agent_selection)

    written = {mode: (run / "metrics.jsonl").stat().st_mtime_ns for mode, run in runs.items()}
    trl_peer.main(flags)
    assert {mode: (run / "metrics.jsonl").stat().st_mtime_ns for mode, run in runs.items()} == written
