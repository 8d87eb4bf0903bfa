"""Tic-Tac-Toe: 3x3, cells 0-8 row-major, player 0 moves first, three in a row wins.

Three board layouts for the turn message (``board``): ``grid``, TextArena's 3x3 drawing with each empty
cell's number; ``cells``, one short word per cell in order, its letter (a-i for 0-8) and what it holds seen
from the player to act (M: your mark, T: theirs, E: empty), e.g. ``aM bE cT``; ``lines``, the cells and
then, for each empty cell, one word per line through it: the cell's letter and what the line's other two
cells hold (``cMM``: c completes your line; ``cTT``: theirs). Each word is one token of the tiny model,
so ``cells`` says where and whose in one token and ``lines`` puts a whole line next to the cell that
would complete it; a 2-layer model learns to take wins from ``lines`` and far less from the other two
(docs/results/learning.md). The layout describes the board; which cell to play stays the player's.
"""

from __future__ import annotations

import re
from typing import Any

from spiral_arena.core.actions import choose
from spiral_arena.core.game import TERMINAL, Message
from spiral_arena.core.readback import PositionUnreadable, latest_turn
from spiral_arena.games.marks import EMPTY, MarkGame, MarkState

# ---- rules ------------------------------------------------------------------------------

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
LINES_THROUGH = tuple(tuple(line for line in LINES if cell in line) for cell in range(9))
# For each cell, the other two cells of each line through it: what a mark there completes.
_PARTNERS = tuple(tuple(tuple(c for c in line if c != cell) for line in LINES_THROUGH[cell]) for cell in range(9))


class TicTacToeState(MarkState):
    """Board of 9 cells holding EMPTY or the player index that marked it."""

    CELLS = 9

    @classmethod
    def from_view(cls, board: list[int], player: int) -> TicTacToeState:
        """The state with ``board`` and ``player`` to act (a served view's board)."""
        state = cls()
        state.board, state.current_player = list(board), player
        state.moves = sum(cell != EMPTY for cell in board)
        return state

    def legal_actions(self) -> list[int]:
        if self.current_player == TERMINAL:
            return []
        return [c for c in range(9) if self.board[c] == EMPTY]

    def apply(self, cell: int) -> None:
        board, player = self.board, self.current_player
        if player == TERMINAL or not 0 <= cell < 9 or board[cell] != EMPTY:
            raise ValueError(f"cell {cell} is not a legal move")
        line = any(board[a] == board[b] == player for a, b in _PARTNERS[cell])
        self.mark(cell, player, line)


# ---- text -------------------------------------------------------------------------------

MARKS = ("O", "X")  # player 0 draws O, as in TextArena
_CELL_KEYS = [str(c) for c in range(9)]
_CELL_STRINGS = [f"[{c}]" for c in range(9)]
_CELL_OF = {text: c for c, text in enumerate(_CELL_STRINGS)}  # "[4]" -> 4
_BOARD = " %s | %s | %s\n---+---+---\n %s | %s | %s\n---+---+---\n %s | %s | %s"
_TURN = re.compile(r"Board \(you are '([OX])'; numbers are empty cells\):\n(.*)", re.DOTALL)
_BOARD_READ = re.compile(re.escape(_BOARD).replace("%s", r"(\S)"))
# What each cell shows, by what it holds: its number while EMPTY, else the mark of the player who took it.
_CELL_SHOWS = tuple({EMPTY: _CELL_KEYS[c], 0: MARKS[0], 1: MARKS[1]} for c in range(9))
BOARDS = ("grid", "cells", "lines")
_LETTERS = "abcdefghi"
# The cells layout's word for each cell, by the player to act and what the cell holds (EMPTY is -1: "E").
_CELL_WORDS = tuple(
    tuple({EMPTY: f" {_LETTERS[c]}E", me: f" {_LETTERS[c]}M", 1 - me: f" {_LETTERS[c]}T"} for c in range(9))
    for me in (0, 1)
)
_CELLS_HEAD = "Board (you are '{}'; cells a-i are 0-8; M yours, T theirs, E empty):"
_TURN_CELLS = re.compile(
    re.escape(_CELLS_HEAD).replace(re.escape("{}"), "([OX])")
    + "".join(f" {letter}([MTE])" for letter in _LETTERS)
    + r"(?: Lines:(?: [a-i](?:MM|MT|ME|TT|TE|EE))+)?"
)
# The lines layout adds, for each empty cell, one word per line through it: the cell's letter and what
# the line's other two cells hold, in the order M, T, E (``cMM``: taking c completes your line).
_PAIR_ORDER = {"M": 0, "T": 1, "E": 2}


