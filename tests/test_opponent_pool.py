"""Population self-play: frozen snapshots, drawn as configured, and the learner trained on its own seat only."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spiral_arena.models import Sampling  # noqa: E402
from spiral_arena.models.hf import HFEngine  # noqa: E402
from spiral_arena.models.policy import Policy  # noqa: E402
from spiral_arena.rollout import collect, parse_mixture  # noqa: E402
from trainers.config import ConfigError, TrainConfig  # noqa: E402
from trainers.loop import train  # noqa: E402
from trainers.pool import OpponentPool  # noqa: E402
from trainers.tiny import create_tiny  # noqa: E402

SAMPLING = Sampling(1.0, 1.0, 6)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = create_tiny(tmp_path_factory.mktemp("tiny") / "model", ["KuhnPoker-v0"])
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    policy = Policy(HFEngine(model, [tokenizer.eos_token_id], tokenizer.pad_token_id), tokenizer, "bare")
    return model, policy


def nudge(model, scale: float = 0.5) -> None:
    """A stand-in for an update: every weight moves."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * scale)


def test_snapshots_are_frozen_copies_and_only_the_last_k_are_kept(tiny):
    model, policy = tiny
    pool = OpponentPool(model, policy, size=3, prob=0.5, sampling=SAMPLING, seed=0)
    frozen = {}
    for step in range(5):
        pool.add(model, step)
        frozen[step] = {k: v.clone() for k, v in model.state_dict().items()}
        nudge(model)
    assert [s.snapshot_step for s in pool.snapshots] == [2, 3, 4]
    for snapshot in pool.snapshots:
        assert all(t.device.type == "cpu" for t in snapshot.weights.values())
        same = frozen[snapshot.snapshot_step]
        assert all(torch.equal(snapshot.weights[k], same[k]) for k in same)  # later updates did not reach it
    assert not torch.equal(pool.snapshots[-1].weights["lm_head.weight"], model.state_dict()["lm_head.weight"])
    assert all(not p.requires_grad for p in pool.spare.parameters())  # the generating copy is never trained


def test_snapshots_are_drawn_with_the_given_probability_and_uniformly(tiny):
    model, policy = tiny
    rng = np.random.default_rng(1)
    assert OpponentPool(model, policy, 2, 0.9, SAMPLING, 0).draw(rng) is None  # an empty pool: self-play
    pool = OpponentPool(model, policy, size=3, prob=0.3, sampling=SAMPLING, seed=0)
    for step in range(3):
        pool.add(model, step)
    draws = [pool.draw(rng) for _ in range(6000)]
    seated = [d.snapshot_step for d in draws if d is not None]
    assert len(seated) / len(draws) == pytest.approx(0.3, abs=0.02)
    for step in range(3):
        assert seated.count(step) / len(seated) == pytest.approx(1 / 3, abs=0.03)
    never = OpponentPool(model, policy, 3, 0.0, SAMPLING, 0)
    never.add(model, 0)
    assert all(never.draw(rng) is None for _ in range(500))
    with pytest.raises(ValueError, match="prob"):
        OpponentPool(model, policy, 0, 0.5, SAMPLING, 0)


def test_a_snapshot_plays_with_its_own_weights(tiny):
    model, policy = tiny
    greedy = Sampling(0.0, 1.0, 6)
    pool = OpponentPool(model, policy, size=2, prob=1.0, sampling=greedy, seed=0)
    observations = ["[GAME] Your turn. Legal actions: [check], [bet].\nYour card: K."] * 3
    then = policy.decode_batch(
        [c.token_ids for c in policy.engine.generate(policy.prompt_ids_batch(observations), Sampling(0.0, 1.0, 6), 0)]
    )
    pool.add(model, 0)
    nudge(model, 2.0)
    now = policy.decode_batch(
        [c.token_ids for c in policy.engine.generate(policy.prompt_ids_batch(observations), Sampling(0.0, 1.0, 6), 0)]
    )
    assert now != then  # the live policy changed ...
    assert pool.snapshots[0].act_batch(observations, [{}] * 3) == then  # ... its snapshot still answers as before


