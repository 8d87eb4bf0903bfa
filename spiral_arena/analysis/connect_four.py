"""How often a policy takes an available win, or blocks the opponent's, at Connect Four, read exactly off
its answer log-probabilities (as ``analysis.tictactoe`` reads Tic-Tac-Toe).

Connect Four has far too many positions to visit them all, so the read-out uses a fixed set, the same on
every run: games of uniform random play on the rules layer, drawn one after another from
``numpy.random.default_rng(SEED)``. From each game it takes at most one position of each kind, drawn by
that generator among the game's positions of that kind: a *win* position, where the player to move can
make four in a line with its next piece, and a *block* position, where it cannot and the opponent could
make four in exactly one column (against two such columns no block saves the game). A board taken once
is not taken again; games are drawn until there are ``POSITIONS`` of each kind. Each position is then
played through our env, so the model scores the very observation it would play from. The probability of
each legal column's answer is normalised over the legal columns; whatever is left is mass on invalid
answers, reported on its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import cache

import numpy as np

from spiral_arena.analysis.read_policy import ScoreFn, answer_text, replay_moves, tactics_read_out
from spiral_arena.core.env import TextGameEnv
from spiral_arena.games.connect_four import ConnectFourState

SEED = 0
POSITIONS = 300  # of each kind


@cache
def positions() -> tuple[tuple[tuple[int, ...], bool], ...]:
    """The read-out's positions as (the moves from the empty board, a win position?), in the order found."""
    rng = np.random.default_rng(SEED)
    found: list[tuple[tuple[int, ...], bool]] = []
    taken: set[tuple[int, ...]] = set()
    counts = {True: 0, False: 0}
    while min(counts.values()) < POSITIONS:
        state, moves = ConnectFourState(), []
        met: dict[bool, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {True: [], False: []}
        while not state.is_terminal():
            me = state.current_player
            if state.completing_columns(me):
                met[True].append((tuple(moves), tuple(state.board)))
            elif len(state.completing_columns(1 - me)) == 1:
                met[False].append((tuple(moves), tuple(state.board)))
            legal = state.legal_actions()
            column = legal[int(rng.integers(len(legal)))]
            state.apply(column)
            moves.append(column)
        for win, candidates in met.items():
            fresh = [(m, board) for m, board in candidates if board not in taken]
            if fresh and counts[win] < POSITIONS:
                chosen, board = fresh[int(rng.integers(len(fresh)))]
                taken.add(board)
                found.append((chosen, win))
                counts[win] += 1
    return tuple(found)


def replayed(game: str = "ConnectFour-v0", obs_format: str = "", stride: int = 1) -> Iterator[TextGameEnv]:
    """The env of ``game`` (its options: the text a policy reads) at every ``stride``-th position of
    ``positions()``, each reached by playing its moves through the env; one env, moved on at each step of
    the iteration, so read it before the next."""
    return replay_moves(game, obs_format, [moves for moves, _ in positions()], stride)


def tactics_from_scores(
    score: ScoreFn, obs_format: str = "", stride: int = 1, game: str = "ConnectFour-v0"
) -> dict[str, float]:
    """``takes_win``: over the win positions, mean probability of a column that makes four; ``blocks``:
    over the block positions, mean probability of the one column where the opponent would make four;
    each over every ``stride``-th position of ``positions()``; ``invalid_mass``: mean probability left
    off the legal columns in those positions; and how many positions each mean is over. ``game`` is the
    Connect Four the policy plays, with its options (``ConnectFour-v0:board=threats``): the text it is
    read on."""
    return tactics_read_out(score, tactical_positions(game, obs_format, stride))


@cache
def tactical_positions(game: str, obs_format: str, stride: int) -> tuple[tuple, ...]:
    """Every ``stride``-th position of ``positions()`` as (legal columns, wanted columns, a win?,
    observation, answers): the same for every read-out of one text, so built once."""
    cases = []
    for env in replayed(game, obs_format, stride):
        state = env.state_
        me = state.current_player
        wins = state.completing_columns(me)  # a block position has none, and one column of the opponent's
        wanted = wins or state.completing_columns(1 - me)
        legal = tuple(state.legal_actions())
        answers = tuple(answer_text(f"[{c}]") for c in legal)
        cases.append((legal, frozenset(wanted), bool(wins), env.observe(env.agent_selection), answers))
    return tuple(cases)


@cache
def uniform_tactics() -> dict[str, float]:
    """The read-out of uniform play over the legal columns: each number's chance level."""
    return tactics_from_scores(lambda observation, answers: [-math.log(len(answers))] * len(answers))