def _line_words(holds: list[str]) -> str:
    """`` Lines:`` and a word per (empty cell, line through it), from each cell's M/T/E."""
    words = []
    for cell in range(9):
        if holds[cell] != "E":
            continue
        for line in LINES_THROUGH[cell]:
            pair = sorted((holds[c] for c in line if c != cell), key=_PAIR_ORDER.__getitem__)
            words.append(f" {_LETTERS[cell]}{''.join(pair)}")
    return " Lines:" + "".join(words)


PROMPT = """\
You are Player {me} in Tic-Tac-Toe, a zero-sum game for two players. Your mark is '{mark}'; \
your opponent (Player {other}) plays '{other_mark}'. The board has nine cells, numbered 0 to 8 \
from left to right and top to bottom:
 0 | 1 | 2
 3 | 4 | 5
 6 | 7 | 8
Players take turns placing one mark in an empty cell, Player 0 first. The first player with \
three marks in a row, a column or a diagonal wins; a full board without such a line is a draw.
On your turn, name the cell in square brackets, for example [4]. Choosing an occupied cell or \
anything that is not a cell number is an invalid move and loses the game."""


class TicTacToe(MarkGame):
    name = "TicTacToe"
    description = "Tic-Tac-Toe on a 3x3 board; cells 0-8; three in a row wins (no chance)."
    state_class = TicTacToeState
    MARKS, BOARDS, PROMPT = MARKS, BOARDS, PROMPT  # the module's facts, as MarkGame reads them
    DRAWN = "The board is full with no line: a draw."
    WON = "Player {player} completed a line and wins."

    def render(self, state: TicTacToeState) -> str:
        return _BOARD % tuple(map(dict.__getitem__, _CELL_SHOWS, state.board))

    def turn_message(self, state: TicTacToeState, player: int) -> str:
        if self.layout in ("cells", "lines"):
            words = [_CELL_WORDS[player][c][v] for c, v in enumerate(state.board)]
            text = _CELLS_HEAD.format(MARKS[player]) + "".join(words)
            return text + _line_words([w[-1] for w in words]) if self.layout == "lines" else text
        return f"Board (you are '{MARKS[player]}'; numbers are empty cells):\n{self.render(state)}"

    def player_view(self, state: TicTacToeState, player: int) -> dict:
        """board: 9 cells, -1 empty else the player index; me: your index."""
        return {"board": list(state.board), "me": player}

    @staticmethod
    def read_position(observation: str) -> dict[str, Any] | None:
        """``player_view`` read back from the observation's latest turn message (any obs_format), or
        None when that is not a Tic-Tac-Toe turn."""
        turn = latest_turn(observation)
        cells = None if turn is None else _TURN_CELLS.fullmatch(turn.message)
        if cells is not None:
            me = MARKS.index(cells.group(1))
            holds = {"M": me, "T": 1 - me, "E": EMPTY}
            return {"board": [holds[h] for h in cells.groups()[1:]], "me": me}
        head = None if turn is None else _TURN.fullmatch(turn.message)
        if head is None:
            return None
        board = _BOARD_READ.fullmatch(head.group(2))
        marks = board.groups() if board is not None else ()
        if len(marks) != 9 or any(m not in (*MARKS, _CELL_KEYS[i]) for i, m in enumerate(marks)):
            raise PositionUnreadable("TicTacToe", "a readable board (nine cells, each a mark or its number)")
        return {"board": [MARKS.index(m) if m in MARKS else EMPTY for m in marks], "me": MARKS.index(head.group(1))}

    def legal_action_strings(self, state: TicTacToeState) -> list[str]:
        board = state.board
        return [_CELL_STRINGS[c] for c in range(9) if board[c] == EMPTY]

    def parse(self, state: TicTacToeState, text: str) -> int:
        board = state.board
        cell = _CELL_OF.get(text)  # the exact answer "[4]", the usual one, without building the options
        if cell is not None and board[cell] == EMPTY:
            return cell
        return choose(text, {_CELL_KEYS[c]: c for c in range(9) if board[c] == EMPTY})

    def move_messages(self, state: TicTacToeState, player: int, cell: int) -> list[Message]:
        return [(None, f"Player {player} placed '{MARKS[player]}' on cell {cell}.")]
