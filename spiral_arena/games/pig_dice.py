"""Pig: roll a die to build a turn total, hold to bank it; a 1 loses the turn total.

The first player to bank ``target`` points wins. The game also ends after ``max_turns``
player-turns (turns, not actions); then the higher score wins and equal scores draw.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from spiral_arena.core.actions import choose
from spiral_arena.core.game import TERMINAL, Message, TextGame, winner_returns
from spiral_arena.core.readback import latest_turn

# ---- rules ------------------------------------------------------------------------------

ROLL, HOLD = "roll", "hold"
BUST_FACE = 1


class PigDiceState:
    def __init__(self, rng: np.random.Generator, target: int = 50, max_turns: int = 50) -> None:
        self.rng = rng
        self.target = target
        self.max_turns = max_turns
        self.scores = [0, 0]
        self.turn_total = 0
        self.turns_played = 0  # finished player-turns
        self.current_player = 0
        self.winner: int | None = None
        # What the last action did, for the text layer: the face rolled (None after a hold) and
        # the points it concerned (new turn total, points lost on a bust, or points banked).
        self.last_roll: int | None = None
        self.last_points = 0

    def legal_actions(self) -> list[str]:
        return [] if self.current_player == TERMINAL else [ROLL, HOLD]

    def apply(self, action: str) -> None:
        player = self.current_player
        if action not in self.legal_actions():
            raise ValueError(f"{action!r} is not legal; legal: {self.legal_actions()}")
        if action == HOLD:
            self.last_roll, self.last_points = None, self.turn_total
            self.scores[player] += self.turn_total
            self._end_turn(player)
            return
        face = int(self.rng.integers(1, 7))
        self.last_roll = face
        if face == BUST_FACE:
            self.last_points = self.turn_total
            self._end_turn(player)
        else:
            self.turn_total += face
            self.last_points = self.turn_total

    def _end_turn(self, player: int) -> None:
        """Winning needs banked points, so both end conditions are checked only here."""
        self.turn_total = 0
        self.turns_played += 1
        if self.scores[player] >= self.target:
            self.winner = player
            self.current_player = TERMINAL
        elif self.turns_played >= self.max_turns:
            s0, s1 = self.scores
            self.winner = None if s0 == s1 else (0 if s0 > s1 else 1)
            self.current_player = TERMINAL
        else:
            self.current_player = 1 - player

    def is_terminal(self) -> bool:
        return self.current_player == TERMINAL

    def returns(self) -> tuple[float, float]:
        return winner_returns(self.winner)


# ---- text -------------------------------------------------------------------------------

_OPTIONS = {"roll": ROLL, "r": ROLL, "hold": HOLD, "h": HOLD}
_LEGAL_STRINGS = ["[roll]", "[hold]"]
_TURN = re.compile(
    r"Turn (\d+) of (\d+) \(both players' turns counted\)\. Scores: you (\d+), opponent (\d+) "
    r"\(target (\d+)\)\. Your turn total: (\d+)\."
)

PROMPT = """\
You are Player {me} in Pig, a zero-sum dice game for two players. Player 0 takes the first turn, \
then turns alternate.
On your turn you roll a six-sided die as many times as you like:
- [roll] (or [r]): roll the die. A 2, 3, 4, 5 or 6 is added to your turn total and you choose \
again. A 1 wipes out your turn total and ends your turn.
- [hold] (or [h]): add your turn total to your score and end your turn (holding with a turn \
total of 0 is allowed).
The first player whose score reaches {target} or more when a turn ends wins. The game also stops \
after {max_turns} turns in all (both players' turns counted, each turn however many rolls it has); \
then the higher score wins and equal scores are a draw.
On your turn, answer with one action in square brackets. Anything else is an invalid move and \
loses the game."""


def _positive_int(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


class PigDice(TextGame):
    name = "PigDice"
    description = "Pig dice: roll to build a turn total, hold to bank it, a 1 busts; first to the target wins."
    default_obs_format = "full"

    def __init__(self, target: int = 50, max_turns: int = 50) -> None:
        self.target = _positive_int("target", target)
        self.max_turns = _positive_int("max_turns", max_turns)

    def new_state(self, rng: np.random.Generator) -> PigDiceState:
        return PigDiceState(rng, self.target, self.max_turns)

    def prompt(self, player: int) -> str:
        return PROMPT.format(me=player, target=self.target, max_turns=self.max_turns)

    def turn_message(self, state: PigDiceState, player: int) -> str:
        return (
            f"Turn {state.turns_played + 1} of {state.max_turns} (both players' turns counted). "
            f"Scores: you {state.scores[player]}, opponent {state.scores[1 - player]} (target {state.target}). "
            f"Your turn total: {state.turn_total}."
        )

    def player_view(self, state: PigDiceState, player: int) -> dict:
        """Scores are banked points; turn_total is what a hold would add now; turns_left counts
        player-turns still to be played, this one included."""
        return {
            "my_score": state.scores[player],
            "opponent_score": state.scores[1 - player],
            "turn_total": state.turn_total,
            "turns_left": state.max_turns - state.turns_played,
            "target": state.target,
        }

    @staticmethod
    def read_position(observation: str) -> dict[str, Any] | None:
        """``player_view`` read back from the observation's latest turn message (any obs_format), or
        None when that is not a Pig turn."""
        turn = latest_turn(observation)
        match = None if turn is None else _TURN.fullmatch(turn.message)
        if match is None:
            return None
        played, max_turns, mine, theirs, target, turn_total = (int(g) for g in match.groups())
        return {
            "my_score": mine,
            "opponent_score": theirs,
            "turn_total": turn_total,
            "turns_left": max_turns - (played - 1),
            "target": target,
        }

    def legal_action_strings(self, state: PigDiceState) -> list[str]:
        return [f"[{a}]" for a in state.legal_actions()]

    def parse(self, state: PigDiceState, text: str) -> str:
        return choose(text, _OPTIONS, _LEGAL_STRINGS)

    def move_messages(self, state: PigDiceState, player: int, action: str) -> list[Message]:
        if action == HOLD:
            text = f"Player {player} holds and banks {state.last_points} points; score now {state.scores[player]}."
        elif state.last_roll == BUST_FACE:
            text = f"Player {player} rolls a 1 and loses the turn total of {state.last_points}."
        else:
            text = f"Player {player} rolls a {state.last_roll}; turn total {state.last_points}."
        return [(None, text)]

    def outcome_reason(self, state: PigDiceState) -> str:
        s0, s1 = state.scores
        if max(s0, s1) >= state.target:
            return f"Player {state.winner} reached the target of {state.target} (scores {s0} to {s1})."
        played = f"All {state.max_turns} turns are played"
        if state.winner is None:
            return f"{played} and the scores are level at {s0}: a draw."
        return f"{played}; Player {state.winner} has the higher score ({s0} to {s1})."

    def render(self, state: PigDiceState) -> str:
        to_act = "-" if state.is_terminal() else f"P{state.current_player}"
        return (
            f"turn {state.turns_played}/{state.max_turns}  scores: P0 {state.scores[0]}, P1 {state.scores[1]}  "
            f"to act: {to_act}  turn total: {state.turn_total}  target: {state.target}"
        )
