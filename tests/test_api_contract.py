"""Every registered env against PettingZoo's and Gymnasium's own checkers, and our API promises."""

from __future__ import annotations

import importlib

import gymnasium
import numpy as np
import pettingzoo.test
import pytest
from conftest import play_random_game
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import render_test
from pettingzoo.utils.conversions import turn_based_aec_to_parallel

import spiral_arena
from spiral_arena.agents import RandomAgent
from spiral_arena.core.env import OUTCOME_REASONS, TextGameEnv
from spiral_arena.core.game import TextGame
from spiral_arena.games.tictactoe import TicTacToe
from spiral_arena.testing import _text_observations_accepted, api_test, parallel_api_test, seed_test
from spiral_arena.wrappers import TextArenaCompat

ENV_IDS = spiral_arena.list_envs()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_api_test(env_id):
    api_test(spiral_arena.make(env_id), num_cycles=200)


def test_unadjusted_pettingzoo_api_test_fails_on_text_observations_and_the_adjustment_is_undone():
    """The adjustment in spiral_arena.testing is needed (PettingZoo's own test fails on a Text space),
    and it holds only during our call, also when that call fails."""
    module = importlib.import_module("pettingzoo.test.api_test")
    original = module._test_observation_space_compatibility
    with pytest.raises(AttributeError, match="'str' object has no attribute 'dtype'"):
        pettingzoo.test.api_test(spiral_arena.make("TicTacToe-v0"), num_cycles=10)
    api_test(spiral_arena.make("TicTacToe-v0"), num_cycles=10)
    assert module._test_observation_space_compatibility is original

    class Broken(TextGameEnv):
        def observe(self, agent):
            return 7

    with pytest.raises(AssertionError, match="observation"):  # a failing check still undoes the adjustment
        api_test(Broken(TicTacToe(), "TicTacToe-v0"), num_cycles=10)
    assert module._test_observation_space_compatibility is original


def test_the_adjustment_accepts_only_str_for_text_and_leaves_other_spaces_alone():
    module = importlib.import_module("pettingzoo.test.api_test")
    text, box = gymnasium.spaces.Text(10), gymnasium.spaces.Box(0, 1, (2,), dtype=np.float32)
    with _text_observations_accepted():
        check = module._test_observation_space_compatibility
        check(text, "abc", [])
        with pytest.raises(AssertionError, match="int"):
            check(text, 7, [])
        check(box, np.zeros(2, dtype=np.float32), [])
        with pytest.raises(AssertionError, match="dtype"):
            check(box, np.zeros(2, dtype=np.float64), [])


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


def test_per_state_random_play_depends_on_the_position_but_favours_no_action():
    """random#per_state=true: fixed arbitrary preferences per observation (what a warm start must read
    the card to imitate), legal, seeded, and uniform on average over positions."""
    from collections import Counter

    from spiral_arena.agents import make_agent, options_problem

    legal = {"legal_actions": ["[check]", "[bet]"]}

    def bet_share(agent, observation, n=500):
        return Counter(agent.act(observation, legal) for _ in range(n))["[bet]"] / n

    agent = make_agent("random#per_state=true", seed=0)
    shares = [bet_share(agent, f"Your card: {card}. Round {r}.") for card in "JQK" for r in range(40)]
    assert max(shares) - min(shares) > 0.5  # the position matters ...
    assert np.mean(shares) == pytest.approx(0.5, abs=0.08)  # ... but no action is favoured overall
    again = make_agent("random#per_state=true", seed=0)
    assert bet_share(again, "Your card: J. Round 0.") == shares[0]  # the same seed, the same play
    uniform = RandomAgent(seed=0)
    assert all(abs(bet_share(uniform, f"Your card: {c}.", n=2000) - 0.5) < 0.05 for c in "JQK")
    env = spiral_arena.make("TicTacToe-v0")
    players = [make_agent("random#per_state=true", seed=s) for s in (1, 2)]
    for seed in range(20):
        env.reset(seed=seed)
        for name in env.agent_iter():
            obs, _, term, trunc, info = env.last()
            assert "invalid_move" not in info
            env.step(None if term or trunc else players[env.possible_agents.index(name)].act(obs, info))
    assert "per_state must be true or false" in options_problem("random#per_state=3", {"per_state": 3})


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


# ---- outcome ------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_ended_game_states_its_outcome_in_every_info(env_id):
    env = spiral_arena.make(env_id)
    agents = [RandomAgent(seed=i) for i in range(len(env.possible_agents))]
    winners = set()
    for seed in range(20):
        env.reset(seed=seed)
        while not all(env.terminations.values()):
            assert all("outcome" not in info for info in env.infos.values())  # only once the game is over
            agent = env.agent_selection
            env.step(agents[env.possible_agents.index(agent)].act(env.observe(agent), env.infos[agent]))
        outcomes = [env.infos[a]["outcome"] for a in env.possible_agents]
        assert all(o == outcomes[0] and set(o) == {"winner", "reason"} for o in outcomes)
        returns = env.returns
        if len(returns) == 2:
            expected = None if returns[0] == returns[1] else env.possible_agents[returns.index(max(returns))]
            assert outcomes[0] == {"winner": expected, "reason": "normal"}, (seed, returns)
        else:
            assert outcomes[0]["reason"] == "normal"
        assert outcomes[0]["reason"] in OUTCOME_REASONS
        winners.add(outcomes[0]["winner"])
    if len(env.possible_agents) == 2:
        assert {"player_0", "player_1"} <= winners  # both seats won some game: the winner is not fixed


