"""Leduc Hold'em against OpenSpiel's ``leduc_poker``: rules, information states, exploitability; the text."""

import numpy as np
import pyspiel
import pytest
from conftest import play_random_game
from open_spiel.python import policy as openspiel_policy
from open_spiel.python.algorithms import exploitability as openspiel_exploitability
from open_spiel.python.algorithms.expected_game_score import policy_value

import spiral_arena
from spiral_arena.agents import ExpertAgent, RandomAgent
from spiral_arena.agents.experts.leduc import expert_policy
from spiral_arena.analysis import leduc_policy_from_scores
from spiral_arena.analysis.leduc import (
    LEDUC_INFO_STATES,
    LEDUC_RANK_STATES,
    expand_key,
    leduc_exploitability,
    leduc_policy_value,
    normalize,
    rank_key,
    solve_cfr,
    state_key,
    uniform_policy,
)
from spiral_arena.core.actions import InvalidMove
from spiral_arena.games.leduc_holdem import CALL, FOLD, RAISE, LeducHoldem, LeducHoldemState

OPENSPIEL_ACTION = {FOLD: 0, CALL: 1, RAISE: 2}  # OpenSpiel's Fold, Call (a check too), Raise (a bet too)
GAME = pyspiel.load_game("leduc_poker")


def openspiel_hand(c0, c1):
    """OpenSpiel's state once its chance nodes dealt the private cards (a chance action is the card, 0..5)."""
    state = GAME.new_initial_state()
    state.apply_action(c0)
    state.apply_action(c1)
    return state


def ours_of(table: openspiel_policy.TabularPolicy) -> dict:
    """An OpenSpiel tabular policy keyed by its own information-state strings, legal actions only."""
    return {
        key: {a: float(table.action_probability_array[i][j]) for a, j in OPENSPIEL_ACTION.items()
              if table.legal_actions_mask[i][j]}
        for key, i in table.state_lookup.items()
    }  # fmt: skip


def openspiel_of(policy: dict) -> openspiel_policy.TabularPolicy:
    """Our policy (any key spelling) as OpenSpiel's tabular policy over its 936 states."""
    probs = normalize(policy)
    table = openspiel_policy.TabularPolicy(GAME)
    for key, i in table.state_lookup.items():
        (ours,) = expand_key(key)
        table.action_probability_array[i] = [probs[ours].get(a, 0.0) for a in OPENSPIEL_ACTION]
    return table


def random_table(seed):
    table = openspiel_policy.TabularPolicy(GAME)
    rng = np.random.default_rng(seed)
    for i in range(len(table.state_lookup)):
        weights = rng.random(3) ** 3 * table.legal_actions_mask[i]  # cubed: some states nearly pure
        table.action_probability_array[i] = weights / weights.sum()
    return table


# ---- rules ------------------------------------------------------------------------------


def test_random_hands_follow_openspiel_move_by_move():
    """Every step of 3,000 random hands: the player to act, the legal actions, the information state of
    the player to act, the end of the hand and its returns, all OpenSpiel's."""
    rng = np.random.default_rng(0)
    endings = set()
    for _ in range(3000):
        ours = LeducHoldemState(rng)
        theirs = openspiel_hand(*ours.cards)
        while not ours.is_terminal():
            if theirs.is_chance_node():  # round 2's public card
                assert ours.round == 2 and theirs.legal_actions() == sorted(set(range(6)) - set(ours.cards))
                theirs.apply_action(ours.public)
            player = ours.current_player
            assert player == theirs.current_player()
            assert [OPENSPIEL_ACTION[a] for a in ours.legal_actions()] == theirs.legal_actions()
            assert expand_key(theirs.information_state_string(player)) == [state_key(ours, player)]
            action = ours.legal_actions()[rng.integers(len(ours.legal_actions()))]
            ours.apply(action)
            theirs.apply_action(OPENSPIEL_ACTION[action])
        assert theirs.is_terminal()
        assert ours.returns() == tuple(theirs.returns())
        endings.add((ours.histories[0], ours.histories[1]))
    assert len(endings) > 40  # folds in both rounds, showdowns after every round-1 ending


def test_every_information_state_is_openspiels():
    seen = {0: {}, 1: {}}

    def walk(state):
        if state.is_terminal():
            return
        if state.is_chance_node():
            for action, _ in state.chance_outcomes():
                walk(state.child(action))
            return
        player = state.current_player()
        seen[player][state.information_state_string(player)] = [
            a for a, j in OPENSPIEL_ACTION.items() if j in state.legal_actions()
        ]
        for action in state.legal_actions():
            walk(state.child(action))

    walk(GAME.new_initial_state())
    assert len(seen[0]) == len(seen[1]) == 468
    theirs = {expand_key(key)[0]: legal for by_player in seen.values() for key, legal in by_player.items()}
    assert sorted(theirs) == sorted(LEDUC_INFO_STATES) and len(LEDUC_INFO_STATES) == 936
    uniform = uniform_policy()
    assert all(list(uniform[key]) == legal for key, legal in theirs.items())


