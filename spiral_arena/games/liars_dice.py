"""Liar's Dice for two: hidden dice, rising bids on the whole table, a call decides who loses a die.

A bid (q, f) claims that at least q of all dice in play show face f (1s are ordinary, not wild).
A new bid raises the quantity (any face) or keeps it and raises the face; q never exceeds the dice
in play. A call counts the face: fewer than q and the bidder loses a die, otherwise the caller
does. Everyone re-rolls and the loser opens the next round. Whoever runs out of dice loses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from spiral_arena.core.actions import InvalidMove, excerpt, extract_token
from spiral_arena.core.game import TERMINAL, Message, TextGame, winner_returns
from spiral_arena.core.readback import PositionUnreadable, latest_turn

# ---- rules ------------------------------------------------------------------------------

FACES = 6
CALL = "call"
Bid = tuple[int, int]  # (quantity, face)


@dataclass(frozen=True)
class CallResult:
    """Everything a call settled, dice included (they are shown to both players at that point)."""

    caller: int
    bidder: int
    bid: Bid
    count: int  # dice showing the bid's face
    loser: int
    dice: tuple[tuple[int, ...], tuple[int, ...]]


class LiarsDiceState:
    def __init__(self, rng: np.random.Generator, dice: int = 5) -> None:
        self.rng = rng
        self.counts = [dice, dice]
        self.round = 1
        self.opener = 0
        self.current_player = 0
        self.bids: list[tuple[int, Bid]] = []  # (bidder, bid) of the current round, in order
        self.calls: list[CallResult] = []
        self.winner: int | None = None
        self.dice: list[tuple[int, ...]] = []
        self._roll()

    def _roll(self) -> None:
        self.dice = [tuple(sorted(int(d) for d in self.rng.integers(1, FACES + 1, size=n))) for n in self.counts]

    @property
    def bid(self) -> Bid | None:
        return self.bids[-1][1] if self.bids else None

    @property
    def dice_in_play(self) -> int:
        return sum(self.counts)

    def bid_error(self, bid: Bid) -> str | None:
        """Why ``bid`` may not be made now, or None if it may."""
        q, f = bid
        if q < 1:
            return f"a bid needs a quantity of at least 1, got {q}"
        if not 1 <= f <= FACES:
            return f"face {f} does not exist; faces are 1 to {FACES}"
        if q > self.dice_in_play:
            return f"quantity {q} is more than the {self.dice_in_play} dice in play"
        current = self.bid
        if current is not None and (q < current[0] or (q == current[0] and f <= current[1])):
            cq, cf = current
            return f"{q} x {f} does not beat {cq} x {cf}: raise the quantity, or bid {cq} with a face above {cf}"
        return None

    def legal_actions(self) -> list[Bid | str]:
        if self.current_player == TERMINAL:
            return []
        current = self.bid
        q0, f0 = current if current is not None else (1, 0)
        bids: list[Bid | str] = [(q0, f) for f in range(f0 + 1, FACES + 1)]
        bids += [(q, f) for q in range(q0 + 1, self.dice_in_play + 1) for f in range(1, FACES + 1)]
        return bids + [CALL] if current is not None else bids

    def apply(self, action: Bid | str) -> None:
        if action not in self.legal_actions():
            reason = self.bid_error(action) if isinstance(action, tuple) else "there is no bid to call"
            raise ValueError(f"{action!r} is not legal now: {reason or 'the game is over'}")
        player = self.current_player
        if action == CALL:
            self._settle_call(player)
        else:
            self.bids.append((player, action))
            self.current_player = 1 - player

    def _settle_call(self, caller: int) -> None:
        bidder, (q, f) = self.bids[-1]
        count = sum(d == f for hand in self.dice for d in hand)
        loser = bidder if count < q else caller  # an exact count goes against the caller
        self.calls.append(CallResult(caller, bidder, (q, f), count, loser, (self.dice[0], self.dice[1])))
        self.counts[loser] -= 1
        if self.counts[loser] == 0:
            self.winner = 1 - loser
            self.current_player = TERMINAL
            return
        self.round += 1
        self.bids = []
        self.opener = self.current_player = loser
        self._roll()

    def is_terminal(self) -> bool:
        return self.current_player == TERMINAL

    def returns(self) -> tuple[float, float]:
        return winner_returns(self.winner)


# ---- text -------------------------------------------------------------------------------

# A normalised token (lower case, single spaces): "bid: 3, 4", "bid 3 4", "bid:3,4".
_BID = re.compile(r"^bid ?:? ?(\d{1,6}) ?[, ] ?(\d{1,6})$")
ACTION_HELP = "write [Bid: quantity, face], e.g. [Bid: 2, 5], or [Call]"
_TURN = re.compile(
    r"Round (\d+)\. Your dice: (\d+(?: \d+)*)\. Your opponent has (\d+) dice; (\d+) dice are in play\. "
    r"(?:No bid yet this round: open it with a bid\.|Bids this round \(quantity x face\): (.+)\. "
    r"Current bid: Player ([01]) claims at least (\d+) (?:die shows|dice show) (\d+)\.)"
)
_BID_SHOWN = re.compile(r"Player ([01]): (\d+) x (\d+)")

PROMPT = """\
You are Player {me} in Liar's Dice, a zero-sum bluffing game for two players. Each player starts \
with {dice} six-sided dice, hidden from the other: you see your own dice and only the number of \
dice your opponent has.
Every round begins with both players rolling all their dice. Player 0 opens the first round; then \
players alternate. On your turn you do one of two things:
- Bid, e.g. [Bid: 3, 4]: you claim that among all dice in play (yours and your opponent's \
together) at least 3 show the face 4. Each bid must beat the one before it: either a higher \
quantity (any face, even a lower one) or the same quantity with a higher face. The quantity can \
never exceed the number of dice in play. A 1 is an ordinary face, not a wild card.
- Call, [Call]: you challenge the last bid. Calling before anyone has bid in the round is not \
allowed. All dice are revealed and the bid's face is counted. If fewer dice show it than the bid \
claimed, the bidder loses one die; if the count is equal or higher, you (the caller) lose one.
After a call both players roll again and whoever lost the die opens the next round. A player \
with no dice left loses the game; the other wins.
Answer with one action in square brackets: [Bid: quantity, face] or [Call]. The colon is \
optional and a space may replace the comma. Anything that is not a legal bid or call is an \
invalid move and loses the game."""


def _dice_text(dice: tuple[int, ...]) -> str:
    return " ".join(map(str, dice))


def _claim(bid: Bid) -> str:
    return f"at least {bid[0]} {'die shows' if bid[0] == 1 else 'dice show'} {bid[1]}"


def _bid_string(action: Bid | str) -> str:
    return "[Call]" if action == CALL else f"[Bid: {action[0]}, {action[1]}]"


# Every turn lists each legal bid (6 faces for each quantity up to the dice in play): 20 dice a player make 240
# bids, a long prompt already; a million made a 225 MB observation.
MAX_DICE = 20


class LiarsDice(TextGame):
    name = "LiarsDice"
    description = "Liar's Dice for two: hidden dice, rising bids on the whole table, a call costs someone a die."
    default_obs_format = "full"

    def __init__(self, dice: int = 5) -> None:
        if not isinstance(dice, int) or isinstance(dice, bool) or not 1 <= dice <= MAX_DICE:
            raise ValueError(f"dice (dice per player at the start) must be a whole number from 1 to {MAX_DICE}, "
                             f"got {dice!r}")  # fmt: skip
        self.dice = dice

    def new_state(self, rng: np.random.Generator) -> LiarsDiceState:
        return LiarsDiceState(rng, self.dice)

    def prompt(self, player: int) -> str:
        return PROMPT.format(me=player, dice=self.dice)

    def start_messages(self, state: LiarsDiceState) -> list[Message]:
        """Each player's fresh private roll at the start of a round."""
        return [
            (
                p,
                f"Round {state.round}: everyone rolls. Your dice: {_dice_text(state.dice[p])}. "
                f"Player {1 - p} has {state.counts[1 - p]} dice; {state.dice_in_play} dice are in play. "
                f"Player {state.opener} opens.",
            )
            for p in (0, 1)
        ]

    def turn_message(self, state: LiarsDiceState, player: int) -> str:
        head = (
            f"Round {state.round}. Your dice: {_dice_text(state.dice[player])}. Your opponent has "
            f"{state.counts[1 - player]} dice; {state.dice_in_play} dice are in play."
        )
        if not state.bids:
            return f"{head} No bid yet this round: open it with a bid."
        bidder, bid = state.bids[-1]
        so_far = "; ".join(f"Player {p}: {q} x {f}" for p, (q, f) in state.bids)
        return f"{head} Bids this round (quantity x face): {so_far}. Current bid: Player {bidder} claims {_claim(bid)}."

    def player_view(self, state: LiarsDiceState, player: int) -> dict:
        """my_dice: own dice, sorted; current_bid: (quantity, face) or None; history: this round's
        bids as (player, quantity, face), oldest first; opponent_dice_count: the opponent's dice."""
        current = state.bids[-1] if state.bids else None
        return {
            "my_dice": list(state.dice[player]),
            "my_dice_count": state.counts[player],
            "opponent_dice_count": state.counts[1 - player],
            "dice_in_play": state.dice_in_play,
            "current_bid": None if current is None else current[1],
            "bidder": None if current is None else current[0],
            "history": [(p, q, f) for p, (q, f) in state.bids],
            "round": state.round,
        }

    @staticmethod
    def read_position(observation: str) -> dict[str, Any] | None:
        """``player_view`` read back from the observation's latest turn message (any obs_format), or
        None when that is not a Liar's Dice turn. Only the player's own dice are shown, so only those
        are read; faces outside 1-6, or counts that do not add up, are ``PositionUnreadable``."""
        turn = latest_turn(observation)
        match = None if turn is None else _TURN.fullmatch(turn.message)
        if match is None:
            return None
        round_, dice, theirs, in_play, bids, bidder, quantity, face = match.groups()
        history = []
        if bids is not None:
            shown = bids.split("; ")
            history = [tuple(int(g) for g in m.groups()) for m in map(_BID_SHOWN.fullmatch, shown) if m is not None]
            if len(history) != len(shown) or history[-1] != (int(bidder), int(quantity), int(face)):
                raise PositionUnreadable("LiarsDice", "a readable list of this round's bids")
        my_dice = [int(d) for d in dice.split()]
        if not all(1 <= d <= FACES for d in my_dice) or len(my_dice) + int(theirs) != int(in_play):
            raise PositionUnreadable("LiarsDice", f"dice with faces 1 to {FACES} that add up to the dice in play")
        return {
            "my_dice": my_dice,
            "my_dice_count": len(my_dice),
            "opponent_dice_count": int(theirs),
            "dice_in_play": int(in_play),
            "current_bid": None if bids is None else (int(quantity), int(face)),
            "bidder": None if bids is None else int(bidder),
            "history": history,
            "round": int(round_),
        }

    def legal_action_strings(self, state: LiarsDiceState) -> list[str]:
        return [_bid_string(a) for a in state.legal_actions()]

    def parse(self, state: LiarsDiceState, text: str) -> Bid | str:
        token = extract_token(text)
        if token is None:
            raise InvalidMove(f"no action found; {ACTION_HELP}")
        if token == CALL:
            if state.bid is None:
                raise InvalidMove("there is no bid to call yet; open the round with a bid such as [Bid: 1, 6]")
            return CALL
        match = _BID.match(token)
        if match is None:
            raise InvalidMove(f"[{excerpt(token)}] is neither a bid nor a call; {ACTION_HELP}")
        bid = (int(match.group(1)), int(match.group(2)))
        error = state.bid_error(bid)
        if error is not None:
            raise InvalidMove(error)
        return bid

    def move_messages(self, state: LiarsDiceState, player: int, action: Bid | str) -> list[Message]:
        if action != CALL:
            return [(None, f"Player {player} bids {action[0]} x {action[1]}: {_claim(action)}.")]
        r = state.calls[-1]
        q, f = r.bid
        if r.count < q:
            verdict = f"fewer than {q}: the bid was false and Player {r.bidder} (the bidder) loses a die."
        else:
            verdict = f"at least {q}: the bid holds and Player {r.caller} (the caller) loses a die."
        text = (
            f"Player {player} calls Player {r.bidder}'s bid ({_claim(r.bid)}). Revealed dice: Player 0 "
            f"{_dice_text(r.dice[0])}; Player 1 {_dice_text(r.dice[1])}. Dice showing {f}: {r.count}, {verdict} "
            f"Dice left: Player 0 {state.counts[0]}, Player 1 {state.counts[1]}."
        )
        messages: list[Message] = [(None, text)]
        if not state.is_terminal():
            messages += self.start_messages(state)
        return messages

    def outcome_reason(self, state: LiarsDiceState) -> str:
        w = state.winner  # set whenever the game is over
        return f"Player {1 - w} has no dice left; Player {w} wins."

    def render(self, state: LiarsDiceState) -> str:
        bid = "none" if not state.bids else f"{state.bid[0]} x {state.bid[1]} by P{state.bids[-1][0]}"
        to_act = "-" if state.is_terminal() else f"P{state.current_player}"
        return (
            f"round {state.round}  P0 dice: {_dice_text(state.dice[0])}  P1 dice: {_dice_text(state.dice[1])}  "
            f"bid: {bid}  to act: {to_act}"
        )
