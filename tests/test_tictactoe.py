"""TicTacToe-v0: lines, draws, invalid moves, marks, equality with OpenSpiel's tic_tac_toe, random-play statistics."""

from __future__ import annotations

import copy
import itertools
import re
from collections import Counter
from fractions import Fraction

import numpy as np
import pyspiel
import pytest
from conftest import play_random_game

import spiral_arena
from spiral_arena.agents import RandomAgent
from spiral_arena.games.tictactoe import TicTacToeState

ROWS = [(3 * r, 3 * r + 1, 3 * r + 2) for r in range(3)]
COLUMNS = [(c, c + 3, c + 6) for c in range(3)]
DIAGONALS = [(0, 4, 8), (2, 4, 6)]
ALL_LINES = ROWS + COLUMNS + DIAGONALS
# Ends full with no line: O X O / O X X / X O O.
DRAW = (0, 1, 2, 4, 3, 5, 7, 6, 8)
SEAT_AND_MARKS = re.compile(r"You are Player (\d)\b.*Your mark is '(\w)'; your opponent \(Player (\d)\) plays '(\w)'")


def winning_sequence(line, winner):
    """Moves (player 0 first) in which ``winner`` completes ``line`` with its last move."""
    others = [c for c in range(9) if c not in line]
    if winner == 0:
        fillers = others[:2]
    else:  # player 0's three moves must not make a line themselves
        fillers = next(t for t in itertools.combinations(others, 3) if t not in ALL_LINES)
    first, second = (line, fillers) if winner == 0 else (fillers, line)
    return [c for pair in itertools.zip_longest(first, second) for c in pair if c is not None]


def new_env(**kwargs):
    env = spiral_arena.make("TicTacToe-v0", **kwargs)
    env.reset(seed=0)
    return env


@pytest.mark.parametrize("winner", [0, 1])
@pytest.mark.parametrize("line", ALL_LINES)
def test_every_line_wins(line, winner):
    moves = winning_sequence(line, winner)
    assert len(moves) == (5 if winner == 0 else 6)
    env = new_env()
    for i, cell in enumerate(moves):
        assert not env.state_.is_terminal()
        assert env.agent_selection == f"player_{i % 2}"
        env.step(f"[{cell}]")
    assert all(env.terminations.values())
    assert env.state_.winner == winner
    expected = [-1.0, -1.0]
    expected[winner] = 1.0
    assert env.returns == tuple(expected)
    assert f"Player {winner} completed a line and wins" in env.observe("player_0")


def test_full_board_without_a_line_is_a_draw():
    env = new_env()
    for cell in DRAW:
        assert not env.state_.is_terminal()
        env.step(f"[{cell}]")
    assert all(env.terminations.values())
    assert env.state_.winner is None and env.state_.moves == 9
    assert env.returns == (0.0, 0.0)
    assert "a draw" in env.observe("player_1")


def test_no_move_after_the_end():
    state = TicTacToeState()
    for cell in winning_sequence(ROWS[0], 0):
        state.apply(cell)
    assert state.is_terminal() and state.legal_actions() == []
    with pytest.raises(ValueError, match="not a legal move"):
        state.apply(8)


@pytest.mark.parametrize(
    "answer, reason",
    [
        ("[4]", r"\[4\] is not a legal action now; legal: \[0\], \[1\], \[2\], \[3\], \[5\], "),  # occupied
        ("[9]", r"\[9\] is not a legal action now"),
        ("[-1]", r"\[-1\] is not a legal action now"),
        ("[10]", r"\[10\] is not a legal action now"),
        ("[four]", r"\[four\] is not a legal action now"),
        ("[4.0]", r"\[4\.0\] is not a legal action now"),
        ("", "no action found"),
        ("I would like to take the centre cell if it is still free", "no action found"),
    ],
)
def test_invalid_answers_lose_with_a_reason(answer, reason):
    env = new_env()
    env.step("[4]")
    env.step(answer)
    assert all(env.terminations.values())
    assert env.returns == (1.0, -1.0)
    assert env.infos["player_1"]["offender"] == "player_1"
    assert re.search(reason, env.infos["player_1"]["invalid_move"])
    assert "[4]" not in env.infos["player_1"]["invalid_move"].split("legal:")[-1]
    assert "invalid move" in env.observe("player_0")


def test_each_seat_is_told_its_own_mark_and_sees_it_on_the_board():
    env = new_env()
    told = {}
    for p in (0, 1):
        prompt = env.game.prompt(p)
        found = re.search(SEAT_AND_MARKS, prompt)
        assert found is not None, prompt
        assert (int(found.group(1)), int(found.group(3))) == (p, 1 - p)
        told[p] = (found.group(2), found.group(4))
    assert told[0] == (told[1][1], told[1][0]) and told[0][0] != told[0][1]
    for p, cell in ((0, 0), (1, 8)):
        assert f"you are '{told[p][0]}'" in env.observe(f"player_{p}")
        env.step(f"[{cell}]")
    board = env.observe("player_0").split("\n\n")[-1]  # player 0's turn: the latest message shows the board
    assert re.search(rf"^ {told[0][0]} \| 1 \| 2$", board, re.M)  # player 0's mark on cell 0
    assert re.search(rf"^ 6 \| 7 \| {told[1][0]}$", board, re.M)  # player 1's mark on cell 8


