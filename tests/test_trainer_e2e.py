"""End-to-end training of the tiny model on CPU: outputs, resume, 2-process gloo, opponents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from conftest import TINY_RUN as SMALL  # noqa: E402
from conftest import cli_flags, stable, weights  # noqa: E402
from conftest import run_rows as rows  # noqa: E402

from spiral_arena.models import Sampling  # noqa: E402
from spiral_arena.models.checkpoints import SETTINGS_FILE  # noqa: E402
from trainers.config import TrainConfig  # noqa: E402
from trainers.loop import train  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("e2e") / "run"
    train(TrainConfig.build({**SMALL, "output_dir": str(out)}), progress=False)
    return out


def test_run_directory_has_everything(finished_run):
    run = finished_run
    config = json.loads((run / "config.json").read_text())
    assert config["recipe"] == "tiny" and config["steps"] == 4
    metrics = rows(run)
    assert [r["step"] for r in metrics] == [0, 1, 2, 3, 4]  # 0 = the SFT warm start and its evaluation
    assert metrics[0]["sft/loss_last"] < metrics[0]["sft/loss_first"]
    assert "eval/KuhnPoker-v0:rounds=1/random/win" in metrics[0] and "loss" not in metrics[0]
    for r in metrics[1:]:
        assert r["samples"] >= 24 and r["lr"] > 0 and "loss" in r
        # on-policy: the learner's log-probs of the sampled tokens are the engine's, from step 1 on
        assert r["logprob_gap/mean"] < 1e-4 and r["logprob_gap/max"] < 1e-3
        assert any(k.startswith("rae/KuhnPoker-v0:rounds=1;reward=chips/") for k in r)
    evals = [r for r in metrics if "eval/kuhn_exploitability" in r]
    assert [r["step"] for r in evals] == [0, 2, 4]
    assert 0 <= evals[-1]["eval/kuhn_exploitability"] <= 1
    assert "eval/KuhnPoker-v0:rounds=1/expert/win" in evals[-1]
    transcript = [json.loads(line) for line in (run / "transcripts.jsonl").read_text().splitlines()]
    assert {t["step"] for t in transcript} == {2, 4}
    assert set(transcript[0]) >= {"prompt", "response", "action", "reward", "advantage", "role", "game"}
    for name in (
        "win_rates.png",
        "exploitability.png",
        "response_length.png",
        "invalid_rate.png",
        "loss.png",
        "logprob_gap.png",
    ):
        assert (run / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    checkpoints = sorted((run / "checkpoints").glob("step_*"))
    assert [c.name for c in checkpoints] == ["step_000002", "step_000004"]
    assert not list((run / "checkpoints").glob(".tmp*"))


def replayed_advantages(run: Path) -> list[float]:
    """RAE as it is wired into the loop, replayed from a run's own files; returns the advantages checked.

    At each step with transcripts: the games in the order they were trained, each policy seat's
    advantage its game's reward minus that (game, seat)'s baseline read before the game, which then
    moves by the EMA (decay from config.json), starting from the baselines logged at the step before
    (none: 0). Every turn must carry its seat's advantage, and after the step the baselines must be
    the ones logged at that step."""
    config = json.loads((run / "config.json").read_text())
    decay, by_shard = config["rae_decay"], config["rae_scope"] == "shard"
    metrics = {r["step"]: r for r in rows(run)}
    transcript = [json.loads(line) for line in (run / "transcripts.jsonl").read_text().splitlines()]
    checked = []
    for step in sorted({t["step"] for t in transcript}):
        lines = [t for t in transcript if t["step"] == step]
        baselines = {k.removeprefix("rae/"): v for k, v in metrics[step - 1].items() if k.startswith("rae/")}
        indices = [t["game_index"] for t in lines]
        assert indices == sorted(indices) and set(indices) == set(range(indices[-1] + 1))  # each game's turns together
        games_played = sum(v for k, v in metrics[step].items() if k.startswith("train/") and k.endswith("/games"))
        assert len(set(indices)) == games_played  # no game is missing from the file
        expected = []
        for index in range(indices[-1] + 1):
            turns = [t for t in lines if t["game_index"] == index]
            rewards, seats = turns[0]["game_rewards"], turns[0]["policy_seats"]
            advantage = {}
            for seat in seats:  # a seat that never got to move still moves its baseline
                key = f"{turns[0]['game']}/{seat}"
                if by_shard:  # each shard's games move its own baselines (SPIRAL's actors)
                    key = f"shard{turns[0]['shard']}/{key}"
                old = baselines.get(key, 0.0)
                advantage[seat] = rewards[seat] - old
                baselines[key] = decay * old + (1 - decay) * rewards[seat]
            for turn in turns:
                assert turn["reward"] == rewards[turn["role"]] and turn["role"] in seats
                expected.append(advantage[turn["role"]])
        assert [t["advantage"] for t in lines] == pytest.approx(expected, rel=1e-12, abs=1e-12)
        logged = {k.removeprefix("rae/"): v for k, v in metrics[step].items() if k.startswith("rae/")}
        assert logged == pytest.approx(baselines, rel=1e-12, abs=1e-12)
        checked += expected
    return checked


def test_self_play_advantages_replay_from_the_run_files(finished_run):
    """Steps 2 and 4, from the baselines logged at steps 1 and 3. (After this short warm start most games
    open with an invalid move: seat 1 then never moves, but its baseline does.)"""
    advantages = replayed_advantages(finished_run)
    assert len(advantages) >= 2 * 24 and any(a != 0 for a in advantages)


def test_each_shard_keeps_its_own_baselines_with_rae_scope_shard(tmp_path):
    """SPIRAL's RAE scope (one EMA per actor process, spiral-rl/spiral train_spiral.py, ``role_baseline_ema``
    in ``SelfPlayActor``): with 3 shards each (shard, game, seat) baseline moves only with its shard's games."""
    out = tmp_path / "run"
    settings = {**SMALL, "output_dir": str(out), "rollout_shards": 3, "rae_scope": "shard", "steps": 2}
    train(TrainConfig.build({**settings, "eval_every": 1, "save_every": 2}), progress=False)
    advantages = replayed_advantages(out)
    assert len(advantages) >= 2 * 24 and any(a != 0 for a in advantages)
    baselines = [k for k in rows(out)[-1] if k.startswith("rae/")]
    assert {k.split("/")[1] for k in baselines} == {"shard0", "shard1", "shard2"}


