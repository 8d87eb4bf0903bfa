"""KuhnPoker-v0: chip accounting, game result, openers, rewards, invalid moves, private information,
equality with OpenSpiel's kuhn_poker for a single hand, and random-play statistics (exact and simulated)."""

from __future__ import annotations

import copy
import math
import re
from collections import Counter
from fractions import Fraction

import numpy as np
import pyspiel
import pytest
from conftest import play_random_game

import spiral_arena
from spiral_arena.agents import RandomAgent
from spiral_arena.games.kuhn_poker import BET, CALL, CARD_NAMES, CHECK, DEALS, FOLD, KuhnPokerState

OPENSPIEL_ACTION = {CHECK: 0, FOLD: 0, BET: 1, CALL: 1}  # OpenSpiel: 0 = Pass, 1 = Bet
SEQUENCES = ((CHECK, CHECK), (CHECK, BET, FOLD), (CHECK, BET, CALL), (BET, FOLD), (BET, CALL))


def play_hand(deal, actions, ante=1):
    state = KuhnPokerState(rng=None, rounds=1, ante=ante, reward="chips", deal=deal)
    for action in actions:
        state.apply(action)
    return state


def step_all(env, answers):
    for answer in answers:
        env.step(answer)


def concede_round(env, loser):
    """Play one round in which ``loser`` folds to a bet, so the other player wins exactly the ante."""
    opener = env.state_.current_player
    step_all(env, ["[check]", "[bet]", "[fold]"] if opener == loser else ["[bet]", "[fold]"])


def showdown_round(env):
    """Play one round as bet-call; returns the player with the higher card (who wins ante + 1)."""
    cards = env.state_.cards
    step_all(env, ["[bet]", "[call]"])
    return 0 if cards[0] > cards[1] else 1


def seeds_for_each_deal(**kwargs):
    """A reset seed for each of the 6 deals of round 1."""
    env = spiral_arena.make("KuhnPoker-v0", **kwargs)
    found = {}
    for seed in range(200):
        env.reset(seed=seed)
        found.setdefault(env.state_.cards, seed)
    assert set(found) == set(DEALS), f"200 seeds dealt only {sorted(found)}"
    return found


# ---- chips and results ------------------------------------------------------------------


@pytest.mark.parametrize("ante", [1, 2, 3])
@pytest.mark.parametrize("deal", DEALS)
@pytest.mark.parametrize("actions", SEQUENCES)
def test_bets_and_calls_move_chips(ante, deal, actions):
    state = play_hand(deal, actions, ante)
    high = 0 if deal[0] > deal[1] else 1
    if actions[-1] == FOLD:  # the folder is the player who acted last: opener after check-bet, else responder
        winner, worth = (1 if len(actions) == 3 else 0), ante
    else:
        winner, worth = high, ante + (1 if actions[-1] == CALL else 0)
    assert state.is_terminal()
    expected = [-worth, -worth]
    expected[winner] = worth
    assert state.returns() == tuple(float(x) for x in expected)
    assert state.results[0].winner == winner and state.results[0].won == worth
    assert state.results[0].showdown == (actions[-1] != FOLD)


def test_called_bet_through_the_env_pays_ante_plus_one():
    env = spiral_arena.make("KuhnPoker-v0", rounds=1, reward="chips", ante=2)
    env.reset(seed=4)
    high = showdown_round(env)
    assert env.returns[high] == 3.0 and env.returns[1 - high] == -3.0
    assert f"Player {high} wins 3 chips this round" in env.observe("player_0")


def test_game_winner_is_the_chip_leader_not_the_last_round_winner():
    for reward in ("win", "chips"):  # +1 either way: the leader is one chip up
        env = spiral_arena.make("KuhnPoker-v0", rounds=2, reward=reward)
        env.reset(seed=11)
        leader = showdown_round(env)  # +2
        concede_round(env, loser=leader)  # -1, and the other player wins the last round
        state = env.state_
        assert state.is_terminal()
        assert state.results[-1].winner == 1 - leader
        assert state.chips[leader] == 1
        assert env.returns[leader] == 1.0 and env.returns[1 - leader] == -1.0
        assert f"Player {leader} leads on chips" in env.observe("player_0")


