"""Per-player message logs and the two observation formats.

``full``: every message the player received since reset, tagged with its sender.
``first_last``: the rules prompt, the latest message (the current position), nothing else.
``last``: the latest message alone, for small models that learn the rules from play (the tiny
recipe); the message before each decision states the position and the legal moves.
The log lives in the env and is rebuilt on reset, so no history leaks between games.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence

OBS_FORMATS = ("full", "first_last", "last")
CHARSET = string.printable
_OUTSIDE_CHARSET = re.compile(f"[^{re.escape(CHARSET)}]")
# A line of player text that begins, after optional whitespace, with ``[``; its bracketed token, if it closes.
_TAG_AT_START = re.compile(r"(\s*)\[([^\[\]]*)(\]?)")


def _untag(line: str) -> str:
    """``line`` without a leading ``[tag]``: its brackets become parentheses (``[GAME] x`` -> ``(GAME) x``)."""
    tag = _TAG_AT_START.match(line)
    if tag is None:
        return line
    lead, inner, close = tag.groups()
    return f"{lead}({inner}{')' if close else ''}{line[tag.end() :]}"


def sanitize(text: str) -> str:
    """Player text as the env echoes it, in every game: the one filter for whatever a player wrote.

    Messages in an observation are separated by a blank line and a ``[sender]`` tag, and every game line
    begins with ``[GAME]``, so the text comes back such that no player can start either:

    - characters outside the observation charset become ``?``, so it stays in the space;
    - every kind of line break (``\\r\\n``, ``\\r``, ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``, ``\\x85``,
      ``\\u2028``, ``\\u2029``: what ``str.splitlines`` splits on) becomes ``\\n``, and whitespace-only lines
      are dropped, so the text never holds a blank line (``spiral-arena serve`` reads positions back from
      the text, splitting messages there);
    - a line after the first that begins (after whitespace) with ``[`` gets parentheses for its brackets:
      ``[GAME] You won.`` reads ``(GAME) You won.``. Parentheses keep the words readable (a chat line may
      quote ``[Accept]``) while no line reads as the square-bracket tag a model knows as a sender.

    The first line is left as written: the env always puts player text after words of its own on that line
    (``Deceiver says: ``, ``Invalid move: ``), and chat tags every line with its sender (``said``). Plain
    printable ASCII (one line) is returned as is."""
    if text.isascii() and text.isprintable():
        return text
    lines = [line for line in (_OUTSIDE_CHARSET.sub("?", raw) for raw in text.splitlines()) if line.strip()]
    return "\n".join(lines[:1] + [_untag(line) for line in lines[1:]])


_SAYS = " says: "  # between a speaker and each line of its chat (``said``)


def said(speaker: str, text: str) -> str:
    """``speaker``'s chat as the game passes it on, the one rule of every game with chat: each line of the
    sanitised text begins with ``<speaker> says: ``. A one-line message reads ``Player 0 says: Hello.``, the
    text trained checkpoints know; the lines after the first carry the same tag, so none of them can pass for
    a line of the game's own (``Open offer to you: ...``): each names whose it is. ``unsaid`` reads it back."""
    return "\n".join([f"{speaker}{_SAYS}{line}" for line in sanitize(text).split("\n")])


def unsaid(message: str) -> tuple[str, str] | None:
    """``(speaker, text)`` of a message that ``said`` wrote (its tags taken off), or None when ``message`` is
    not one: its first line names no speaker, or a later line lacks that speaker's tag."""
    speaker, says, text = message.partition(_SAYS)
    if not says or "\n" in speaker:
        return None
    tag = speaker + _SAYS
    first, *more = text.split("\n")
    if not all(line.startswith(tag) for line in more):
        return None
    return speaker, "\n".join([first, *(line[len(tag) :] for line in more)])


def one_line(text: str) -> str:
    """Player text shown inside one line of the game's own (Twenty Questions' echo and recap of a question):
    ``sanitize``'s text with its line breaks as spaces, so no part of it starts a line."""
    return sanitize(text).replace("\n", " ")


def last_message(observation: str) -> str:
    """The latest message of an observation in any format (messages start with ``[sender]``),
    so a model trained on ``last`` observations can play envs that use another format."""
    head, sep, tail = observation.rpartition("\n\n[")
    return "[" + tail if sep else observation


class MessageLog:
    """What each player has been told, in order; the full text is joined only when asked for. Each player
    may read its own format (``obs_format``: one for all, or one per player)."""

    def __init__(self, prompts: list[str], obs_format: str | Sequence[str]) -> None:
        self.formats = (obs_format,) * len(prompts) if isinstance(obs_format, str) else tuple(obs_format)
        self.prompts = prompts
        self.lines = [[f"[GAME] {p}"] for p in prompts]

    def post(self, to: int | None, text: str) -> None:
        """A message from the game to player ``to``, or to every player (None)."""
        self.post_all(((to, text),))

    def post_all(self, messages: Iterable[tuple[int | None, str]]) -> None:
        """Each ``(to, text)`` of a game's messages, in order: to player ``to``, or to every player (None)."""
        lines = self.lines
        for to, text in messages:
            line = "[GAME] " + text
            if to is None:
                for own in lines:
                    own.append(line)
            else:
                lines[to].append(line)

    def post_own(self, player: int, messages: Iterable[tuple[int | None, str]]) -> None:
        """Of a game's messages, those that reach ``player`` (to it or to everyone): the messages of one
        player's own view of the game, when players read the match in different texts."""
        own = self.lines[player]
        own.extend("[GAME] " + text for to, text in messages if to is None or to == player)

    def latest(self, player: int) -> str:
        return self.lines[player][-1]

    def observation(self, player: int) -> str:
        form = self.formats[player]
        if form == "full":
            return "\n\n".join(self.lines[player])
        if form == "last":
            return self.lines[player][-1]
        return f"{self.prompts[player]}\n\n{self.lines[player][-1]}"
