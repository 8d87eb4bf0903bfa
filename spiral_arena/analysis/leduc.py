"""Exact analysis of Leduc Hold'em (OpenSpiel's ``leduc_poker``), computed on our own rules layer.

A policy gives, at each information state, a probability for each legal action, named as the rules
name them: ``fold``, ``call`` (a check when there is nothing to match) and ``raise`` (a bet when nobody
has bet). Information states are keyed ``<card>:<round 1 betting>`` in round 1 and
``<card>:<round 1 betting>/<public card>:<round 2 betting>`` in round 2, cards as rank and suit
(``Js Jh Qs Qh Ks Kh``, OpenSpiel's cards 0..5) and betting as letters (``c`` check or call, ``r`` bet or
raise): ``Ks:`` opens the hand holding the king of spades, ``Qh:crc/Js:r`` faces a bet in round 2. There
are 468 per player, 936 in all, exactly OpenSpiel's. Three other spellings are read too: a rank without a
suit (``K:cr``, ``Q:crc/J:r``) stands for every suited state it covers, which is how a player who reads
ranks only (our text) plays; and OpenSpiel's own information-state strings.

The betting tree is walked once through ``LeducHoldemState``, so these numbers check our rules as much as
they measure a policy.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass

from spiral_arena.analysis.cfr import Node, cfr_plus
from spiral_arena.games.leduc_holdem import CALL, CARDS, FOLD, RAISE, RANKS, SUITS, LeducHoldemState, hand_strength

ACTIONS = (FOLD, CALL, RAISE)
_OPENSPIEL_ACTION = {"0": "f", "1": "c", "2": "r"}  # OpenSpiel's Fold, Call, Raise in its betting strings
_OPENSPIEL_KEY = re.compile(
    r"\[Observer: ([01])\]\[Private: ([0-5])\]\[Round [12]\]\[Player: [01]\]\[Pot: \d+\]"
    r"\[Money: \d+ \d+\](?:\[Public: ([0-5])\])?\[Round1: ([0-2 ]*)\]\[Round2: ([0-2 ]*)\]"
)


@dataclass(frozen=True)
class _Node:
    """A point of the betting tree (the same for every deal): who acts and what each action leads to,
    or, at the end, who folded and the chips each player put in."""

    histories: tuple[str, str]
    round: int
    player: int  # to act; -1 at the end
    children: tuple[tuple[str, _Node], ...] = ()
    folded: int | None = None
    put_in: tuple[int, int] = (0, 0)


def _grow(actions: tuple[str, ...]) -> _Node:
    state = LeducHoldemState(rng=None, deal=(0, 2, 4))  # any deal: the betting does not depend on the cards
    for action in actions:
        state.apply(action)
    histories = (state.histories[0], state.histories[1])
    if state.is_terminal():
        return _Node(histories, state.round, -1, folded=state.folded, put_in=tuple(state.put_in))
    children = tuple((a, _grow((*actions, a))) for a in state.legal_actions())
    return _Node(histories, state.round, state.current_player, children)


@functools.cache
def _tree() -> _Node:
    return _grow(())


def info_key(card: int, histories: tuple[str, str], public: int | None) -> str:
    """The key of the information state of a player holding ``card`` (0..5) after ``histories``, with
    ``public`` the public card once it is up (round 2)."""
    head = f"{CARDS[card]}:{histories[0]}"
    return head if public is None else f"{head}/{CARDS[public]}:{histories[1]}"


def state_key(state: LeducHoldemState, player: int) -> str:
    """The key of ``player``'s information state in ``state``."""
    return info_key(
        state.cards[player], (state.histories[0], state.histories[1]), state.public if state.round == 2 else None
    )


def _information_states() -> dict[str, tuple[str, ...]]:
    """Every information state's key -> the legal actions there, in the tree's depth-first order."""
    legal: dict[str, tuple[str, ...]] = {}

    def walk(node: _Node) -> None:
        if node.player < 0:
            return
        actions = tuple(action for action, _ in node.children)
        for card in range(len(CARDS)):
            for public in [None] if node.round == 1 else [p for p in range(len(CARDS)) if p != card]:
                legal[info_key(card, node.histories, public)] = actions
        for _, child in node.children:
            walk(child)

    walk(_tree())
    return legal


_LEGAL = _information_states()
LEDUC_INFO_STATES: tuple[str, ...] = tuple(_LEGAL)