def test_five_rounds_can_tie():
    env = spiral_arena.make("KuhnPoker-v0", rounds=5)
    env.reset(seed=2)
    w = showdown_round(env)  # +2
    concede_round(env, loser=w)  # +1
    concede_round(env, loser=w)  # 0
    concede_round(env, loser=1 - w)  # +1
    concede_round(env, loser=w)  # 0
    assert env.state_.is_terminal() and env.state_.chips == [0, 0]
    assert env.returns == (0.0, 0.0)
    assert "chips are level" in env.observe("player_1")


@pytest.mark.parametrize("first", [0, 1])
def test_opener_alternates_every_round(first):
    env = spiral_arena.make("KuhnPoker-v0", rounds=5, first_player=first)
    env.reset(seed=9)
    for r in range(5):
        expected = first if r % 2 == 0 else 1 - first
        assert env.state_.round == r + 1 and env.state_.current_player == expected
        assert env.agent_selection == f"player_{expected}"
        assert f"Round {r + 1} of 5 begins; Player {expected} opens." in env.observe("player_0")
        step_all(env, ["[check]", "[check]"])
    assert [result.opener for result in env.state_.results] == [first, 1 - first, first, 1 - first, first]


def test_first_player_random_is_drawn_from_the_seed():
    env = spiral_arena.make("KuhnPoker-v0", first_player="random")
    openers = {}
    for seed in range(40):
        env.reset(seed=seed)
        openers[seed] = env.state_.current_player
        assert env.agent_selection == f"player_{openers[seed]}"
        assert "drawn at random" in env.observe("player_0")
    assert set(openers.values()) == {0, 1}
    for seed in (3, 17, 31):
        env.reset(seed=seed)
        assert env.state_.current_player == openers[seed]


@pytest.mark.parametrize("bad", [2, -1, "0", None, "first"])
def test_first_player_must_be_a_seat_or_random(bad):
    with pytest.raises(ValueError, match="first_player"):
        spiral_arena.make("KuhnPoker-v0", first_player=bad)


def test_chips_reward_is_net_chips_and_zero_sum():
    env = spiral_arena.make("KuhnPoker-v0", rounds=5, reward="chips")
    agents = [RandomAgent(seed=1), RandomAgent(seed=2)]
    called = 0
    for seed in range(200):
        returns = play_random_game(env, agents, seed=seed)
        results = env.state_.results
        net0 = sum(r.won if r.winner == 0 else -r.won for r in results)
        assert returns == (float(net0), float(-net0))  # net chips, not the difference of the two stacks
        called += sum(r.won == 2 for r in results)
    assert called > 0  # some rounds were worth 2, so the check above covered real bets


def test_multi_round_chips_equal_a_sum_of_openspiel_hands():
    """Every round is one OpenSpiel hand with the opener in OpenSpiel's seat 0."""
    game = pyspiel.load_game("kuhn_poker")
    env = spiral_arena.make("KuhnPoker-v0", rounds=5, reward="chips")
    agents = [RandomAgent(seed=5), RandomAgent(seed=6)]
    for seed in range(100):
        returns = play_random_game(env, agents, seed=seed)
        total = [0.0, 0.0]
        for r in env.state_.results:
            seats = (r.opener, 1 - r.opener)  # OpenSpiel seat -> our player
            hand = game.new_initial_state()
            for seat in seats:
                hand.apply_action(r.cards[seat])
            for letter in r.history:
                hand.apply_action(0 if letter == "p" else 1)
            for seat, value in enumerate(hand.returns()):
                total[seats[seat]] += value
        assert returns == tuple(total)