def test_marshal_advantages_replay_from_the_transcripts(tmp_path):
    """--advantage marshal with the released rewards: each valid turn carries 0.05 and a seat's last turn its
    result besides (-11 for an invalid answer, 0 to the other seat, 0.1 a draw); the advantages are the
    released pipeline's (trainers.marshal, pinned by hand in test_trainer_units) over each step's turns, as
    recomputed here from the transcripts."""
    from trainers.marshal import Episode, marshal_advantages

    out = tmp_path / "run"
    config = {**SMALL, "output_dir": str(out), "advantage": "marshal", "steps": 2, "eval_every": 1, "plots": False}
    config.update(sft_steps=100, samples_per_step=48, games_in_flight=16)  # games that end in a result, not a typo
    train(TrainConfig.build(config), progress=False)
    turns = [json.loads(line) for line in (out / "transcripts.jsonl").read_text().splitlines()]
    episodes: dict[tuple, list[dict]] = {}
    for t in turns:
        episodes.setdefault((t["step"], t["shard"], t["game_index"], t["role"]), []).append(t)
    kinds = set()
    for ts in episodes.values():
        *valid, last = [t["reward"] for t in ts]
        assert valid == pytest.approx([0.05] * len(valid))
        shaped = ts[-1]["game_rewards"]
        mine = shaped[ts[-1]["role"]]
        if mine == -11.0:  # its invalid answer ended the game
            assert last == -11.0
        elif len(set(shaped)) == 1:  # a draw, or a game cut at max_game_actions (0)
            assert last in (pytest.approx(0.15), pytest.approx(0.05))
        else:
            assert last == pytest.approx(mine + 0.05)
        kinds.add("invalid" if -11.0 in shaped else "even" if len(set(shaped)) == 1 else "result")
    assert kinds - {"even"}  # some games ended in a result
    for step in (1, 2):
        keys = [k for k in episodes if k[0] == step]
        batch = [Episode(episodes[k][0]["game"], k[3], [t["reward"] for t in episodes[k]],
                         [t["tokens"] for t in episodes[k]]) for k in keys]  # fmt: skip
        for k, advantages in zip(keys, marshal_advantages(batch), strict=True):
            assert [t["advantage"] for t in episodes[k]] == pytest.approx(advantages, abs=1e-9)
    saved = json.loads((out / "config.json").read_text())
    assert (saved["advantage"], saved["turn_reward"], saved["invalid_penalty"]) == ("marshal", 0.05, -11.0)