class _OneMoveState:
    """Player 0 names a result (an index into the game's results) and the game ends with it."""

    def __init__(self, results):
        self.results, self.current_player, self.chosen = results, 0, None

    def legal_actions(self):
        return list(range(len(self.results)))

    def apply(self, action):
        self.chosen, self.current_player = action, -1

    def is_terminal(self):
        return self.chosen is not None

    def returns(self):
        return self.results[self.chosen] if self.chosen is not None else (0.0,) * len(self.results[0])


class _OneMoveGame(TextGame):
    """A game a test can end with any returns: the env's end-of-game text and winner on chosen results."""

    name, description, default_obs_format, has_chance = "OneMove", "one move, any result", "last", False

    def __init__(self, results):
        self.results = results
        self.agents = tuple(f"player_{i}" for i in range(len(results[0])))

    def new_state(self, rng):
        return _OneMoveState(self.results)

    def prompt(self, player):
        return "Name a result."

    def turn_message(self, state, player):
        return "Your move."

    def parse(self, state, text):
        return int(text.strip("[]"))

    def legal_action_strings(self, state):
        return [f"[{i}]" for i in range(len(self.results))]

    def move_messages(self, state, player, action):
        return []

    def render(self, state):
        return f"result {state.chosen}"


@pytest.mark.parametrize(
    ("returns", "summary", "winner"),
    [
        ((1.0, -1.0), "Player 0 +1, Player 1 -1", "player_0"),
        ((-1.0, 1.0), "Player 0 -1, Player 1 +1", "player_1"),
        ((0.0, 0.0), "Player 0 +0, Player 1 +0", None),
        ((-0.0, 0.0), "Player 0 -0, Player 1 +0", None),  # a cached summary of (0.0, 0.0) must not answer this
        ((0.0, -0.0), "Player 0 +0, Player 1 -0", None),
        ((0.5, -0.5), "Player 0 +0.5, Player 1 -0.5", "player_0"),
        ((1.0, 1.0, -2.0), "Player 0 +1, Player 1 +1, Player 2 -2", None),  # a tie at the top: no winner
        ((-1.0, 2.0, -1.0), "Player 0 -1, Player 1 +2, Player 2 -1", "player_1"),
    ],
)
def test_the_final_message_and_the_winner_follow_the_returns(returns, summary, winner):
    """Every result the env has ended before is written and judged the same way again (the summary is
    formatted once per result and reused: these runs share its cache, in this order)."""
    results = [(1.0, -1.0)[: len(returns)] + (0.0,) * (len(returns) - 2), (0.0, 0.0, 0.0)[: len(returns)], returns]
    env = TextGameEnv(_OneMoveGame(results), "OneMove-v0")
    for chosen in (0, 1, 2, 2):  # other results first, then this one twice
        env.reset()
        env.step(f"[{chosen}]")
    assert env.log.lines[0][-1] == f"[GAME] Game over. Rewards: {summary}."
    assert env.infos["player_0"]["outcome"] == {"winner": winner, "reason": "normal"}


@pytest.mark.parametrize(("question", "winner"), [("Is it a cat?", "questioner"), ("Is it alive?", None)])
def test_twenty_questions_winner_is_the_questioner_only_when_it_finds_the_secret(question, winner):
    env = spiral_arena.make("TwentyQuestions-v0", secret="cat", max_questions=1)
    env.reset(seed=0)
    env.step(f"\\boxed{{{question}}}")
    assert env.terminations["questioner"]
    assert env.infos["questioner"]["outcome"] == {"winner": winner, "reason": "normal"}


def test_a_won_twenty_questions_game_with_a_negative_return_still_names_the_questioner():
    env = spiral_arena.make("TwentyQuestions-v0", secret="cat", max_questions=5)
    env.reset(seed=0)
    env.step("not a question")  # invalid question: -5, and the game goes on
    env.step("\\boxed{Is it a cat?}")
    assert env.returns[0] < 0
    assert env.infos["questioner"]["outcome"] == {"winner": "questioner", "reason": "normal"}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_truncate_stops_the_game_without_a_result(env_id):
    env = spiral_arena.make(env_id)
    env.reset(seed=4)
    agent = env.agent_selection
    env.step(RandomAgent(0).act(env.observe(agent), env.infos[agent]))
    if all(env.terminations.values()):
        pytest.skip("this seed ended the game in one move")
    returns = env.returns
    env.truncate()
    assert all(env.truncations.values()) and not any(env.terminations.values())
    assert env.rewards == dict.fromkeys(env.possible_agents, 0.0)
    assert env.returns == returns
    for a in env.possible_agents:
        assert env.infos[a]["outcome"] == {"winner": None, "reason": "truncation"}
        assert "truncated" in env.observe(a)
    with pytest.raises(RuntimeError, match="already over"):
        env.truncate()
    for _ in env.agent_iter():
        assert env.last()[3]
        env.step(None)
    assert env.agents == []
