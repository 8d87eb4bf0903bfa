"""Asynchronous rollouts (``async_steps``): the off-policy correction's maths against hand-computed numbers,
the staleness schedule, the first step equal to the synchronous trainer's, exact resume with the batches a
checkpoint holds, Ctrl-C, the opponent pool and fixed opponents, and torchrun refused before any model."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from conftest import TINY_RUN, cli_flags, stable, weights  # noqa: E402
from conftest import run_rows as rows  # noqa: E402

from trainers import checkpoint  # noqa: E402
from trainers.config import ConfigError, TrainConfig  # noqa: E402
from trainers.loop import train  # noqa: E402
from trainers.losses import importance_weights, policy_loss  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SMALL = {**TINY_RUN, "eval_opponents": "random", "plots": False}


# ---- the correction's maths -----------------------------------------------------------------------------


def test_importance_weights_against_hand_computed_ratios():
    learner = torch.tensor([[-1.0, -0.5, -2.0, -0.1]])
    engine = torch.tensor([[-1.5, -0.5, -0.2, -3.0]])  # ratios e^0.5, 1, e^-1.8, e^2.9
    known = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # the last token's sampling log-prob was not recorded
    rho = [math.exp(0.5), 1.0, math.exp(-1.8)]
    w, ratio, capped = importance_weights(learner, engine, known, "truncate", 1.5)
    assert w[0, :3].tolist() == pytest.approx([1.5, 1.0, rho[2]])  # min(rho, 1.5)
    assert w[0, 3] == 1.0 and ratio[0, :3].tolist() == pytest.approx(rho)
    assert capped.tolist() == [[True, False, False, False]]
    w, _, capped = importance_weights(learner, engine, known, "mask", 1.5)
    assert w[0].tolist() == pytest.approx([0.0, 1.0, rho[2], 1.0])  # above the cap: weight 0, below: rho
    assert capped.tolist() == [[True, False, False, False]]
    w, _, _ = importance_weights(learner, engine, known, "truncate", 2.0)  # e^0.5 = 1.65 under a cap of 2
    assert w[0, :3].tolist() == pytest.approx(rho)
    w, _, capped = importance_weights(learner, engine, known, "none", 1.5)
    assert w.tolist() == [[1.0] * 4] and not capped.any()
    with pytest.raises(ValueError, match="tis must be one of"):
        importance_weights(learner, engine, known, "clip", 2.0)
    with pytest.raises(ValueError, match="tis_cap must be at least 1"):
        importance_weights(learner, engine, known, "truncate", 0.5)


def test_two_sided_and_sequence_level_weights_by_hand():
    """verl's rollout correction: a two-sided mask keeps lower <= rho <= cap; the sequence level weighs every
    token by the row's product of ratios, the geometric level by their geometric mean, unknown tokens left
    out of both."""
    learner = torch.tensor([[-1.0, -0.5, -2.0, -0.1], [-0.2, -0.2, 0.0, 0.0]])
    engine = torch.tensor([[-1.5, -0.5, -0.2, -3.0], [-0.3, -0.4, 0.0, 0.0]])
    known = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])  # row 1 has two tokens
    rho = [math.exp(0.5), 1.0, math.exp(-1.8)]  # e^-1.8 = 0.165
    w, _, bounded = importance_weights(learner, engine, known, "mask", 2.0, lower=0.5)
    assert w[0].tolist() == pytest.approx([rho[0], 1.0, 0.0, 1.0])  # 0.165 < 0.5: masked from below
    assert bounded[0].tolist() == [False, False, True, False]
    # sequence: row 0's log-ratios 0.5 + 0 - 1.8 = -1.3, row 1's 0.1 + 0.2 = 0.3
    w, ratio, _ = importance_weights(learner, engine, known, "truncate", 2.0, level="sequence")
    assert w[0].tolist() == pytest.approx([math.exp(-1.3)] * 3 + [1.0])
    assert w[1].tolist() == pytest.approx([math.exp(0.3)] * 2 + [1.0, 1.0])
    assert ratio[0, 0].item() == pytest.approx(math.exp(-1.3))
    w, _, bounded = importance_weights(learner, engine, known, "mask", 2.0, lower=0.5, level="sequence")
    assert w[0].tolist() == pytest.approx([0.0, 0.0, 0.0, 1.0])  # the whole turn masked: e^-1.3 = 0.27 < 0.5
    assert bounded[0].tolist() == [True, True, True, False] and not bounded[1].any()
    # geometric: row 0's mean log-ratio -1.3 / 3, row 1's 0.3 / 2
    w, _, _ = importance_weights(learner, engine, known, "mask", 2.0, lower=0.5, level="geometric")
    assert w[0].tolist() == pytest.approx([math.exp(-1.3 / 3)] * 3 + [1.0])  # 0.648: kept
    assert w[1].tolist() == pytest.approx([math.exp(0.15)] * 2 + [1.0, 1.0])
    with pytest.raises(ValueError, match="tis_level must be one of"):
        importance_weights(learner, engine, known, "mask", 2.0, level="turn")
    with pytest.raises(ValueError, match="tis_lower must be in"):
        importance_weights(learner, engine, known, "mask", 2.0, lower=1.5)


def test_the_learner_weighs_by_learner_over_engine_not_the_reverse():
    """``learner.tis_weights``, the call the update makes: rho = pi_learner / pi_engine. With the arguments
    swapped, the cap would act on engine / learner: a token the learner now prefers (rho = e^1) would be
    capped at 2 in the wrong place and one it now avoids (rho = e^-1) would not."""
    from trainers.learner import tis_weights

    config = TrainConfig.build({"tis": "truncate"})
    logp = torch.tensor([[-0.5, -3.0]])  # the learner's log-probs of one row's two tokens
    engine = torch.tensor([[-1.5, -2.0]])  # the engine's, recorded while sampling
    sampled = (torch.tensor([0]), engine, torch.ones_like(engine))
    totals = {"tis_sum": 0.0, "tis_tokens": 0.0, "tis_capped": 0.0, "tis_max": 0.0}
    w = tis_weights(1, logp, sampled, config, totals)
    assert w[0].tolist() == pytest.approx([min(math.e, 2.0), math.exp(-1.0)])  # [2, 0.368], not [0.368, 2]
    assert totals["tis_capped"] == 1.0 and totals["tis_max"] == pytest.approx(math.e)


def test_masked_tokens_leave_the_denominator_when_asked():
    """``drop_masked`` with token_mean: two turns of 3 and 2 tokens, one token of the first masked, so the
    loss's token count is 4, not 5 (each row's coefficient 1/4); per turn (seq_mean_token_mean) the first
    turn's own count is 2: coefficients 1/(2*2) and 1/(2*2)."""
    from spiral_arena.rollout import Turn
    from trainers.learner import Row, drop_masked

    turns = [Turn("g", 0, "p", [1], [5, 6, 7], [0.0] * 3, "r", True, advantage=1.0, group_id=0),
             Turn("g", 0, "q", [2], [8, 9], [0.0] * 2, "s", True, advantage=-1.0, group_id=1)]  # fmt: skip
    rows = [Row([turns[0]], 0.2, 1.0), Row([turns[1]], 0.2, -1.0)]
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    weights = torch.tensor([[1.3, 0.0, 0.9], [1.0, 1.1, 1.0]])  # the first turn's second token masked

    def local(values):
        return values

    for aggregation, expected in (("token_mean", [0.25, 0.25]), ("seq_mean_token_mean", [0.25, 0.25])):
        config = TrainConfig.build({"tis": "mask", "tis_drop_masked": True, "aggregation": aggregation})
        drop_masked(turns, [rows], [weights], [mask], config, local)
        assert [r.coefficient for r in rows] == pytest.approx(expected)
        assert [r.advantage for r in rows] == [1.0, -1.0]
    config = TrainConfig.build({"tis": "mask", "tis_drop_masked": True, "aggregation": "dr_grpo"})
    drop_masked(turns, [rows], [weights], [mask], config, local)  # Dr.GRPO divides by the limit, not the count
    assert [r.coefficient for r in rows] == pytest.approx([1 / (2 * config.max_new_tokens)] * 2)
    with pytest.raises(ConfigError, match="tis_drop_masked: applies to tis mask"):
        TrainConfig.build({"tis": "truncate", "tis_drop_masked": True})
    with pytest.raises(ConfigError, match="tis_lower: applies to tis mask"):
        TrainConfig.build({"tis_lower": 0.5})