# ---- invalid moves ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer, reason",
    [
        ("[call]", r"\[call\] is not a legal action now; legal: \[check\], \[bet\]"),
        ("[fold]", r"\[fold\] is not a legal action now"),
        ("[raise]", r"\[raise\] is not a legal action now"),
        ("", "no action found"),
        ("I have a strong hand so I think the right move here is to raise", "no action found"),
    ],
)
def test_invalid_answer_ends_the_game_against_the_offender(answer, reason):
    env = spiral_arena.make("KuhnPoker-v0")
    env.reset(seed=0)
    env.step(answer)
    assert all(env.terminations.values())
    assert env.returns == (-1.0, 1.0)
    assert re.search(reason, env.infos["player_0"]["invalid_move"])
    assert env.infos["player_0"]["offender"] == "player_0"
    assert "invalid_move" not in env.infos["player_1"]


def test_invalid_move_late_in_the_game_scores_minus_one_plus_one_even_with_chip_rewards():
    env = spiral_arena.make("KuhnPoker-v0", rounds=5, reward="chips")
    env.reset(seed=1)
    high = showdown_round(env)  # someone is 2 chips up
    concede_round(env, loser=1 - high)  # and 3 now
    bettor = env.state_.current_player
    env.step("[bet]")
    offender = env.state_.current_player
    env.step("[check]")  # facing a bet, only fold or call are legal
    assert env.state_.chips[high] == 3 and all(env.terminations.values())
    assert env.returns[offender] == -1.0 and env.returns[bettor] == 1.0
    reason = env.infos[f"player_{offender}"]["invalid_move"]
    assert "[check] is not a legal action now; legal: [fold], [call]" in reason


def test_rules_layer_refuses_illegal_actions():
    state = play_hand((0, 1), [])
    with pytest.raises(ValueError, match="not legal"):
        state.apply(CALL)
    state = play_hand((0, 1), [BET, CALL])
    with pytest.raises(ValueError, match="not legal"):
        state.apply(CHECK)


# ---- private information -----------------------------------------------------------------

_CARD = re.compile(r"\b[JQK]\b")
_OWN_CARD = re.compile(r"Round (\d+) of \d+\b.*Your card: ([JQK])\.")
_SHOWDOWN = re.compile(r"Showdown: Player 0 has ([JQK]), Player 1 has ([JQK])\.")


def assert_only_own_cards_and_showdowns(env):
    """Every card named after the prompt is the player's own, or in a showdown that happened."""
    state = env.state_
    for p, agent in enumerate(env.possible_agents):
        prompt = f"[GAME] {env.game.prompt(p)}"
        obs = env.observe(agent)
        assert obs.startswith(prompt)
        showdowns = []
        for line in obs[len(prompt) :].splitlines():
            if not _CARD.search(line):
                continue
            if own := _OWN_CARD.search(line):
                r = int(own.group(1))
                cards = state.results[r - 1].cards if r <= len(state.results) else state.cards
                assert own.group(2) == CARD_NAMES[cards[p]], line
                assert len(_CARD.findall(line)) == 1, line
            else:
                shown = _SHOWDOWN.search(line)
                assert shown is not None, f"a card outside the own-card and showdown messages: {line!r}"
                assert len(_CARD.findall(line)) == 2, line
                showdowns.append(shown.groups())
        revealed = [tuple(CARD_NAMES[c] for c in r.cards) for r in state.results if r.showdown]
        assert showdowns == revealed  # every showdown shown, and no folded hand


def test_observations_reveal_only_own_cards_and_showdowns():
    env = spiral_arena.make("KuhnPoker-v0", rounds=5, obs_format="full")
    agents = [RandomAgent(seed=3), RandomAgent(seed=4)]
    folds = showdowns = 0
    for seed in range(150):
        env.reset(seed=seed)
        for agent in env.agent_iter():
            assert_only_own_cards_and_showdowns(env)
            obs, _, term, trunc, info = env.last()
            if term or trunc:
                env.step(None)
                continue
            p = env.possible_agents.index(agent)
            assert info["view"]["card"] == env.state_.cards[p]
            env.step(agents[p].act(obs, info))
        folds += sum(not r.showdown for r in env.state_.results)
        showdowns += sum(r.showdown for r in env.state_.results)
    assert folds > 100 and showdowns > 100


