"""PigDice-v0: busts, holds, the target, the turn limit (in turns), parsing, and random-play length."""

from __future__ import annotations

import numpy as np
import pytest

import spiral_arena
from spiral_arena.core.actions import InvalidMove
from spiral_arena.games.pig_dice import HOLD, ROLL, PigDice, PigDiceState


def first_rolls(seed: int, n: int) -> list[int]:
    """The first ``n`` rolls a game reset with ``seed`` makes (one ``integers(1, 7)`` draw per roll)."""
    rng = np.random.default_rng(seed)
    return [int(rng.integers(1, 7)) for _ in range(n)]


def seed_rolling(prefix: list[int]) -> int:
    """A seed whose game rolls ``prefix`` first."""
    return next(s for s in range(100_000) if first_rolls(s, len(prefix)) == prefix)


def state_rolling(prefix: list[int], **kwargs) -> PigDiceState:
    return PigDiceState(np.random.default_rng(seed_rolling(prefix)), **kwargs)


def test_rolls_add_up_and_hold_banks_the_turn_total():
    state = state_rolling([3, 5, 6])
    for total in (3, 8, 14):
        state.apply(ROLL)
        assert state.turn_total == total and state.current_player == 0
    state.apply(HOLD)
    assert state.scores == [14, 0] and state.turn_total == 0 and state.current_player == 1
    assert state.turns_played == 1 and not state.is_terminal()


def test_rolling_a_one_loses_the_turn_total_and_ends_the_turn():
    state = state_rolling([4, 6, 1])
    state.apply(ROLL)
    state.apply(ROLL)
    assert state.turn_total == 10
    state.apply(ROLL)
    assert state.last_roll == 1 and state.turn_total == 0 and state.scores == [0, 0]
    assert state.current_player == 1 and state.turns_played == 1


def test_holding_zero_is_allowed_and_passes_the_turn():
    state = PigDiceState(np.random.default_rng(0))
    state.apply(HOLD)
    assert state.scores == [0, 0] and state.current_player == 1 and state.turns_played == 1


def test_reaching_the_target_exactly_wins_at_the_hold():
    state = state_rolling([6])
    state.scores = [44, 48]
    state.apply(ROLL)
    assert state.turn_total == 6 and not state.is_terminal()  # points count only once banked
    state.apply(HOLD)
    assert state.scores[0] == 50 and state.is_terminal() and state.returns() == (1.0, -1.0)


def test_one_short_of_the_target_plays_on():
    state = state_rolling([6])
    state.scores = [43, 0]
    state.apply(ROLL)
    state.apply(HOLD)
    assert state.scores[0] == 49 and not state.is_terminal() and state.current_player == 1


def test_a_turn_total_past_the_target_is_lost_on_a_bust():
    state = state_rolling([6, 6, 1])
    state.scores = [45, 0]
    state.apply(ROLL)
    state.apply(ROLL)
    assert state.turn_total == 12 and not state.is_terminal()
    state.apply(ROLL)
    assert state.scores == [45, 0] and not state.is_terminal() and state.current_player == 1


def test_player_1_can_win_too():
    state = state_rolling([5])
    state.scores = [10, 47]
    state.apply(HOLD)
    state.apply(ROLL)
    state.apply(HOLD)
    assert state.returns() == (-1.0, 1.0)


def test_the_limit_counts_turns_not_actions():
    # Four turns of two rolls and a hold: the game ends after the fourth turn, not the fourth action.
    seed = next(s for s in range(1000) if 1 not in first_rolls(s, 8))
    rolls = first_rolls(seed, 8)
    state = PigDiceState(np.random.default_rng(seed), max_turns=4)
    for _ in range(4):
        assert not state.is_terminal()
        state.apply(ROLL)
        state.apply(ROLL)
        state.apply(HOLD)
    assert state.is_terminal() and state.turns_played == 4
    p0, p1 = sum(rolls[0:2] + rolls[4:6]), sum(rolls[2:4] + rolls[6:8])
    assert state.scores == [p0, p1]
    assert state.returns() == ((0.0, 0.0) if p0 == p1 else ((1.0, -1.0) if p0 > p1 else (-1.0, 1.0)))


def test_equal_scores_at_the_limit_draw_after_50_turns():
    env = spiral_arena.make("PigDice-v0")
    env.reset(seed=0)
    actions = 0
    for _ in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        if term or trunc:
            env.step(None)
        else:
            env.step("[h]")
            actions += 1
    assert actions == 50 and env.returns == (0.0, 0.0)
    assert "scores are level at 0: a draw" in env.observe("player_1")


def test_higher_score_wins_at_the_limit():
    state = state_rolling([5], max_turns=2)
    state.apply(HOLD)
    state.apply(ROLL)
    state.apply(HOLD)
    assert state.is_terminal() and state.returns() == (-1.0, 1.0)


def test_random_play_lasts_about_58_actions():
    pick = np.random.default_rng(1)
    lengths = []
    for game in range(2000):
        state = PigDiceState(np.random.default_rng([7, game]))
        n = 0
        while not state.is_terminal():
            state.apply((ROLL, HOLD)[int(pick.integers(2))])
            n += 1
        lengths.append(n)
    assert 57.0 < np.mean(lengths) < 60.0  # measured ~58.5 (sd ~13.5, so the standard error is ~0.3)
    assert max(lengths) > 50  # a 50-action cap would cut many games short


def test_rolls_come_from_the_reset_seed():
    def rolls(seed):
        env = spiral_arena.make("PigDice-v0")
        env.reset(seed=seed)
        for _ in range(12):
            env.step("[roll]")
        return env.observe("player_0"), env.observe("player_1")

    assert rolls(3) == rolls(3)
    assert len({rolls(s) for s in range(8)}) == 8


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("[roll]", ROLL),
        ("[r]", ROLL),
        ("[ROLL]", ROLL),
        ("[Hold]", HOLD),
        ("\\boxed{h}", HOLD),
        ("[roll] no, [hold]", HOLD),
    ],
)
def test_parse_actions_and_short_forms(text, action):
    game = PigDice()
    assert game.parse(game.new_state(np.random.default_rng(0)), text) == action


@pytest.mark.parametrize("text", ["[pass]", "", "[rolls]", "roll the die now and then hold it please"])
def test_parse_rejects_other_text(text):
    game = PigDice()
    with pytest.raises(InvalidMove, match="roll"):
        game.parse(game.new_state(np.random.default_rng(0)), text)


def test_view_and_messages():
    env = spiral_arena.make("PigDice-v0", obs_format="full")
    env.reset(seed=seed_rolling([4, 2]))
    env.step("[roll]")
    env.step("[r]")
    view = env.infos["player_0"]["view"]
    assert view == {"my_score": 0, "opponent_score": 0, "turn_total": 6, "turns_left": 50, "target": 50}
    env.step("[hold]")
    assert "Player 0 holds and banks 6 points" in env.observe("player_1")
    view = env.infos["player_1"]["view"]
    assert view == {"my_score": 0, "opponent_score": 6, "turn_total": 0, "turns_left": 49, "target": 50}


def test_options_reach_the_game_and_bad_ones_are_rejected():
    env = spiral_arena.make("PigDice-v0", target=20, max_turns=6)
    env.reset(seed=0)
    assert "reaches 20 or more" in env.observe("player_0") and "after 6 turns" in env.observe("player_0")
    for bad in ({"target": 0}, {"max_turns": -1}, {"target": "50"}, {"max_turns": 2.0}):
        with pytest.raises(ValueError, match="target|max_turns"):
            PigDice(**bad)
