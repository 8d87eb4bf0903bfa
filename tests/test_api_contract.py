"""Every registered env against PettingZoo's and Gymnasium's own checkers, and our API promises."""

from __future__ import annotations

import gymnasium
import pytest
from conftest import play_random_game
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import parallel_api_test, render_test, seed_test
from pettingzoo.utils.conversions import turn_based_aec_to_parallel

import spiral_arena
from spiral_arena.agents import RandomAgent
from spiral_arena.wrappers import TextArenaCompat

ENV_IDS = spiral_arena.list_envs()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_api_test(env_id, text_space_api_test):
    text_space_api_test(spiral_arena.make(env_id), num_cycles=200)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_seed_test(env_id):
    seed_test(lambda: spiral_arena.make(env_id), num_cycles=50)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_render_test(env_id):
    render_test(lambda render_mode=None: spiral_arena.make(env_id, render_mode=render_mode))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_parallel_api_test(env_id):
    parallel_api_test(turn_based_aec_to_parallel(spiral_arena.make(env_id)), num_cycles=200)
    parallel_api_test(spiral_arena.make_parallel(env_id), num_cycles=200)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_spaces_are_text_and_stable(env_id):
    env = spiral_arena.make(env_id)
    for agent in env.possible_agents:
        assert isinstance(env.observation_space(agent), gymnasium.spaces.Text)
        assert isinstance(env.action_space(agent), gymnasium.spaces.Text)
        assert env.observation_space(agent) is env.observation_space(agent)
        assert env.action_space(agent) is env.action_space(agent)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_random_play_is_legal_and_zero_sum(env_id):
    env = spiral_arena.make(env_id)
    agents = [RandomAgent(seed=i) for i in range(len(env.possible_agents))]
    for seed in range(30):
        env.reset(seed=seed)
        for agent in env.agent_iter():
            obs, _, term, trunc, info = env.last()
            assert env.observation_space(agent).contains(obs)
            if term or trunc:
                assert "invalid_move" not in info, info
                env.step(None)
            else:
                env.step(agents[env.possible_agents.index(agent)].act(obs, info))
        if len(env.possible_agents) == 2:
            assert sum(env.returns) == 0


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_actions_same_transcript(env_id):
    def transcript(seed):
        env = spiral_arena.make(env_id)
        agents = [RandomAgent(seed=7 + i) for i in range(len(env.possible_agents))]
        env.reset(seed=seed)
        seen = []
        for agent in env.agent_iter():
            obs, reward, term, trunc, info = env.last()
            seen.append((agent, obs, reward, term, repr(sorted(info.items()))))
            env.step(None if term or trunc else agents[env.possible_agents.index(agent)].act(obs, info))
        return seen, env.returns

    assert transcript(123) == transcript(123)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_clears_history(env_id):
    env = spiral_arena.make(env_id, obs_format="full")
    agents = [RandomAgent(seed=i) for i in range(len(env.possible_agents))]
    env.reset(seed=5)
    first = {a: env.observe(a) for a in env.possible_agents}
    play_random_game(env, agents, seed=5)
    env.reset(seed=5)
    assert {a: env.observe(a) for a in env.possible_agents} == first


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_check_env(env_id):
    gym_env = spiral_arena.make_gym(env_id, opponent="random", seat=0)
    check_env(gym_env, skip_render_check=True)
    if len(gym_env.env.possible_agents) > 1:
        check_env(spiral_arena.make_gym(env_id, opponent="random", seat=1), skip_render_check=True)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gym_wrapper_plays_to_the_end(env_id):
    gym_env = spiral_arena.make_gym(
        env_id, opponent=RandomAgent(1), seat=len(spiral_arena.make(env_id).possible_agents) - 1
    )
    learner = RandomAgent(2)
    for seed in range(10):
        obs, info = gym_env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, reward, done, truncated, info = gym_env.step(learner.act(obs, info))
            total += reward
            assert not truncated
        assert total == gym_env.env.returns[gym_env.env.possible_agents.index(gym_env.learner)]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_textarena_style_loop(env_id):
    env = TextArenaCompat(spiral_arena.make(env_id))
    n = len(env.env.possible_agents)
    agents = [RandomAgent(seed=i) for i in range(n)]
    env.reset(num_players=n, seed=3)
    done = False
    steps = 0
    while not done:
        player_id, observation = env.get_observation()
        assert isinstance(observation, str) and observation
        info = env.env.infos[env.env.agent_selection]
        done, info = env.step(agents[player_id].act(observation, info))
        steps += 1
    rewards = env.close()
    assert set(rewards) == set(range(n)) and steps > 0
    if n == 2:
        assert rewards[0] == -rewards[1]
    with pytest.raises(RuntimeError, match="game is over"):
        env.step("[0]")
    with pytest.raises(ValueError, match="player"):
        env.reset(num_players=n + 1)
