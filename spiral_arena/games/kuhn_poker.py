"""Kuhn poker over several rounds, with real chip accounting (bets and calls move chips).

Each round: both ante, each gets one of J < Q < K, one betting round on OpenSpiel's tree.
The opener alternates every round; after the last round the chip leader wins.
With ``rounds=1, reward="chips"`` this is exactly OpenSpiel's ``kuhn_poker``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from spiral_arena.core.actions import choose
from spiral_arena.core.game import TERMINAL, Message, TextGame
from spiral_arena.core.readback import latest_turn

# ---- rules ------------------------------------------------------------------------------

CHECK, BET, CALL, FOLD = "check", "bet", "call", "fold"
CARD_NAMES = ("J", "Q", "K")  # index = rank
DEALS = ((0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1))  # (player 0's card, player 1's card)
# Round history in OpenSpiel letters: p = check or fold (pass), b = bet or call.
_PASS_ACTIONS = (CHECK, FOLD)
_OPENING_ACTIONS = (CHECK, BET)
_FACING_BET_ACTIONS = (FOLD, CALL)
_DECIDED = {"pp", "bp", "bb", "pbp", "pbb"}


class RoundResult(NamedTuple):
    cards: tuple[int, int]
    history: str  # e.g. "pbb"
    opener: int
    winner: int
    won: int  # chips the winner took from the loser
    showdown: bool


class KuhnPokerState:
    def __init__(
        self,
        rng: np.random.Generator | None,
        rounds: int = 5,
        ante: int = 1,
        opener: int = 0,
        reward: str = "win",
        deal: tuple[int, int] | None = None,
    ) -> None:
        """``deal`` fixes round 1's cards (exact analysis); later rounds draw from ``rng``.

        ``reward="win"``: +1/-1 to the chip leader, 0/0 when level; ``"chips"``: net chips.
        """
        self.rng = rng
        self.reward = reward
        self.rounds = rounds
        self.ante = ante
        self.round = 1
        self.opener = opener
        self.chips = [0, 0]  # net result of each player so far
        self.results: list[RoundResult] = []
        self.history = ""
        self.cards = deal if deal is not None else self._draw()
        self.current_player = opener

    def _draw(self) -> tuple[int, int]:
        if self.rng is None:
            raise ValueError("this state needs an rng to deal cards")
        return DEALS[int(self.rng.random() * 6)]  # uniform over the 6 ordered deals

    def legal_actions(self) -> list[str]:
        if self.current_player == TERMINAL:
            return []
        return list(_FACING_BET_ACTIONS if self.history[-1:] == "b" else _OPENING_ACTIONS)

    def apply(self, action: str) -> None:
        legal = _FACING_BET_ACTIONS if self.history[-1:] == "b" else _OPENING_ACTIONS
        if self.current_player == TERMINAL or action not in legal:
            raise ValueError(f"{action!r} is not legal; legal: {self.legal_actions()}")
        self.history += "p" if action in _PASS_ACTIONS else "b"
        if self.history not in _DECIDED:
            self.current_player = 1 - self.current_player
            return
        self._settle_round()

    def _settle_round(self) -> None:
        h, opener, cards = self.history, self.opener, self.cards
        if h.endswith("bp"):  # the last player folded to a bet
            winner, showdown = self.current_player ^ 1, False
        else:
            winner, showdown = (0 if cards[0] > cards[1] else 1), True
        won = self.ante + (1 if h.endswith("bb") else 0)
        self.chips[winner] += won
        self.chips[1 - winner] -= won
        self.results.append(RoundResult(cards, h, opener, winner, won, showdown))
        if self.round == self.rounds:
            self.current_player = TERMINAL
            return
        self.round += 1
        self.opener = 1 - opener
        self.history = ""
        self.cards = self._draw()
        self.current_player = self.opener

    def is_terminal(self) -> bool:
        return self.current_player == TERMINAL

    def returns(self) -> tuple[float, float]:
        c0, c1 = self.chips
        if self.reward == "chips":
            return (float(c0), float(c1))
        return (0.0, 0.0) if c0 == c1 else ((1.0, -1.0) if c0 > c1 else (-1.0, 1.0))


# ---- text -------------------------------------------------------------------------------

PROMPT = """\
You are Player {me} in Kuhn Poker, a zero-sum card game for two players, played over {rounds} \
round{s}. The deck has three cards, ranked J (lowest), Q, K (highest).
Each round, both players put an ante of {ante} chip{ante_s} into the pot and each receives one \
private card; the third card stays hidden. Then there is one betting round:
- The opener may [check] (put nothing in) or [bet] (put 1 more chip in).
- If the opener checked, the other player may [check] (go straight to the showdown) or [bet].
- A player facing a bet may [call] (put in 1 chip to match, then showdown) or [fold] (give up the \
pot without showing the card).
At the showdown the higher card takes the whole pot. Player {first} opens round 1 and the opener \
alternates every round. Chips carry over from round to round. {goal}
On your turn, answer with exactly one legal action in square brackets, for example [check]. \
Anything else is an invalid move and loses the game."""

GOAL = {
    "win": "After the last round, the player who has won more chips wins the game; equal totals are a draw.",
    "chips": "Your reward is your net number of chips won or lost over all rounds.",
}
# What happened so far this round, by history and opener; the private card comes last, right before the
# answer, where a small model attends to it best.
_SO_FAR = {
    "": ("You open.", "You open."),
    "p": ("Player 0 checked.", "Player 1 checked."),
    "b": ("Player 0 bet.", "Player 1 bet."),
    "pb": ("You checked, then Player 1 bet.", "You checked, then Player 0 bet."),
}
# The betting so far as the turn message says it -> (history, opener); "You open." says only that the
# player to act opens.
_SO_FAR_READ = {text: (history, opener) for history, texts in _SO_FAR.items() for opener, text in enumerate(texts)}
_TURN = re.compile(
    r"Round (\d+) of (\d+), you are Player ([01])\. (.+?) Pot: \d+ chips\. "
    r"Your chips so far: ([+-]\d+)\. Your card: ([JQK])\."
)
_OPENING = {CHECK: CHECK, BET: BET}
_FACING_BET = {FOLD: FOLD, CALL: CALL}
_OPENING_ANSWERS = {f"[{a}]": a for a in _OPENING}
_FACING_BET_ANSWERS = {f"[{a}]": a for a in _FACING_BET}
_ACTION_TEXT = {CHECK: "checks", BET: "bets", CALL: "calls", FOLD: "folds"}
_MOVE_TEXT = tuple({a: f"Player {p} {verb}." for a, verb in _ACTION_TEXT.items()} for p in (0, 1))
_FIRST_PLAYER_CHOICES = (0, 1, "random")
REWARDS = tuple(GOAL)


# The texts, as functions of the few values they show: a handful recur in every game, so each is formatted
# once (the caches are bounded; 5-round games meet a few thousand turn messages in all). Messages come back
# as tuples: a cached value must not be changed by whoever reads it.


@functools.lru_cache(maxsize=16384)
def _turn_text(
    round_: int, rounds: int, player: int, history: str, opener: int, ante: int, chips: int, card: int
) -> str:
    return (
        f"Round {round_} of {rounds}, you are Player {player}. {_SO_FAR[history][opener]} "
        f"Pot: {2 * ante + history.count('b')} chips. Your chips so far: {chips:+d}. Your card: {CARD_NAMES[card]}."
    )


@functools.lru_cache(maxsize=1024)
def _deal_messages(round_: int, rounds: int, opener: int, cards: tuple[int, int]) -> tuple[Message, ...]:
    start = f"Round {round_} of {rounds} begins; Player {opener} opens. Your card: "
    return tuple((p, f"{start}{CARD_NAMES[cards[p]]}.") for p in (0, 1))


@functools.lru_cache(maxsize=16384)
def _round_result(move: str, r: RoundResult, c0: int, c1: int) -> str:
    """The move that ended round ``r``, its result and the totals after it (``c0``, ``c1``)."""
    if r.showdown:
        shown = f"Showdown: Player 0 has {CARD_NAMES[r.cards[0]]}, Player 1 has {CARD_NAMES[r.cards[1]]}."
    else:
        shown = f"Player {1 - r.winner} folded."
    return (
        f"{move} {shown} Player {r.winner} wins {r.won} chip{'s' if r.won > 1 else ''} this round. "
        f"Totals: Player 0 {c0:+d}, Player 1 {c1:+d}."
    )


@functools.lru_cache(maxsize=1024)
def _outcome_text(rounds: int, c0: int, c1: int) -> str:
    played = f"After {rounds} round{'' if rounds == 1 else 's'}"
    if c0 == c1:
        return f"{played} the chips are level ({c0:+d} each)."
    leader = 0 if c0 > c1 else 1
    return f"{played} Player {leader} leads on chips ({c0:+d} vs {c1:+d})."


class KuhnPoker(TextGame):
    name = "KuhnPoker"
    description = "Kuhn poker, J/Q/K, several rounds with real chip accounting; chip leader wins."
    default_obs_format = "full"

    def __init__(self, rounds: int = 5, reward: str = "win", ante: int = 1, first_player: int | str = 0) -> None:
        if not isinstance(rounds, int) or rounds < 1:
            raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        if not isinstance(ante, int) or ante < 1:
            raise ValueError(f"ante must be a positive integer, got {ante!r}")
        if first_player not in _FIRST_PLAYER_CHOICES:
            raise ValueError(f"first_player must be one of {_FIRST_PLAYER_CHOICES}, got {first_player!r}")
        self.rounds, self.reward, self.ante, self.first_player = rounds, reward, ante, first_player

    def new_state(self, rng: np.random.Generator) -> KuhnPokerState:
        opener = int(rng.integers(2)) if self.first_player == "random" else self.first_player
        return KuhnPokerState(rng, self.rounds, self.ante, opener, self.reward)

    def prompt(self, player: int) -> str:
        first = "0 or 1 (drawn at random)" if self.first_player == "random" else self.first_player
        return PROMPT.format(
            me=player,
            rounds=self.rounds,
            s="" if self.rounds == 1 else "s",
            ante=self.ante,
            ante_s="" if self.ante == 1 else "s",
            first=first,
            goal=GOAL[self.reward],
        )

    def turn_message(self, state: KuhnPokerState, player: int) -> str:
        return _turn_text(
            state.round, state.rounds, player, state.history, state.opener, state.ante, state.chips[player],
            state.cards[player],
        )  # fmt: skip

    def player_view(self, state: KuhnPokerState, player: int) -> dict:
        """card: own rank (0=J, 1=Q, 2=K); history: this round in p/b letters (OpenSpiel's)."""
        return {
            "card": state.cards[player],
            "history": state.history,
            "round": state.round,
            "rounds": state.rounds,
            "opener": state.opener,
            "chips": state.chips[player],
        }

    @staticmethod
    def read_position(observation: str) -> dict[str, Any] | None:
        """``player_view`` read back from the observation's latest turn message (any obs_format), or
        None when that is not a Kuhn poker turn. It reads the player's own card only: the turn
        message shows no other."""
        turn = latest_turn(observation)
        match = None if turn is None else _TURN.fullmatch(turn.message)
        if match is None or match.group(4) not in _SO_FAR_READ:
            return None
        me = int(match.group(3))
        history, opener = _SO_FAR_READ[match.group(4)]
        return {
            "card": CARD_NAMES.index(match.group(6)),
            "history": history,
            "round": int(match.group(1)),
            "rounds": int(match.group(2)),
            "opener": me if history == "" else opener,
            "chips": int(match.group(5)),
        }

    def legal_action_strings(self, state: KuhnPokerState) -> list[str]:
        if state.current_player == TERMINAL:
            return []
        return ["[fold]", "[call]"] if state.history[-1:] == "b" else ["[check]", "[bet]"]

    def parse(self, state: KuhnPokerState, text: str) -> str:
        facing = state.history[-1:] == "b"
        exact = (_FACING_BET_ANSWERS if facing else _OPENING_ANSWERS).get(text)  # "[bet]", the usual answer
        return exact if exact is not None else choose(text, _FACING_BET if facing else _OPENING)

    def move_messages(self, state: KuhnPokerState, player: int, action: str) -> Sequence[Message]:
        """The move; when it ends a round, one message per player with the result and the next deal."""
        terminal = state.current_player == TERMINAL
        if state.history and not terminal:  # the round goes on (the last one keeps its history)
            return [(None, _MOVE_TEXT[player][action])]
        c0, c1 = state.chips
        result = _round_result(_MOVE_TEXT[player][action], state.results[-1], c0, c1)
        if terminal:
            return ((None, result),)
        (_, deal0), (_, deal1) = self.start_messages(state)
        return ((0, f"{result}\n{deal0}"), (1, f"{result}\n{deal1}"))

    def start_messages(self, state: KuhnPokerState) -> Sequence[Message]:
        """Each player's private card at the start of a round."""
        return _deal_messages(state.round, state.rounds, state.opener, state.cards)

    def outcome_reason(self, state: KuhnPokerState) -> str:
        return _outcome_text(state.rounds, *state.chips)

    def render(self, state: KuhnPokerState) -> str:
        cards = " ".join(CARD_NAMES[c] for c in state.cards)
        return (
            f"Round {state.round}/{state.rounds}  cards (P0 P1): {cards}  history: {state.history or '-'}  "
            f"chips: P0 {state.chips[0]:+d}, P1 {state.chips[1]:+d}"
        )
