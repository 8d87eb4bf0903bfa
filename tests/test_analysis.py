"""Exact Kuhn analysis: known exploitabilities, the Nash family, agreement with OpenSpiel, bad input."""

from __future__ import annotations

import math

import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as openspiel_policy
from open_spiel.python.algorithms import exploitability as openspiel_exploitability
from open_spiel.python.algorithms.expected_game_score import policy_value

from spiral_arena.analysis import KUHN_INFO_STATES, kuhn_exploitability, kuhn_policy_value

DIGIT = {"J": "0", "Q": "1", "K": "2"}


def constant(p):
    return dict.fromkeys(KUHN_INFO_STATES, p)


def nash(alpha):
    """The docs' Nash family: player 0 bluffs J with alpha, bets K with 3 alpha."""
    return {
        "J": alpha, "Q": 0.0, "K": 3 * alpha,
        "Jpb": 0.0, "Qpb": alpha + 1 / 3, "Kpb": 1.0,
        "Jb": 0.0, "Qb": 1 / 3, "Kb": 1.0,
        "Jp": 1 / 3, "Qp": 0.0, "Kp": 1.0,
    }  # fmt: skip


def to_digits(policy):
    return {DIGIT[key[0]] + key[1:]: p for key, p in policy.items()}


@pytest.fixture(scope="module")
def game():
    return pyspiel.load_game("kuhn_poker")


def tabular(game, policy):
    """OpenSpiel's TabularPolicy for our mapping: rows by OpenSpiel info state, columns [pass, bet]."""
    table = openspiel_policy.TabularPolicy(game)
    for key, p in to_digits(policy).items():
        table.action_probability_array[table.state_lookup[key]] = [1.0 - p, p]
    return table


def test_info_states_are_openspiels():
    assert len(set(KUHN_INFO_STATES)) == 12
    table = openspiel_policy.TabularPolicy(pyspiel.load_game("kuhn_poker"))
    assert set(table.state_lookup) == set(to_digits(constant(0.5)))
    state = pyspiel.load_game("kuhn_poker").new_initial_state()
    state.apply_action(0)
    state.apply_action(1)
    assert [state.action_to_string(a) for a in state.legal_actions()] == ["Pass", "Bet"]  # column order


@pytest.mark.parametrize(
    "policy, expected",
    [
        (constant(0.5), 11 / 24),
        (constant(1.0), 1 / 3),
        ({key: float(key[0] == "K") for key in KUHN_INFO_STATES}, 0.25),
        (constant(0.0), 1.0),
    ],
    ids=["uniform", "always-bet-call", "bet-call-only-K", "always-check-fold"],
)
def test_known_exploitabilities(policy, expected):
    assert kuhn_exploitability(policy) == pytest.approx(expected, abs=1e-12)
    assert kuhn_exploitability(to_digits(policy)) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("alpha", [0.0, 1 / 9, 1 / 6, 0.25, 0.3, 1 / 3])
def test_nash_family_is_unexploitable_and_worth_minus_one_eighteenth(alpha):
    assert abs(kuhn_exploitability(nash(alpha))) < 1e-12
    assert kuhn_policy_value(nash(alpha)) == pytest.approx(-1 / 18, abs=1e-12)


@pytest.mark.parametrize("key, value", [("J", 0.4), ("Qb", 0.4), ("Kp", 0.9), ("Qpb", 1.0)])
def test_leaving_the_nash_family_is_exploitable(key, value):
    assert kuhn_exploitability({**nash(0.2), key: value}) > 1e-3


def test_uniform_random_value_is_one_eighth():
    assert kuhn_policy_value(constant(0.5)) == pytest.approx(1 / 8, abs=1e-12)


def test_equals_openspiel_on_random_policies(game):
    rng = np.random.default_rng(2025)
    for i in range(300):
        probs = rng.random(12)
        if i % 3 == 0:  # pure and edge probabilities, where ties between best responses happen
            probs = rng.choice([0.0, 1.0, 0.5, rng.random()], size=12)
        policy = dict(zip(KUHN_INFO_STATES, probs.tolist(), strict=True))
        table = tabular(game, policy)
        theirs = openspiel_exploitability.exploitability(game, table)
        assert kuhn_exploitability(policy) == pytest.approx(theirs, abs=1e-9), policy
        value = policy_value(game.new_initial_state(), [table, table])[0]
        assert kuhn_policy_value(policy) == pytest.approx(value, abs=1e-9), policy


def test_accepts_numpy_numbers_and_ints():
    policy = {key: np.float64(0.5) for key in KUHN_INFO_STATES} | {"J": 1, "Q": np.float32(0.0)}
    mixed = {key: float(value) for key, value in policy.items()}
    assert kuhn_exploitability(policy) == kuhn_exploitability(mixed)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"J": 1.5}, r"policy\['J'\] = 1\.5 is outside \[0, 1\]"),
        ({"Kpb": -0.1}, r"policy\['Kpb'\] = -0\.1 is outside \[0, 1\]"),
        ({"Qb": math.inf}, r"policy\['Qb'\] = inf is outside"),
        ({"Qb": math.nan}, r"policy\['Qb'\] = nan is not a number"),
        ({"Jp": "0.5"}, r"policy\['Jp'\] = '0\.5' is not a number"),
        ({"Jp": None}, r"policy\['Jp'\] = None is not a number"),
        ({"Jp": True}, r"policy\['Jp'\] = True is not a number"),
        ({"Jx": 0.5}, r"unknown Kuhn info state 'Jx'; valid: J, Q, K, Jp, .*Kpb \(or OpenSpiel's digit form"),
        ({"3": 0.5}, r"unknown Kuhn info state '3'"),
        ({"": 0.5}, r"unknown Kuhn info state ''"),
        ({5: 0.5}, r"unknown Kuhn info state 5"),
        ({"0": 0.5}, r"info state 'J' is given twice"),
    ],
)
def test_bad_policies_are_rejected_with_the_key_named(change, message):
    with pytest.raises(ValueError, match=message):
        kuhn_exploitability({**constant(0.5), **change})
    with pytest.raises(ValueError, match=message):
        kuhn_policy_value({**constant(0.5), **change})


def test_missing_info_states_are_named():
    policy = constant(0.5)
    del policy["Qpb"], policy["Kb"]
    with pytest.raises(ValueError, match=r"lacks info state\(s\) Kb, Qpb; all 12 are needed: J, Q, K"):
        kuhn_exploitability(policy)
    with pytest.raises(ValueError, match="lacks info state"):
        kuhn_exploitability({})


def test_a_policy_must_be_a_mapping():
    with pytest.raises(TypeError, match="mapping from info state"):
        kuhn_exploitability([0.5] * 12)
