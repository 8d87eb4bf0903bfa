"""Bad input gets a clear error naming what was wrong and what is valid, and never corrupts a game."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_actions import rules_snapshot

import spiral_arena
from spiral_arena.agents import RandomAgent, make_agent
from spiral_arena.core.env import ResetNeededError

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
def test_everything_that_reads_the_game_before_reset_says_call_reset(env_id):
    env = spiral_arena.make(env_id, render_mode="ansi")
    agent = env.possible_agents[0]
    calls = {
        "step": lambda: env.step("[0]"),
        "observe": lambda: env.observe(agent),
        "last": env.last,
        "agent_iter": env.agent_iter,
        "render": env.render,
        "check_action": lambda: env.check_action("[0]"),
        "truncate": env.truncate,
        "returns": lambda: env.returns,
        "agents": lambda: env.agents,
        "num_agents": lambda: env.num_agents,
        "agent_selection": lambda: env.agent_selection,
        "rewards": lambda: env.rewards,
        "infos": lambda: env.infos,
        "terminations": lambda: env.terminations,
    }
    assert issubclass(ResetNeededError, RuntimeError)
    for name, call in calls.items():
        with pytest.raises(ResetNeededError, match=rf"{env_id}: call reset\(\) before (reading )?{name}"):
            call()
    assert not hasattr(env, "agents")  # still an AttributeError too, as PettingZoo's tools expect
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        env.no_such_thing  # noqa: B018  (other missing attributes keep Python's own error)
    env.reset(seed=0)
    assert env.agents == env.possible_agents and env.check_action(legal_answer(env)) is None


def test_snakes_parallel_view_says_call_reset_before_step():
    par_env = spiral_arena.make_parallel("Snake-v0")
    with pytest.raises(RuntimeError, match=r"call reset\(\) before step"):
        par_env.step({a: "[up]" for a in par_env.possible_agents})


# ---- seeds --------------------------------------------------------------------------------

BAD_SEEDS = [
    ("7", TypeError),
    (1.5, TypeError),
    (7.0, TypeError),
    (True, TypeError),
    (np.float64(3), TypeError),
    ([1, 2], TypeError),
    (-1, ValueError),
    (2**64, ValueError),
    (np.int64(-3), ValueError),
]


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize(("seed", "error"), BAD_SEEDS, ids=repr)
def test_one_seed_rule_for_every_game(env_id, seed, error):
    env = spiral_arena.make(env_id)
    env.reset(seed=3)
    before = snapshot(env)
    with pytest.raises(error, match=r"seed must be None or an integer in \[0, 2\*\*64\)") as caught:
        env.reset(seed=seed)
    shown = str(int(seed)) if isinstance(seed, np.integer) else repr(seed)
    assert shown in str(caught.value)
    assert snapshot(env) == before  # a refused seed changes nothing


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_numpy_integer_seeds_and_the_largest_seed_are_accepted(env_id):
    def opening(seed):
        env = spiral_arena.make(env_id)
        env.reset(seed=seed)
        return {a: env.observe(a) for a in env.possible_agents}, env.infos

    assert opening(np.int64(5)) == opening(np.uint8(5)) == opening(5)
    opening(2**64 - 1)
    opening(np.uint64(2**64 - 1))


def test_seeds_are_no_longer_cut_to_64_bits():
    """-1 used to play the same game as 2**64 - 1 (seeds were cut to 64 bits); now both ends are refused."""
    env = spiral_arena.make("KuhnPoker-v0")
    with pytest.raises(ValueError, match="-1"):
        env.reset(seed=-1)
    with pytest.raises(ValueError, match=str(2**64 + 5)):
        env.reset(seed=2**64 + 5)


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


# ---- invalid moves end the game with an outcome -------------------------------------------

GARBAGE = ("[zzz]", "[Offer: 50 Wood -> 1 Gold]")  # the second is a malformed negotiation offer


@pytest.mark.parametrize("env_id", [e for e in ENV_IDS if e != "TwentyQuestions-v0"])  # no invalid moves there
def test_an_invalid_move_names_the_other_player_winner_in_every_info(env_id):
    env = spiral_arena.make(env_id)
    agents = [RandomAgent(seed=i) for i in range(len(env.possible_agents))]
    env.reset(seed=6)
    while not all(env.terminations.values()):
        offender = env.agent_selection
        bad = next((g for g in GARBAGE if env.check_action(g) is not None), None)
        if bad is not None:
            break
        env.step(agents[env.possible_agents.index(offender)].act(env.observe(offender), env.infos[offender]))
    else:
        pytest.fail(f"no garbage answer in {GARBAGE} was ever invalid in {env_id}")
    env.step(bad)
    other = next(a for a in env.possible_agents if a != offender)
    for a in env.possible_agents:
        assert env.infos[a]["outcome"] == {"winner": other, "reason": "invalid_move"}
    assert env.infos[offender]["offender"] == offender


def test_two_snake_offenders_at_once_draw_with_reason_invalid_move():
    par_env = spiral_arena.make_parallel("Snake-v0")
    par_env.reset(seed=0)
    _, rewards, terms, _, infos = par_env.step({"player_0": "[jump]", "player_1": "[fly]"})
    assert all(terms.values()) and rewards == {"player_0": 0.0, "player_1": 0.0}
    assert all(info["outcome"] == {"winner": None, "reason": "invalid_move"} for info in infos.values())
    par_env.reset(seed=0)
    infos = par_env.step({"player_0": "[up]", "player_1": "[fly]"})[4]
    assert all(info["outcome"] == {"winner": "player_0", "reason": "invalid_move"} for info in infos.values())


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
