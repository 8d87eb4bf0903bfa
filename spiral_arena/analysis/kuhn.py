"""Exact analysis of single-hand Kuhn poker (OpenSpiel's rules), computed on our own rules layer.

A policy gives, at each of the 12 information states, the probability of the aggressive action
(bet or call); the passive action (check or fold) gets the rest. Keys are the player's card letter
followed by the hand's betting so far, ``p`` for check/fold and ``b`` for bet/call:

- ``J Q K``: player 0 opens;
- ``Jp Qp Kp``: player 1 after a check; ``Jb Qb Kb``: player 1 facing a bet;
- ``Jpb Qpb Kpb``: player 0 after check-bet.

OpenSpiel's info-state strings (card digit 0=J, 1=Q, 2=K, then the same letters, e.g. ``"1pb"``) are
accepted too. The game tree (6 deals x 5 betting sequences) is enumerated once through
``KuhnPokerState``, so these numbers check our rules as much as they measure a policy.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

from spiral_arena.analysis.cfr import Node, cfr_plus
from spiral_arena.games.kuhn_poker import BET, CALL, CARD_NAMES, DEALS, KuhnPokerState

KUHN_INFO_STATES: tuple[str, ...] = tuple(card + history for history in ("", "p", "b", "pb") for card in CARD_NAMES)
_AGGRESSIVE = (BET, CALL)
_OPENSPIEL_DIGITS = {str(rank): name for rank, name in enumerate(CARD_NAMES)}
# The two information states each player has for one card: player 0 opens and may face check-bet,
# player 1 answers a check or a bet.
_HISTORIES_OF_PLAYER = (("", "pb"), ("p", "b"))


@dataclass(frozen=True)
class _Leaf:
    """One terminal history of one deal: every decision on the way and player 0's chips."""

    deal: tuple[int, int]
    decisions: tuple[tuple[str, bool], ...]  # (info state, aggressive action taken?)
    chips0: float


def _walk(deal: tuple[int, int], actions: tuple[str, ...]) -> list[_Leaf]:
    state = KuhnPokerState(rng=None, rounds=1, reward="chips", deal=deal)
    decisions = []
    for action in actions:
        decisions.append((CARD_NAMES[deal[state.current_player]] + state.history, action in _AGGRESSIVE))
        state.apply(action)
    if state.is_terminal():
        return [_Leaf(deal, tuple(decisions), state.returns()[0])]
    return [leaf for action in state.legal_actions() for leaf in _walk(deal, (*actions, action))]


@functools.cache
def _leaves() -> tuple[_Leaf, ...]:
    """All 30 terminal histories of a single hand, from the rules layer."""
    return tuple(leaf for deal in DEALS for leaf in _walk(deal, ()))


def deal_trees() -> tuple[Node, ...]:
    """The game tree of each of the 6 equally likely deals of a single hand (``analysis.cfr``), keyed by
    our information states, from the rules layer."""

    def grow(deal: tuple[int, int], actions: tuple[str, ...]) -> Node:
        state = KuhnPokerState(rng=None, rounds=1, reward="chips", deal=deal)
        for action in actions:
            state.apply(action)
        if state.is_terminal():
            return Node(-1, payoff0=state.returns()[0])
        key = CARD_NAMES[deal[state.current_player]] + state.history
        return Node(state.current_player, key, tuple((a, grow(deal, (*actions, a))) for a in state.legal_actions()))

    return tuple(grow(deal, ()) for deal in DEALS)


def solve_cfr(iterations: int) -> dict[str, float]:
    """The average policy after ``iterations`` of CFR+ (OpenSpiel's ``CFRPlusSolver`` iteration for
    iteration), as each information state's probability of the aggressive action."""
    *_, average = cfr_plus(deal_trees(), iterations)
    return {key: sum(p for action, p in probs.items() if action in _AGGRESSIVE) for key, probs in average.items()}


