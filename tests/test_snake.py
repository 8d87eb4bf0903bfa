"""Snake-v0: collision order, growth, apple respawn, the round limit, hidden simultaneous moves,
seeded setup, and the Parallel API view."""

from __future__ import annotations

import numpy as np
import pytest

import spiral_arena
from spiral_arena.core.actions import InvalidMove
from spiral_arena.games.snake import (
    HEAD_ON,
    OFF_BOARD,
    OTHER_BODY,
    OWN_BODY,
    SWAP,
    Snake,
    SnakeParallelEnv,
    SnakeState,
)


def position(p0, p1, apples=(), width=5, height=5, rounds=20, seed=0) -> SnakeState:
    """A state with the given snakes (cells head first) and apples; respawns still use a real Generator."""
    state = SnakeState(np.random.default_rng(seed), width, height, apples=0, rounds=rounds)
    state.bodies = [list(p0), list(p1)]
    state.apples = list(apples)
    return state


def play(state: SnakeState, m0: str, m1: str) -> None:
    before = [list(b) for b in state.bodies]
    state.apply(m0)
    assert state.current_player == 1 and state.bodies == before  # nothing moves on player 0's submission
    state.apply(m1)


# ---- collision order ----------------------------------------------------------------------


def test_moving_off_the_board_kills_and_up_increases_y():
    state = position([(2, 4)], [(0, 0)])
    play(state, "up", "right")  # (2, 5) is off a 5-high board
    assert state.deaths == {0: OFF_BOARD}
    assert state.is_terminal() and state.returns() == (-1.0, 1.0)
    state = position([(2, 3)], [(0, 0)])
    play(state, "up", "left")
    assert state.bodies[0] == [(2, 4)] and state.deaths == {1: OFF_BOARD} and state.returns() == (1.0, -1.0)


def test_head_on_collision_kills_both_and_draws():
    state = position([(1, 2)], [(3, 2)])
    play(state, "right", "left")
    assert state.deaths == {0: HEAD_ON, 1: HEAD_ON}
    assert state.is_terminal() and state.returns() == (0.0, 0.0)


def test_head_on_onto_an_apple_still_kills_both():
    state = position([(1, 2)], [(3, 2)], apples=[(2, 2)])
    play(state, "right", "left")
    assert state.deaths == {0: HEAD_ON, 1: HEAD_ON} and state.scores == [0, 0] and state.returns() == (0.0, 0.0)


def test_swapping_heads_kills_both():
    state = position([(1, 2)], [(2, 2)])
    play(state, "right", "left")
    assert state.deaths == {0: SWAP, 1: SWAP} and state.returns() == (0.0, 0.0)


def test_a_snake_that_left_the_board_no_longer_blocks():
    # Player 0 leaves the board; player 1 moves onto the cell player 0's head was on and survives.
    state = position([(0, 2)], [(1, 2), (2, 2)])
    play(state, "left", "left")
    assert state.deaths == {0: OFF_BOARD}
    assert state.bodies[1] == [(0, 2), (1, 2)] and state.returns() == (-1.0, 1.0)


def test_following_a_tail_that_moves_away_is_safe():
    # Player 1 moves onto player 0's tail while player 0 moves on without eating.
    state = position([(2, 2), (2, 1), (1, 1)], [(0, 1)])
    play(state, "up", "right")
    assert not state.deaths and not state.is_terminal()
    assert state.bodies == [[(2, 3), (2, 2), (2, 1)], [(1, 1)]]


def test_following_a_tail_kills_when_that_snake_eats():
    state = position([(2, 2), (2, 1), (1, 1)], [(0, 1)], apples=[(2, 3)])
    play(state, "up", "right")
    assert state.deaths == {1: OTHER_BODY} and state.returns() == (1.0, -1.0)
    assert state.bodies[0] == [(2, 3), (2, 2), (2, 1), (1, 1)]  # it grew: the tail stayed


def test_moving_onto_a_head_that_moves_away_is_safe():
    # A one-cell snake's head is also its tail.
    state = position([(2, 2)], [(1, 2)])
    play(state, "up", "right")
    assert not state.deaths and state.bodies == [[(2, 3)], [(2, 2)]]


