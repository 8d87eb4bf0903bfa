"""Truth and Deception: the Deceiver knows which of two facts is true and talks the Guesser toward the false one.

Six actions: free chat by the Deceiver, the Guesser, the Deceiver, the Guesser; the Deceiver's last
message; then the Guesser answers ``[Fact 1]`` or ``[Fact 2]``. The right fact wins for the Guesser
(+1, Deceiver -1), the wrong one for the Deceiver. An answer naming both facts or neither is an
invalid move: a reply such as "[Fact 1] or [Fact 2]" must not be able to win (upstream pitfall #5).
The pair and the order in which its facts are shown are drawn from the reset seed.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from spiral_arena.core.actions import InvalidMove, extract_answer, normalize
from spiral_arena.core.game import TERMINAL, Message, TextGame
from spiral_arena.core.observations import said, sanitize, unsaid
from spiral_arena.core.readback import PositionUnreadable, latest_turn, transcript

# ---- rules ------------------------------------------------------------------------------

DECEIVER, GUESSER = 0, 1
SCHEDULE = (DECEIVER, GUESSER, DECEIVER, GUESSER, DECEIVER, GUESSER)  # who plays actions 1..6
CHAT_ACTIONS = 5  # actions 1-5 are messages, action 6 is the guess
FACTS = (1, 2)  # facts are numbered as shown to the players


@dataclass(frozen=True)
class FactPair:
    """One true statement and its closely matched false twin."""

    true: str
    false: str
    topic: str = ""


class TruthAndDeceptionState:
    """The two facts as shown, which of them is true, the messages so far and the guess."""

    def __init__(self, facts: tuple[str, str], true_fact: int) -> None:
        if true_fact not in FACTS:
            raise ValueError(f"true_fact must be 1 or 2, got {true_fact!r}")
        self.facts = facts
        self.true_fact = true_fact
        self.conversation: list[tuple[int, str]] = []  # (player, message)
        self.guess: int | None = None
        self.current_player = SCHEDULE[0]

    @property
    def turn(self) -> int:
        """Number of the action to play now, 1-6 (7 once the game is over)."""
        return len(self.conversation) + (self.guess is not None) + 1

    @property
    def phase(self) -> str:
        return "chat" if len(self.conversation) < CHAT_ACTIONS else "guess"

    def legal_actions(self) -> list[int] | None:
        if self.is_terminal():
            return []
        return None if self.phase == "chat" else list(FACTS)

    def apply(self, action: str | int) -> None:
        """A message (str) on chat turns, a fact number (1 or 2) on the guess turn."""
        if self.is_terminal():
            raise ValueError("the game is over")
        if self.phase == "chat":
            if not isinstance(action, str):
                raise ValueError(f"action {self.turn} is a message (str), got {action!r}")
            self.conversation.append((self.current_player, action))
            self.current_player = SCHEDULE[len(self.conversation)]
            return
        if isinstance(action, bool) or action not in FACTS:
            raise ValueError(f"the guess must be fact 1 or 2, got {action!r}")
        self.guess = action
        self.current_player = TERMINAL

    def is_terminal(self) -> bool:
        return self.current_player == TERMINAL

    def returns(self) -> tuple[float, float]:
        if self.guess is None:
            return (0.0, 0.0)
        return (-1.0, 1.0) if self.guess == self.true_fact else (1.0, -1.0)


# ---- fact pairs -------------------------------------------------------------------------

_PAIR_KEYS = {"true", "false", "topic"}


def _check_line(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where} must be a non-empty string, got {value!r}")
    if not (value.isascii() and value.isprintable()):
        raise ValueError(f"{where} must be one line of printable ASCII characters, got {value!r}")
    return value.strip()


def load_pairs(pairs_file: str | os.PathLike[str] | None = None) -> tuple[FactPair, ...]:
    """The fact pairs in ``pairs_file``, or the package's own set when None.

    The file is a JSON list of objects with string fields ``true`` and ``false`` (one line of
    printable ASCII each, different from each other) and an optional ``topic``.
    """
    if pairs_file is None:
        source = "spiral_arena/data/fact_pairs.json"
        text = resources.files("spiral_arena").joinpath("data", "fact_pairs.json").read_text(encoding="utf-8")
    else:
        source = os.fspath(pairs_file)
        try:
            with open(source, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            raise FileNotFoundError(f"pairs_file {source!r} does not exist") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"pairs_file {source!r} is not valid JSON: {e}") from None
    if not isinstance(data, list) or not data:
        raise ValueError(
            f"pairs_file {source!r} must hold a non-empty JSON list of objects with fields 'true', 'false' "
            "and optionally 'topic'"
        )
    pairs = []
    for i, entry in enumerate(data):
        where = f"{source}, pair {i}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be an object with fields 'true', 'false' and optionally 'topic'")
        unknown = set(entry) - _PAIR_KEYS
        if unknown or "true" not in entry or "false" not in entry:
            raise ValueError(f"{where} has fields {sorted(entry)}; required: 'true', 'false'; optional: 'topic'")
        true = _check_line(entry["true"], f"{where}, field 'true'")
        false = _check_line(entry["false"], f"{where}, field 'false'")
        if true == false:
            raise ValueError(f"{where}: the true and the false statement are the same text")
        topic = _check_line(entry["topic"], f"{where}, field 'topic'") if "topic" in entry else ""
        pairs.append(FactPair(true, false, topic))
    return tuple(pairs)


# ---- text -------------------------------------------------------------------------------

ROLES = ("Deceiver", "Guesser")
_BRACKETED = re.compile(r"\[([^\[\]]*)\]")
_FACT_TOKEN = re.compile(r"fact ?([12])")
_MAX_BARE_WORDS = 5  # an unbracketed answer counts as a token only when this short ("Fact 2")
_GUESS_STRINGS = ["[Fact 1]", "[Fact 2]"]

SCHEDULE_TEXT = """\
The game has exactly 6 actions, in this order:
  1. the Deceiver sends a message;
  2. the Guesser sends a message;
  3. the Deceiver sends a message;
  4. the Guesser sends a message;
  5. the Deceiver sends a last message;
  then the game tells both players that the guess is due, and
  6. the Guesser answers with [Fact 1] or [Fact 2].
