"""Bad input gets a clear error naming what was wrong and what is valid, and never corrupts a game."""

from __future__ import annotations

import copy

import pytest
from test_actions import rules_snapshot

import spiral_arena
from spiral_arena.agents import RandomAgent, make_agent

ENV_IDS = spiral_arena.list_envs()


def snapshot(env) -> tuple:
    """Everything a bad call could have touched: rules state, observations, turn, rewards, infos."""
    return (
        rules_snapshot(env),
        {a: env.observe(a) for a in env.possible_agents},
        env.agent_selection,
        dict(env.rewards),
        dict(env._cumulative_rewards),
        copy.deepcopy(env.infos),
        dict(env.terminations),
    )


def legal_answer(env, seed: int = 0) -> str:
    agent = env.agent_selection
    return RandomAgent(seed).act(env.observe(agent), env.infos[agent])


def play_to_the_end(env) -> None:
    """Random legal moves until the game is over (agents have not stepped out yet)."""
    agents = [RandomAgent(seed=i) for i in range(len(env.possible_agents))]
    while not all(env.terminations.values()):
        agent = env.agent_selection
        env.step(agents[env.possible_agents.index(agent)].act(env.observe(agent), env.infos[agent]))


def play_out(env) -> None:
    """Finish the game and let every agent step out with ``step(None)``."""
    play_to_the_end(env)
    for _ in env.agent_iter():
        env.step(None)


# ---- stepping at the wrong time -----------------------------------------------------------


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step_after_everyone_stepped_out_names_reset(env_id):
    env = spiral_arena.make(env_id)
    env.reset(seed=1)
    play_out(env)
    assert env.agents == []
    for action in ("[0]", None):
        with pytest.raises(RuntimeError, match="reset"):
            env.step(action)
    env.reset(seed=1)  # and reset does bring the env back
    agent = env.agent_selection
    env.step(legal_answer(env))
    assert "invalid_move" not in env.infos[agent]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_a_finished_agent_may_only_pass_none(env_id):
    env = spiral_arena.make(env_id)
    env.reset(seed=2)
    play_to_the_end(env)
    agent = env.agent_selection
    assert env.terminations[agent]
    before = snapshot(env)
    with pytest.raises(ValueError, match="None"):
        env.step("[0]")
    assert snapshot(env) == before
    env.step(None)
    assert agent not in env.agents


# ---- wrong action types -------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("action", [4, 4.0, b"[4]", ["[4]"], {"move": "[4]"}, None], ids=repr)
def test_non_str_actions_raise_type_error_and_change_nothing(env_id, action):
    env = spiral_arena.make(env_id)
    env.reset(seed=3)
    env.step(legal_answer(env, seed=3))  # mid-game, not just the opening position
    if all(env.terminations.values()):
        pytest.skip("this seed ended the game in one move")
    before = snapshot(env)
    with pytest.raises(TypeError, match="str") as caught:
        env.step(action)
    assert type(action).__name__ in str(caught.value)
    assert snapshot(env) == before
    agent = env.agent_selection
    env.step(legal_answer(env, seed=4))
    assert "invalid_move" not in env.infos[agent]


# ---- wrong ids and options ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("env_id", "suggestion"),
    [("KuhnPoker-v1", "KuhnPoker-v0"), ("tictactoe-v0", "TicTacToe-v0"), ("SimpleNegotiation", "SimpleNegotiation-v0")],
)
def test_unknown_env_id_suggests_close_matches(env_id, suggestion):
    with pytest.raises(ValueError, match=suggestion) as caught:
        spiral_arena.make(env_id)
    assert repr(env_id) in str(caught.value)


