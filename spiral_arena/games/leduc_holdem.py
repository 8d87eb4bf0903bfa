"""Leduc Hold'em: OpenSpiel's ``leduc_poker`` for two players, one hand, chips zero-sum.

Six cards (J, Q, K in two suits), an ante of 1 each, one private card each, two betting rounds with
one public card turned up between them. Player 0 acts first in both rounds. A bet or raise is 2 chips
in round 1 and 4 in round 2, at most two a round (a bet and one raise). A pair with the public card
beats any other hand, then the higher card wins, and equal ranks split the pot.

The rules use OpenSpiel's three actions: ``call`` with nothing to match is a check, ``raise`` with no
bet yet is a bet; the text names them as a player would ([check], [bet], [call], [raise], [fold]).
Suits exist only in the rules (cards are OpenSpiel's 0..5, rank = card // 2); a player reads ranks.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from spiral_arena.core.actions import choose
from spiral_arena.core.game import TERMINAL, Message, TextGame
from spiral_arena.core.readback import latest_turn

# ---- rules ------------------------------------------------------------------------------

FOLD, CALL, RAISE = "fold", "call", "raise"
RANKS = ("J", "Q", "K")
SUITS = ("s", "h")
CARDS = tuple(rank + suit for rank in RANKS for suit in SUITS)  # index = OpenSpiel's card; rank = card // 2
ANTE = 1
RAISE_SIZE = (2, 4)  # by round
MAX_RAISES = 2  # a round's bets, the first bet included
LETTER = {FOLD: "f", CALL: "c", RAISE: "r"}  # a round's betting as letters, e.g. "crc"
REWARDS = ("chips", "win")


def hand_strength(card: int, public: int) -> int:
    """Comparable strength of a private card with the public card: a pair beats every rank."""
    return 10 + card // 2 if card // 2 == public // 2 else card // 2


class LeducHoldemState:
    def __init__(
        self, rng: np.random.Generator | None, reward: str = "chips", deal: tuple[int, int, int] | None = None
    ) -> None:
        """``deal`` fixes (player 0's card, player 1's card, the public card), for exact analysis; else the
        three are drawn from ``rng`` without replacement, uniformly."""
        if deal is None:
            if rng is None:
                raise ValueError("this state needs an rng to deal cards")
            deal = tuple(int(c) for c in rng.choice(len(CARDS), size=3, replace=False))
        if len(set(deal)) != 3 or not all(0 <= c < len(CARDS) for c in deal):
            raise ValueError(f"a deal is three different cards in 0..5, got {deal!r}")
        self.cards = deal[:2]
        self.public = deal[2]  # face down until round 2
        self.reward = reward
        self.round = 1
        self.histories = ["", ""]  # the betting of rounds 1 and 2 as letters
        self.put_in = [ANTE, ANTE]  # each player's chips in the pot
        self.raises = 0  # this round's
        self.folded: int | None = None
        self.current_player = 0

    @property
    def history(self) -> str:
        """This round's betting so far."""
        return self.histories[self.round - 1]

    def facing_bet(self) -> bool:
        p = self.current_player
        return self.put_in[p] < self.put_in[1 - p]

    def legal_actions(self) -> list[str]:
        if self.current_player == TERMINAL:
            return []
        if not self.facing_bet():
            return [CALL, RAISE]
        return [FOLD, CALL, RAISE] if self.raises < MAX_RAISES else [FOLD, CALL]

    def apply(self, action: str) -> None:
        if action not in self.legal_actions():
            raise ValueError(f"{action!r} is not legal; legal: {self.legal_actions()}")
        p = self.current_player
        opened = bool(self.history)
        self.histories[self.round - 1] += LETTER[action]
        if action == FOLD:
            self.folded, self.current_player = p, TERMINAL
        elif action == RAISE:
            self.put_in[p] = self.put_in[1 - p] + RAISE_SIZE[self.round - 1]
            self.raises += 1
            self.current_player = 1 - p
        else:
            self.put_in[p] = self.put_in[1 - p]
            if not opened:  # a check that opens the round
                self.current_player = 1 - p
            elif self.round == 1:  # the call (or second check) that closes round 1
                self.round, self.raises, self.current_player = 2, 0, 0
            else:
                self.current_player = TERMINAL

    def is_terminal(self) -> bool:
        return self.current_player == TERMINAL

    def winner(self) -> int | None:
        """The player who takes the pot, None for a split (or a hand still going)."""
        if self.folded is not None:
            return 1 - self.folded
        if not self.is_terminal():
            return None
        s0, s1 = (hand_strength(c, self.public) for c in self.cards)
        return None if s0 == s1 else (0 if s0 > s1 else 1)

    @property
    def chips(self) -> tuple[int, int]:
        """Each player's net chips once the hand is over (0, 0 before); the leaderboard's payoff, as Kuhn's."""
        winner = self.winner()
        if winner is None:
            return (0, 0)
        won = self.put_in[1 - winner]
        return (won, -won) if winner == 0 else (-won, won)

    def returns(self) -> tuple[float, float]:
        c0, c1 = self.chips
        if self.reward == "chips":
            return (float(c0), float(c1))
        return (0.0, 0.0) if c0 == 0 else ((1.0, -1.0) if c0 > 0 else (-1.0, 1.0))


