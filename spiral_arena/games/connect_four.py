"""Connect Four: 6 rows x 7 columns, pieces fall to the lowest empty cell, four in a line wins.

Cells are numbered ``7 * row + column`` with row 0 the bottom row; an action is a column, 0-6 from left to
right. Player 0 drops 'X' and moves first, player 1 drops 'O' (OpenSpiel's ``connect_four``: x first,
action = column).

Three board layouts for the turn message (``board``): ``grid``, the rows top to bottom with the column
numbers under them; ``columns``, one word per column, its letter (a-g for 0-6) and its pieces from the
bottom up seen from the player to act (M: yours, T: theirs), e.g. ``a bMT cM`` (a is empty, b holds your
piece under theirs); ``threats``, the columns and then, for each column that is not full, one word: its
letter and what a piece landing there would complete (``cM``: four of yours; ``cT``: four of theirs;
``cMT``: both; ``cE``: neither). As with Tic-Tac-Toe's ``cells`` and ``lines``, ``columns`` says the
position in a few short words, and ``threats`` puts each four-in-a-row next to the column that would make
it, which a small model need not find across rows and diagonals. The layout describes the board; which
column to play stays the player's.
"""

from __future__ import annotations

import re
from typing import Any

from spiral_arena.core.actions import InvalidMove, choose
from spiral_arena.core.game import TERMINAL, Message
from spiral_arena.core.readback import PositionUnreadable, latest_turn
from spiral_arena.games.marks import EMPTY, MarkGame, MarkState

# ---- rules ------------------------------------------------------------------------------

ROWS, COLUMNS = 6, 7
CELLS = ROWS * COLUMNS


def _lines() -> tuple[tuple[int, int, int, int], ...]:
    """Every line of four cells: horizontal, vertical and both diagonals (69 in all)."""
    lines = []
    for row in range(ROWS):
        for column in range(COLUMNS):
            for d_row, d_column in ((0, 1), (1, 0), (1, 1), (1, -1)):
                end_row, end_column = row + 3 * d_row, column + 3 * d_column
                if 0 <= end_row < ROWS and 0 <= end_column < COLUMNS:
                    lines.append(tuple(COLUMNS * (row + i * d_row) + column + i * d_column for i in range(4)))
    return tuple(lines)


LINES = _lines()
# For each cell, the other three cells of each line through it: what a piece there completes.
_PARTNERS = tuple(tuple(tuple(c for c in line if c != cell) for line in LINES if cell in line) for cell in range(CELLS))


def completes_four(board: list[int], cell: int, player: int) -> bool:
    """Whether a piece of ``player`` on ``cell`` makes four in a line with ``board``'s pieces (what ``cell``
    itself holds is not read)."""
    return any(board[a] == board[b] == board[c] == player for a, b, c in _PARTNERS[cell])


class ConnectFourState(MarkState):
    """Board of 42 cells holding EMPTY or the player index that dropped there; ``heights`` counts the
    pieces in each column, so a column's next piece lands on cell ``7 * height + column``."""

    CELLS = CELLS

    def __init__(self) -> None:
        super().__init__()
        self.heights = [0] * COLUMNS

    @classmethod
    def from_view(cls, board: list[int], player: int) -> ConnectFourState:
        """The state with ``board`` (pieces resting on each other) and ``player`` to act (a served view's board)."""
        state = cls()
        state.board, state.current_player = list(board), player
        state.heights = [sum(board[COLUMNS * row + c] != EMPTY for row in range(ROWS)) for c in range(COLUMNS)]
        state.moves = sum(state.heights)
        return state

    def legal_actions(self) -> list[int]:
        if self.current_player == TERMINAL:
            return []
        return [c for c in range(COLUMNS) if self.heights[c] < ROWS]

    def apply(self, column: int) -> None:
        player, heights = self.current_player, self.heights
        if player == TERMINAL or not 0 <= column < COLUMNS or heights[column] == ROWS:
            raise ValueError(f"column {column} is not a legal move")
        cell = COLUMNS * heights[column] + column
        heights[column] += 1
        self.mark(cell, player, completes_four(self.board, cell, player))

    def completing_columns(self, player: int) -> list[int]:
        """The columns, not full, where a piece of ``player`` would land and make four in a line."""
        board, heights = self.board, self.heights
        return [
            c for c in range(COLUMNS) if heights[c] < ROWS and completes_four(board, COLUMNS * heights[c] + c, player)
        ]


# ---- text -------------------------------------------------------------------------------

MARKS = ("X", "O")  # player 0 drops X, as OpenSpiel's x
BOARDS = ("grid", "columns", "threats")
_COLUMN_KEYS = [str(c) for c in range(COLUMNS)]
_COLUMN_STRINGS = [f"[{c}]" for c in range(COLUMNS)]
_COLUMN_OF = {text: c for c, text in enumerate(_COLUMN_STRINGS)}  # "[3]" -> 3
_EVERY_COLUMN = {key: c for c, key in enumerate(_COLUMN_KEYS)}
_SHOWS = {EMPTY: ".", 0: MARKS[0], 1: MARKS[1]}
_NUMBERS = " ".join(_COLUMN_KEYS)
_GRID_HEAD = "Board (you are '{}'; . is empty; column numbers below):"
_TURN = re.compile(re.escape(_GRID_HEAD).replace(re.escape("{}"), "([XO])") + r"\n(.*)", re.DOTALL)
_GRID_READ = re.compile("\n".join([" ".join([r"([.XO])"] * COLUMNS)] * ROWS) + "\n" + re.escape(_NUMBERS))
_LETTERS = "abcdefg"
_COLUMNS_HEAD = "Columns (you are '{}'; a-g are columns 0-6; pieces from the bottom up, M yours, T theirs):"
_TURN_COLUMNS = re.compile(
    re.escape(_COLUMNS_HEAD).replace(re.escape("{}"), "([XO])")
    + "".join(f" {letter}([MT]{{0,{ROWS}}})" for letter in _LETTERS)
    + r"(?: Drops:(?: [a-g](?:MT|M|T|E))+)?"
)