def test_following_your_own_tail_is_safe_but_your_body_is_not():
    loop = [(1, 1), (1, 2), (2, 2), (2, 1)]  # head (1, 1), tail (2, 1) to its right
    state = position(loop, [(4, 4)])
    play(state, "right", "left")
    assert not state.deaths and state.bodies[0] == [(2, 1), (1, 1), (1, 2), (2, 2)]
    state = position([(1, 1), (1, 2), (1, 3)], [(4, 4)])
    play(state, "up", "left")  # into its own neck
    assert state.deaths == {0: OWN_BODY} and state.returns() == (-1.0, 1.0)


def test_running_into_the_other_body_kills():
    state = position([(0, 2)], [(1, 3), (1, 2), (1, 1)])
    play(state, "right", "up")  # (1, 2) stays body: it is not player 1's tail
    assert state.deaths == {0: OTHER_BODY} and state.returns() == (-1.0, 1.0)


def test_both_dying_in_one_round_is_a_draw():
    state = position([(0, 0)], [(4, 4)])
    play(state, "left", "up")
    assert state.deaths == {0: OFF_BOARD, 1: OFF_BOARD} and state.returns() == (0.0, 0.0)
    state = position([(0, 2), (0, 1), (0, 0)], [(1, 1), (1, 2), (1, 3)])
    play(state, "right", "left")  # each head enters the other's neck, which stays body
    assert state.deaths == {0: OTHER_BODY, 1: OTHER_BODY} and state.returns() == (0.0, 0.0)


# ---- apples ---------------------------------------------------------------------------------


def test_eating_grows_scores_and_respawns_on_a_free_cell():
    for seed in range(20):
        state = position([(2, 2)], [(0, 0)], apples=[(2, 3), (4, 4)], seed=seed)
        play(state, "up", "right")
        assert state.bodies[0] == [(2, 3), (2, 2)] and state.scores == [1, 0]
        assert len(state.apples) == 2 and (4, 4) in state.apples
        new = state.spawned[0]
        assert new in state.apples and new not in [*state.bodies[0], *state.bodies[1], (4, 4)]


def test_new_apples_appear_only_after_both_snakes_moved():
    # On a 4x1 board the only cell free after both moves is (3, 0); spawning before player 1
    # moved would have used (2, 0), the cell player 1 is entering.
    for seed in range(10):
        state = position([(0, 0)], [(3, 0)], apples=[(1, 0)], width=4, height=1, seed=seed)
        play(state, "right", "left")
        assert state.apples == [(3, 0)] and state.scores == [1, 0]


def test_no_free_cell_means_no_new_apple():
    state = position([(0, 0)], [(1, 1), (0, 1)], apples=[(1, 0)], width=2, height=2)
    play(state, "right", "left")  # player 1 follows its own tail
    assert state.scores == [1, 0] and state.apples == [] and not state.is_terminal()


# ---- end of game ----------------------------------------------------------------------------


def oscillating_seed() -> tuple[int, tuple[str, str], tuple[str, str]]:
    """A seed whose start lets both one-cell snakes shuttle between two apple-free cells."""
    game = Snake()
    for seed in range(200):
        state = game.new_state(np.random.default_rng(seed))
        plans = []
        for body in state.bodies:
            plans.append(("right", "left") if body[0][0] < 4 else ("left", "right"))
        cells = [
            {b[0], (b[0][0] + (1 if p[0] == "right" else -1), b[0][1])}
            for b, p in zip(state.bodies, plans, strict=True)
        ]
        if not cells[0] & cells[1] and not (cells[0] | cells[1]) & set(state.apples):
            return seed, plans[0], plans[1]
    raise AssertionError("no seed found")


def test_tie_at_the_round_limit_is_a_draw_after_exactly_40_submissions():
    seed, plan0, plan1 = oscillating_seed()
    env = spiral_arena.make("Snake-v0")
    env.reset(seed=seed)
    submissions = 0
    for agent in env.agent_iter():
        _, _, term, trunc, info = env.last()
        if term or trunc:
            assert "invalid_move" not in info
            env.step(None)
            continue
        plan = plan0 if agent == "player_0" else plan1
        env.step(f"[{plan[(submissions // 2) % 2]}]")
        submissions += 1
        assert env.state_.round == submissions // 2
    assert submissions == 40 and env.state_.round == 20
    assert env.returns == (0.0, 0.0)
    assert "both ate 0 apples: a draw" in env.observe("player_0")


