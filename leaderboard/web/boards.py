"""The board of a match as data the page draws (``spiral-arena web``), for a person who would rather click a
cell than read a drawing made of text.

``board(env, answers)`` is None for a game without a board, else a small JSON dict:

- ``game``: the game's name (``TicTacToe``); ``rows``, ``cols``: the grid's size;
- ``cells``: ``rows`` lists of ``cols`` marks, the top row first, each the mark the game's own text draws there
  (``"X"``, ``"O"``, a Snake's ``"0"``/``"+"``/``"@"``) or ``""`` for an empty cell;
- ``seats``: each seat's mark, in seat order;
- ``last``: the ``[row, col]`` cells of the last move (a Snake round moves both heads), ``[]`` before any;
- ``click``: ``"cell"`` (a person clicks the cell to play) or ``"column"`` (Connect Four: the column);
- ``actions``: ``{"row", "col", "text"}`` for each legal action of the player to act that lands on the board:
  ``text`` is the action exactly as the env lists it (``legal_action_strings`` of that seat's view), placed
  by the env's own parser, so the page never invents a move. ``[]`` once the game is over.

Drawn are the games whose whole board every seat sees (``DRAWINGS``): the board tells a person nothing their
observation does not (a Snake's pending move is not on it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from spiral_arena.core.actions import InvalidMove
from spiral_arena.core.env import TextGameEnv
from spiral_arena.games import connect_four, snake, tictactoe

Cell = tuple[int, int]  # (row, column), row 0 the top row as drawn


@dataclass(frozen=True)
class Drawing:
    """How one game is drawn, from its state (the rules' own object, ``env.state_``)."""

    size: Callable[[Any], tuple[int, int]]  # (rows, columns)
    marks: Callable[[Any], dict[Cell, str]]  # the marked cells
    lands: Callable[[Any, Any], Cell | None]  # the cell a move of the player to act lands on; None: off the board
    seats: tuple[str, ...]  # each seat's mark
    click: str = "cell"  # what a person clicks to move: "cell" or "column"
    # the last move's cells, read from the state; None: found by replaying the answers (a game without chance)
    moved: Callable[[Any], list[Cell]] | None = None


def _tictactoe_marks(state: tictactoe.TicTacToeState) -> dict[Cell, str]:
    return {divmod(c, 3): tictactoe.MARKS[v] for c, v in enumerate(state.board) if v != tictactoe.EMPTY}


def _connect_four_cell(index: int) -> Cell:
    """The drawn cell of ``connect_four``'s index ``7 * row + column``, whose row 0 is the bottom."""
    row, column = divmod(index, connect_four.COLUMNS)
    return connect_four.ROWS - 1 - row, column


def _connect_four_marks(state: connect_four.ConnectFourState) -> dict[Cell, str]:
    return {_connect_four_cell(i): connect_four.MARKS[v] for i, v in enumerate(state.board) if v != connect_four.EMPTY}


def _snake_cell(state: snake.SnakeState, x: int, y: int) -> Cell:
    """The drawn cell of Snake's ``(x, y)``, whose y grows upwards."""
    return state.height - 1 - y, x


def _snake_marks(state: snake.SnakeState) -> dict[Cell, str]:
    """What ``Snake.render`` draws: apples, then bodies, then heads on top."""
    marks = {_snake_cell(state, *cell): "@" for cell in state.apples}
    for p, body in enumerate(state.bodies):
        marks.update({_snake_cell(state, *cell): snake.BODY_MARKS[p] for cell in body[1:]})
        marks[_snake_cell(state, *body[0])] = str(p)
    return marks


def _snake_lands(state: snake.SnakeState, direction: str) -> Cell | None:
    (x, y), (dx, dy) = state.bodies[state.current_player][0], snake.DIRECTIONS[direction]
    on_board = 0 <= x + dx < state.width and 0 <= y + dy < state.height
    return _snake_cell(state, x + dx, y + dy) if on_board else None


def _snake_moved(state: snake.SnakeState) -> list[Cell]:
    """Both heads once a round has been played: the round moved both snakes."""
    return [] if state.last_moves is None else [_snake_cell(state, *body[0]) for body in state.bodies]


DRAWINGS: dict[type, Drawing] = {
    tictactoe.TicTacToe: Drawing(
        size=lambda state: (3, 3),
        marks=_tictactoe_marks,
        lands=lambda state, cell: divmod(cell, 3),
        seats=tictactoe.MARKS,
    ),
    connect_four.ConnectFour: Drawing(
        size=lambda state: (connect_four.ROWS, connect_four.COLUMNS),
        marks=_connect_four_marks,
        lands=lambda state, column: _connect_four_cell(connect_four.COLUMNS * state.heights[column] + column),
        seats=connect_four.MARKS,
        click="column",
    ),
    snake.Snake: Drawing(
        size=lambda state: (state.height, state.width),
        marks=_snake_marks,
        lands=_snake_lands,
        seats=("0", "1"),
        moved=_snake_moved,
    ),
}


def _replayed_last(env: TextGameEnv, drawing: Drawing, answers: Sequence[str]) -> list[Cell]:
    """The last move's cell, found by replaying ``answers`` with the game's own parser and rules (an invalid
    answer changes nothing, as in the env); none if the replay does not reach the env's board."""
    state, last = env.game.new_state(None), []
    for text in answers:
        try:
            move = env.game.parse(state, text)
        except InvalidMove:
            continue
        last = [drawing.lands(state, move)]
        state.apply(move)
    return last if state.board == env.state_.board else []


def _actions(env: TextGameEnv, drawing: Drawing) -> list[dict[str, Any]]:
    """Each legal action of the player to act that lands on the board, with the cell it lands on."""
    state = env.state_
    if state.is_terminal():
        return []
    actions = []
    for text in env.view(state.current_player).legal_action_strings(state) or []:
        cell = drawing.lands(state, env.game.parse(state, text))
        if cell is not None:  # a Snake stepping off the board: the legal-move buttons still offer it
            actions.append({"row": cell[0], "col": cell[1], "text": text})
    return actions


def board(env: TextGameEnv, answers: Sequence[str]) -> dict[str, Any] | None:
    """The board of the game in ``env`` after ``answers`` (every answer the env was given, in order), as the
    module docstring describes; None for a game without one, or before the game has begun."""
    drawing = DRAWINGS.get(type(env.game))
    state = env.state_
    if drawing is None or state is None:
        return None
    rows, cols = drawing.size(state)
    cells = [[""] * cols for _ in range(rows)]
    for (row, col), mark in drawing.marks(state).items():
        cells[row][col] = mark
    last = drawing.moved(state) if drawing.moved is not None else _replayed_last(env, drawing, answers)
    return {
        "game": env.game.name,
        "rows": rows,
        "cols": cols,
        "cells": cells,
        "seats": list(drawing.seats),
        "last": [list(cell) for cell in last],
        "click": drawing.click,
        "actions": _actions(env, drawing),
    }
