"""ConnectFour-v0: equality with OpenSpiel's connect_four, the env's API, answers and board layouts, the
expert, and the tactics read-out (``spiral_arena.analysis.connect_four``).

OpenSpiel's conventions, checked in ``test_openspiel_conventions``: action ``a`` drops into column ``a``
(0-6, left to right, ``action_to_string`` gives ``x3``), player 0 plays ``x`` and moves first, and its
board prints the top row first. Ours are the same: the action is the column, player 0 drops 'X' first.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pyspiel
import pytest
from test_experts import expert_vs_random

import spiral_arena
from spiral_arena.agents import RandomAgent, make_agent
from spiral_arena.agents.expert import ExpertAgent
from spiral_arena.agents.experts.connect_four import best_columns
from spiral_arena.analysis.connect_four import POSITIONS, positions, tactics_from_scores, uniform_tactics
from spiral_arena.core.observations import OBS_FORMATS
from spiral_arena.core.readback import PositionUnreadable, latest_turn
from spiral_arena.games.connect_four import COLUMNS, EMPTY, ROWS, ConnectFour, ConnectFourState
from spiral_arena.games.tictactoe import TicTacToe
from spiral_arena.serve import read_info
from spiral_arena.testing import api_test

# A full board without four in a line (found by expert self-play; OpenSpiel agrees it is a draw).
DRAW = [int(c) for c in "333333654110010011546466456525516224400222"]
SEAT_AND_MARKS = re.compile(
    r"You are Player (\d)\b.*Your pieces are '(\w)'; your opponent \(Player (\d)\) plays '(\w)'"
)


def state_after(moves) -> ConnectFourState:
    state = ConnectFourState()
    for column in moves:
        state.apply(column)
    return state


def openspiel_after(moves):
    state = pyspiel.load_game("connect_four").new_initial_state()
    for column in moves:
        state.apply_action(column)
    return state


def env_after(moves, game="ConnectFour-v0", **kwargs):
    env = spiral_arena.make(game, **kwargs)
    env.reset(seed=0)
    for column in moves:
        env.step(f"[{column}]")
    return env


# ---- rules, against OpenSpiel ----------------------------------------------------------------------


def test_openspiel_conventions():
    state = pyspiel.load_game("connect_four").new_initial_state()
    assert state.current_player() == 0 and state.legal_actions() == list(range(COLUMNS))
    assert [state.action_to_string(0, a) for a in range(COLUMNS)] == [f"x{a}" for a in range(COLUMNS)]
    assert [state.action_to_string(1, a) for a in range(COLUMNS)] == [f"o{a}" for a in range(COLUMNS)]
    theirs, ours = openspiel_after([2, 2, 6]), state_after([2, 2, 6])
    assert str(theirs).splitlines()[-2:] == ["..o....", "..x...x"]  # the bottom row last; x moved first
    assert ConnectFour().render(ours).splitlines()[-3:] == [". . O . . . .", ". . X . . . X", "0 1 2 3 4 5 6"]


def test_random_games_match_openspiel():
    """3,000 seeded random playouts applied move by move to both: the same player to act, legal columns
    and terminal flag at every step, then the same returns and the same final board."""
    game = pyspiel.load_game("connect_four")
    rng = np.random.default_rng(7)
    outcomes = Counter()
    for _ in range(3000):
        ours, theirs = ConnectFourState(), game.new_initial_state()
        while not theirs.is_terminal():
            assert not ours.is_terminal()
            assert ours.current_player == theirs.current_player()
            legal = ours.legal_actions()
            assert legal == theirs.legal_actions()
            column = legal[int(rng.integers(len(legal)))]
            ours.apply(column)
            theirs.apply_action(column)
        assert ours.is_terminal() and ours.legal_actions() == []
        assert ours.returns() == tuple(theirs.returns())
        rows = ConnectFour().render(ours).splitlines()[:-1]
        assert [row.replace(" ", "").lower() for row in rows] == str(theirs).splitlines()
        outcomes[ours.returns()] += 1
    assert outcomes[(1.0, -1.0)] > outcomes[(-1.0, 1.0)] > 1000  # the first player wins more often at random


def test_a_full_board_without_four_is_a_draw_as_in_openspiel():
    theirs = openspiel_after(DRAW)
    assert theirs.is_terminal() and theirs.returns() == [0.0, 0.0]
    env = env_after(DRAW)
    assert all(env.terminations.values()) and env.returns == (0.0, 0.0)
    assert env.state_.winner is None and env.state_.moves == ROWS * COLUMNS
    assert "no four in a line: a draw" in env.observe("player_0")


@pytest.mark.parametrize(
    ("moves", "winner"),
    [
        ([0, 1, 0, 1, 0, 1, 0], 0),  # vertical
        ([0, 0, 1, 1, 2, 2, 3], 0),  # horizontal on the bottom row
        ([0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3], 0),  # diagonal up to the right: (0,0) (1,1) (2,2) (3,3)
        ([6, 5, 5, 4, 4, 3, 4, 3, 3, 0, 3], 0),  # diagonal up to the left: (6,0) (5,1) (4,2) (3,3)
        ([6, 0, 6, 1, 5, 2, 6, 3], 1),  # player 1 on the bottom row
    ],
)
def test_four_in_each_direction_wins_as_in_openspiel(moves, winner):
    env = env_after(moves[:-1])
    assert not any(env.terminations.values())
    env.step(f"[{moves[-1]}]")
    assert all(env.terminations.values()) and env.state_.winner == winner
    assert env.returns == tuple(openspiel_after(moves).returns())
    assert f"Player {winner} made four in a line and wins" in env.observe("player_0")


def test_no_move_into_a_full_column_or_after_the_end():
    state = state_after([3] * ROWS)
    assert 3 not in state.legal_actions()
    with pytest.raises(ValueError, match="column 3 is not a legal move"):
        state.apply(3)
    with pytest.raises(ValueError, match="column 7 is not a legal move"):
        state.apply(7)
    won = state_after([0, 1, 0, 1, 0, 1, 0])
    assert won.is_terminal() and won.legal_actions() == []
    with pytest.raises(ValueError, match="not a legal move"):
        won.apply(4)


def test_env_games_match_openspiel():
    game = pyspiel.load_game("connect_four")
    env = spiral_arena.make("ConnectFour-v0")
    agents = [RandomAgent(seed=1), RandomAgent(seed=2)]
    for seed in range(200):
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


# ---- the env and its text --------------------------------------------------------------------------


@pytest.mark.parametrize("board", ["grid", "columns", "threats"])
def test_pettingzoo_api_test(board):
    api_test(spiral_arena.make(f"ConnectFour-v0:board={board}"), num_cycles=200)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("[3]", r"^column 3 is full; legal: \[0\], \[1\], \[2\], \[4\], \[5\], \[6\]$"),
        ("\\boxed{[3]}", r"^column 3 is full; "),
        ("[7]", r"^\[7\] is not a legal action now; legal: \[0\], \[1\], \[2\], \[4\], \[5\], \[6\]$"),
        ("[-1]", r"^\[-1\] is not a legal action now"),
        ("[three]", r"^\[three\] is not a legal action now"),
        ("[3.0]", r"^\[3\.0\] is not a legal action now"),
        ("", "^no action found; answer with one of \\[0\\], \\[1\\], \\[2\\], \\[4\\]"),
        ("I would drop my piece into the middle column if it had room", "^no action found"),
    ],
)
def test_invalid_answers_lose_with_a_reason(answer, reason):
    env = env_after([3] * ROWS)  # column 3 is full; player 0 to act
    env.step(answer)
    assert all(env.terminations.values())
    assert env.returns == (-1.0, 1.0)
    assert env.infos["player_0"]["offender"] == "player_0"
    assert re.search(reason, env.infos["player_0"]["invalid_move"])


@pytest.mark.parametrize("answer", ["[2]", "\\boxed{[2]}", "\\boxed{2}", "I drop it in [2]", " [2] ", "2"])
def test_the_ways_of_writing_a_column_that_are_accepted(answer):
    env = env_after([3] * ROWS)
    assert env.check_action(answer) is None
    env.step(answer)
    assert env.state_.board[2] == 0


def test_each_seat_is_told_its_own_mark_and_the_rules():
    env = env_after([])
    told = {}
    for p in (0, 1):
        prompt = env.game.prompt(p)
        found = re.search(SEAT_AND_MARKS, prompt)
        assert found is not None, prompt
        assert (int(found.group(1)), int(found.group(3))) == (p, 1 - p)
        told[p] = (found.group(2), found.group(4))
        for rule in ("7 columns, numbered 0 to 6", "6 rows", "lowest empty cell", "Player 0 first", "four"):
            assert rule in prompt
    assert told == {0: ("X", "O"), 1: ("O", "X")}
    for p, column in ((0, 0), (1, 6)):
        assert f"you are '{told[p][0]}'" in env.observe(f"player_{p}")
        env.step(f"[{column}]")
    assert env.observe("player_0").endswith("\n. . . . . . .\nX . . . . . O\n0 1 2 3 4 5 6")


def test_the_columns_and_threats_layouts_seen_from_the_player_to_act():
    # X: 0, 1, 2 on the bottom row and 6; O: 3 on the bottom row, 4, 4, 4 up column 4; column 5 full
    moves = [0, 4, 1, 4, 2, 4, *[5] * ROWS, 6, 3]
    env = env_after(moves, "ConnectFour-v0:board=threats", obs_format="last")
    head = "Columns (you are 'X'; a-g are columns 0-6; pieces from the bottom up, M yours, T theirs):"
    words = " aM bM cM dT eTTT fMTMTMT gM"  # f is full: no drop word; e: O's fourth piece up column 4
    assert env.observe("player_0").endswith(f"{head}{words} Drops: aE bE cE dE eT gE")
    env.step("[6]")  # X drops on column 6; O to act reads the board from its own side
    flipped = " aT bT cT dM eMMM fTMTMTM gTT"
    assert env.observe("player_1").endswith(head.replace("'X'", "'O'") + flipped + " Drops: aE bE cE dE eM gE")
    columns = env_after([*moves, 6], "ConnectFour-v0:board=columns", obs_format="last")
    assert columns.observe("player_1").endswith(head.replace("'X'", "'O'") + flipped)
    assert env.game.render(env.state_).startswith(". . . . . O .\n")  # render and the final board stay the grid


def test_a_drop_that_completes_both_players_fours_says_so():
    # the bottom row X X X _ O O O: a piece on column 3 makes four for whoever drops it
    env = env_after([0, 4, 1, 5, 2, 6], "ConnectFour-v0:board=threats", obs_format="last")
    assert env.observe("player_0").endswith("Drops: aE bE cE dMT eE fE gE")


@pytest.mark.parametrize("board", ["grid", "columns", "threats"])
def test_every_layout_reads_back_as_the_player_view_in_every_format(board):
    """Random positions (finished games excluded): ``read_position`` gives the env's view, ``view_message``
    writes the very turn message back, and the server's ``read_info`` finds Connect Four in it."""
    agents = [RandomAgent(seed=3), RandomAgent(seed=4)]
    for obs_format in OBS_FORMATS:
        env = spiral_arena.make(f"ConnectFour-v0:board={board}", obs_format=obs_format)
        for seed in range(12):
            env.reset(seed=seed)
            for agent in env.agent_iter():
                observation, _, term, trunc, info = env.last()
                if term or trunc:
                    env.step(None)
                    continue
                assert ConnectFour.read_position(observation) == info["view"]
                assert env.game.view_message(info["view"]) == latest_turn(observation).message
                assert TicTacToe.read_position(observation) is None
                recovered = read_info(observation)
                assert (recovered["game"], recovered["view"]) == ("ConnectFour", info["view"])
                assert recovered["legal_actions"] == info["legal_actions"]
                env.step(agents[env.possible_agents.index(agent)].act(observation, info))


