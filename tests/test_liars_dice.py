"""LiarsDice-v0: the bid rule, call resolution, re-roll and opener, elimination, parsing, and
private dice staying private until a call."""

from __future__ import annotations

import numpy as np
import pytest

import spiral_arena
from spiral_arena.core.actions import InvalidMove
from spiral_arena.games.liars_dice import CALL, LiarsDice, LiarsDiceState


def fresh(seed: int = 0, dice: int = 5) -> LiarsDiceState:
    """The initial state the env deals for ``seed`` (the env owns the Generator and its seeding)."""
    env = spiral_arena.make("LiarsDice-v0", dice=dice)
    env.reset(seed=seed)
    return env.state_


def with_dice(hand0: tuple[int, ...], hand1: tuple[int, ...]) -> LiarsDiceState:
    """A first-round state holding the given hands (later rolls still come from a real Generator)."""
    state = fresh(dice=len(hand0))
    state.counts = [len(hand0), len(hand1)]
    state.dice = [hand0, hand1]
    return state


# ---- the bid rule -------------------------------------------------------------------------------

# (current bid, new bid, valid?) with 10 dice in play.
BID_TABLE = [
    (None, (1, 1), True),
    (None, (10, 6), True),
    (None, (0, 3), False),  # quantity below 1
    (None, (11, 2), False),  # more than the dice in play
    (None, (2, 0), False),  # no such face
    (None, (2, 7), False),
    ((3, 4), (4, 1), True),  # quantity up, face may drop
    ((3, 4), (3, 5), True),  # same quantity, higher face
    ((3, 4), (3, 6), True),
    ((3, 4), (10, 6), True),
    ((3, 4), (3, 4), False),  # repeating the bid
    ((3, 4), (3, 3), False),  # same quantity, lower face
    ((3, 4), (2, 6), False),  # lower quantity, even with a higher face
    ((3, 4), (11, 1), False),
    ((10, 5), (10, 6), True),
    ((10, 6), (10, 6), False),  # nothing beats the top bid: only a call is left
]


@pytest.mark.parametrize(("current", "bid", "valid"), BID_TABLE)
def test_bid_validity_table(current, bid, valid):
    state = fresh()
    if current is not None:
        state.apply(current)
    game = LiarsDice()
    text = f"[Bid: {bid[0]}, {bid[1]}]"
    assert (state.bid_error(bid) is None) == valid
    assert (bid in state.legal_actions()) == valid
    assert (text in game.legal_action_strings(state)) == valid
    if valid:
        assert game.parse(state, text) == bid
    else:
        with pytest.raises(InvalidMove):
            game.parse(state, text)


def test_legal_actions_are_exactly_the_valid_bids_plus_call():
    state = fresh(dice=3)  # 6 dice in play
    everything = [(q, f) for q in range(0, 9) for f in range(0, 8)]
    assert state.legal_actions() == [b for b in everything if state.bid_error(b) is None]
    assert len(state.legal_actions()) == 36 and CALL not in state.legal_actions()
    state.apply((4, 2))
    assert state.legal_actions() == [b for b in everything if state.bid_error(b) is None] + [CALL]
    assert state.legal_actions()[:4] == [(4, 3), (4, 4), (4, 5), (4, 6)]


def test_dice_in_play_caps_the_quantity_after_a_die_is_lost():
    state = with_dice((2, 2, 3), (5, 6, 6))
    state.apply((4, 2))
    state.apply(CALL)  # two 2s, fewer than 4: player 0 loses a die
    assert state.dice_in_play == 5
    assert state.bid_error((6, 1)) is not None and state.bid_error((5, 1)) is None


@pytest.mark.parametrize(
    ("text", "bid"),
    [("[Bid: 4, 1]", (4, 1)), ("[bid 4 1]", (4, 1)), ("[BID:4,1]", (4, 1)), ("\\boxed{Bid: 4, 1}", (4, 1))],
)
def test_bid_spellings(text, bid):
    state = fresh()
    assert LiarsDice().parse(state, text) == bid


@pytest.mark.parametrize("text", ["[Bid: 4; 1]", "[Bid: four, 1]", "[Raise]", "", "[Bid: 4]"])
def test_unreadable_actions_are_invalid(text):
    with pytest.raises(InvalidMove, match=r"Bid: quantity, face"):
        LiarsDice().parse(fresh(), text)


def test_call_without_a_bid_is_invalid():
    with pytest.raises(InvalidMove, match="no bid to call"):
        LiarsDice().parse(fresh(), "[Call]")
    env = spiral_arena.make("LiarsDice-v0")
    env.reset(seed=0)
    assert "[Call]" not in env.infos["player_0"]["legal_actions"]
    env.step("[call]")
    assert env.returns == (-1.0, 1.0) and env.infos["player_0"]["invalid_move"]


# ---- calls ------------------------------------------------------------------------------------


def test_call_on_a_false_bid_costs_the_bidder_a_die_and_ones_are_not_wild():
    state = with_dice((2, 2, 3, 5, 6), (1, 2, 4, 4, 6))  # three 2s and one 1
    state.apply((4, 2))  # true only if 1s were wild
    state.apply(CALL)
    result = state.calls[-1]
    assert (result.count, result.bidder, result.caller, result.loser) == (3, 0, 1, 0)
    assert state.counts == [4, 5]


def test_an_exact_count_goes_against_the_caller():
    state = with_dice((2, 2, 3, 5, 6), (1, 2, 4, 4, 6))
    state.apply((3, 2))
    state.apply(CALL)
    assert state.calls[-1].count == 3 and state.calls[-1].loser == 1 and state.counts == [5, 4]