def test_pool_games_train_only_the_learners_seat(tiny):
    model, policy = tiny
    pool = OpponentPool(model, policy, size=2, prob=0.5, sampling=SAMPLING, seed=0)
    pool.add(model, 0)
    specs, weights = parse_mixture("KuhnPoker-v0:rounds=1", "")
    results = collect(
        policy, specs, weights, min_samples=400, games_in_flight=32, rng=np.random.default_rng(0),
        sampling=SAMPLING, invalid_penalty=-1.5, invalid_opponent_reward=0.5, snapshots=pool, max_game_actions=10,
    )  # fmt: skip
    against = [g for g in results if g.snapshot_step is not None]
    selfplay = [g for g in results if g.snapshot_step is None]
    assert 0.35 < len(against) / len(results) < 0.65
    assert all(len(g.policy_seats) == 2 for g in selfplay)
    assert {g.policy_seats for g in against} == {(0,), (1,)}  # the learner sits in both chairs over games
    # the untrained model often answers invalidly, so a snapshot may end a game before the learner moves
    assert sum(len(g.turns) for g in against) > 20
    for game in against:
        assert all(t.role == game.policy_seats[0] for t in game.turns)  # its own seat only
        assert game.snapshot_step == 0


def test_population_play_in_a_training_run(tmp_path):
    out = tmp_path / "run"
    config = {
        "steps": 3, "sft_steps": 20, "samples_per_step": 32, "games_in_flight": 8, "eval_every": 10,
        "eval_games": 2, "eval_opponents": "random", "eval_env_ids": "KuhnPoker-v0:rounds=1", "time_limit_s": 0,
        "micro_batch": 16, "plots": False, "output_dir": str(out), "opponent_pool": 2, "pool_every": 1,
        "pool_prob": 0.5, "eval_tactics": False,
    }  # fmt: skip
    train(TrainConfig.build(config), progress=False)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r["step"] > 0]
    assert [r["pool/snapshots"] for r in steps] == [2, 2, 2]  # the warm start, then one per step, at most 2
    assert all(0 < r["pool/games_share"] < 1 for r in steps)


def test_a_run_with_a_pool_of_one_resumes_exactly(tmp_path):
    """A pool of one snapshot refreshed at every checkpoint: the checkpoint holds the pool's rng, and the
    snapshot is the checkpoint's own policy, so a resumed run plays and learns as the uninterrupted one. (60
    warm-start steps: after fewer, a snapshot answers invalidly whatever it samples, and its seeds go unseen.)"""
    import shutil

    from transformers import AutoModelForCausalLM

    config = {
        "steps": 2, "sft_steps": 60, "samples_per_step": 24, "games_in_flight": 8, "eval_every": 10,
        "eval_games": 2, "eval_opponents": "random", "eval_env_ids": "KuhnPoker-v0:rounds=1", "time_limit_s": 0,
        "micro_batch": 16, "plots": False, "opponent_pool": 1, "pool_every": 1, "save_every": 1,
        "eval_tactics": False,
    }  # fmt: skip
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    train(TrainConfig.build({**config, "output_dir": str(first)}), progress=False)
    shutil.copytree(first, resumed)
    shutil.rmtree(resumed / "checkpoints" / "step_000002")  # as if it died during step 2
    train(TrainConfig.build({**config, "output_dir": str(resumed), "resume": True}), progress=False)
    volatile = ("time_s", "rollout_s", "advantage_s", "update_s", "sync_s", "generated_tokens_per_s")

    def rows(run):
        lines = (run / "metrics.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k not in volatile} for line in lines]

    assert rows(resumed) == rows(first) and rows(first)[-1]["pool/games_share"] > 0
    a, b = (AutoModelForCausalLM.from_pretrained(run / "checkpoints" / "step_000002").state_dict()
            for run in (first, resumed))  # fmt: skip
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_population_play_is_refused_where_it_does_not_apply():
    with pytest.raises(ConfigError, match="opponent_pool"):
        TrainConfig.build({"opponent_pool": 2, "opponent": "random"})
    with pytest.raises(ConfigError, match="pool_prob"):
        TrainConfig.build({"opponent_pool": 2, "pool_prob": 1.5})