The Deceiver sends 3 messages; the Guesser sends 2 messages and then the answer."""

COMMON_RULES = """\
Messages are free text. If a reply contains \\boxed{...}, only the content of the last box is \
sent to the other player; otherwise the whole reply is.
If the Guesser picks the true fact, the Guesser wins (+1) and the Deceiver loses (-1); if the \
Guesser picks the false fact, the Deceiver wins (+1) and the Guesser loses (-1). The answer must \
name exactly one fact: an answer naming both facts or neither is an invalid move, and the Guesser \
loses the game."""

PROMPTS = (
    """\
You are Player 0, the Deceiver, in Truth and Deception, a zero-sum game for two players. Your \
opponent, Player 1, is the Guesser. You both see the same two statements, Fact 1 and Fact 2: one \
is true and the other is false. You are told which one is true; the Guesser is not.
Your goal: convince the Guesser to pick the false fact.
{schedule}
{rules}""",
    """\
You are Player 1, the Guesser, in Truth and Deception, a zero-sum game for two players. Your \
opponent, Player 0, is the Deceiver. You both see the same two statements, Fact 1 and Fact 2: one \
is true and the other is false. The Deceiver knows which one is true and wants you to pick the \
false one; you are not told which is which.
Your goal: pick the true fact.
{schedule}
{rules} Your answer on action 6 must be [Fact 1] or [Fact 2]; chatting without one of them there \
is an invalid move.""",
)

_CHAT_EXAMPLES = (
    (
        "Fact 1 is the true one, I am certain of it.",
        "Fact 2 is the true one, I am certain of it.",
        "Think it through: one of these is a well-known myth.",
        "I have no reason to mislead you on this one.",
    ),
    (
        "Which fact do you say is true, and why?",
        "Why should I believe you?",
        "Tell me something more about Fact 1.",
        "Tell me something more about Fact 2.",
    ),
)


_EMPTY_MESSAGE = "(an empty message)"
_TURN = re.compile(
    r"Action ([1-6]) of 6\. (?:Your message ([1-3]) of ([1-3]) to the (Deceiver|Guesser)\."
    r"(?: This is your last message\.)?|(Your answer: which fact is true\? Reply with \[Fact 1\] or \[Fact 2\]\.))\n"
    r"Fact 1: (.*)\nFact 2: (.*)\n(?:Fact ([12]) is the true one \(only you know this\)\.|"
    r"One of them is true and the other is false\.)"
)


def _read_conversation(observation: str) -> list[tuple[str, str]] | None:
    """The chat so far as (role, text) pairs, from a full transcript; None when the observation does not
    hold one (the start message with the facts is missing). Every message the env wrote is one piece of
    ``transcript``: a player's text never holds the blank line that starts a message (``sanitize``), and each
    of its lines carries its sender's tag (``said``), taken off here."""
    messages = transcript(observation)
    if not any(m.startswith("The two facts:") for m in messages):
        return None
    conversation: list[tuple[str, str]] = []
    for message in messages:
        chat = unsaid(message)
        if chat is not None and chat[0] in ROLES:
            role, text = chat
            conversation.append((role, "" if text == _EMPTY_MESSAGE else text))
    return conversation


