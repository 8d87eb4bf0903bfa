"""Simple negotiation: two players trade Wood and Gold they value differently, 10 messages in all.

Both start with 10 Wood and 10 Gold; player 0 values Wood 5 / Gold 15, player 1 the reverse.
Messages are free text carrying at most one ``[Offer: ... -> ...]``, ``[Accept]`` or ``[Deny]``.
The larger gain in one's own valuation wins; equal gains draw. ``brief=true`` (a text option) writes each
turn's action line in one short line instead of the whole grammar, which the prompt still states, and says
of an offer made to the player what accepting it would change in the number of items it holds (``That is +1
item for you.``): a short latest message for small models that read only that (``obs_format="last"``). The
gains differ by 20 points per item held above 20 (the values mirror each other), so the items count decides
the game; the line says what an offer does, and whether to take it stays the player's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from spiral_arena.core.actions import InvalidMove, excerpt, extract_answer
from spiral_arena.core.game import TERMINAL, Message, TextGame
from spiral_arena.core.observations import said
from spiral_arena.core.readback import PositionUnreadable, latest_turn

# ---- rules ------------------------------------------------------------------------------

RESOURCES = ("Wood", "Gold")
START_HOLDINGS = (10, 10)
VALUES = ((5, 15), (15, 5))  # VALUES[player][resource]
MAX_ACTIONS = 10

Bundle = tuple[int, int]  # amount of Wood, amount of Gold


@dataclass(frozen=True)
class Offer:
    proposer: int
    give: Bundle  # what the proposer hands over
    ask: Bundle  # what the proposer receives


@dataclass(frozen=True)
class Move:
    """One message: an optional answer to the pending offer, an optional new offer, the chat text."""

    response: str | None = None  # "accept", "deny" or None
    offer: Offer | None = None
    message: str = ""


def covers(holdings: list[int], bundle: Bundle) -> bool:
    return holdings[0] >= bundle[0] and holdings[1] >= bundle[1]


class SimpleNegotiationState:
    def __init__(self) -> None:
        self.holdings = [list(START_HOLDINGS), list(START_HOLDINGS)]
        self.pending: Offer | None = None
        self.actions = 0
        self.current_player = 0
        self.last_outcome: str | None = None  # "traded", "cancelled", "denied" or None, for the text

    def legal_actions(self) -> None:
        return None  # free text; validity is checked by ``check``

    def check(self, move: Move) -> None:
        """Raise InvalidMove if ``move`` breaks a rule for the player to act."""
        me = self.current_player
        pending = self.pending
        mine = self.holdings[me]
        if move.response == "accept" and pending is not None:
            if pending.proposer == me:
                raise InvalidMove("you cannot accept your own offer")
            # A proposer who is short cancels the trade without penalty, even if the acceptor is short too.
            if covers(self.holdings[pending.proposer], pending.give):
                if not covers(mine, pending.ask):
                    raise InvalidMove("you cannot accept: you do not hold what the offer asks of you")
                mine = [mine[r] + pending.give[r] - pending.ask[r] for r in (0, 1)]  # the trade happens first
        if move.offer is not None and not covers(mine, move.offer.give):
            raise InvalidMove("you offered more than you hold")

    def apply(self, move: Move) -> None:
        self.check(move)
        me, pending = self.current_player, self.pending
        self.last_outcome = None
        if pending is not None and pending.proposer != me:
            if move.response == "accept":
                proposer = self.holdings[pending.proposer]
                if covers(proposer, pending.give):
                    acceptor = self.holdings[me]
                    for r in (0, 1):
                        proposer[r] += pending.ask[r] - pending.give[r]
                        acceptor[r] += pending.give[r] - pending.ask[r]
                    self.last_outcome = "traded"
                else:
                    self.last_outcome = "cancelled"
                self.pending = None
            elif move.response == "deny":
                self.last_outcome = "denied"
                self.pending = None
        if move.offer is not None:
            self.pending = move.offer  # a counter-offer replaces (and so denies) the pending one
        self.actions += 1
        self.current_player = TERMINAL if self.actions == MAX_ACTIONS else 1 - me

    def value(self, player: int) -> int:
        h, v = self.holdings[player], VALUES[player]
        return h[0] * v[0] + h[1] * v[1]

    def gain(self, player: int) -> int:
        v = VALUES[player]
        return self.value(player) - (START_HOLDINGS[0] * v[0] + START_HOLDINGS[1] * v[1])

    def is_terminal(self) -> bool:
        return self.current_player == TERMINAL

    def returns(self) -> tuple[float, float]:
        if not self.is_terminal():
            return (0.0, 0.0)
        diff = self.gain(0) - self.gain(1)
        return (0.0, 0.0) if diff == 0 else ((1.0, -1.0) if diff > 0 else (-1.0, 1.0))


# ---- text -------------------------------------------------------------------------------

_TOKEN = re.compile(r"\[([^\[\]]*)\]")
_OFFER_HEAD = re.compile(r"^\s*offer\b\s*:?\s*", re.IGNORECASE)
_LEAD_IN = re.compile(r"^(i\s+give|i\s+offer)\s+", re.IGNORECASE)
_ITEM = re.compile(r"^(\d+)\s+(wood|gold)s?$", re.IGNORECASE)
_SEPARATOR = re.compile(r" ?, ?| and ", re.IGNORECASE)  # applied after whitespace is normalised
# Nobody ever holds more than 20 of a good; the bound keeps int() within Python's digit limit.
_MAX_AMOUNT_DIGITS = 9
# Chat is echoed to both players; the bound keeps the observation within its space.
MAX_CHAT_CHARS = 4096

ACTION_FORMAT = (
    "Write a message (chat is allowed). It may contain one of: [Offer: 3 Wood -> 2 Gold] "
    "(you give the left side, you ask for the right side), [Accept] (take the offer made to you) "
    "or [Deny] (reject it)."
)
BRIEF_ACTION_FORMAT = "Chat with at most one of [Offer: 3 Wood -> 2 Gold], [Accept] or [Deny]."

PROMPT = """\
You are Player {me} in a negotiation game, zero-sum for two players. There are two goods, Wood \
and Gold. You hold 10 Wood and 10 Gold. To you, one Wood is worth {vw} and one Gold is worth {vg}, \
so your goods are worth 200 now. Your opponent may value them differently and will not tell you.
The game lasts exactly 10 messages, alternating, Player 0 first, so each player sends 5.
Every message may contain free chat and at most one of these moves:
- [Offer: 3 Wood -> 2 Gold] proposes a trade: you give what is left of the arrow and receive what \
is right of it. Several goods are separated by commas or 'and', e.g. [Offer: 2 Wood, 1 Gold -> 5 Gold].
- [Accept] accepts the offer your opponent made to you; the trade happens at once.
- [Deny] rejects it. Making an offer of your own also replaces a pending one.
Only one offer can be open at a time, and only the player it was made to can accept it.
When the 10 messages are over, each player's gain is the value of their goods by their own prices \
minus 200. The player with the larger gain wins; equal gains are a draw.
Offering goods you do not hold, accepting a trade you cannot pay for, accepting your own offer or \
writing an offer that cannot be read is an invalid move and loses the game."""


def _bundle(side: str, what: str) -> Bundle:
    side = side.strip().rstrip(".,!?").strip()
    if not side:
        raise InvalidMove(f"the offer has nothing on the {what} side")
    amounts = [0, 0]
    for item in _SEPARATOR.split(side):
        m = _ITEM.match(item)
        if m and len(m.group(1).lstrip("0")) > _MAX_AMOUNT_DIGITS:
            raise InvalidMove(f"the amount in '{excerpt(item)}' is too large; only 20 of each good exist")
        if not m or int(m.group(1)) <= 0:
            raise InvalidMove(f"cannot read '{excerpt(item)}' in an offer; write items like '3 Wood' or '2 Gold'")
        amounts[0 if m.group(2).lower() == "wood" else 1] += int(m.group(1))
    return (amounts[0], amounts[1])


def parse_offer(body: str, proposer: int) -> Offer:
    """The inside of ``[Offer: ...]`` after the word ``Offer``."""
    body = _LEAD_IN.sub("", " ".join(body.split()))
    if body.count("->") != 1:
        raise InvalidMove("an offer needs exactly one '->' between what you give and what you ask for")
    give, ask = body.split("->")
    return Offer(proposer, _bundle(give, "give"), _bundle(ask, "ask"))


def describe(bundle: Bundle) -> str:
    parts = [f"{n} {name}" for n, name in zip(bundle, RESOURCES, strict=True) if n]
    return " and ".join(parts) or "nothing"


_SHOWN_BUNDLE = r"(nothing|\d+ Wood(?: and \d+ Gold)?|\d+ Gold)"  # what ``describe`` writes
_TURN = re.compile(
    r"You hold (\d+) Wood and (\d+) Gold \(worth (\d+) to you\)\. Messages left in the game: (\d+)\. "
    rf"(?:(No offer is open\.)|Your open offer: you give {_SHOWN_BUNDLE} for {_SHOWN_BUNDLE}\.|"
    rf"Open offer to you: Player ([01]) gives {_SHOWN_BUNDLE} and asks for {_SHOWN_BUNDLE}\. "
    r"(?:That is [+-]\d+ items? for you\. )?You may \[Accept\] or \[Deny\] it\.)"
)
_SHOWN_ITEM = re.compile(r"(\d+) (Wood|Gold)")
TOTALS = tuple(2 * n for n in START_HOLDINGS)  # trades move goods between the players only


def read_bundle(text: str) -> Bundle:
    """The inverse of ``describe``: ``"3 Wood and 2 Gold"`` -> ``(3, 2)``, ``"nothing"`` -> ``(0, 0)``."""
    amounts = dict.fromkeys(RESOURCES, 0)
    for n, name in _SHOWN_ITEM.findall(text):
        amounts[name] = int(n)
    return (amounts["Wood"], amounts["Gold"])


def _examples(me: int, mine: Bundle, theirs: Bundle, pending: Offer | None) -> list[str]:
    """A few well-formed messages valid for ``me`` holding ``mine`` against ``theirs``."""
    examples = ["Let us keep talking."]
    if pending is not None and pending.proposer != me:
        examples.append("[Deny]")
        if covers(list(mine), pending.ask):
            examples.append("[Accept]")
    for give_r in (0, 1):
        for n_give in range(1, min(3, mine[give_r]) + 1):
            for n_ask in range(1, min(3, theirs[1 - give_r]) + 1):
                examples.append(f"[Offer: {n_give} {RESOURCES[give_r]} -> {n_ask} {RESOURCES[1 - give_r]}]")
    return examples


class SimpleNegotiation(TextGame):
    name = "SimpleNegotiation"
    description = "Trade Wood and Gold valued differently by each side; 10 messages; larger gain wins."
    default_obs_format = "full"
    has_chance = False
    text_options = {"brief": (False, True)}

    def __init__(self, brief: bool = False) -> None:
        if not isinstance(brief, bool):
            raise ValueError(f"brief must be true or false, got {brief!r}")
        self.brief = brief

    def new_state(self, rng: np.random.Generator | None) -> SimpleNegotiationState:
        return SimpleNegotiationState()

    def prompt(self, player: int) -> str:
        vw, vg = VALUES[player]
        return PROMPT.format(me=player, vw=vw, vg=vg)

    def parse(self, state: SimpleNegotiationState, text: str) -> Move:
        message = extract_answer(text)
        response, offer = None, None
        for token in _TOKEN.findall(message):
            word = token.strip().lower()
            if word in ("accept", "deny"):
                if response is not None and response != word:
                    raise InvalidMove("a message cannot both [Accept] and [Deny]")
                response = word
            elif _OFFER_HEAD.match(token):
                if offer is not None:
                    raise InvalidMove("a message may contain at most one offer")
                offer = parse_offer(_OFFER_HEAD.sub("", token, count=1), state.current_player)
        move = Move(response, offer, excerpt(message, MAX_CHAT_CHARS))
        state.check(move)
        return move

    def legal_action_strings(self, state: SimpleNegotiationState) -> None:
        return None

    def player_view(self, state: SimpleNegotiationState, player: int) -> dict:
        """holdings and values are (Wood, Gold); pending is the open offer, if any."""
        o = state.pending
        return {
            "holdings": tuple(state.holdings[player]),
            "values": VALUES[player],
            "pending": None if o is None else {"proposer": o.proposer, "give": o.give, "ask": o.ask},
            "actions_left": MAX_ACTIONS - state.actions,
        }

    def action_format(self, state: SimpleNegotiationState) -> str:
        return BRIEF_ACTION_FORMAT if self.brief else ACTION_FORMAT

    def action_examples(self, state: SimpleNegotiationState) -> list[str]:
        me = state.current_player
        return _examples(me, state.holdings[me], state.holdings[1 - me], state.pending)

    @staticmethod
    def examples_from_view(view: dict[str, Any]) -> list[str]:
        """``action_examples`` from the acting player's view (what ``read_position`` gives)."""
        actions = MAX_ACTIONS - view["actions_left"]
        me = actions % 2  # turns alternate, Player 0 first
        mine = tuple(view["holdings"])
        theirs = (TOTALS[0] - mine[0], TOTALS[1] - mine[1])
        pending = view["pending"]
        offer = None if pending is None else Offer(pending["proposer"], tuple(pending["give"]), tuple(pending["ask"]))
        return _examples(me, mine, theirs, offer)

    @staticmethod
    def read_position(observation: str) -> dict[str, Any] | None:
        """``player_view`` read back from the observation's latest turn message (any obs_format), or
        None when that is not a negotiation turn. Turns alternate from Player 0, so the messages left
        say who is acting, and so whose prices hold."""
        turn = latest_turn(observation)
        match = None if turn is None else _TURN.fullmatch(turn.message)
        if match is None:
            return None
        wood, gold, worth, left = (int(g) for g in match.group(1, 2, 3, 4))
        me = (MAX_ACTIONS - left) % 2
        values = VALUES[me]
        if not 1 <= left <= MAX_ACTIONS or wood * values[0] + gold * values[1] != worth:
            raise PositionUnreadable("SimpleNegotiation", "a consistent position (holdings, worth and messages left)")
        pending = None
        if match.group(6) is not None:  # the player's own offer is still open
            pending = {"proposer": me, "give": read_bundle(match.group(6)), "ask": read_bundle(match.group(7))}
        elif match.group(8) is not None:
            give, ask = read_bundle(match.group(9)), read_bundle(match.group(10))
            pending = {"proposer": int(match.group(8)), "give": give, "ask": ask}
        return {"holdings": (wood, gold), "values": values, "pending": pending, "actions_left": left}

    def turn_message(self, state: SimpleNegotiationState, player: int) -> str:
        w, g = state.holdings[player]
        left = MAX_ACTIONS - state.actions
        text = (
            f"You hold {w} Wood and {g} Gold (worth {state.value(player)} to you). Messages left in the game: {left}."
        )
        offer = state.pending
        if offer is None:
            return text + " No offer is open."
        if offer.proposer == player:
            return text + f" Your open offer: you give {describe(offer.give)} for {describe(offer.ask)}."
        balance = ""
        if self.brief:  # what accepting does to the items it holds (the count that decides the game)
            net = sum(offer.give) - sum(offer.ask)
            balance = f"That is {net:+d} item{'' if abs(net) == 1 else 's'} for you. "
        return (
            text + f" Open offer to you: Player {offer.proposer} gives {describe(offer.give)} "
            f"and asks for {describe(offer.ask)}. {balance}You may [Accept] or [Deny] it."
        )

    def move_messages(self, state: SimpleNegotiationState, player: int, move: Move) -> list[Message]:
        messages: list[Message] = [(None, said(f"Player {player}", move.message))]
        outcome = state.last_outcome
        if outcome == "traded":
            messages.append((None, f"Player {player} accepted; the trade is done."))
        elif outcome == "cancelled":
            messages.append((None, "The trade was cancelled: the proposer no longer holds the goods."))
        elif outcome == "denied":
            messages.append((None, f"Player {player} rejected the offer."))
        if move.offer is not None:
            o = move.offer
            messages.append((None, f"Player {player} offers {describe(o.give)} for {describe(o.ask)}."))
        return messages

    def outcome_reason(self, state: SimpleNegotiationState) -> str:
        g0, g1 = state.gain(0), state.gain(1)
        return f"Gains in own valuation: Player 0 {g0:+d}, Player 1 {g1:+d}."

    def render(self, state: SimpleNegotiationState) -> str:
        (w0, g0), (w1, g1) = state.holdings
        pending = "none"
        if state.pending is not None:
            o = state.pending
            pending = f"P{o.proposer} gives {describe(o.give)} for {describe(o.ask)}"
        return (
            f"actions {state.actions}/{MAX_ACTIONS}  P0: {w0} Wood {g0} Gold  P1: {w1} Wood {g1} Gold  offer: {pending}"
        )