def test_a_board_that_cannot_be_a_position_is_unreadable():
    observation = env_after([3, 3]).observe("player_0")
    assert ConnectFour.read_position(observation)["board"][3] == 0
    floating = observation.replace(". . . X . . .\n0", ". . . . . . .\n0")  # the O on column 3 now floats
    with pytest.raises(PositionUnreadable, match="no piece over an empty cell"):
        ConnectFour.read_position(floating)
    with pytest.raises(PositionUnreadable, match="six rows of seven cells"):
        ConnectFour.read_position(observation.replace(". . . O . . .", ". . . Q . . ."))
    assert ConnectFour.read_position(env_after([4], "TicTacToe-v0").observe("player_1")) is None


def test_an_unknown_board_layout_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match=r"board must be one of \('grid', 'columns', 'threats'\), got 'cells'"):
        spiral_arena.make("ConnectFour-v0:board=cells")


# ---- the expert -------------------------------------------------------------------------------------


def test_the_expert_takes_every_win_in_one_and_blocks_every_single_threat():
    """On the read-out's 600 positions (random play): where it can make four it does, even where the
    opponent also threatens (a block would lose the win); else it blocks the one column of the opponent's."""
    agent, met = ExpertAgent(seed=0), Counter()
    for moves, win in positions():
        state = state_after(moves)
        me = state.current_player
        mine, theirs = state.completing_columns(me), state.completing_columns(1 - me)
        assert best_columns(state.board, me, depth=4) == (mine if win else theirs)
        answer = agent.act("", {"game": "ConnectFour", "view": {"board": state.board, "me": me}})
        assert int(answer.strip("[]")) in (mine if win else theirs)
        met[win, bool(theirs)] += 1
    assert met[True, True] == 100 and met[True, False] == 200 and met[False, True] == POSITIONS