def test_showdowns_pairs_then_high_card_then_split():
    def showdown(deal):
        state = LeducHoldemState(rng=None, deal=deal)
        for action in (CALL, CALL, CALL, CALL):  # check it down
            state.apply(action)
        return state.returns()

    js, jh, qs, qh, ks, kh = range(6)
    assert showdown((js, ks, jh)) == (1.0, -1.0)  # a pair of jacks beats a king
    assert showdown((qs, js, kh)) == (1.0, -1.0)  # no pair: the higher card
    assert showdown((qs, qh, ks)) == (0.0, 0.0)  # equal ranks split
    state = LeducHoldemState(rng=None, deal=(js, ks, jh))
    for action in (RAISE, RAISE, CALL, RAISE, RAISE, CALL):  # capped in both rounds: 1 + 2 + 2 + 4 + 4
        state.apply(action)
    assert state.returns() == (13.0, -13.0)


def test_raises_are_capped_at_two_a_round_and_folding_needs_a_bet():
    state = LeducHoldemState(rng=None, deal=(0, 2, 4))
    assert state.legal_actions() == [CALL, RAISE]
    state.apply(RAISE)
    state.apply(RAISE)
    assert state.legal_actions() == [FOLD, CALL]
    with pytest.raises(ValueError, match="not legal"):
        state.apply(RAISE)


def test_bad_deals_and_rewards_are_named():
    with pytest.raises(ValueError, match="three different cards"):
        LeducHoldemState(rng=None, deal=(1, 1, 2))
    with pytest.raises(ValueError, match="reward must be one of"):
        spiral_arena.make("LeducHoldem-v0:reward=points")


def test_reward_win_is_the_sign_of_the_chips():
    rng = np.random.default_rng(3)
    for _ in range(300):
        chips, win = LeducHoldemState(rng, "chips"), LeducHoldemState(np.random.default_rng(0), "win")
        win.cards, win.public = chips.cards, chips.public
        while not chips.is_terminal():
            action = chips.legal_actions()[rng.integers(len(chips.legal_actions()))]
            chips.apply(action)
            win.apply(action)
        assert win.returns() == tuple(float(np.sign(c)) for c in chips.returns())


# ---- exact analysis ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["uniform", "random 1", "random 2", "random 3", "expert"])
def test_exploitability_and_value_equal_openspiels(name):
    if name == "uniform":
        table = openspiel_policy.TabularPolicy(GAME)  # uniform over legal actions
        ours = uniform_policy()
    elif name == "expert":
        ours = expert_policy()  # rank-only keys: each stands for both suits
        table = openspiel_of(ours)
    else:
        table = random_table(int(name[-1]))
        ours = ours_of(table)  # keyed by OpenSpiel's strings
    expected = openspiel_exploitability.exploitability(GAME, table)
    assert leduc_exploitability(ours) == pytest.approx(expected, abs=1e-9)
    value = policy_value(GAME.new_initial_state(), [table, table])[0]
    assert leduc_policy_value(ours) == pytest.approx(value, abs=1e-9)


def test_uniform_and_expert_reference_numbers():
    assert leduc_exploitability(uniform_policy()) == pytest.approx(2.3736111111, abs=1e-9)
    assert leduc_exploitability(expert_policy()) < 0.001  # 0.000202 (scripts/leduc_expert.py)
    assert leduc_policy_value(expert_policy()) == pytest.approx(-0.0856, abs=0.001)  # the game's value
    assert len(expert_policy()) == 288 and {rank_key(k) for k in LEDUC_INFO_STATES} == set(expert_policy())


def test_cfr_converges():
    early, later = (leduc_exploitability(solve_cfr(n)) for n in (3, 30))
    assert later < early / 5 and later < 0.1
    with pytest.raises(ValueError, match="iterations must be at least 1"):
        solve_cfr(0)


@pytest.mark.parametrize(
    "policy, message",
    [
        ({"Ks:": {CALL: 1.0}, "Kz:": {CALL: 1.0}}, "unknown Leduc information state 'Kz:'"),
        ({"Ks:": {FOLD: 1.0}}, "gives 'fold', not legal there; legal: call, raise"),
        ({"Ks:": {CALL: 0.5, RAISE: 0.6}}, "sums to 1.1"),
        ({"Ks:": {CALL: -0.5, RAISE: 1.5}}, "is not a probability"),
        ({"K:": {CALL: 1.0}, "Ks:": {CALL: 1.0}}, "'Ks:' is given twice"),
        ({"K:": {CALL: 1.0}}, "lacks 934 of the 936"),
        (["Ks:"], "must map information states"),
    ],
)
def test_bad_policies_are_named(policy, message):
    with pytest.raises((ValueError, TypeError), match=message):
        leduc_exploitability(policy)


