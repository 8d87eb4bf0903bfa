"""Our games in TRL's GRPOTrainer, for real on CPU: the embedded tiny model (built here, no hub), one
step with each entry point on Kuhn Poker; the rewards the trainer used are the env's own returns and
the loss is finite."""

from __future__ import annotations

import math

import pytest

EXTRA = "needs the integrations-trl extra: pip install 'spiral-arena[integrations-trl]'"
trl = pytest.importorskip("trl", reason=EXTRA)
datasets = pytest.importorskip("datasets", reason=EXTRA)
transformers = pytest.importorskip("transformers", reason="needs the train extra")

from spiral_arena.integrations import trl as ours  # noqa: E402
from trainers.tiny import create_tiny  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return create_tiny(tmp_path_factory.mktemp("tiny") / "model", env_ids=("KuhnPoker-v0",))


def config(tmp_path, **kw):
    return trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=12,
        max_steps=1,
        learning_rate=1e-4,
        use_cpu=True,
        bf16=False,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        seed=0,
        **kw,
    )


def loss_of(trainer) -> float:
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert logged, trainer.state.log_history
    return logged[-1]["loss"]


def test_environment_factory_plays_kuhn_against_the_opponent_inside(tiny, tmp_path):
    from trl.chat_template_utils import qwen3_chat_template

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny)
    # The tiny model's own template has no tool calls; TRL needs one that renders them (and parses replies).
    tokenizer.chat_template = qwen3_chat_template
    games = []

    class Recorded(ours.KuhnPokerEnvironment):
        def get_reward(self) -> float:
            reward = super().get_reward()
            env = self._text_env.env
            games.append((reward, env.returns[env.possible_agents.index(self._text_env.learner)], env))
            return reward

    rows = [
        {"prompt": [{"role": "user", "content": "Play Kuhn Poker with the move tool."}], "seed": s, "seat": s % 2}
        for s in range(4)
    ]
    trainer = trl.GRPOTrainer(
        model=str(tiny),
        processing_class=tokenizer,
        args=config(tmp_path),
        train_dataset=datasets.Dataset.from_list(rows),
        environment_factory=Recorded,
    )
    trainer.train()
    assert len(games) == 4
    for reward, env_return, env in games:
        assert all(env.terminations.values())  # unfinished games were forfeited through the env's own rule
        assert reward == env_return and sum(env.returns) == 0.0
    assert math.isfinite(loss_of(trainer))
    logged = [e for e in trainer.state.log_history if "reward" in e][-1]["reward"]
    assert logged == pytest.approx(sum(r for r, _, _ in games) / len(games))


@pytest.mark.parametrize("family", ["LeducHoldemEnvironment", "ConnectFourEnvironment"])
def test_every_two_player_game_has_its_environment_class(family):
    """Leduc Hold'em and Connect Four too: a whole game through the move tool, the reward the env's return."""
    env = ours.ENVIRONMENTS[family]()
    env.reset(seed=1, seat=1)
    text_env = env._text_env
    while not ours.is_over(text_env):
        env.move(text_env.env.infos[text_env.learner]["legal_actions"][0])
    assert env.get_reward() == ours.game_summary(text_env.env)["returns"][1]


def test_the_move_tool_applies_the_text_move_and_the_opponent_answers():
    env = ours.KuhnPokerEnvironment()
    opening = env.reset(seed=3, seat=0)
    assert "Your turn" in opening and "[check]" in opening
    text_env = env._text_env
    while not ours.is_over(text_env):
        text = env.move(text_env.env.infos[text_env.learner]["legal_actions"][-1])
        assert text.startswith("[") and "[GAME]" in text  # what the game said since the move, never empty
    assert "Game over" in text
    summary = ours.game_summary(env._text_env.env)
    assert env.get_reward() == summary["returns"][0]
    with pytest.raises(ValueError, match="the game is over"):
        env.move("[check]")


@pytest.mark.parametrize("penalty", [None, -1.5])
def test_selfplay_rollout_func_returns_turns_with_their_seat_and_the_envs_returns(tiny, tmp_path, penalty):
    """The turns come from our trainer's rollouts (``spiral_arena.rollout.collect``); with ``invalid_penalty`` a
    game ended by an invalid answer pays its offender the penalty and the other seat the recipe's 0.5."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny)
    seen = []

    def recorded_reward(completions, game_reward, game, seat, returns, **kwargs):
        seen.extend(zip(game, seat, returns, game_reward, strict=True))
        return ours.selfplay_reward(completions, game_reward)

    rows = [{"prompt": "KuhnPoker-v0"}] * 4
    rollout = ours.selfplay_rollout_func(invalid_penalty=penalty)
    trainer = trl.GRPOTrainer(
        model=str(tiny),
        processing_class=tokenizer,
        reward_funcs=recorded_reward,
        args=config(tmp_path, scale_rewards="none"),
        train_dataset=datasets.Dataset.from_list(rows),
        rollout_func=rollout,
    )
    trainer.train()
    assert len(seen) == 4 and rollout.played["turns"] >= 4
    for game, seat, returns, reward in seen:  # the untrained model's first moves are mostly invalid: seats vary
        assert game == "KuhnPoker-v0" and sum(returns) == 0.0
        # an invalid answer ends a game at -1/+1 (or -2/+2 after a bet): shaped, that is -1.5 / 0.5
        assert reward == returns[seat] if penalty is None else reward in (returns[seat], -1.5, 0.5)
    if penalty is not None:
        assert any(reward in (-1.5, 0.5) for *_, reward in seen)  # the tiny model answers Kuhn mostly invalid
    assert math.isfinite(loss_of(trainer))


@pytest.mark.real_model
def test_grpo_trains_the_real_model_on_self_play(real_model, tmp_path):
    """SmolLM2-135M (``smollm2-135m``) in GRPOTrainer with our self-play rollouts: its own tokenizer and chat
    template, one step; every turn's reward is its seat's return and the loss is finite."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(real_model)
    seen = []

    def recorded_reward(completions, game_reward, game, seat, returns, **kwargs):
        seen.extend(zip(game, seat, returns, game_reward, strict=True))
        return ours.selfplay_reward(completions, game_reward)

    trainer = trl.GRPOTrainer(
        model=str(real_model),
        processing_class=tokenizer,
        reward_funcs=recorded_reward,
        args=config(tmp_path, scale_rewards="none"),
        train_dataset=datasets.Dataset.from_list([{"prompt": "KuhnPoker-v0:rounds=1"}] * 4),
        rollout_func=ours.selfplay_rollout_func(),
    )
    trainer.train()
    assert len(seen) == 4 and all(reward == returns[seat] for _, seat, returns, reward in seen)
    assert math.isfinite(loss_of(trainer))