def test_the_search_sees_a_double_threat_coming():
    """X holds columns 2 and 3 of the bottom row: X then makes three with both ends open on 1 or 4 and
    wins. O must take 1 or 4 now, which one ply of search cannot see and two can."""
    state = state_after([3, 3, 2])
    assert best_columns(state.board, 1, depth=1) == [3]
    assert best_columns(state.board, 1, depth=2) == [1, 4]
    assert set(best_columns(state.board, 1, depth=4)) <= {1, 4}
    state = state_after([2, 2, 3, 3])  # X to move makes the open three itself
    assert best_columns(state.board, 0, depth=4) == [1, 4]


def test_the_expert_never_plays_under_the_opponents_four():
    # O has three on row 1 (columns 0-2) and X cannot win or block anything now: X's column 3 would land on
    # row 0 and let O drop on row 1 to make four
    state = state_after([6, 0, 1, 1, 2, 2, 6, 0])
    me = state.current_player
    assert me == 0 and not state.completing_columns(0) and not state.completing_columns(1)
    assert 3 not in best_columns(state.board, me, depth=4)


@pytest.mark.parametrize("seat", [0, 1])
def test_the_expert_beats_random_from_both_seats(seat):
    results, invalid = expert_vs_random("ConnectFour-v0", 100, seat)
    assert not invalid
    # Measured (200 games a seat, as in the expert's docstring): every game won from both seats.
    assert Counter(results)[1.0] == 100