def test_more_apples_at_the_limit_wins():
    state = position([(0, 0)], [(4, 4)], apples=[(0, 2)], rounds=2)
    play(state, "up", "left")
    assert not state.is_terminal() and state.scores == [0, 0]
    play(state, "up", "right")  # player 0 eats in the last round
    assert state.is_terminal() and state.round == 2 and state.scores == [1, 0]
    assert state.returns() == (1.0, -1.0)


# ---- text and env -----------------------------------------------------------------------------


def test_player_1_cannot_see_player_0s_pending_move():
    for obs_format in ("full", "first_last"):
        seen = []
        for first in ("[up]", "[down]", "[left]", "[right]"):
            env = spiral_arena.make("Snake-v0", obs_format=obs_format)
            env.reset(seed=11)
            env.step(first)
            assert env.agent_selection == "player_1"
            seen.append((env.observe("player_1"), repr(env.infos["player_1"])))
        assert all(s == seen[0] for s in seen)
        assert "Player 0 has chosen a move" in seen[0][0]


def test_player_0_is_told_its_own_choice_and_both_moves_are_shown_after_resolution():
    env = spiral_arena.make("Snake-v0", obs_format="full")
    env.reset(seed=11)
    env.step("[w]")
    assert "You chose up" in env.observe("player_0") and "You chose" not in env.observe("player_1")
    env.step("\\boxed{a}")
    for agent in env.possible_agents:
        assert "Round 1: Player 0 moved up, Player 1 moved left." in env.observe(agent)


@pytest.mark.parametrize(
    ("text", "move"),
    [
        ("[up]", "up"),
        ("[W]", "up"),
        ("[Down]", "down"),
        ("[s]", "down"),
        ("go \\boxed{left}", "left"),
        ("[d]", "right"),
    ],
)
def test_parse_accepts_directions_and_short_forms(text, move):
    game = Snake()
    assert game.parse(game.new_state(np.random.default_rng(0)), text) == move


@pytest.mark.parametrize("text", ["[north]", "", "[up down]", "I go somewhere far away from here"])
def test_parse_rejects_anything_else(text):
    game = Snake()
    with pytest.raises(InvalidMove):
        game.parse(game.new_state(np.random.default_rng(0)), text)


def test_invalid_move_by_player_1_loses():
    env = spiral_arena.make("Snake-v0")
    env.reset(seed=2)
    env.step("[up]")
    env.step("[jump]")
    assert env.returns == (1.0, -1.0)
    assert env.infos["player_1"]["invalid_move"] and env.infos["player_0"]["offender"] == "player_1"


def test_setup_comes_from_the_seed():
    game = Snake()

    def setup(seed):
        env = spiral_arena.make("Snake-v0")
        env.reset(seed=seed)
        return [list(b) for b in env.state_.bodies], list(env.state_.apples)

    assert setup(5) == setup(5)
    assert len({repr(setup(s)) for s in range(20)}) > 15
    starts = np.zeros((5, 5), dtype=int)
    for seed in range(5000):
        state = game.new_state(np.random.default_rng(seed))
        cells = [state.bodies[0][0], state.bodies[1][0], *state.apples]
        assert len(set(cells)) == 4  # two snakes and two apples on distinct cells
        starts[state.bodies[0][0]] += 1
    assert starts.min() > 120 and starts.max() < 280  # uniform: 200 expected per cell