def test_a_run_directory_named_as_a_model_points_at_its_checkpoint(finished_run, capsys):
    """A newcomer's first guess after ``train`` ("run written to runs/X"): ``hf:runs/X`` says which
    checkpoint plays instead of that the run's config.json is no transformers config."""
    from spiral_arena.cli import main as cli_main

    assert cli_main(["play", "KuhnPoker-v0", "--p0", f"hf:{finished_run}", "--p1", "random"]) == 2
    last = sorted((finished_run / "checkpoints").glob("step_*"))[-1]
    assert f"is a training run; its checkpoints play, the last one as hf:{last}" in capsys.readouterr().err


def test_checkpoint_plays_as_an_hf_agent(finished_run):
    import spiral_arena
    from spiral_arena.agents import RandomAgent, make_agent
    from spiral_arena.play import play_game

    path = sorted((finished_run / "checkpoints").glob("step_*"))[-1]
    agent = make_agent(f"hf:{path}", max_new_tokens=12)
    assert agent.obs_format == "last" and agent.policy.template == "bare"
    # unset sampling settings are the ones the run evaluated with; given ones win
    config = json.loads((finished_run / "config.json").read_text())
    assert agent.sampling == Sampling(config["eval_temperature"], config["top_p"], 12)
    assert make_agent(f"hf:{path}").sampling.max_new_tokens == config["max_new_tokens"]
    assert make_agent(f"hf:{path}", temperature=0).sampling.temperature == 0
    assert make_agent(f"hf:{path}#temperature=0#max_new_tokens=5").sampling.temperature == 0  # options in the spec
    assert make_agent(f"hf:{path}#temperature=0.5", temperature=0.2).sampling.temperature == 0.2  # a kwarg wins
    env = spiral_arena.make("KuhnPoker-v0")  # full-history observations: the agent reads the last message
    record = play_game(env, [agent, RandomAgent(0)], seed=1)
    assert sum(record.returns) == 0
    policy = agent.kuhn_policy()
    assert len(policy) == 12 and all(0 <= p <= 1 for p in policy.values())


def test_the_leaderboard_reads_the_exploitability_the_run_reported(finished_run):
    """Train, then rank: the leaderboard's exploitability column for a checkpoint is read on the Kuhn it trained
    on, at its recorded temperature: the run's own final number "at the evaluation temperature"."""
    from leaderboard.entrants import kuhn_policy_of
    from spiral_arena.agents import make_agent
    from spiral_arena.analysis import kuhn_exploitability

    final = rows(finished_run)[-1]
    step = finished_run / "checkpoints" / f"step_{final['step']:06d}"
    agent = make_agent(f"hf:{step}")
    assert agent.trained.kuhn_game().canonical == "KuhnPoker-v0:reward=chips;rounds=1"
    column = kuhn_exploitability(kuhn_policy_of(agent))
    assert column == pytest.approx(final["eval/kuhn_exploitability_at_eval_t"], abs=1e-6)