# ---- text -------------------------------------------------------------------------------

PROMPT = """\
You are Player {me} in Leduc Hold'em, a zero-sum poker game for two players, one hand. The deck has \
six cards: two each of J (lowest), Q and K (highest); suits do not matter.
Both players put an ante of 1 chip into the pot and each receives one private card. There are two \
betting rounds, and Player 0 acts first in both. After the first round one public card is turned face up.
In a betting round, a player who faces no bet may [check] (put nothing in) or [bet] (2 chips in round 1, \
4 chips in round 2). A player facing a bet may [fold] (give up the pot), [call] (match the bet) or \
[raise] (match it and bet the same amount again); a round has at most two bets, a bet and one raise. A \
round ends when a bet is called or both players check.
At the showdown, a card that pairs the public card wins; otherwise the higher card wins, and equal \
cards split the pot. {goal}
On your turn, answer with exactly one legal action in square brackets, for example [check]. \
Anything else is an invalid move and loses the game."""

GOAL = {
    "chips": "Your reward is the number of chips you win or lose.",
    "win": "The player who wins chips wins the game; a split pot is a draw.",
}
# The answers a player may give, by its situation: no bet to face, a bet with a raise left, a capped bet.
_ANSWERS = {
    "open": {"check": CALL, "bet": RAISE},
    "facing": {"fold": FOLD, "call": CALL, "raise": RAISE},
    "capped": {"fold": FOLD, "call": CALL},
}
_LEGAL_TEXT = {kind: [f"[{word}]" for word in words] for kind, words in _ANSWERS.items()}
_PRESENT = {"checked": "checks", "called": "calls", "bet": "bets", "raised": "raises", "folded": "folds"}
_TURN = re.compile(
    r"Round ([12]) of 2, you are Player ([01])\. (?:Round 1: (.+?)\. Public card: ([JQK])\. )?"
    r"(.+?) Pot: \d+ chips, you put in \d+\. Your card: ([JQK])\."
)


def _verbs(history: str) -> list[str]:
    """The words of a round's betting letters: c is checked or called, r bet or raised."""
    words, bets = [], 0
    for letter in history:
        if letter == "r":
            words.append("raised" if bets else "bet")
            bets += 1
        else:
            words.append("folded" if letter == "f" else ("called" if bets else "checked"))
    return words


@functools.lru_cache(maxsize=512)
def betting_text(history: str) -> str:
    """A round's betting as sentences, Player 0 acting first: ``"Player 0 checked, Player 1 bet"``."""
    return ", ".join(f"Player {i % 2} {verb}" for i, verb in enumerate(_verbs(history)))


@functools.lru_cache(maxsize=512)
def _history_of(text: str) -> str | None:
    """``betting_text`` read back, or None."""
    letters = {"checked": "c", "called": "c", "bet": "r", "raised": "r", "folded": "f"}
    history = ""
    for i, part in enumerate(text.split(", ")):
        player, _, verb = part.removeprefix("Player ").partition(" ")
        if player != str(i % 2) or verb not in letters:
            return None
        history += letters[verb]
    return history if betting_text(history) == text else None


@functools.lru_cache(maxsize=4096)
def _turn_text(round_: int, player: int, h1: str, h2: str, public: str, pot: int, mine: int, card: str) -> str:
    current = h1 if round_ == 1 else h2
    so_far = f"Betting so far: {betting_text(current)}." if current else "You open the betting."
    earlier = f"Round 1: {betting_text(h1)}. Public card: {public}. " if round_ == 2 else ""
    return (
        f"Round {round_} of 2, you are Player {player}. {earlier}{so_far} "
        f"Pot: {pot} chips, you put in {mine}. Your card: {card}."
    )