@pytest.mark.parametrize("obs_format", ["full", "first_last"])
@pytest.mark.parametrize("player", [0, 1])
def test_observations_do_not_depend_on_the_hidden_card(obs_format, player):
    """Same own card, same actions, different opponent card: identical text until a showdown."""
    seeds = seeds_for_each_deal(rounds=1, obs_format=obs_format)
    env = spiral_arena.make("KuhnPoker-v0", rounds=1, obs_format=obs_format)
    agent = f"player_{player}"
    for own in range(3):
        deals = [d for d in DEALS if d[player] == own]
        for actions in SEQUENCES:
            seen = []
            for deal in deals:
                env.reset(seed=seeds[deal])
                history = [env.observe(agent)]
                for action in actions:
                    env.step(f"[{action}]")
                    history.append(env.observe(agent))
                seen.append(history)
            if actions[-1] == FOLD:
                assert seen[0] == seen[1]
            else:
                assert seen[0][:-1] == seen[1][:-1]
                if obs_format == "full":  # first_last keeps only the final "game over" line
                    assert seen[0][-1] != seen[1][-1]  # the showdown names the opponent's card


# ---- equality with OpenSpiel ---------------------------------------------------------------


def test_every_single_hand_matches_openspiel():
    game = pyspiel.load_game("kuhn_poker")
    leaves = 0

    def walk(actions, theirs, deal):
        nonlocal leaves
        ours = play_hand(deal, actions)
        assert ours.is_terminal() == theirs.is_terminal()
        if ours.is_terminal():
            assert ours.returns() == tuple(theirs.returns()), (deal, actions)
            leaves += 1
            return
        player = ours.current_player
        assert player == theirs.current_player()
        assert theirs.information_state_string(player) == f"{deal[player]}{ours.history}"
        legal = ours.legal_actions()
        assert [OPENSPIEL_ACTION[a] for a in legal] == theirs.legal_actions() == [0, 1]
        assert [theirs.action_to_string(OPENSPIEL_ACTION[a]) for a in legal] == ["Pass", "Bet"]
        for action in legal:
            child = theirs.clone()
            child.apply_action(OPENSPIEL_ACTION[action])
            walk([*actions, action], child, deal)

    for deal in DEALS:
        theirs = game.new_initial_state()
        for card in deal:
            assert theirs.is_chance_node()
            theirs.apply_action(card)
        walk([], theirs, deal)
    assert leaves == 30


def test_env_hands_match_openspiel_with_the_same_cards():
    game = pyspiel.load_game("kuhn_poker")
    env = spiral_arena.make("KuhnPoker-v0", rounds=1, reward="chips")
    agents = [RandomAgent(seed=8), RandomAgent(seed=9)]
    histories = Counter()
    for seed in range(600):
        env.reset(seed=seed)
        theirs = game.new_initial_state()
        for card in env.state_.cards:
            theirs.apply_action(card)
        for agent in env.agent_iter():
            obs, _, term, trunc, info = env.last()
            if term or trunc:
                env.step(None)
                continue
            p = env.possible_agents.index(agent)
            assert theirs.current_player() == p
            answer = agents[p].act(obs, info)
            theirs.apply_action(OPENSPIEL_ACTION[answer.strip("[]")])
            env.step(answer)
        assert theirs.is_terminal()
        assert env.returns == tuple(theirs.returns())
        histories[env.state_.results[0].history] += 1
    assert set(histories) == {"pp", "pbp", "pbb", "bp", "bb"}