def test_the_warm_start_plays_the_texts_it_learned(finished_run):
    """warm_start/ records how it reads each game, as a checkpoint does: given the plain TicTacToe id, its seat is
    shown the recipe's layout and the latest message alone, as in its warm start."""
    from spiral_arena.agents import make_agent
    from spiral_arena.play import reading
    from spiral_arena.registry import GameSpec

    warm = json.loads((finished_run / "warm_start" / SETTINGS_FILE).read_text())
    step = json.loads((finished_run / "checkpoints" / "step_000002" / SETTINGS_FILE).read_text())
    assert warm["kind"] == "spiral-arena sft" and warm["step"] == 0
    for key in ("games", "obs_format", "prompt_template", "sampling"):
        assert warm[key] == step[key], key
    seat = reading(make_agent(f"hf:{finished_run / 'warm_start'}"), GameSpec.parse("TicTacToe-v0")).text
    assert seat == {"board": "lines", "obs_format": "last"}


def test_resume_continues_exactly(finished_run, tmp_path):
    """Crash after the step-2 checkpoint, resume: the same metrics and weights as never stopping."""
    out = tmp_path / "resumed"
    train(TrainConfig.build({**SMALL, "output_dir": str(out)}), progress=False)
    import shutil

    shutil.rmtree(out / "checkpoints" / "step_000004")  # as if it died during steps 3-4
    train(TrainConfig.build({**SMALL, "output_dir": str(out), "resume": True}), progress=False)
    assert [stable(r) for r in rows(out)] == [stable(r) for r in rows(finished_run)]
    a, b = weights(finished_run / "checkpoints" / "step_000004"), weights(out / "checkpoints" / "step_000004")
    assert all(torch.equal(a[k], b[k]) for k in a)
    # the resumed run's checkpoint records the same games, read the same way, as the first run's
    for step in ("step_000002", "step_000004"):
        settings = [json.loads((run / "checkpoints" / step / SETTINGS_FILE).read_text()) for run in (finished_run, out)]
        first, resumed = settings
        assert first["games"] == resumed["games"] and first["games"]
    recipe = TrainConfig.build({}).games.split(",")
    assert [g["game"].split(":")[0] for g in first["games"]] == [g.split(":")[0] for g in recipe]
    assert {g["obs_format"] for g in first["games"]} == {"last"}


def test_checkpoints_keep_the_models_own_pad_id(finished_run):
    """A pad id the run wrote into the model's config would come back, when a checkpoint is loaded, as the
    embedding's padding_idx (a row without gradient): a resumed run would then train differently from one
    that never stopped, as soon as a response holds the pad token."""
    base = json.loads((finished_run / "tiny_init" / "config.json").read_text())
    for saved in ("warm_start", "checkpoints/step_000002", "checkpoints/step_000004"):
        config = json.loads((finished_run / saved / "config.json").read_text())
        assert config.get("pad_token_id") == base.get("pad_token_id"), saved


def test_two_gloo_ranks_equal_one_process(tmp_path):
    flags = cli_flags({**SMALL, "steps": 2, "eval_every": 10})
    flags += ["--rollout-shards=2", "--no-plots"]
    single = tmp_path / "single"
    subprocess.run(
        [sys.executable, "-m", "trainers", f"--output-dir={single}", *flags],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=600,
    )
    ranks = tmp_path / "ranks"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "trainers",
            f"--output-dir={ranks}",
            *flags,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    one, two = rows(single), rows(ranks)
    for a, b in zip(one, two, strict=True):
        for key in ("samples", "trained"):
            assert a.get(key) == b.get(key)
        for key in a:
            if key.startswith("rae/") or key in ("loss", "grad_norm"):
                assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    wa, wb = weights(single / "checkpoints" / "step_000002"), weights(ranks / "checkpoints" / "step_000002")
    # Adam turns float noise in near-zero gradients into steps of up to lr (1e-3); a real difference
    # (a wrong weighting or a missing rank) moves most weights by that much, so 2e-4 tells them apart.
    diffs = torch.cat([(wa[k] - wb[k]).abs().flatten() for k in wa])
    assert diffs.max() < 2e-4 and (diffs > 1e-6).float().mean() < 0.01


