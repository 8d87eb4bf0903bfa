"""What the two games of marks on a board share (TicTacToe, Connect Four): two players, no chance, a board
layout chosen by the ``board`` option, a rules prompt naming each player's mark, the final board with the
verdict at the end, and a served view's board told as a turn message; their states share the board, the turn and
the end of a game. Each game declares its facts as data (``MARKS``, ``BOARDS``, ``PROMPT``, ``DRAWN``, ``WON``)
and keeps its own rules (where a mark lands, what makes a line) and texts."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from spiral_arena.core.game import TERMINAL, TextGame, winner_returns

EMPTY = -1  # a cell no player has marked


class MarkState:
    """A board of ``CELLS`` cells holding ``EMPTY`` or the index of the player who marked it, and whose turn it is.
    A game's state class says where a move's mark lands and whether it made a line; ``mark`` ends the turn."""

    CELLS: ClassVar[int]

    def __init__(self) -> None:
        self.board = [EMPTY] * self.CELLS
        self.current_player = 0
        self.winner: int | None = None
        self.moves = 0

    def mark(self, cell: int, player: int, made_a_line: bool) -> None:
        """``player``'s mark on ``cell``: the game ends on a line or on a full board, else the other player moves."""
        self.board[cell] = player
        self.moves += 1
        if made_a_line:
            self.winner = player
            self.current_player = TERMINAL
        else:
            self.current_player = TERMINAL if self.moves == self.CELLS else 1 - player

    def is_terminal(self) -> bool:
        return self.current_player == TERMINAL

    def returns(self) -> tuple[float, float]:
        return winner_returns(self.winner)


class MarkGame(TextGame):
    default_obs_format = "first_last"
    has_chance = False
    MARKS: ClassVar[tuple[str, str]]  # player 0's mark, player 1's
    BOARDS: ClassVar[tuple[str, ...]]  # the layouts of the turn message, the first the default
    PROMPT: ClassVar[str]  # the rules, with {me}, {mark}, {other} and {other_mark}
    DRAWN: ClassVar[str]  # the verdict of a full board without a winner
    WON: ClassVar[str]  # the verdict of a win, with {player}
    state_class: ClassVar[type]  # its states, with ``from_view(board, player)``

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.text_options = {"board": cls.BOARDS}

    def __init__(self, board: str = "grid") -> None:
        if board not in self.BOARDS:
            raise ValueError(f"board must be one of {self.BOARDS}, got {board!r}")
        self.layout = board

    def new_state(self, rng: np.random.Generator | None) -> Any:
        return self.state_class()

    def prompt(self, player: int) -> str:
        marks = self.MARKS
        return self.PROMPT.format(me=player, mark=marks[player], other=1 - player, other_mark=marks[1 - player])

    def outcome_reason(self, state: Any) -> str:
        verdict = self.DRAWN if state.winner is None else self.WON.format(player=state.winner)
        return f"Final board:\n{self.render(state)}\n{verdict}"

    def view_message(self, view: dict[str, Any]) -> str:
        """The turn message of ``view``'s board for its player, in this game's layout."""
        return self.turn_message(self.state_class.from_view(view["board"], view["me"]), view["me"])