def test_the_cells_layout_names_each_cell_by_letter_and_whose_it_is_for_the_player_to_act():
    env = spiral_arena.make("TicTacToe-v0:board=cells", obs_format="last")
    env.reset()
    for cell in (4, 0, 8):  # O on 4 and 8, X on 0; X (player 1) to act
        env.step(f"[{cell}]")
    head = "Board (you are 'X'; cells a-i are 0-8; M yours, T theirs, E empty):"
    assert env.observe("player_1").endswith(f"{head} aM bE cE dE eT fE gE hE iT")
    env.step("[2]")  # O's turn: the same board from the other side
    assert env.observe("player_0").endswith(head.replace("'X'", "'O'") + " aT bE cT dE eM fE gE hE iM")
    assert env.game.render(env.state_).startswith(" X | 1 | X")  # render and the final board stay the grid


def test_the_lines_layout_adds_each_line_through_each_empty_cell_seen_from_the_player_to_act():
    env = spiral_arena.make("TicTacToe-v0:board=lines", obs_format="last")
    env.reset()
    for cell in (4, 0, 2, 1):  # O on 4 and 2, X on 0 and 1; O (player 0) to act: g (6) completes O's diagonal
        env.step(f"[{cell}]")
    cells, lines = env.observe("player_0").splitlines()[-1].split(" Lines: ")
    assert cells.endswith("E empty): aT bT cM dE eM fE gE hE iE")
    # per empty cell, its lines in the order of LINES_THROUGH (rows, columns, diagonals), the other two
    # cells sorted M, T, E
    assert lines.split() == [
        "dME", "dTE",  # row def: e; column adg: a
        "fME", "fME",  # row def: e; column cfi: c
        "gEE", "gTE", "gMM",  # row ghi; column adg: a; diagonal ceg: c and e, the win
        "hEE", "hMT",  # row ghi; column beh: b and e
        "iEE", "iME", "iMT",  # row ghi; column cfi: c; diagonal aei: a and e
    ]  # fmt: skip


@pytest.mark.parametrize("board", ["grid", "cells", "lines"])
def test_every_position_reads_back_as_the_player_view(board):
    from spiral_arena.analysis.tictactoe import positions
    from spiral_arena.games.tictactoe import TicTacToe

    env = spiral_arena.make(f"TicTacToe-v0:board={board}")
    for moves in positions()[::7]:
        env.reset()
        for cell in moves:
            env.step(f"[{cell}]")
        agent = env.agent_selection
        assert TicTacToe.read_position(env.observe(agent)) == env.infos[agent]["view"], moves


def test_an_unknown_board_layout_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match=r"board must be one of \('grid', 'cells', 'lines'\), got 'rows'"):
        spiral_arena.make("TicTacToe-v0:board=rows")


def test_openspiel_action_ids_are_row_major_cells():
    state = pyspiel.load_game("tic_tac_toe").new_initial_state()
    assert [state.action_to_string(0, a) for a in range(9)] == [f"x({a // 3},{a % 3})" for a in range(9)]


def test_random_games_match_openspiel():
    game = pyspiel.load_game("tic_tac_toe")
    rng = np.random.default_rng(7)
    outcomes = Counter()
    for _ in range(3000):
        ours, theirs = TicTacToeState(), game.new_initial_state()
        while not theirs.is_terminal():
            assert not ours.is_terminal()
            assert ours.current_player == theirs.current_player()
            assert ours.legal_actions() == theirs.legal_actions()
            cell = ours.legal_actions()[int(rng.integers(len(ours.legal_actions())))]
            ours.apply(cell)
            theirs.apply_action(cell)
        assert ours.is_terminal()
        assert ours.returns() == tuple(theirs.returns())
        outcomes[ours.returns()] += 1
    assert set(outcomes) == {(1.0, -1.0), (-1.0, 1.0), (0.0, 0.0)}


def test_env_games_match_openspiel():
    game = pyspiel.load_game("tic_tac_toe")
    env = spiral_arena.make("TicTacToe-v0")
    agents = [RandomAgent(seed=1), RandomAgent(seed=2)]
    for seed in range(300):
        env.reset(seed=seed)
        theirs = game.new_initial_state()
        for agent in env.agent_iter():
            obs, _, term, trunc, info = env.last()
            if term or trunc:
                env.step(None)
                continue
            assert info["legal_actions"] == [f"[{a}]" for a in theirs.legal_actions()]
            answer = agents[env.possible_agents.index(agent)].act(obs, info)
            theirs.apply_action(int(answer.strip("[]")))
            env.step(answer)
        assert theirs.is_terminal()
        assert env.returns == tuple(theirs.returns())


def exact_random_play(state, cache):
    """(P0 wins, P1 wins, draw) probabilities under uniform random legal play, on the rules layer."""
    if state.is_terminal():
        r0 = state.returns()[0]
        return (Fraction(r0 == 1), Fraction(r0 == -1), Fraction(r0 == 0))
    key = tuple(state.board)
    if key not in cache:
        legal = state.legal_actions()
        total = [Fraction(0)] * 3
        for cell in legal:
            child = copy.deepcopy(state)
            child.apply(cell)
            for i, p in enumerate(exact_random_play(child, cache)):
                total[i] += p / len(legal)
        cache[key] = tuple(total)
    return cache[key]


def test_exact_random_play_statistics():
    assert exact_random_play(TicTacToeState(), {}) == (Fraction(737, 1260), Fraction(121, 420), Fraction(8, 63))


def test_simulated_random_play_statistics():
    n = 20_000
    env = spiral_arena.make("TicTacToe-v0")
    agents = [RandomAgent(seed=11), RandomAgent(seed=12)]
    counts = Counter(play_random_game(env, agents, seed=seed) for seed in range(n))
    for returns, percent in (((1.0, -1.0), 58.5), ((-1.0, 1.0), 28.8), ((0.0, 0.0), 12.7)):
        assert abs(100 * counts[returns] / n - percent) < 1.5, (returns, counts)