def test_the_expert_takes_a_depth_and_refuses_a_bad_one():
    assert make_agent("expert", seed=0, depth=2).experts["ConnectFour"].depth == 2
    for depth in (0, -1, 2.5, True, "4"):
        with pytest.raises(ValueError, match="depth must be a positive integer"):
            ExpertAgent(depth=depth)
    with pytest.raises(ValueError, match="full board"):
        ExpertAgent().act("", {"game": "ConnectFour", "view": {"board": state_after(DRAW).board, "me": 0}})


# ---- the tactics read-out ---------------------------------------------------------------------------


def columns_of(answers: list[str]) -> list[int]:
    return [int(a.removeprefix("\\boxed{[").removesuffix("]}")) for a in answers]


def rules_of(observation: str) -> ConnectFourState:
    """The position of the observation, read back from its text as a model reads it."""
    view = ConnectFour.read_position(observation)
    state = ConnectFourState()
    for cell, holder in enumerate(view["board"]):
        if holder != EMPTY:
            state.board[cell] = holder
            state.heights[cell % COLUMNS] += 1
    state.current_player = view["me"]
    return state


def tactical_columns(observation: str) -> set[int]:
    """The columns the read-out wants: a win where there is one, else the opponent's one column of four."""
    state = rules_of(observation)
    me = state.current_player
    return set(state.completing_columns(me) or state.completing_columns(1 - me))