def expert_scorer(observations):
    """A scorer that reads the position off the observation it is shown (as the env wrote it) and gives each
    legal answer 0.9 times the expert's probability of that move: its read-out is the expert's policy,
    with 0.1 left to invalid answers, if and only if every observation is the state its key names."""
    policy = expert_policy()

    def score(observation, answers):
        observations.append(observation)
        view = LeducHoldem.read_position(observation)
        h1, h2 = view["histories"]
        key = f"{'JQK'[view['card']]}:{h1}" + ("" if view["public"] is None else f"/{'JQK'[view['public']]}:{h2}")
        facing = (h1 if view["round"] == 1 else h2).endswith("r")
        action = {"[check]": CALL, "[bet]": RAISE, "[call]": CALL, "[raise]": RAISE, "[fold]": FOLD}
        assert all(a.startswith("\\boxed{") for a in answers) and len(answers) == len(policy[key])
        assert facing == ("\\boxed{[fold]}" in answers)
        return [
            np.log(0.9 * policy[key][action[a[7:-1]]]) if policy[key][action[a[7:-1]]] else -np.inf for a in answers
        ]

    return score


@pytest.mark.parametrize("obs_format, game", [("", "LeducHoldem-v0"), ("last", "LeducHoldem-v0:reward=win")])
def test_a_model_policy_reads_back_exactly_at_every_information_state(obs_format, game):
    seen = []
    policy, invalid = leduc_policy_from_scores(expert_scorer(seen), obs_format, game)
    assert len(seen) == len(policy) == len(LEDUC_RANK_STATES) == 288
    assert invalid == pytest.approx(0.1, abs=1e-12)
    expert = expert_policy()
    assert all(policy[k] == pytest.approx(expert[k], abs=1e-12) for k in LEDUC_RANK_STATES)
    assert leduc_exploitability(policy) == pytest.approx(leduc_exploitability(expert), abs=1e-12)
    shown = "wins the game" if "win" in game else "Your reward is the number of chips"
    assert all(shown in observation for observation in seen) == (obs_format != "last")


# ---- text -------------------------------------------------------------------------------


@pytest.mark.parametrize("obs_format", ["full", "last", "first_last"])
def test_every_turn_reads_back_as_the_players_view(obs_format):
    env = spiral_arena.make("LeducHoldem-v0", obs_format=obs_format)
    agents = [RandomAgent(seed=1), RandomAgent(seed=2)]
    turns = 0
    for seed in range(150):
        env.reset(seed=seed)
        for agent in env.agent_iter():
            observation, _, done, truncated, info = env.last()
            if done or truncated:
                env.step(None)
                continue
            assert LeducHoldem.read_position(observation) == info["view"]
            turns += 1
            env.step(agents[env.possible_agents.index(agent)].act(observation, info))
    assert turns > 400


def test_env_returns_equal_openspiels_for_random_text_games():
    env = spiral_arena.make("LeducHoldem-v0")
    agents = [RandomAgent(seed=5), RandomAgent(seed=6)]
    for seed in range(200):
        returns = play_random_game(env, agents, seed=seed)
        state = env.state_
        theirs = openspiel_hand(*state.cards)
        for round_, history in enumerate(state.histories):
            if round_ == 1 and history:
                theirs.apply_action(state.public)
            for letter in history:
                theirs.apply_action("fcr".index(letter))
        assert theirs.is_terminal() and returns == tuple(theirs.returns())


def test_answers_are_the_words_a_player_would_use():
    env = spiral_arena.make("LeducHoldem-v0")
    env.reset(seed=0)
    game, state = env.game, env.state_
    assert game.legal_action_strings(state) == ["[check]", "[bet]"]
    with pytest.raises(InvalidMove, match=r"\[call\] is not a legal action now; legal: \[check\], \[bet\]"):
        game.parse(state, "[call]")
    env.step("\\boxed{[bet]}")
    assert env.game.legal_action_strings(env.state_) == ["[fold]", "[call]", "[raise]"]
    env.step("I raise. [raise]")
    assert env.game.legal_action_strings(env.state_) == ["[fold]", "[call]"]
    with pytest.raises(InvalidMove, match="not a legal action now"):
        game.parse(env.state_, "[raise]")
    env.step("[call]")
    observation = env.observe(env.agent_selection)
    assert "Round 1 is over. The public card is" in observation
    assert "Round 1: Player 0 bet, Player 1 raised, Player 0 called." in observation.splitlines()[-1]
    assert "Pot: 10 chips, you put in 5." in observation


@pytest.mark.parametrize("seat, exact", [(0, 0.5860326276), (1, 0.8134632901)])
def test_expert_wins_what_the_exact_analysis_says_against_random(seat, exact):
    """The random agent plays uniformly over the legal answers, so the exact value against it is the
    expert's policy against ``uniform_policy``; 2,000 text games land within 4 standard errors of it."""
    expert, uniform = expert_policy(), uniform_policy()
    value = leduc_policy_value(expert, uniform) if seat == 0 else -leduc_policy_value(uniform, expert)
    assert value == pytest.approx(exact, abs=1e-9)
    env = spiral_arena.make("LeducHoldem-v0")
    players = [RandomAgent(seed=seat), RandomAgent(seed=seat + 10)]
    players[seat] = ExpertAgent(seed=seat)
    chips = [play_random_game(env, players, seed=10_000 * seat + g)[seat] for g in range(2000)]
    assert abs(np.mean(chips) - exact) < 4 * np.std(chips) / np.sqrt(len(chips)), np.mean(chips)