def test_token_weights_multiply_each_tokens_ppo_loss():
    """PPO-clip with weights: -sum_t w_t * min(r_t A, clip(r_t) A) * coefficient, by hand."""
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -0.3]])
    old = torch.tensor([[-1.1, -1.5], [-0.5, -0.9]])  # ratios e^0.1, e^-0.5, 1, e^0.6
    adv = torch.tensor([1.0, -2.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    coefficients = torch.tensor([0.5, 0.25])
    w = torch.tensor([[2.0, 0.5], [0.0, 3.0]])
    loss, _ = policy_loss(logp, old, adv, mask, coefficients, "ppo", 0.2, token_weights=w)
    r = [math.exp(0.1), math.exp(-0.5), 1.0]
    by_token = [
        2.0 * max(-r[0] * 1.0, -min(max(r[0], 0.8), 1.2) * 1.0),
        0.5 * max(-r[1] * 1.0, -0.8 * 1.0),
        0.0 * max(-r[2] * -2.0, -r[2] * -2.0),  # masked by importance (weight 0), not by the response mask
    ]
    expected = 0.5 * (by_token[0] + by_token[1]) + 0.25 * by_token[2]
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    unweighted, _ = policy_loss(logp, old, adv, mask, coefficients, "ppo", 0.2)
    assert unweighted.item() != pytest.approx(loss.item())


def test_config_records_the_correction_and_refuses_what_cannot_run():
    assert TrainConfig.build({"async_steps": 1}).tis == "truncate"  # resolved: config.json says which
    assert TrainConfig.build({}).tis == "none"  # the synchronous trainer stays as it was
    assert TrainConfig.build({"async_steps": 2, "tis": "mask", "tis_cap": 3}).tis == "mask"
    with pytest.raises(ConfigError) as error:
        TrainConfig.build({"async_steps": -1, "tis": "both", "tis_cap": 0.9})
    text = str(error.value)
    assert "async_steps: must be at least 0" in text and "tis: must be one of auto, none, truncate, mask" in text
    assert "tis_cap: must be at least 1" in text
    with pytest.raises(ConfigError, match="async_steps: runs in one process"):
        TrainConfig.build({"async_steps": 1, "fsdp": True})


# ---- runs ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sync_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sync") / "run"
    train(TrainConfig.build({**SMALL, "output_dir": str(out)}), progress=False)
    return out


@pytest.fixture(scope="module")
def async_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("async") / "run"
    train(TrainConfig.build({**SMALL, "async_steps": 1, "output_dir": str(out)}), progress=False)
    return out


def test_each_step_trains_on_games_at_most_k_updates_old(async_run):
    metrics = rows(async_run)
    assert [r["step"] for r in metrics] == [0, 1, 2, 3, 4]
    # steps 1 and 2 from the warm start, step s >= 2 from the weights before update s - 1
    assert [r["async/staleness"] for r in metrics[1:]] == [0, 1, 1, 1]
    for r in metrics[1:]:
        assert r["async/learner_idle_s"] >= 0 and r["async/actor_idle_s"] >= 0
        assert r["tis/ratio_max"] >= r["tis/ratio_mean"] > 0 and 0 <= r["tis/capped_share"] <= 1
    # step 1 is on-policy: every ratio is 1; later steps' were sampled by the weights one update back
    assert metrics[1]["logprob_gap/mean"] < 1e-4 and metrics[1]["tis/ratio_mean"] == pytest.approx(1, abs=1e-3)
    assert min(r["logprob_gap/mean"] for r in metrics[2:]) > 10 * metrics[1]["logprob_gap/mean"]
    config = json.loads((async_run / "config.json").read_text())
    assert (config["async_steps"], config["tis"], config["tis_cap"]) == (1, "truncate", 2.0)
    # a checkpoint holds the games already played for the steps after it: step 3's at step 2, none at the end
    for step, pending in ((2, [3]), (4, [])):
        state = torch.load(async_run / "checkpoints" / f"step_{step:06d}" / checkpoint.STATE_FILE, weights_only=True)
        assert [b["step"] for b in state["extra"]["pending"]] == pending
        assert [b["version"] for b in state["extra"]["pending"]] == [1] * len(pending)


def test_the_first_step_is_the_synchronous_trainers(sync_run, async_run):
    """Step 1 samples from the warm start in both trainers with the same streams: the same games, the same
    returns and baselines; only the correction (ratios of 1 within rounding) separates their losses."""
    one, two = rows(sync_run)[:2], rows(async_run)[:2]
    assert stable(one[0]) == stable(two[0])  # the warm start and its evaluation
    first, second = one[1], two[1]
    assert first["samples"] == second["samples"] and first["trained"] == second["trained"]
    for key in first:
        if key.startswith(("train/", "rae/", "response_")):
            assert first[key] == second[key], key
    assert first["loss"] == pytest.approx(second["loss"], rel=1e-3)
    assert "tis/ratio_mean" not in first and "async/staleness" not in first


def test_a_resumed_async_run_continues_exactly(async_run, tmp_path):
    """Killed after the step-2 checkpoint: resumed, it takes the saved step-3 games and the actor's streams
    after them, and ends with the same metrics and weights as the run that never stopped."""
    out = tmp_path / "resumed"
    settings = {**SMALL, "async_steps": 1, "output_dir": str(out)}
    train(TrainConfig.build(settings), progress=False)
    shutil.rmtree(out / "checkpoints" / "step_000004")
    lines = (out / "metrics.jsonl").read_text().splitlines()
    (out / "metrics.jsonl").write_text("\n".join(lines[:3]) + "\n")  # as if it died during step 3
    train(TrainConfig.build({**settings, "resume": True}), progress=False)
    assert [stable(r) for r in rows(out)] == [stable(r) for r in rows(async_run)]
    a, b = weights(async_run / "checkpoints" / "step_000004"), weights(out / "checkpoints" / "step_000004")
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize(
    "extra",
    [
        {"async_steps": 2, "opponent_pool": 2, "pool_prob": 0.5, "pool_every": 1, "tis": "mask",
         "tis_lower": 0.5, "tis_level": "geometric", "tis_drop_masked": True},  # verl's two-sided mask, per turn
        {"async_steps": 1, "opponent": "random", "steps": 3},
    ],
    ids=["k2-pool-verl-mask", "fixed-opponent"],
)
def test_staleness_bound_with_the_pool_and_fixed_opponents(tmp_path, extra):
    out = tmp_path / "run"
    train(TrainConfig.build({**SMALL, "eval_every": 10, **extra, "output_dir": str(out)}), progress=False)
    metrics = rows(out)[1:]
    k = extra["async_steps"]
    assert [r["async/staleness"] for r in metrics] == [min(s - 1, k) for s in range(1, len(metrics) + 1)]
    if "opponent_pool" in extra:  # snapshots join as the actor loads each version: warm start, then 1, 2
        assert [r["pool/snapshots"] for r in metrics] == [1, 1, 1, 2]
        assert all(0 <= r["tis/capped_share"] <= 1 and r["tis/ratio_mean"] > 0 for r in metrics)
        assert max(r["pool/games_share"] for r in metrics) > 0
    else:  # the policy holds one seat of every game, the opponent the other
        transcripts = [json.loads(line) for line in (out / "transcripts.jsonl").read_text().splitlines()]
        assert transcripts


def test_a_group_algorithm_plays_ahead_too(tmp_path):
    """StarPO on the closed-world Twenty Questions recipe: the actor plays the next step's groups (each group's
    games share a secret) while the learner normalises this step's."""
    out = tmp_path / "starpo"
    settings = {
        "algo": "starpo", "async_steps": 1, "steps": 3, "sft_steps": 2, "sft_batch": 8, "group_size": 4,
        "groups_per_step": 2, "max_new_tokens": 8, "eval_every": 10, "eval_at_start": False, "eval_games": 2,
        "eval_samples_per_secret": 1, "games_in_flight": 8, "time_limit_s": 0, "plots": False, "output_dir": str(out),
    }  # fmt: skip
    train(TrainConfig.build(settings), progress=False)
    metrics = [r for r in rows(out) if r["step"] > 0]  # (step 0: the warm start's loss)
    assert [r["async/staleness"] for r in metrics] == [0, 1, 1]
    assert all(r["samples"] >= 8 and "tis/ratio_mean" in r for r in metrics)


def test_ctrl_c_stops_actor_and_learner_without_a_traceback(tmp_path):
    out = tmp_path / "run"
    flags = cli_flags({**SMALL, "steps": 200, "save_every": 1, "eval_every": 100, "async_steps": 1})
    proc = subprocess.Popen(
        [sys.executable, "-m", "spiral_arena.cli", "train", f"--output-dir={out}", *flags],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        # a suite started in the background inherits SIGINT ignored; a terminal's Ctrl-C reaches a default handler
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 300
    while not (out / "checkpoints" / "step_000003").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert "stopped." in stderr and "Traceback" not in stderr
    assert not list((out / "checkpoints").glob(".tmp*"))  # no half-written checkpoint
    saved = sorted((out / "checkpoints").glob("step_*"))
    assert len(saved) >= 3 and all(checkpoint.problem(path) is None for path in saved)


def test_torchrun_is_refused_before_any_model_is_built(tmp_path):
    out = tmp_path / "ranks"
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "trainers"]
        + [f"--output-dir={out}", *cli_flags({**SMALL, "async_steps": 1, "rollout_shards": 2})],
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "async_steps runs in one process" in done.stderr
    assert not (out / "tiny_init").exists() and not (out / "warm_start").exists()
