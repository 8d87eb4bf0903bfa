"""Raw model text -> the answer the player meant.

One extraction rule for every game: the last ``\\boxed{...}`` wins; without a box, the last
bracketed token. Fixed-action games then match that token against their legal actions;
free-text games (negotiation chat) read the whole answer with their own grammar.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

A = TypeVar("A")

_BRACKETED = re.compile(r"\[([^\[\]]*)\]")
_TEXT_WRAPPER = re.compile(r"^\\text\s*\{(.*)\}$", re.DOTALL)
_SPACES = re.compile(r"\s+")
# A bare answer ("bet", "4") is read as an action only when it is this short.
_MAX_BARE_WORDS = 5


class InvalidMove(Exception):
    """The text does not name a legal action; ``reason`` says why, for the player and the logs."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` with balanced braces, or None if there is none."""
    start = text.rfind("\\boxed")
    while start != -1:
        i = start + len("\\boxed")
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == "{":
            depth = 0
            for j in range(i, len(text)):
                if text[j] == "{":
                    depth += 1
                elif text[j] == "}":
                    depth -= 1
                    if depth == 0:
                        inner = text[i + 1 : j].strip()
                        wrapped = _TEXT_WRAPPER.match(inner)
                        return wrapped.group(1).strip() if wrapped else inner
        start = text.rfind("\\boxed", 0, start)
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


def choose(text: str, options: Mapping[str, A], legal_strings: list[str]) -> A:
    """Map a response to one of ``options`` (normalised token -> action) or raise InvalidMove.

    ``legal_strings`` are the bracketed forms shown to the player, used in the reason.
    """
    if text[:1] == "[" and text[-1:] == "]":  # fast path: exactly a legal token, e.g. "[4]"
        direct = options.get(text[1:-1])
        if direct is not None:
            return direct
    token = extract_token(text)
    if token is None:
        raise InvalidMove(f"no action found; answer with one of {', '.join(legal_strings)}")
    action = options.get(token)
    if action is None:
        raise InvalidMove(f"[{token}] is not a legal action now; legal: {', '.join(legal_strings)}")
    return action