def expand_key(key: str) -> list[str]:
    """The suited keys a key stands for: itself, each suit of a rank-only card, or OpenSpiel's string's."""
    if (match := _OPENSPIEL_KEY.fullmatch(key)) is not None:
        _, private, public, round1, round2 = match.groups()
        h1 = "".join(_OPENSPIEL_ACTION[a] for a in round1.split())
        h2 = "".join(_OPENSPIEL_ACTION[a] for a in round2.split())
        return [info_key(int(private), (h1, h2), None if public is None else int(public))]
    parts = [part.partition(":") for part in key.split("/")]
    if len(parts) > 2 or any(not sep for _, sep, _ in parts):
        return []
    found = []
    for cards in itertools.product(*(_suited(card) for card, _, _ in parts)):
        if len(set(cards)) == len(cards):
            found.append("/".join(f"{c}:{h}" for c, (_, _, h) in zip(cards, parts, strict=True)))
    return found


def _suited(card: str) -> list[str]:
    """The suited cards a key's card names: itself, or both suits of a bare rank (none for anything else)."""
    if card in CARDS:
        return [card]
    return [card + suit for suit in SUITS] if card in RANKS else []


def _valid_keys_text() -> str:
    return (
        "'<card>:<round 1 betting>' or '<card>:<round 1 betting>/<public card>:<round 2 betting>' with cards "
        "Js Jh Qs Qh Ks Kh (or a bare rank for both suits) and betting letters c and r, e.g. 'Ks:', 'Qh:crc/Js:r'; "
        "or OpenSpiel's information-state strings"
    )


def normalize(policy: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """The policy at every suited information state, each a distribution over that state's legal actions
    (an action left out gets 0), checked and rescaled to sum to exactly 1."""
    if not isinstance(policy, Mapping):
        raise TypeError(
            f"a Leduc policy must map information states to {{action: probability}}, got {type(policy).__name__}"
        )
    probs: dict[str, dict[str, float]] = {}
    for key, dist in policy.items():
        keys = [k for k in expand_key(key) if k in _LEGAL] if isinstance(key, str) else []
        if not keys:
            raise ValueError(f"unknown Leduc information state {key!r}; valid: {_valid_keys_text()}")
        if not isinstance(dist, Mapping):
            raise ValueError(f"policy[{key!r}] must map actions ({', '.join(_LEGAL[keys[0]])}) to probabilities")
        legal = _LEGAL[keys[0]]
        for action, value in dist.items():
            if action not in legal:
                raise ValueError(f"policy[{key!r}] gives {action!r}, not legal there; legal: {', '.join(legal)}")
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value) or value < 0:
                raise ValueError(f"policy[{key!r}][{action!r}] = {value!r} is not a probability")
        total = float(sum(dist.values()))
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"policy[{key!r}] sums to {total!r}, not 1")
        for k in keys:
            if k in probs:
                raise ValueError(f"information state {k!r} is given twice (by {key!r} and another key); give it once")
            probs[k] = {a: float(dist.get(a, 0.0)) / total for a in legal}
    missing = [k for k in LEDUC_INFO_STATES if k not in probs]
    if missing:
        raise ValueError(
            f"the policy lacks {len(missing)} of the {len(LEDUC_INFO_STATES)} information states (e.g. "
            f"{', '.join(missing[:3])}); keys: {_valid_keys_text()}"
        )
    return probs


def uniform_policy() -> dict[str, dict[str, float]]:
    """Every legal action equally likely at every information state."""
    return {key: {a: 1.0 / len(legal) for a in legal} for key, legal in _LEGAL.items()}


def _showdown(card: int, other: int, public: int) -> int:
    """+1 if ``card`` beats ``other`` with ``public`` up, -1 if it loses, 0 for a split."""
    mine, theirs = hand_strength(card, public), hand_strength(other, public)
    return (mine > theirs) - (mine < theirs)