def test_a_count_above_the_bid_goes_against_the_caller():
    state = with_dice((2, 2, 3, 5, 6), (1, 2, 4, 4, 6))
    state.apply((1, 1))
    state.apply((2, 2))
    state.apply(CALL)  # player 0 calls player 1's bid of two 2s
    assert state.calls[-1].bidder == 1 and state.calls[-1].loser == 0 and state.counts == [4, 5]


def test_after_a_call_everyone_rerolls_and_the_loser_opens():
    for loser_bid, loser in (((4, 2), 0), ((3, 2), 1)):
        state = with_dice((2, 2, 3, 5, 6), (1, 2, 4, 4, 6))
        state.apply(loser_bid)
        state.apply(CALL)
        assert state.round == 2 and state.bids == [] and state.bid is None
        assert state.current_player == loser and state.opener == loser
        assert [len(hand) for hand in state.dice] == state.counts
        assert all(1 <= d <= 6 for hand in state.dice for d in hand)


def test_the_count_is_announced_and_the_dice_revealed():
    env = spiral_arena.make("LiarsDice-v0")
    env.reset(seed=9)
    hands = [tuple(h) for h in env.state_.dice]
    env.step("[Bid: 2, 5]")
    env.step("[Call]")
    count = sum(d == 5 for hand in hands for d in hand)
    loser = 0 if count < 2 else 1
    for agent in env.possible_agents:
        obs = env.observe(agent)
        assert f"Dice showing 5: {count}," in obs
        assert f"Revealed dice: Player 0 {' '.join(map(str, hands[0]))}; Player 1 {' '.join(map(str, hands[1]))}" in obs
        assert f"Player {loser} (the {'bidder' if loser == 0 else 'caller'}) loses a die" in obs
    assert env.agent_selection == f"player_{loser}"
    assert env.infos[f"player_{loser}"]["view"]["current_bid"] is None


def test_running_out_of_dice_ends_the_game():
    state = with_dice((3,), (4,))
    state.apply((1, 6))
    state.apply(CALL)
    assert state.is_terminal() and state.counts == [0, 1] and state.returns() == (-1.0, 1.0)
    env = spiral_arena.make("LiarsDice-v0", dice=1)
    env.reset(seed=0)
    env.step("[Bid: 2, 6]")  # two 6s among two dice: true only if both show 6
    env.step("[Call]")
    assert env.terminations == {"player_0": True, "player_1": True}
    assert sorted(env.returns) == [-1.0, 1.0] and "has no dice left" in env.observe("player_1")


def test_random_games_end_after_five_to_nine_calls():
    pick = np.random.default_rng(0)
    for seed in range(200):
        state = fresh(seed)
        while not state.is_terminal():
            legal = state.legal_actions()
            state.apply(legal[int(pick.integers(len(legal)))])
        assert 5 <= len(state.calls) <= 9 and 0 in state.counts
        assert sum(state.returns()) == 0


# ---- private information ----------------------------------------------------------------------


def test_opponent_dice_stay_hidden_until_a_call():
    """Two games where player 1 rolls the same dice and player 0 different ones: everything
    player 1 sees before the call is identical; the call reveals the difference."""
    by_hand: dict[tuple, int] = {}
    seeds = None
    for seed in range(5000):
        hands = fresh(seed).dice
        other = by_hand.setdefault(hands[1], seed)
        if other != seed and fresh(other).dice[0] != hands[0]:
            seeds = (other, seed)
            break
    assert seeds is not None
    script = ["[Bid: 1, 1]", "[Bid: 1, 2]", "[Bid: 2, 3]", "[Bid: 3, 3]", "[Call]"]

    def player_1_sees(seed):
        env = spiral_arena.make("LiarsDice-v0", obs_format="full")
        env.reset(seed=seed)
        seen = []
        for action in script:
            if env.agent_selection == "player_1":
                seen.append((env.observe("player_1"), repr(env.infos["player_1"])))
            env.step(action)
        return seen, env.observe("player_1")

    (before_a, after_a), (before_b, after_b) = (player_1_sees(s) for s in seeds)
    assert before_a == before_b and len(before_a) == 2
    assert after_a != after_b
    view = LiarsDice().player_view(fresh(seeds[0]), 1)
    assert view["my_dice"] == list(fresh(seeds[0]).dice[1]) and view["opponent_dice_count"] == 5


def test_first_roll_comes_from_the_reset_seed():
    def first_roll(seed):
        env = spiral_arena.make("LiarsDice-v0")
        env.reset(seed=seed)
        return env.infos["player_0"]["view"]["my_dice"]

    assert first_roll(4) == first_roll(4) == list(fresh(4).dice[0])
    assert len({tuple(first_roll(s)) for s in range(10)}) > 5


def test_view_keys():
    state = with_dice((1, 2, 3, 4, 5), (6, 6, 6, 6, 6))
    state.apply((2, 6))
    view = LiarsDice().player_view(state, 1)
    assert view == {
        "my_dice": [6, 6, 6, 6, 6],
        "my_dice_count": 5,
        "opponent_dice_count": 5,
        "dice_in_play": 10,
        "current_bid": (2, 6),
        "bidder": 0,
        "history": [(0, 2, 6)],
        "round": 1,
    }


def test_options():
    env = spiral_arena.make("LiarsDice-v0", dice=3)
    env.reset(seed=0)
    assert env.state_.counts == [3, 3] and "starts with 3 six-sided dice" in env.observe("player_0")
    for bad in (0, -2, 2.5, "5", True, 21, 10**6):
        with pytest.raises(ValueError, match="dice"):
            LiarsDice(dice=bad)
    assert LiarsDice(dice=20).dice == 20  # the most: every turn lists 240 bids