def test_the_positions_are_fixed_distinct_and_of_their_kind():
    found = positions()
    assert found == positions.__wrapped__()  # drawn from a fixed seed: the same every time
    assert Counter(win for _, win in found) == {True: POSITIONS, False: POSITIONS}
    boards = set()
    for moves, win in found:
        state = state_after(moves)
        assert not state.is_terminal()
        me = state.current_player
        if win:
            assert state.completing_columns(me)
        else:
            assert not state.completing_columns(me) and len(state.completing_columns(1 - me)) == 1
        boards.add(tuple(state.board))
    assert len(boards) == len(found)
    assert len({len(moves) for moves, _ in found}) > 20  # from the opening to the late game


@pytest.mark.parametrize("game", ["ConnectFour-v0", "ConnectFour-v0:board=threats"])
def test_a_policy_that_always_takes_the_win_or_the_block_reads_one(game):
    def tactical(observation: str, answers: list[str]) -> list[float]:
        wanted, columns = tactical_columns(observation), columns_of(answers)
        hits = [c for c in columns if c in wanted]
        return [-math.log(len(hits)) if c in wanted else -math.inf for c in columns]

    read = tactics_from_scores(tactical, game=game)
    assert read == {
        "takes_win": pytest.approx(1.0),
        "blocks": pytest.approx(1.0),
        "invalid_mass": pytest.approx(0.0, abs=1e-12),
        "win_positions": POSITIONS,
        "block_positions": POSITIONS,
    }


def test_a_policy_that_never_does_reads_zero_and_its_invalid_mass_is_kept_apart():
    """Half of its probability goes to answers that are no column; the other half to the legal columns
    that neither win nor block, or where every legal column does, nowhere (all of it is then invalid)."""
    forced = []

    def avoid(observation: str, answers: list[str]) -> list[float]:
        wanted, columns = tactical_columns(observation), columns_of(answers)
        others = [c for c in columns if c not in wanted]
        forced.append(not others)
        return [math.log(0.5 / len(others)) if c not in wanted else -math.inf for c in columns]

    read = tactics_from_scores(avoid)
    assert read["takes_win"] == 0.0 and read["blocks"] == 0.0
    assert read["invalid_mass"] == pytest.approx((0.5 * len(forced) + 0.5 * sum(forced)) / len(forced))
    assert len(forced) == 2 * POSITIONS


def test_uniform_play_reads_its_chance_level_and_the_stride():
    full, every_4th = uniform_tactics(), tactics_from_scores(lambda o, a: [-math.log(len(a))] * len(a), stride=4)
    chance = {True: [], False: []}
    for moves, win in positions():
        state = state_after(moves)
        me = state.current_player
        wanted = state.completing_columns(me if win else 1 - me)
        chance[win].append(len(wanted) / len(state.legal_actions()))
    assert full["takes_win"] == pytest.approx(sum(chance[True]) / POSITIONS)
    assert full["blocks"] == pytest.approx(sum(chance[False]) / POSITIONS)
    assert 1 / 7 < full["blocks"] < full["takes_win"] < 0.3
    assert every_4th["win_positions"] + every_4th["block_positions"] == 2 * POSITIONS / 4
    with pytest.raises(ValueError, match="stride"):
        tactics_from_scores(lambda o, a: [0.0] * len(a), stride=0)