def _best_response(probs: Mapping[str, Mapping[str, float]], responder: int) -> float:
    """The most chips ``responder`` can expect in one hand against the other seat's part of ``probs``.

    For each of the responder's cards the betting tree is walked once with, for every card the opponent
    may hold, the chance of the deal times the opponent's reach so far; each of the responder's
    information states is one node of that walk, so choosing the best action node by node is a best
    response (perfect recall)."""
    other = 1 - responder

    def value(node: _Node, card: int, public: int | None, weights: list[float]) -> float:
        if node.player < 0:
            if node.folded is not None:
                sign = 1.0 if node.folded == other else -1.0
                return sign * node.put_in[node.folded] * sum(weights)
            stake = node.put_in[other]
            return sum(w * stake * _showdown(card, o, public) for o, w in enumerate(weights) if w)
        if node.round == 2 and public is None:  # round 1 is over: the public card is dealt
            total = 0.0
            for up in range(len(CARDS)):
                if up != card:
                    dealt = [0.0 if o == up else w / 4.0 for o, w in enumerate(weights)]
                    total += value(node, card, up, dealt)
            return total
        if node.player == responder:
            return max(value(child, card, public, weights) for _, child in node.children)
        total = 0.0
        for action, child in node.children:
            reach = [
                w * probs[info_key(o, node.histories, public)][action] if w else 0.0 for o, w in enumerate(weights)
            ]
            total += value(child, card, public, reach)
        return total

    return sum(
        value(_tree(), card, None, [0.0 if o == card else 1.0 / 30.0 for o in range(len(CARDS))])
        for card in range(len(CARDS))
    )


def leduc_policy_value(
    policy: Mapping[str, Mapping[str, float]], opponent: Mapping[str, Mapping[str, float]] | None = None
) -> float:
    """Expected chips won by player 0 in one hand when player 0 plays ``policy`` and player 1 plays
    ``opponent`` (by default ``policy`` too)."""
    seats = (normalize(policy), normalize(policy if opponent is None else opponent))

    def value(node: _Node, deal: tuple[int, int, int], reach: float) -> float:
        if node.player < 0:
            winner = (1 - node.folded) if node.folded is not None else None
            if winner is None:
                result = _showdown(deal[0], deal[1], deal[2])
                return reach * node.put_in[1] * result
            return reach * node.put_in[1 - winner] * (1.0 if winner == 0 else -1.0)
        public = deal[2] if node.round == 2 else None
        dist = seats[node.player][info_key(deal[node.player], node.histories, public)]
        return sum(value(child, deal, reach * dist[a]) for a, child in node.children if dist[a])

    deals = list(itertools.permutations(range(len(CARDS)), 3))
    return sum(value(_tree(), deal, 1.0 / len(deals)) for deal in deals)


def leduc_exploitability(policy: Mapping[str, Mapping[str, float]]) -> float:
    """How many chips per hand a best-responding opponent wins from ``policy``, averaged over seats:
    OpenSpiel's exploitability (NashConv / 2; the policy's own values cancel, the game being zero-sum).
    0 exactly at a Nash equilibrium. Raises ``ValueError`` for a missing or unknown information state, an
    illegal action or a distribution that is not one."""
    probs = normalize(policy)
    return (_best_response(probs, 0) + _best_response(probs, 1)) / 2.0


def rank_key(key: str) -> str:
    """A suited key with its suits dropped (``Qh:crc/Js:r`` -> ``Q:crc/J:r``): the state as our text shows
    it, where a player reads ranks only."""
    return "/".join(part[0] + part[2:] for part in key.split("/"))


LEDUC_RANK_STATES: tuple[str, ...] = tuple(dict.fromkeys(rank_key(key) for key in LEDUC_INFO_STATES))


def deal_trees() -> tuple[Node, ...]:
    """The game tree of each of the 120 equally likely deals (two private cards, then the public one), its
    information states keyed by rank only (``rank_key``: the 288 rank states are an exact abstraction of
    the 936, as suits decide nothing in Leduc)."""

    def grow(node: _Node, deal: tuple[int, int, int]) -> Node:
        if node.player < 0:
            if node.folded is not None:
                return Node(-1, payoff0=node.put_in[node.folded] * (1.0 if node.folded == 1 else -1.0))
            return Node(-1, payoff0=node.put_in[0] * _showdown(deal[0], deal[1], deal[2]))
        key = rank_key(info_key(deal[node.player], node.histories, deal[2] if node.round == 2 else None))
        return Node(node.player, key, tuple((a, grow(child, deal)) for a, child in node.children))

    return tuple(grow(_tree(), deal) for deal in itertools.permutations(range(len(CARDS)), 3))


def solve_cfr(iterations: int) -> dict[str, dict[str, float]]:
    """An approximate Nash equilibrium: the average policy after ``iterations`` of CFR+ (``analysis.cfr``,
    OpenSpiel's ``CFRPlusSolver`` iteration for iteration) on the rank-only information states our players
    read; ``leduc_exploitability`` of the result says how close it is."""
    *_, average = cfr_plus(deal_trees(), iterations)
    return average