def _facts_text(state: TruthAndDeceptionState, player: int) -> str:
    lines = f"Fact 1: {state.facts[0]}\nFact 2: {state.facts[1]}"
    if player == DECEIVER:
        return f"{lines}\nFact {state.true_fact} is the true one (only you know this)."
    return f"{lines}\nOne of them is true and the other is false."


class TruthAndDeception(TextGame):
    """``pairs_file``: a JSON file of fact pairs in the form of the package's own (see ``load_pairs``).
    ``max_message_chars``: longer messages are cut to this length before they are passed on, so an
    endless reply cannot flood the other player's context."""

    name = "TruthAndDeception"
    description = "The Deceiver knows which of two facts is true; 5 chat messages, then the Guesser picks one."
    default_obs_format = "full"
    roles = ROLES

    def __init__(self, pairs_file: str | os.PathLike[str] | None = None, max_message_chars: int = 2000) -> None:
        if isinstance(max_message_chars, bool) or not isinstance(max_message_chars, int) or max_message_chars < 1:
            raise ValueError(f"max_message_chars must be a positive integer, got {max_message_chars!r}")
        if pairs_file is not None and not isinstance(pairs_file, (str, os.PathLike)):
            raise TypeError(f"pairs_file must be a path (str or os.PathLike) or None, got {pairs_file!r}")
        self.pairs = load_pairs(pairs_file)
        self.max_message_chars = max_message_chars

    def new_state(self, rng: np.random.Generator) -> TruthAndDeceptionState:
        pair = self.pairs[int(rng.integers(len(self.pairs)))]
        if rng.random() < 0.5:
            return TruthAndDeceptionState((pair.true, pair.false), true_fact=1)
        return TruthAndDeceptionState((pair.false, pair.true), true_fact=2)

    def prompt(self, player: int) -> str:
        return PROMPTS[player].format(schedule=SCHEDULE_TEXT, rules=COMMON_RULES)

    def start_messages(self, state: TruthAndDeceptionState) -> list[Message]:
        return [(p, f"The two facts:\n{_facts_text(state, p)}") for p in (DECEIVER, GUESSER)]

    def turn_message(self, state: TruthAndDeceptionState, player: int) -> str:
        if state.phase == "guess":
            task = "Your answer: which fact is true? Reply with [Fact 1] or [Fact 2]."
        else:
            mine = sum(1 for p, _ in state.conversation if p == player) + 1
            of = SCHEDULE[:CHAT_ACTIONS].count(player)
            last = " This is your last message." if mine == of else ""
            task = f"Your message {mine} of {of} to the {ROLES[1 - player]}.{last}"
        return f"Action {state.turn} of 6. {task}\n{_facts_text(state, player)}"

    def player_view(self, state: TruthAndDeceptionState, player: int) -> dict[str, Any]:
        """role: "Deceiver" or "Guesser"; facts: (Fact 1, Fact 2) as shown; true_fact: 1 or 2 for the
        Deceiver, None for the Guesser; turn: the action being played, 1-6; phase: "chat" (actions
        1-5) or "guess" (action 6); conversation: the messages so far as (role, text) pairs."""
        return {
            "role": ROLES[player],
            "facts": state.facts,
            "true_fact": state.true_fact if player == DECEIVER else None,
            "turn": state.turn,
            "phase": state.phase,
            "conversation": [(ROLES[p], text) for p, text in state.conversation],
        }

    @staticmethod
    def read_position(observation: str) -> dict[str, Any] | None:
        """``player_view`` read back from the observation's latest turn message (any obs_format), or
        None when that is not a Truth and Deception turn. Only the Deceiver's observation says which
        fact is true. After action 1 the view holds the conversation, which only a full transcript
        (``obs_format="full"``, the default) shows: other formats raise ``PositionUnreadable``, as
        does a transcript whose messages do not add up to the action's number (text the env did not write)."""
        turn = latest_turn(observation)
        match = None if turn is None else _TURN.fullmatch(turn.message)
        if match is None:
            return None
        action, mine, of, to, guess, fact_1, fact_2, true_fact = match.groups()
        role = "Guesser" if guess is not None or to == "Deceiver" else "Deceiver"
        if (true_fact is not None) != (role == "Deceiver"):
            return None
        turn_number = int(action)
        expected = turn_number - 1
        conversation = _read_conversation(observation) if expected else []
        if conversation is None:
            raise PositionUnreadable(
                "TruthAndDeception", "the conversation so far (only obs_format='full', the default, shows it)"
            )
        roles = [ROLES[p] for p in SCHEDULE[:expected]]
        if [r for r, _ in conversation] != roles:
            raise PositionUnreadable(
                "TruthAndDeception", f"a readable conversation ({expected} messages in turn, {len(conversation)} found)"
            )
        return {
            "role": role,
            "facts": (fact_1, fact_2),
            "true_fact": None if true_fact is None else int(true_fact),
            "turn": turn_number,
            "phase": "guess" if guess is not None else "chat",
            "conversation": conversation,
        }

    @staticmethod
    def examples_from_view(view: dict[str, Any]) -> list[str]:
        """``action_examples`` from the acting player's view (what ``read_position`` gives)."""
        return list(_CHAT_EXAMPLES[ROLES.index(view["role"])]) if view["phase"] == "chat" else []

    def legal_action_strings(self, state: TruthAndDeceptionState) -> list[str] | None:
        return None if state.phase == "chat" else list(_GUESS_STRINGS)

    def action_format(self, state: TruthAndDeceptionState) -> str:
        if state.phase == "guess":
            return "Answer with exactly one of [Fact 1] or [Fact 2]."
        return (
            f"Write your message to the {ROLES[1 - state.current_player]} as free text "
            f"(at most {self.max_message_chars} characters are passed on)."
        )

    def action_examples(self, state: TruthAndDeceptionState) -> list[str]:
        return list(_CHAT_EXAMPLES[state.current_player]) if state.phase == "chat" else []

    def parse(self, state: TruthAndDeceptionState, text: str) -> str | int:
        answer = extract_answer(text)
        if state.phase == "chat":
            message = sanitize(answer)
            if len(message) > self.max_message_chars:
                message = message[: self.max_message_chars] + " ...(cut)"
            return message
        tokens = _BRACKETED.findall(answer)
        if not tokens and len(answer.split()) <= _MAX_BARE_WORDS:
            tokens = [answer]
        named = {int(m.group(1)) for t in tokens if (m := _FACT_TOKEN.fullmatch(normalize(t)))}
        if len(named) == 2:
            raise InvalidMove("the answer names both facts; name exactly one, [Fact 1] or [Fact 2]")
        if not named:
            raise InvalidMove("the answer names no fact; answer with [Fact 1] or [Fact 2]")
        return named.pop()

    def move_messages(self, state: TruthAndDeceptionState, player: int, action: str | int) -> list[Message]:
        if isinstance(action, int):
            return [(None, f"The Guesser answers: Fact {action}.")]
        messages: list[Message] = [(None, said(ROLES[player], action or _EMPTY_MESSAGE))]
        if len(state.conversation) == CHAT_ACTIONS:
            messages.append(
                (None, "The conversation is over. The guess is due: the Guesser must now answer [Fact 1] or [Fact 2].")
            )
        return messages

    def outcome_reason(self, state: TruthAndDeceptionState) -> str:
        true = state.true_fact
        verdict = "The Guesser found it." if state.guess == true else "The Guesser was deceived."
        return f'Fact {true} was the true one: "{state.facts[true - 1]}" {verdict}'

    def render(self, state: TruthAndDeceptionState) -> str:
        lines = [f"Truth and Deception, action {min(state.turn, 6)} of 6 ({state.phase})"]
        for n in FACTS:
            lines.append(f"Fact {n} ({'true' if n == state.true_fact else 'false'}): {state.facts[n - 1]}")
        lines += [f"{ROLES[p]}: {text}" for p, text in state.conversation]
        if state.guess is not None:
            lines.append(f"Guess: Fact {state.guess}")
        return "\n".join(lines)
