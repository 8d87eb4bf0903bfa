"""How often a policy takes an available win, or blocks a threat, at Tic-Tac-Toe, read exactly off
its answer log-probabilities (as ``read_policy`` reads Kuhn).

Win-or-draw against ``random`` mixes many things; these two numbers isolate whether the policy reads
the board at all. Every position a player can face (the 4,520 non-terminal positions reachable from
the empty board) is built through our env, so the model scores the very observation it would play
from. The probability of each legal cell's answer is normalised over the legal cells; whatever is
left is mass on invalid answers, reported on its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import cache

from spiral_arena.analysis.read_policy import ScoreFn, answer_text, replay_moves, tactics_read_out
from spiral_arena.core.env import TextGameEnv
from spiral_arena.games.tictactoe import EMPTY, LINES, TicTacToeState


def positions() -> list[tuple[int, ...]]:
    """One move sequence for each distinct non-terminal position (board and player to move), in
    depth-first order from the empty board."""
    seen: set[tuple[int, ...]] = set()
    found: list[tuple[int, ...]] = []

    def walk(moves: tuple[int, ...]) -> None:
        state = TicTacToeState()
        for cell in moves:
            state.apply(cell)
        if state.is_terminal() or tuple(state.board) in seen:
            return
        seen.add(tuple(state.board))  # the board says whose turn it is: O moves when the counts are equal
        found.append(moves)
        for cell in state.legal_actions():
            walk((*moves, cell))

    walk(())
    return found


def completing_cells(board: list[int], player: int) -> set[int]:
    """Empty cells that would give ``player`` three in a line."""
    cells = set()
    for line in LINES:
        marks = [board[c] for c in line]
        if marks.count(player) == 2 and marks.count(EMPTY) == 1:
            cells.add(line[marks.index(EMPTY)])
    return cells


def replayed(game: str = "TicTacToe-v0", obs_format: str = "", stride: int = 1) -> Iterator[TextGameEnv]:
    """The env of ``game`` (its options: the text a policy reads) at every ``stride``-th position of
    ``positions()``, each reached by playing its moves through the env; one env, moved on at each step of
    the iteration, so read it before the next."""
    return replay_moves(game, obs_format, positions(), stride)


def tactics_from_scores(
    score: ScoreFn, obs_format: str = "", stride: int = 1, game: str = "TicTacToe-v0"
) -> dict[str, float]:
    """``takes_win``: mean probability of completing a line where the player can; ``blocks``: where it
    cannot and the opponent threatens to complete a line on exactly one cell, mean probability of
    taking that cell (against two threats no block saves the game, and perfect play is indifferent);
    each over every ``stride``-th position; ``invalid_mass``: mean probability left off the legal
    cells in those positions; and how many positions each mean is over. ``game`` is the Tic-Tac-Toe
    the policy plays, with its options (``TicTacToe-v0:board=cells``): the text it is read on."""
    return tactics_read_out(score, tactical_positions(game, obs_format, stride))


@cache
def tactical_positions(game: str, obs_format: str, stride: int) -> tuple[tuple, ...]:
    """Every ``stride``-th position with a win to take or a single threat to block, as (legal cells,
    wanted cells, a win?, observation, answers): the same for every read-out of one text, so built once
    (replaying the 4,520 positions was a third of a training evaluation)."""
    cases = []
    for env in replayed(game, obs_format, stride):
        state = env.state_
        me = state.current_player
        wins, threats = completing_cells(state.board, me), completing_cells(state.board, 1 - me)
        if not wins and len(threats) != 1:
            continue
        legal = tuple(state.legal_actions())
        answers = tuple(answer_text(f"[{c}]") for c in legal)
        cases.append((legal, frozenset(wins or threats), bool(wins), env.observe(env.agent_selection), answers))
    return tuple(cases)


@cache
def uniform_tactics() -> dict[str, float]:
    """The read-out of uniform play over the legal cells: each number's chance level."""
    return tactics_from_scores(lambda observation, answers: [-math.log(len(answers))] * len(answers))