def test_unknown_env_id_lists_the_registered_ones():
    with pytest.raises(ValueError) as caught:
        spiral_arena.make("Chess-v0")
    assert all(env_id in str(caught.value) for env_id in ENV_IDS)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "valid"),
    [
        ("KuhnPoker-v0", {"round": 3}, ["rounds", "reward", "ante", "obs_format", "invalid_move", "render_mode"]),
        ("TicTacToe-v0", {"rounds": 3}, ["obs_format", "invalid_move", "render_mode"]),
        ("SimpleNegotiation-v0", {"seed": 1}, ["obs_format", "invalid_move"]),
    ],
)
def test_unknown_kwargs_raise_type_error_listing_valid_ones(env_id, kwargs, valid):
    with pytest.raises(TypeError) as caught:
        spiral_arena.make(env_id, **kwargs)
    message = str(caught.value)
    assert next(iter(kwargs)) in message
    assert all(name in message for name in valid)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "named"),
    [
        ("KuhnPoker-v0", {"rounds": 0}, ["rounds", "positive"]),
        ("KuhnPoker-v0", {"rounds": 2.5}, ["rounds", "positive"]),
        ("KuhnPoker-v0", {"reward": "money"}, ["money", "win", "chips"]),
        ("KuhnPoker-v0", {"ante": 0}, ["ante"]),
        ("KuhnPoker-v0", {"first_player": 2}, ["first_player", "random"]),
        ("TicTacToe-v0", {"obs_format": "xml"}, ["xml", "full", "first_last"]),
        ("TicTacToe-v0", {"invalid_move": "ignore"}, ["ignore", "lose", "retry"]),
        ("TicTacToe-v0", {"render_mode": "rgb"}, ["rgb", "ansi", "human"]),
    ],
)
def test_bad_option_values_raise_value_error_naming_the_valid_ones(env_id, kwargs, named):
    with pytest.raises(ValueError) as caught:
        spiral_arena.make(env_id, **kwargs)
    assert all(word in str(caught.value) for word in named), str(caught.value)


# ---- invalid_move="retry" -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("env_id", "bad"),
    [
        ("TicTacToe-v0", "[9]"),
        ("KuhnPoker-v0", "[raise]"),
        ("SimpleNegotiation-v0", "[Offer: 50 Wood -> 1 Gold]"),
    ],
)
def test_retry_keeps_the_turn_and_tells_only_the_offender(env_id, bad):
    env = spiral_arena.make(env_id, invalid_move="retry")
    env.reset(seed=5)
    agent = env.agent_selection
    other = next(a for a in env.possible_agents if a != agent)
    rules_before = snapshot(env)[0]
    other_obs = env.observe(other)

    env.step(bad)

    reason = env.infos[agent]["invalid_move"]
    assert reason and reason in env.observe(agent)
    assert env.agent_selection == agent
    assert not any(env.terminations.values())
    assert env.rewards == dict.fromkeys(env.possible_agents, 0.0)
    assert env.returns == (0.0, 0.0)
    assert snapshot(env)[0] == rules_before
    assert env.observe(other) == other_obs

    env.step(legal_answer(env, seed=5))  # the second try counts
    assert "invalid_move" not in env.infos[agent]
    assert env.agent_selection == other or all(env.terminations.values())


# ---- wrappers and agents ------------------------------------------------------------------


@pytest.mark.parametrize("seat", [2, -1])
def test_make_gym_rejects_a_seat_that_does_not_exist(seat):
    with pytest.raises(ValueError, match=r"seat.*0\.\.1") as caught:
        spiral_arena.make_gym("TicTacToe-v0", seat=seat)
    assert repr(seat) in str(caught.value)


def test_make_gym_needs_an_opponent_for_a_two_player_game():
    with pytest.raises(ValueError, match="opponent"):
        spiral_arena.make_gym("KuhnPoker-v0", opponent=None)


@pytest.mark.parametrize("spec", ["nonsense", "randomly", ""])
def test_make_agent_rejects_unknown_specs_listing_the_valid_forms(spec):
    with pytest.raises(ValueError) as caught:
        make_agent(spec)
    message = str(caught.value)
    assert repr(spec) in message
    assert "random" in message and "human" in message
