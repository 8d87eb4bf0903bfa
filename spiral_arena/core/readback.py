"""Reading a position back from observation text: the helpers every game's ``read_position`` shares.

A game's ``read_position(observation)`` is the inverse of its ``turn_message``: from the text the env
gave the player to act, and nothing else, it rebuilds that player's ``player_view``. ``spiral-arena
serve`` uses it to play for clients that send only chat messages (see ``spiral_arena.serve``).

Every observation format ends with the acting player's turn message, ``[GAME] Your turn. <action
line>\\n<position>``, written by the env after everything else (so a player's chat can never come
after it); the games read the position from that message. A finished game ends with the env's
``Game over.`` (or ``Game stopped before its end``) message instead (``game_over``). Messages are
split where a blank line is followed by a ``[sender]`` tag; the env writes players' text without blank
lines (``observations.sanitize``), so no player's text can pass for a message of the game's own. Only
two readers also need the history before it, which only the ``full`` format (their default) shows:
Truth and Deception's conversation and Twenty Questions' answered questions (or its ``recap=true``
turn message).

It imports nothing from the games or anything above them.
"""

from __future__ import annotations

import re
from typing import NamedTuple

TURN_HEADER = "[GAME] Your turn. "
MESSAGE_BREAK = "\n\n[GAME] "  # between two messages of a full transcript
# How the env's last message of a finished game begins (``TextGameEnv._finish`` and ``truncate``).
GAME_ENDINGS = ("Game over. ", "Game stopped before its end")
_CELL = re.compile(r"\((\d+), (\d+)\)")


class PositionUnreadable(ValueError):
    """The observation is a turn of ``game`` but does not show ``missing``, which its view needs."""

    def __init__(self, game: str, missing: str) -> None:
        super().__init__(f"{game}: the observation does not show {missing}")
        self.game = game
        self.missing = missing


class TurnMessage(NamedTuple):
    action_line: str  # "Legal actions: [a], [b]." or a free-text game's action format
    message: str  # the position, as the game's turn_message wrote it


def latest_turn(observation: str) -> TurnMessage | None:
    """The latest ``[GAME] Your turn.`` message of an observation in any format, or None.

    The message ends at the next message break: with ``invalid_move="retry"`` an ``Invalid move``
    message may follow it (the position is unchanged)."""
    start = observation.rfind(TURN_HEADER)
    while start > 0 and not observation.endswith("\n\n", 0, start):  # not at the start of a message
        start = observation.rfind(TURN_HEADER, 0, start)
    if start == -1:
        return None
    text = observation[start + len(TURN_HEADER) :]
    text = text.split(MESSAGE_BREAK, 1)[0]
    action_line, _, message = text.partition("\n")
    return TurnMessage(action_line, message)


def transcript(observation: str) -> list[str]:
    """The messages of an observation without their ``[GAME] `` tag, in order. Messages are split where a
    blank line is followed by ``[GAME] ``, which players' text never holds (the env joins its blank lines)."""
    text = observation.removeprefix("[GAME] ")
    return text.split(MESSAGE_BREAK)


def game_over(observation: str) -> bool:
    """Whether the observation is of a finished game: its last message is the env's end-of-game message."""
    return transcript(observation)[-1].startswith(GAME_ENDINGS)


def cells(text: str) -> list[tuple[int, int]]:
    """``"(1, 2), (3, 4)"`` -> ``[(1, 2), (3, 4)]``; ``"none"`` -> ``[]`` (Snake's cell lists)."""
    return [(int(x), int(y)) for x, y in _CELL.findall(text)]