def test_view_and_board_drawing():
    game = Snake()
    state = position([(0, 4), (1, 4)], [(3, 0)], apples=[(2, 2)])
    view = game.player_view(state, 1)
    assert view["my_head"] == (3, 0) and view["opponent_body"] == [(0, 4), (1, 4)]
    assert view["apples"] == [(2, 2)] and view["round"] == 1 and (view["width"], view["height"]) == (5, 5)
    rows = game.render(state).splitlines()
    assert rows[1] == "4 | 0 + . . . |" and rows[3] == "2 | . . @ . . |" and rows[5] == "0 | . . . 1 . |"
    assert rows[-1].split() == ["0", "1", "2", "3", "4"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"width": 0},
        {"height": -1},
        {"apples": 0},
        {"rounds": 0},
        {"width": 2.5},
        {"width": 1, "height": 3, "apples": 2},
    ],
)
def test_bad_options_are_rejected(kwargs):
    with pytest.raises(ValueError, match="width|height|apples|rounds"):
        Snake(**kwargs)


def test_a_board_is_at_most_20_cells_a_side():
    """Every turn draws the whole board into the prompt: a larger one is refused by name, not drawn for seconds."""
    assert Snake(width=20, height=20).width == 20
    for side in ("width", "height"):
        with pytest.raises(ValueError, match=f"{side} must be at most 20, got 3000"):
            Snake(**{side: 3000})


def test_options_reach_the_game():
    env = spiral_arena.make("Snake-v0", width=7, height=4, apples=3, rounds=5)
    env.reset(seed=0)
    assert (env.state_.width, env.state_.height, env.state_.rounds, len(env.state_.apples)) == (7, 4, 5, 3)
    assert "7 cells wide and 4 cells high" in env.observe("player_0") and "at most 5 rounds" in env.observe("player_0")


# ---- Parallel API ---------------------------------------------------------------------------


def test_parallel_round_resolves_both_moves_at_once_like_the_aec_env():
    par = spiral_arena.make_parallel("Snake-v0")
    assert isinstance(par, SnakeParallelEnv)
    obs, infos = par.reset(seed=4)
    for agent in par.possible_agents:
        assert "Your turn" in obs[agent] and infos[agent]["legal_actions"] == ["[up]", "[down]", "[left]", "[right]"]
        assert infos[agent]["view"]["round"] == 1
    aec = spiral_arena.make("Snake-v0")
    aec.reset(seed=4)
    rng = np.random.default_rng(0)
    while par.agents:
        moves = {a: f"[{['up', 'down', 'left', 'right'][int(rng.integers(4))]}]" for a in par.agents}
        obs, rewards, terms, truncs, infos = par.step(moves)
        aec.step(moves["player_0"])
        aec.step(moves["player_1"])
        assert par.env.state_.bodies == aec.state_.bodies and par.env.state_.apples == aec.state_.apples
        assert set(terms.values()) == {aec.state_.is_terminal()} and not any(truncs.values())
    assert tuple(rewards[a] for a in par.possible_agents) == aec.returns
    assert sum(rewards.values()) == 0


def test_parallel_invalid_moves():
    par = spiral_arena.make_parallel("Snake-v0")
    par.reset(seed=1)
    _, rewards, terms, _, infos = par.step({"player_0": "[up]", "player_1": "[fly]"})
    assert rewards == {"player_0": 1.0, "player_1": -1.0} and all(terms.values()) and par.agents == []
    assert "invalid_move" in infos["player_1"] and "invalid_move" not in infos["player_0"]
    assert infos["player_0"]["offenders"] == ["player_1"]
    par.reset(seed=1)
    _, rewards, _, _, infos = par.step({"player_0": "", "player_1": "[fly]"})
    assert rewards == {"player_0": 0.0, "player_1": 0.0}
    assert all("invalid_move" in infos[a] for a in par.possible_agents)
    with pytest.raises(RuntimeError, match="game is over"):
        par.step({"player_0": "[up]", "player_1": "[up]"})


def test_parallel_needs_both_moves_and_plays_to_the_limit():
    seed, plan0, plan1 = oscillating_seed()
    par = spiral_arena.make_parallel("Snake-v0")
    par.reset(seed=seed)
    with pytest.raises(ValueError, match="player_1"):
        par.step({"player_0": "[up]"})
    steps = 0
    while par.agents:
        _, rewards, _, _, _ = par.step({"player_0": f"[{plan0[steps % 2]}]", "player_1": f"[{plan1[steps % 2]}]"})
        steps += 1
    assert steps == 20 and rewards == {"player_0": 0.0, "player_1": 0.0}
