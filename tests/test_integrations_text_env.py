"""The single-seat text env (``make_text_env``) and its GEM / SkyRL-gym shims, through the real libraries
where they are installed."""

from __future__ import annotations

import pytest

import spiral_arena
from spiral_arena.agents import make_agent
from spiral_arena.integrations.text_env import make_text_env, new_messages, register_gem, skyrl_env_class

EXTRA = "needs the integrations-text-env extra: pip install 'spiral-arena[integrations-text-env]'"


@pytest.mark.parametrize("env_id", ["KuhnPoker-v0", "TicTacToe-v0", "LeducHoldem-v0", "ConnectFour-v0"])
@pytest.mark.parametrize("seat", [0, 1])
def test_the_seats_rewards_add_up_to_the_envs_return_over_many_seeds(env_id, seat):
    text_env = spiral_arena.make_text_env(env_id, seat=seat, opponent="random")
    learner = make_agent("random")
    for seed in range(30):
        observation, info = text_env.reset(seed=seed)
        learner.reset(seed=seed)
        total, terminated = 0.0, False
        while not terminated:
            observation, reward, terminated, truncated, info = text_env.step(learner.act(observation, info))
            total += reward
            assert not truncated
        assert total == text_env.env.returns[seat] and info["outcome"]["reason"] == "normal"
        assert "Game over" in observation


def test_new_messages_hold_exactly_what_the_game_said_since():
    text_env = make_text_env("KuhnPoker-v0", seat=1, opponent="random")
    text_env.reset(seed=4)
    first, count = new_messages(text_env, 0)
    assert first == text_env.env.observe(text_env.learner)  # full format: everything so far, rules first
    text_env.step(text_env.env.infos[text_env.learner]["legal_actions"][0])
    later, _ = new_messages(text_env, count)
    assert text_env.env.observe(text_env.learner) == first + "\n\n" + later


def test_twenty_questions_is_a_one_seat_game_without_an_opponent():
    text_env = make_text_env("TwentyQuestions-v0:max_questions=2;secret=cat")
    text_env.reset(seed=0)
    _, reward, terminated, _, info = text_env.step("Is it a cat?")
    assert terminated and info["outcome"]["winner"] == text_env.learner and reward > 0


def test_gem_makes_our_env_by_its_registered_id():
    gem = pytest.importorskip("gem", reason=EXTRA)
    name = register_gem("TicTacToe-v0", opponent="random", seat=0)
    env = gem.make(name)
    observation, info = env.reset(seed=2)
    assert "Your turn" in observation
    done = False
    while not done:
        observation, reward, terminated, truncated, info = env.step(env.sample_random_action())
        done = terminated or truncated
    assert reward in (-1.0, 0.0, 1.0) and info["outcome"]["reason"] == "normal"


def test_skyrl_gym_steps_our_env_as_a_text_env():
    pytest.importorskip("skyrl_gym", reason=EXTRA)
    env = skyrl_env_class()(extras={"env_id": "KuhnPoker-v0", "seat": 0, "opponent": "random", "seed": 5})
    messages, _ = env.init([])
    expert = make_agent("expert")
    assert messages[-1]["role"] == "user" and "Your turn" in messages[-1]["content"]
    out = {"done": False}
    while not out["done"]:
        info = env.text_env.env.infos[env.text_env.learner]
        out = env.step(expert.act(messages[-1]["content"], info))
        messages += out["observations"]
    assert out["reward"] == env.text_env.env.returns[0] and env.turns >= 1
