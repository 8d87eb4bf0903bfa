"""Exact Kuhn analysis: known exploitabilities, the Nash family, agreement with OpenSpiel, bad input; the
read-out of a policy off answer scores, pinned with scorers whose policy is known."""

from __future__ import annotations

import math
import re

import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as openspiel_policy
from open_spiel.python.algorithms import exploitability as openspiel_exploitability
from open_spiel.python.algorithms.expected_game_score import policy_value

from spiral_arena.analysis import (
    KUHN_INFO_STATES,
    kuhn_exploitability,
    kuhn_policy_from_samples,
    kuhn_policy_from_scores,
    kuhn_policy_value,
)

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


KUHN_READ_ON = [("KuhnPoker-v0", ""), ("KuhnPoker-v0:rounds=1;reward=chips", "last"), ("KuhnPoker-v0:rounds=5", "full")]


def states_by_text(game: str, obs_format: str) -> dict[str, str]:
    """Each information state's observation -> its key, as the read-outs visit them."""
    seen: list[str] = []
    kuhn_policy_from_scores(lambda observation, answers: seen.append(observation) or [0.0, 0.0], obs_format, game)
    return dict(zip(seen, KUHN_INFO_STATES, strict=True))


def aggressive(answer: str) -> bool:
    return "[bet]" in answer or "[call]" in answer


@pytest.mark.parametrize("game, obs_format", KUHN_READ_ON)
def test_the_read_out_reads_the_card_the_env_shows(game, obs_format):
    """A scorer that bets or calls with the King and checks or folds with the Jack, read only from the text
    the env shows: the read-out must give P(bet | K...) = 0.999 and P(bet | J...) = 0.001 at every state."""

    def score(observation: str, answers: list[str]) -> list[float]:
        card = re.findall(r"Your card: ([JQK])", observation)[-1]  # the latest line (a full transcript has several)
        want = {"K": 0.999, "J": 0.001, "Q": 0.5}[card]
        return [math.log(want if aggressive(a) else 1.0 - want) for a in answers]

    policy, invalid = kuhn_policy_from_scores(score, obs_format, game)
    assert set(policy) == set(KUHN_INFO_STATES)
    for key, p in policy.items():
        assert p == pytest.approx({"K": 0.999, "J": 0.001, "Q": 0.5}[key[0]], abs=1e-12), key
    assert invalid == pytest.approx(0.0, abs=1e-12)
    assert kuhn_exploitability(policy) == pytest.approx(
        kuhn_exploitability({key: {"K": 0.999, "J": 0.001, "Q": 0.5}[key[0]] for key in KUHN_INFO_STATES}), abs=1e-12
    )


@pytest.mark.parametrize("game, obs_format", KUHN_READ_ON)
def test_a_scorer_that_plays_nash_reads_as_unexploitable(game, obs_format):
    """Each of the 12 information states shows its own text; a scorer that answers each with the Nash
    family's probability (0.9 of its mass on the two legal answers, 0.1 elsewhere) reads back as exactly that
    policy, exploitability 0, and 0.1 of invalid mass."""
    state_of = states_by_text(game, obs_format)
    assert len(state_of) == 12  # a text per information state
    target = nash(1 / 6)

    def score(observation: str, answers: list[str]) -> list[float]:
        p = target[state_of[observation]]
        return [math.log(0.9 * (p if aggressive(a) else 1.0 - p) + 1e-300) for a in answers]

    policy, invalid = kuhn_policy_from_scores(score, obs_format, game)
    assert policy == pytest.approx(target, abs=1e-12)
    assert invalid == pytest.approx(0.1, abs=1e-12)
    assert kuhn_exploitability(policy) < 1e-9


@pytest.mark.parametrize("game, obs_format", KUHN_READ_ON)
def test_the_played_read_out_parses_answers_as_the_env_does(game, obs_format):
    """A sampler with a known policy that writes its moves in several ways the env accepts (and 5% of
    answers it refuses): the played read-out recovers the policy within its sampling error, counts the
    refused share, and states an error that covers the exploitability it estimates."""
    state_of, target = states_by_text(game, obs_format), nash(1 / 6)
    rng = np.random.default_rng(7)
    writings = {
        True: ["\\boxed{[bet]}", "I bet. \\boxed{bet}", "[bet]"],
        False: ["\\boxed{[check]}", "check", "[check]"],
    }

    def act(observations: list[str]) -> list[str]:
        out = []
        for observation in observations:
            key = state_of[observation]
            if rng.random() < 0.05:
                out.append("\\boxed{[raise]}")
                continue
            bet = rng.random() < target[key]
            text = str(rng.choice(writings[bet]))
            if "b" in key[1:]:  # facing a bet: call or fold
                text = text.replace("bet", "call").replace("check", "fold")
            out.append(text)
        return out

    played = kuhn_policy_from_samples(act, obs_format, game, samples=2000, seed=3)
    assert played.samples == 2000 and set(played.policy) == set(KUHN_INFO_STATES)
    for key, p in played.policy.items():
        assert p == pytest.approx(target[key], abs=4 * math.sqrt(0.25 / 1900) + 1e-9), key
    assert played.invalid == pytest.approx(0.05, abs=0.01)
    assert 0 < played.standard_error < 0.05
    assert played.exploitability < 4 * played.standard_error  # the true value is 0


def test_the_played_read_out_of_a_sure_policy_has_no_error():
    """K always bets or calls, J always checks or folds, Q never answers validly: the read-out is exact, its
    error 0, a third of the answers refused, and a state with no valid answer read as 1/2."""

    def act(observations: list[str]) -> list[str]:
        cards = [re.findall(r"Your card: ([JQK])", o)[-1] for o in observations]
        aggressive = ["calls" not in o and "bets" not in o for o in observations]
        return [
            "nonsense" if c == "Q" else ("[bet]" if a else "[call]") if c == "K" else ("[check]" if a else "[fold]")
            for c, a in zip(cards, aggressive, strict=True)
        ]

    played = kuhn_policy_from_samples(act, samples=5)
    assert played.policy == {key: {"K": 1.0, "J": 0.0, "Q": 0.5}[key[0]] for key in KUHN_INFO_STATES}
    assert played.standard_error == pytest.approx(0.0, abs=1e-12) and played.invalid == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="samples must be at least 1"):
        kuhn_policy_from_samples(act, samples=0)
    with pytest.raises(ValueError, match="act returned 1 answers for 5 observations"):
        kuhn_policy_from_samples(lambda observations: ["[bet]"], samples=5)


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