class LeducHoldem(TextGame):
    name = "LeducHoldem"
    description = "Leduc Hold'em (OpenSpiel's rules): J/Q/K x2, two betting rounds, a public card; chips."
    default_obs_format = "full"

    def __init__(self, reward: str = "chips") -> None:
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        self.reward = reward

    def new_state(self, rng: np.random.Generator | None) -> LeducHoldemState:
        return LeducHoldemState(rng, self.reward)

    def prompt(self, player: int) -> str:
        return PROMPT.format(me=player, goal=GOAL[self.reward])

    def start_messages(self, state: LeducHoldemState) -> Sequence[Message]:
        return tuple((p, f"The hand begins; Player 0 acts first. Your card: {RANKS[state.cards[p] // 2]}.")
                     for p in (0, 1))  # fmt: skip

    def turn_message(self, state: LeducHoldemState, player: int) -> str:
        h1, h2 = state.histories
        public = RANKS[state.public // 2] if state.round == 2 else ""
        return _turn_text(
            state.round,
            player,
            h1,
            h2,
            public,
            sum(state.put_in),
            state.put_in[player],
            RANKS[state.cards[player] // 2],
        )

    def player_view(self, state: LeducHoldemState, player: int) -> dict[str, Any]:
        """card / public: ranks (0=J, 1=Q, 2=K; public None in round 1), as the text shows them;
        histories: each round's betting so far in letters (c check/call, r bet/raise)."""
        return {
            "card": state.cards[player] // 2,
            "public": state.public // 2 if state.round == 2 else None,
            "round": state.round,
            "histories": tuple(state.histories),
        }

    @staticmethod
    def read_position(observation: str) -> dict[str, Any] | None:
        """``player_view`` read back from the observation's latest turn message, or None when that is not
        a Leduc Hold'em turn."""
        turn = latest_turn(observation)
        match = None if turn is None else _TURN.fullmatch(turn.message)
        if match is None:
            return None
        round_, _, r1, public, now, card = match.groups()
        current = "" if now == "You open the betting." else _history_of(now.removeprefix("Betting so far: ")[:-1])
        h1 = current if round_ == "1" else _history_of(r1)
        if current is None or h1 is None:
            return None
        return {
            "card": RANKS.index(card),
            "public": None if public is None else RANKS.index(public),
            "round": int(round_),
            "histories": (h1, "") if round_ == "1" else (h1, current),
        }

    @staticmethod
    def _situation(state: LeducHoldemState) -> str:
        """Which of ``_ANSWERS`` the player to act chooses from."""
        if not state.facing_bet():
            return "open"
        return "facing" if state.raises < MAX_RAISES else "capped"

    def legal_action_strings(self, state: LeducHoldemState) -> list[str]:
        return [] if state.current_player == TERMINAL else list(_LEGAL_TEXT[self._situation(state)])

    def parse(self, state: LeducHoldemState, text: str) -> str:
        return choose(text, _ANSWERS[self._situation(state)])

    def move_messages(self, state: LeducHoldemState, player: int, action: str) -> Sequence[Message]:
        """The move in words, and after round 1's last move the public card (the result is the env's
        final message, ``outcome_reason``)."""
        history = state.histories[1] or state.histories[0]
        move = f"Player {player} {_PRESENT[_verbs(history)[-1]]}."
        if state.round == 2 and not state.histories[1] and not state.is_terminal():
            return ((None, f"{move} Round 1 is over. The public card is {RANKS[state.public // 2]}."),)
        return ((None, move),)

    def outcome_reason(self, state: LeducHoldemState) -> str:
        if state.folded is not None:
            return f"Player {state.folded} folded; Player {1 - state.folded} wins {state.put_in[state.folded]} chips."
        c0, c1 = (RANKS[c // 2] for c in state.cards)
        shown = f"Showdown: Player 0 has {c0}, Player 1 has {c1}, the public card is {RANKS[state.public // 2]}."
        winner = state.winner()
        if winner is None:
            return f"{shown} Equal hands split the pot."
        return f"{shown} Player {winner} wins {state.put_in[1 - winner]} chips."

    def render(self, state: LeducHoldemState) -> str:
        public = CARDS[state.public] if state.round == 2 or state.is_terminal() else "--"
        return (
            f"round {state.round}  cards (P0 P1): {CARDS[state.cards[0]]} {CARDS[state.cards[1]]}  public: {public}  "
            f"betting: {state.histories[0] or '-'}/{state.histories[1] or '-'}  pot: P0 {state.put_in[0]}, "
            f"P1 {state.put_in[1]}"
        )