def torchrun(flags: list[str], out: Path, ranks: int = 2) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}", "-m", "trainers"]
        + [f"--output-dir={out}", *flags],
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_fsdp_ranks_equal_one_process_and_resume(tmp_path):
    """FSDP2 on 2 gloo ranks trains the model one process trains on the same games; a sharded
    run resumed from its checkpoint (sharded optimizer state included) ends where it would have."""
    flags = cli_flags({**SMALL, "steps": 2, "eval_every": 2, "save_every": 1})
    flags += ["--rollout-shards=2", "--no-plots", "--kl-coef=0.1"]
    single = tmp_path / "single"
    subprocess.run(
        [sys.executable, "-m", "trainers", f"--output-dir={single}", *flags], cwd=REPO, check=True, timeout=600
    )
    sharded = tmp_path / "fsdp"
    torchrun([*flags, "--fsdp"], sharded)
    one, two = rows(single), rows(sharded)
    for a, b in zip(one, two, strict=True):
        assert (a.get("samples"), a.get("trained")) == (b.get("samples"), b.get("trained"))
        for key in a:
            if key.startswith(("rae/", "eval/kuhn")) or key in ("loss", "grad_norm", "kl"):
                assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    wa, wb = weights(single / "checkpoints" / "step_000002"), weights(sharded / "checkpoints" / "step_000002")
    diffs = torch.cat([(wa[k] - wb[k]).abs().flatten() for k in wa])
    assert diffs.max() < 2e-4 and (diffs > 1e-6).float().mean() < 0.01  # see the gloo test above
    config = json.loads((sharded / "checkpoints" / "step_000002" / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"]  # loadable by vLLM, not "FSDPQwen3..."

    import shutil

    shutil.rmtree(sharded / "checkpoints" / "step_000002")
    torchrun([*flags, "--fsdp", "--resume"], sharded)
    wc = weights(sharded / "checkpoints" / "step_000002")
    assert all(torch.equal(wb[k], wc[k]) for k in wb)


@pytest.mark.parametrize("flags", [{"opponent": "random"}, {"rae": False}])
def test_fixed_opponent_and_no_rae(tmp_path, flags):
    out = tmp_path / "run"
    train(TrainConfig.build({**SMALL, "steps": 1, "plots": False, "output_dir": str(out), **flags}), progress=False)
    last = rows(out)[-1]
    if flags.get("rae") is False:
        assert not any(k.startswith("rae/") for k in last)
    else:  # only the learning seat is trained: each game has one policy seat
        assert last["samples"] >= 24


def test_state_baseline_in_a_training_step(tmp_path):
    """--state-baseline 2: a turn whose observation at least 2 other turns of the step answered gets its
    return minus their mean; the others keep RAE's (game, role) advantage, as in a run without it on
    the same games (same seed). Read back from the transcripts."""
    config = {**SMALL, "steps": 1, "eval_every": 1, "samples_per_step": 64, "games_in_flight": 16, "sft_steps": 100}
    runs = {}
    for state_baseline in (0, 2):
        out = tmp_path / f"run{state_baseline}"
        train(
            TrainConfig.build({**config, "plots": False, "output_dir": str(out), "state_baseline": state_baseline}),
            progress=False,
        )
        runs[state_baseline] = [json.loads(line) for line in (out / "transcripts.jsonl").read_text().splitlines()]
    plain, turns = runs[0], runs[2]
    advantages = replayed_advantages(tmp_path / "run0")  # step 1 from zero baselines, real games
    assert len(advantages) == len(plain) and min(advantages) < 0 < max(advantages)
    assert {t["role"] for t in plain} == {0, 1}
    assert [t["response"] for t in plain] == [t["response"] for t in turns]  # the same games
    groups: dict[tuple, list[int]] = {}
    for i, t in enumerate(turns):
        groups.setdefault((t["game"], t["role"], t["prompt"]), []).append(i)
    shared = [g for g in groups.values() if len(g) >= 3]
    assert shared and any(len(g) < 3 for g in groups.values())  # both kinds occur in a Kuhn + TicTacToe step
    for group in shared:
        total = sum(turns[i]["reward"] for i in group)
        for i in group:
            reward = turns[i]["reward"]
            assert turns[i]["advantage"] == pytest.approx(reward - (total - reward) / (len(group) - 1))
    for i in (i for g in groups.values() if len(g) < 3 for i in g):
        assert turns[i]["advantage"] == pytest.approx(plain[i]["advantage"])  # RAE's
    share = rows(tmp_path / "run2")[-1]["state_baseline/share"]
    assert share == pytest.approx(sum(len(g) for g in shared) / len(turns))


def test_collect_then_sft_from_the_cli(tmp_path):
    """SPIRAL's SFT baseline: transcripts of expert play, then supervised training on them."""
    cli = [sys.executable, "-m", "spiral_arena.cli"]
    data = tmp_path / "expert.jsonl"
    subprocess.run(
        [
            *cli,
            "collect",
            "--agent",
            "expert",
            "--games",
            "KuhnPoker-v0:rounds=1",
            "--n-games",
            "40",
            "--out",
            str(data),
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=300,
    )
    records = [json.loads(line) for line in data.read_text().splitlines()]
    assert len(records) >= 80 and all(r["response"].startswith("\\boxed{[") for r in records)
    out = tmp_path / "sft"
    sft_run = subprocess.run(
        [
            *cli,
            "sft",
            "--data",
            str(data),
            "--steps",
            "30",
            "--batch",
            "16",
            "--lr",
            "3e-3",
            "--output-dir",
            str(out),
            "--prompt-template",
            "bare",
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    settings = json.loads((out / "model" / "spiral_arena.json").read_text())
    assert settings["loss_last"] < settings["loss_first"]
    # it says what it does, shows the loss on its bar (with tqdm's time left), and ends with the loss
    assert "SFT: 30 steps of 16 examples" in sft_run.stdout and "loss=" in sft_run.stderr
    assert f"SFT loss {settings['loss_first']:.3f} -> {settings['loss_last']:.3f}" in sft_run.stdout
    from spiral_arena.agents import make_agent

    agent = make_agent(f"hf:{out / 'model'}", max_new_tokens=10)
    assert agent.policy.template == "bare"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n')
    failed = subprocess.run(
        [*cli, "sft", "--data", str(bad), "--output-dir", str(tmp_path / "x")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert failed.returncode == 2 and "'prompt' and 'response'" in failed.stderr


def test_lora_and_tensorboard(tmp_path):
    pytest.importorskip("peft")
    pytest.importorskip("tensorboard")
    out = tmp_path / "run"
    train(
        TrainConfig.build(
            {
                **SMALL,
                "steps": 1,
                "plots": False,
                "output_dir": str(out),
                "lora_rank": 4,
                "lora_alpha": 8,
                "tensorboard": True,
                "kl_coef": 0.0,
            }
        ),
        progress=False,
    )
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert rows(out)[-1]["samples"] >= 24


def test_reasoning_check_during_training(tmp_path):
    """--eval-reasoning: a fixed subset of maths and multiple-choice items answered by the policy's engine."""
    pytest.importorskip("math_verify")
    out = tmp_path / "run"
    data = REPO / "tests" / "data" / "evals"
    overrides = {"steps": 1, "output_dir": str(out), "eval_reasoning": "math500:2,mmlu_pro:2"}
    overrides.update(eval_reasoning_data=str(data), eval_reasoning_max_new_tokens=8)
    train(TrainConfig.build({**SMALL, **overrides}), progress=False)
    last = rows(out)[-1]
    for bench in ("math500", "mmlu_pro"):
        assert 0.0 <= last[f"reasoning/{bench}/accuracy"] <= 1.0
        assert 0 < last[f"reasoning/{bench}/response_tokens_mean"] <= 8
    assert "reasoning/average/accuracy" in last
    assert (out / "reasoning.png").read_bytes()[:4] == b"\x89PNG"
    from trainers.config import ConfigError

    with pytest.raises(ConfigError, match="eval_reasoning: unknown benchmark 'math5000'"):
        TrainConfig.build({**SMALL, "eval_reasoning": "math5000:2", "eval_reasoning_data": str(data)})


def test_cli_training_output_summary_and_resume(tmp_path, capsys):
    """What a user sees: one line per evaluation (step 0 included), a bar counted in steps, a final
    table naming the README targets, and on --resume the step it resumed at."""
    from spiral_arena.cli import main as cli_main

    out = tmp_path / "run"
    flags = cli_flags({**SMALL, "eval_env_ids": "", "games": "KuhnPoker-v0:rounds=1"})
    # the tiny recipe leaves the out-of-domain games out of its evaluations; the flag puts them back
    flags += ["--game-weights=", f"--output-dir={out}", "--no-plots", "--eval-out-of-domain"]
    assert cli_main(["train", *flags]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert [line.split(" eval:")[0].split()[-1] for line in lines if " eval: " in line] == ["0", "2", "4"]
    assert "Kuhn exploitability" in lines[0]
    assert "Final evaluation at step 4" in captured.out
    assert "KuhnPoker-v0:rounds=1" in captured.out and "PigDice-v0 (out-of-domain)" in captured.out
    assert "README targets (tiny recipe): Kuhn single-hand exploitability <= 0.20:" in captured.out
    assert "4/4" in captured.err and "step" in captured.err  # the bar counts steps, not seconds
    assert f"run written to {out}" in captured.out

    weights = out / "checkpoints" / "step_000004" / "model.safetensors"  # damaged after it was written
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert cli_main(["train", *flags, "--resume"]) == 0
    captured = capsys.readouterr()
    assert f"spiral-arena train: warning: {weights} is truncated (" in captured.err and "Traceback" not in captured.err
    assert "; resuming from step_000002, the previous complete checkpoint" in captured.err
    assert f"resumed {out} at step 2 of 4 (from step_000002)" in captured.out
    assert [line.split(" eval:")[0].split()[-1] for line in captured.out.splitlines() if " eval: " in line] == ["4"]

    hurried = tmp_path / "hurried"  # the time limit is a safety stop, and says so loudly
    short = [f.replace("--time-limit-s=0", "--time-limit-s=0.001") for f in flags if not f.startswith("--output-dir")]
    assert cli_main(["train", *short, f"--output-dir={hurried}"]) == 0
    captured = capsys.readouterr()
    assert "STOPPED EARLY by time_limit_s=0.001 at step 1 of 4" in captured.err
    assert "No evaluation ran: time_limit_s=0.001 passed first (checkpoints/step_000001)" in captured.out
    assert rows(hurried)[-1]["step"] == 1 and rows(hurried)[-1]["stopped_by_time_limit"] == 1.0
    early = "STOPPED EARLY at step 1 of 4 by time_limit_s=0.001"
    assert captured.out.splitlines()[-1] == f"run written to {hurried}; {early}"  # the last line says so
    cut = hurried / "checkpoints" / "step_000001"
    assert json.loads((cut / SETTINGS_FILE).read_text())["stopped_early"] == early[len("STOPPED EARLY ") :]
    assert "stopped_early" not in json.loads((out / "checkpoints" / "step_000004" / SETTINGS_FILE).read_text())
    # wherever it plays, it is named as stopped early: play, and the leaderboard's notes (the web page's too)
    game = "KuhnPoker-v0:rounds=1"  # the game it trained on: the only note is the early stop
    assert cli_main(["play", game, "--p0", f"hf:{cut}", "--p1", "random", "--games", "1", "--quiet"]) == 0
    said = capsys.readouterr()
    assert f"hf:{cut} is from a run {early}, not the trained policy" in said.out + said.err
    from leaderboard.entrants import notes, parse_entrants

    marked = notes(parse_entrants(f"hf:{cut},random"), [game])
    assert marked == {(f"hf:{cut}", game): f"hf:{cut} is from a run {early}, not the trained policy"}

    empty = tmp_path / "empty"
    assert cli_main(["train", f"--output-dir={empty}", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "resume:" in err and "holds no checkpoint" in err and not empty.exists()
