"""Raw model text -> the answer the player meant.

One extraction rule for every game: the last ``\\boxed{...}`` wins; without a box, the last
bracketed token. Fixed-action games then match that token against their legal actions;
free-text games (negotiation chat) read the whole answer with their own grammar.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TypeVar

from spiral_arena.core.observations import sanitize

A = TypeVar("A")

_BOX_OPEN = re.compile(r"\\boxed *\{")
_BRACKETED = re.compile(r"\[([^\[\]]*)\]")
_TEXT_WRAPPER = re.compile(r"^\\text\s*\{(.*)\}$", re.DOTALL)
_SPACES = re.compile(r"\s+")
# A bare answer ("bet", "4") is read as an action only when it is this short.
_MAX_BARE_WORDS = 5
_EXCERPT_CHARS = 40


class InvalidMove(Exception):
    """The text does not name a legal action; ``reason`` says why, for the player and the logs. Reasons may
    quote player text and every game's env echoes them, so they are sanitised here, where each is made."""

    def __init__(self, reason: str) -> None:
        self.reason = sanitize(reason)
        super().__init__(self.reason)


def excerpt(text: str, limit: int = _EXCERPT_CHARS) -> str:
    """Player text as it may be quoted back (reasons, chat): in the observation charset, bounded."""
    return sanitize(text) if len(text) <= limit else sanitize(text[:limit]) + "..."


def _closing_braces(text: str) -> dict[int, int]:
    """Index of each ``{`` -> index of its matching ``}``, in one pass (unmatched ones are absent)."""
    closing: dict[int, int] = {}
    open_at: list[int] = []
    for i, char in enumerate(text):
        if char == "{":
            open_at.append(i)
        elif char == "}" and open_at:
            closing[open_at.pop()] = i
    return closing


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` with balanced braces, or None if there is none.

    Braces are matched in a single pass, so degenerate output (thousands of unclosed boxes, common
    in RL rollouts) costs linear time, not quadratic.
    """
    if "\\boxed" not in text:
        return None
    closing = _closing_braces(text)
    for box in reversed(list(_BOX_OPEN.finditer(text))):
        end = closing.get(box.end() - 1)
        if end is not None:
            inner = text[box.end() : end].strip()
            wrapped = _TEXT_WRAPPER.match(inner)
            return wrapped.group(1).strip() if wrapped else inner
    return None


def extract_answer(text: str) -> str:
    """The part of a response addressed to the game: the last box's content, else all of it."""
    boxed = last_boxed(text)
    return text.strip() if boxed is None else boxed


def normalize(token: str) -> str:
    """Case and spacing variants of one action compare equal: ``' Bet '`` -> ``'bet'``."""
    return _SPACES.sub(" ", token).strip().lower()


def extract_token(text: str) -> str | None:
    """The action token of a response, normalised, without brackets; None if there is none."""
    answer = extract_answer(text)
    tokens = _BRACKETED.findall(answer)
    if tokens:
        return normalize(tokens[-1])
    if answer and len(answer.split()) <= _MAX_BARE_WORDS:
        return normalize(answer)
    return None


def choose(text: str, options: Mapping[str, A], legal_strings: Sequence[str] | None = None) -> A:
    """Map a response to one of ``options`` (normalised token -> action) or raise InvalidMove.

    ``legal_strings`` are the bracketed forms shown to the player, used in the reason; by default
    every accepted token of ``options``.
    """
    if text[:1] == "[" and text[-1:] == "]":  # fast path: exactly a legal token, e.g. "[4]"
        direct = options.get(text[1:-1])
        if direct is not None:
            return direct
    token = extract_token(text)
    action = None if token is None else options.get(token)
    if action is not None:
        return action
    legal = ", ".join(legal_strings if legal_strings is not None else (f"[{k}]" for k in options))
    if token is None:
        raise InvalidMove(f"no action found; answer with one of {legal}")
    raise InvalidMove(f"[{excerpt(token)}] is not a legal action now; legal: {legal}")