@pytest.mark.parametrize("first_player", [0, "random"])
def test_deals_are_uniform_over_seeds(first_player):
    env = spiral_arena.make("KuhnPoker-v0", first_player=first_player)
    n = 6000
    counts = Counter()
    for seed in range(n):
        env.reset(seed=seed)
        counts[env.state_.cards] += 1
    assert set(counts) == set(DEALS)
    expected = n / len(DEALS)
    chi_square = sum((counts[d] - expected) ** 2 / expected for d in DEALS)
    assert chi_square < 30.0  # 5 degrees of freedom: exceeded by chance with probability ~1.5e-5


# ---- random play ----------------------------------------------------------------------------


def random_play_outcomes(rounds, opener):
    """Exact distribution of (player 0's reward, player 0's chips) under uniform random legal play.

    Walks the rules layer: every deal of every round (set on the state as the chance outcome) and
    every legal action with equal probability. Positions are merged at round starts by what carries
    over (chips and opener), which keeps the walk small.
    """
    frontier = {None: (Fraction(1), KuhnPokerState(np.random.default_rng(0), rounds=rounds, opener=opener))}
    finals: Counter = Counter()
    while frontier:
        merged: dict = {}
        for prob, start in frontier.values():
            for deal in DEALS:
                state = copy.deepcopy(start)
                state.cards = deal
                stack = [(prob / len(DEALS), state)]
                while stack:
                    p, s = stack.pop()
                    legal = s.legal_actions()
                    for action in legal:
                        child = copy.deepcopy(s)
                        child.apply(action)
                        q = p / len(legal)
                        if child.is_terminal():
                            finals[(child.returns()[0], child.chips[0])] += q
                        elif child.history == "":  # next round
                            key = (tuple(child.chips), child.opener)
                            old = merged.get(key, (Fraction(0), child))
                            merged[key] = (old[0] + q, old[1])
                        else:
                            stack.append((q, child))
        frontier = merged
    return finals


def outcome_summary(finals):
    win = sum(p for (reward, _), p in finals.items() if reward == 1)
    loss = sum(p for (reward, _), p in finals.items() if reward == -1)
    draw = sum(p for (reward, _), p in finals.items() if reward == 0)
    chips = sum(p * c for (_, c), p in finals.items())
    chips_var = sum(p * c * c for (_, c), p in finals.items()) - chips**2
    return win, loss, draw, chips, chips_var


def test_exact_random_play_statistics_five_rounds():
    win, loss, draw, chips, _ = outcome_summary(random_play_outcomes(rounds=5, opener=0))
    assert win == Fraction(242073, 524288)
    assert loss == Fraction(224639, 524288)
    assert draw == Fraction(7197, 65536)
    assert chips == Fraction(1, 8)
    # Seats swapped when player 1 opens round 1.
    win1, loss1, draw1, chips1, _ = outcome_summary(random_play_outcomes(rounds=5, opener=1))
    assert (win1, loss1, draw1, chips1) == (loss, win, draw, -chips)


def test_exact_random_play_single_hand_value():
    *_, chips, _ = outcome_summary(random_play_outcomes(rounds=1, opener=0))
    assert chips == Fraction(1, 8)


def test_simulated_random_play_matches_the_exact_statistics():
    win, loss, draw, chips, chips_var = outcome_summary(random_play_outcomes(rounds=5, opener=0))
    n = 20_000
    env = spiral_arena.make("KuhnPoker-v0")
    agents = [RandomAgent(seed=21), RandomAgent(seed=22)]
    results = Counter()
    total_chips = 0
    for seed in range(n):
        results[play_random_game(env, agents, seed=seed)[0]] += 1
        total_chips += env.state_.chips[0]
    # Five standard errors: safe against chance, yet far tighter than the gap to a wrong rule
    # (e.g. 1-chip rounds would give no draws; last-round winner would give ~50/50).
    for value, p in ((1.0, win), (-1.0, loss), (0.0, draw)):
        tolerance = 5 * math.sqrt(float(p * (1 - p)) / n)
        assert abs(results[value] / n - float(p)) < tolerance, (value, results[value] / n, float(p))
    assert abs(total_chips / n - float(chips)) < 5 * math.sqrt(float(chips_var) / n)