def _valid_keys_text() -> str:
    return f"{', '.join(KUHN_INFO_STATES)} (or OpenSpiel's digit form 0, 1, 2, 0p, ..., 2pb with 0=J, 1=Q, 2=K)"


def _normalize(policy: Mapping[str, float]) -> dict[str, float]:
    """The policy keyed by letter info states, every value checked to be a probability."""
    if not isinstance(policy, Mapping):
        raise TypeError(
            f"a Kuhn policy must be a mapping from info state to the probability of bet/call, "
            f"got {type(policy).__name__}"
        )
    probs: dict[str, float] = {}
    for key, value in policy.items():
        name = key
        if isinstance(key, str) and key[:1] in _OPENSPIEL_DIGITS:
            name = _OPENSPIEL_DIGITS[key[0]] + key[1:]
        if name not in KUHN_INFO_STATES:
            raise ValueError(f"unknown Kuhn info state {key!r}; valid: {_valid_keys_text()}")
        if name in probs:
            raise ValueError(f"info state {name!r} is given twice (letter and digit form); give it once")
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
            raise ValueError(f"policy[{key!r}] = {value!r} is not a number; give the probability of bet/call in [0, 1]")
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"policy[{key!r}] = {value!r} is outside [0, 1]; give the probability of bet/call")
        probs[name] = float(value)
    missing = [s for s in KUHN_INFO_STATES if s not in probs]
    if missing:
        raise ValueError(
            f"the policy lacks info state(s) {', '.join(missing)}; all 12 are needed: {_valid_keys_text()}"
        )
    return probs


def _value(probs: Mapping[str, float], leaves: tuple[_Leaf, ...]) -> float:
    """Expected chips of player 0 over ``leaves`` (chance included) when both follow ``probs``."""
    total = 0.0
    for leaf in leaves:
        reach = 1.0 / len(DEALS)
        for state, aggressive in leaf.decisions:
            p = probs[state]
            reach *= p if aggressive else 1.0 - p
        total += reach * leaf.chips0
    return total


def _best_response_value(probs: Mapping[str, float], responder: int) -> float:
    """The most chips ``responder`` can expect against the other seat's part of ``probs``.

    Each card's two information states touch only the hands where the responder holds that card,
    so the best response is the best of the 4 pure plans per card, chosen card by card (the same
    optimum as searching all 64 pure strategies, and a pure plan is always among the best).
    """
    sign = 1.0 if responder == 0 else -1.0
    total = 0.0
    for rank, card in enumerate(CARD_NAMES):
        leaves = tuple(leaf for leaf in _leaves() if leaf.deal[responder] == rank)
        states = [card + history for history in _HISTORIES_OF_PLAYER[responder]]
        total += max(
            sign * _value({**probs, **dict(zip(states, plan, strict=True))}, leaves)
            for plan in itertools.product((0.0, 1.0), repeat=len(states))
        )
    return total


def kuhn_policy_value(policy: Mapping[str, float]) -> float:
    """Expected chips won by player 0 in one hand when both seats play ``policy``.

    Uniform random gives +1/8; every Nash equilibrium gives -1/18 (the second seat's edge).
    """
    return _value(_normalize(policy), _leaves())


def kuhn_exploitability(policy: Mapping[str, float]) -> float:
    """How many chips per hand a best-responding opponent wins from ``policy``, averaged over seats.

    This is OpenSpiel's exploitability, NashConv / 2: the best response value of player 0 against
    the policy's player-1 half plus that of player 1 against its player-0 half (the policy's own
    values cancel, the game being zero-sum), halved. It is 0 exactly for Nash equilibria and
    positive otherwise; 11/24 for uniform random, 1 for always check/fold. Raises ``ValueError``
    for a missing or unknown info state or a value that is not a probability.
    """
    probs = _normalize(policy)
    return (_best_response_value(probs, 0) + _best_response_value(probs, 1)) / 2.0