def _column_words(state: ConnectFourState, player: int) -> str:
    """A word per column: its letter and its pieces from the bottom up, M for ``player``'s, T for the other's."""
    board, pieces = state.board, {player: "M", 1 - player: "T"}
    return "".join(
        f" {_LETTERS[c]}" + "".join(pieces[board[COLUMNS * row + c]] for row in range(state.heights[c]))
        for c in range(COLUMNS)
    )


def _drop_words(state: ConnectFourState, player: int) -> str:
    """`` Drops:`` and a word per open column: its letter and whose four a piece landing there completes."""
    mine, theirs = set(state.completing_columns(player)), set(state.completing_columns(1 - player))
    words = [
        f" {_LETTERS[c]}" + (("M" if c in mine else "") + ("T" if c in theirs else "") or "E")
        for c in range(COLUMNS)
        if state.heights[c] < ROWS
    ]
    return " Drops:" + "".join(words)


PROMPT = """\
You are Player {me} in Connect Four, a zero-sum game for two players. Your pieces are '{mark}'; \
your opponent (Player {other}) plays '{other_mark}'. The board stands upright: 7 columns, numbered 0 to 6 \
from left to right, and 6 rows. Players take turns dropping one piece into a column that is not full, \
Player 0 first; the piece falls to the lowest empty cell of that column. The first player with four \
pieces in a line, horizontally, vertically or diagonally, wins; a full board without such a line is a draw.
On your turn, name the column in square brackets, for example [3]. Choosing a full column or anything \
that is not a column number is an invalid move and loses the game."""


class ConnectFour(MarkGame):
    name = "ConnectFour"
    description = "Connect Four on 6 rows x 7 columns; drop into columns 0-6; four in a line wins (no chance)."
    state_class = ConnectFourState
    MARKS, BOARDS, PROMPT = MARKS, BOARDS, PROMPT  # the module's facts, as MarkGame reads them
    DRAWN = "The board is full with no four in a line: a draw."
    WON = "Player {player} made four in a line and wins."

    def render(self, state: ConnectFourState) -> str:
        board = state.board
        rows = [" ".join(_SHOWS[board[COLUMNS * row + c]] for c in range(COLUMNS)) for row in reversed(range(ROWS))]
        return "\n".join([*rows, _NUMBERS])

    def turn_message(self, state: ConnectFourState, player: int) -> str:
        if self.layout == "grid":
            return f"{_GRID_HEAD.format(MARKS[player])}\n{self.render(state)}"
        text = _COLUMNS_HEAD.format(MARKS[player]) + _column_words(state, player)
        return text + _drop_words(state, player) if self.layout == "threats" else text

    def player_view(self, state: ConnectFourState, player: int) -> dict:
        """board: 42 cells, ``7 * row + column`` with row 0 the bottom, -1 empty else the player index;
        me: your index (your mark is ``MARKS[me]``)."""
        return {"board": list(state.board), "me": player}

    @staticmethod
    def read_position(observation: str) -> dict[str, Any] | None:
        """``player_view`` read back from the observation's latest turn message (any obs_format), or
        None when that is not a Connect Four turn."""
        turn = latest_turn(observation)
        columns = None if turn is None else _TURN_COLUMNS.fullmatch(turn.message)
        if columns is not None:
            me = MARKS.index(columns.group(1))
            board = [EMPTY] * CELLS
            for c, pieces in enumerate(columns.groups()[1:]):
                for row, piece in enumerate(pieces):
                    board[COLUMNS * row + c] = me if piece == "M" else 1 - me
            return {"board": board, "me": me}
        head = None if turn is None else _TURN.fullmatch(turn.message)
        if head is None:
            return None
        grid = _GRID_READ.fullmatch(head.group(2))
        if grid is None:
            raise PositionUnreadable("ConnectFour", "a readable board (six rows of seven cells, each ., X or O)")
        shown = grid.groups()  # the top row first
        rows = [shown[COLUMNS * i : COLUMNS * (i + 1)] for i in reversed(range(ROWS))]
        board = [EMPTY if s == "." else MARKS.index(s) for row in rows for s in row]
        if any(board[cell] == EMPTY and board[cell + COLUMNS] != EMPTY for cell in range(CELLS - COLUMNS)):
            raise PositionUnreadable("ConnectFour", "a board with no piece over an empty cell")
        return {"board": board, "me": MARKS.index(head.group(1))}

    def legal_action_strings(self, state: ConnectFourState) -> list[str]:
        heights = state.heights
        return [_COLUMN_STRINGS[c] for c in range(COLUMNS) if heights[c] < ROWS]

    def parse(self, state: ConnectFourState, text: str) -> int:
        heights = state.heights
        column = _COLUMN_OF.get(text)  # the exact answer "[3]", the usual one, without building the options
        if column is not None and heights[column] < ROWS:
            return column
        legal = self.legal_action_strings(state)
        column = choose(text, _EVERY_COLUMN, legal)  # any column number: a full one gets its own reason
        if heights[column] == ROWS:
            raise InvalidMove(f"column {column} is full; legal: {', '.join(legal)}")
        return column

    def move_messages(self, state: ConnectFourState, player: int, column: int) -> list[Message]:
        return [(None, f"Player {player} dropped '{MARKS[player]}' into column {column}.")]
