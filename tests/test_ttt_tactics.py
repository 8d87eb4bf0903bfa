"""The Tic-Tac-Toe tactics read-out (``spiral_arena.analysis.tictactoe``): every position a player can
face, built through the env, scored by a policy that reads the observation text as a model would."""

from __future__ import annotations

import math

import pytest

from spiral_arena.agents.experts.tictactoe import move_scores
from spiral_arena.analysis.tictactoe import completing_cells, positions, tactics_from_scores, uniform_tactics
from spiral_arena.games.tictactoe import EMPTY, TicTacToe, TicTacToeState


def cells_of(answers: list[str]) -> list[int]:
    return [int(a.removeprefix("\\boxed{[").removesuffix("]}")) for a in answers]


def expert_score(observation: str, answers: list[str]) -> list[float]:
    """All probability on the perfect player's best cells, read from the observation's board."""
    view = TicTacToe.read_position(observation)
    scores = move_scores(tuple(view["board"]), view["me"])
    best = [c for c, s in scores.items() if s == max(scores.values())]
    return [-math.log(len(best)) if c in best else -math.inf for c in cells_of(answers)]


def test_every_non_terminal_position_once():
    found = positions()
    assert len(found) == 5478 - 958  # the legal positions, less the terminal ones (a known count)
    boards = set()
    for moves in found:
        state = TicTacToeState()
        for cell in moves:
            state.apply(cell)
        assert not state.is_terminal()
        boards.add(tuple(state.board))
    assert len(boards) == len(found)


def test_completing_cells():
    board = [0, 0, EMPTY, 1, 1, EMPTY, EMPTY, EMPTY, 0]
    assert completing_cells(board, 0) == {2}  # 0-1-2; 0-4-8 is blocked by the X on 4
    assert completing_cells(board, 1) == {5}


@pytest.mark.parametrize("game", ["TicTacToe-v0", "TicTacToe-v0:board=cells"])
def test_perfect_play_takes_every_win_and_blocks_every_threat(game):
    read = tactics_from_scores(expert_score, game=game)  # read on that layout's text (read_position reads both)
    assert read["takes_win"] == pytest.approx(1.0)
    assert read["blocks"] == pytest.approx(1.0)
    assert read["invalid_mass"] == pytest.approx(0.0, abs=1e-12)
    assert (read["win_positions"], read["block_positions"]) == (2358, 976)


def test_a_policy_that_avoids_lines_scores_zero_and_invalid_mass_is_kept_apart():
    def avoid(observation: str, answers: list[str]) -> list[float]:
        view = TicTacToe.read_position(observation)
        board, me = view["board"], view["me"]
        bad = completing_cells(board, me) | completing_cells(board, 1 - me)
        cells = cells_of(answers)
        good = [c for c in cells if c not in bad] or cells
        # half of the probability goes to answers that are not cells at all
        return [math.log(0.5 / len(good)) if c in good else -math.inf for c in cells]

    read = tactics_from_scores(avoid)
    # it completes a line only where every legal cell completes one (late positions; its mass then
    # spreads over them all): expected shares worked out here from the rules
    forced = {"win": 0.0, "block": 0.0}
    for moves in positions():
        state = TicTacToeState()
        for cell in moves:
            state.apply(cell)
        legal, me = set(state.legal_actions()), state.current_player
        wins, threats = completing_cells(state.board, me), completing_cells(state.board, 1 - me)
        if wins and wins | threats >= legal:
            forced["win"] += len(wins) / len(legal)
        elif not wins and len(threats) == 1 and threats >= legal:
            forced["block"] += 1
    assert 0 < forced["win"] < read["win_positions"] / 4
    assert read["takes_win"] == pytest.approx(forced["win"] / read["win_positions"])
    assert read["blocks"] == pytest.approx(forced["block"] / read["block_positions"])
    assert read["invalid_mass"] == pytest.approx(0.5)


def test_uniform_play_and_the_stride():
    def uniform(observation: str, answers: list[str]) -> list[float]:
        return [-math.log(len(answers))] * len(answers)

    full, every_8th = tactics_from_scores(uniform), tactics_from_scores(uniform, stride=8)
    assert full["takes_win"] == pytest.approx(0.433, abs=0.001)  # the chance level of docs/results/learning.md's table
    assert full["blocks"] == pytest.approx(0.313, abs=0.001)
    assert every_8th["win_positions"] + every_8th["block_positions"] == pytest.approx(
        (full["win_positions"] + full["block_positions"]) / 8, rel=0.05
    )
    assert uniform_tactics() == full  # the plots' chance levels
    with pytest.raises(ValueError, match="stride"):
        tactics_from_scores(uniform, stride=0)


@pytest.mark.parametrize(
    ("on", "game"), [(True, "TicTacToe-v0"), (False, "TicTacToe-v0"), (True, "TicTacToe-v0:board=cells")]
)
def test_the_trainers_evaluation_logs_the_tactics_of_its_policy(tmp_path, on, game):
    """With eval_tactics (the tiny recipe's setting) an evaluation of a run that trains TicTacToe logs the
    read-out of its own policy at the evaluation temperature on the text of the game it trains (its board
    layout), equal to reading it directly; off, none."""
    pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spiral_arena.models.hf import HFEngine
    from spiral_arena.models.policy import Policy
    from spiral_arena.models.scoring import answer_scorer
    from spiral_arena.rollout import parse_mixture
    from trainers.config import TrainConfig
    from trainers.evaluate import evaluate
    from trainers.tiny import create_tiny

    path = create_tiny(tmp_path / "model", ["TicTacToe-v0"], seed=1)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    stops = [tokenizer.eos_token_id]
    policy = Policy(HFEngine(model, stops, tokenizer.pad_token_id), tokenizer, "bare", stops)
    assert TrainConfig.build({"recipe": "tiny"}).eval_tactics is True
    config = TrainConfig.build({"recipe": "tiny", "games": game, "eval_tactics": on})
    scores = evaluate(model, policy, config, parse_mixture(config.games, "")[0], play=False)
    if not on:
        assert not any(key.startswith("eval/ttt_") for key in scores)
        return
    direct = tactics_from_scores(answer_scorer(model, policy, config.eval_temperature), config.obs_format, game=game)
    if game != "TicTacToe-v0":  # another text, other scores: the read-out is not taken on the default grid
        grid = tactics_from_scores(answer_scorer(model, policy, config.eval_temperature), config.obs_format)
        assert scores["eval/ttt_takes_win"] != pytest.approx(grid["takes_win"], abs=1e-6)
    assert scores["eval/ttt_takes_win"] == pytest.approx(direct["takes_win"], abs=1e-9)
    assert scores["eval/ttt_blocks"] == pytest.approx(direct["blocks"], abs=1e-9)
    assert scores["eval/ttt_invalid_mass"] == pytest.approx(direct["invalid_mass"], abs=1e-9)
    greedy = tactics_from_scores(answer_scorer(model, policy, 0.0), config.obs_format)
    assert greedy["takes_win"] != pytest.approx(direct["takes_win"], abs=1e-6)  # the temperature is the run's


def test_the_tiny_models_tokenizer_learns_the_text_of_the_games_with_their_options(tmp_path):
    """The embedded model's tokenizer is trained on the games the run trains, options included: with the
    cells layout each cell word (" aM") is one token, which it is not for a tokenizer of the grid."""
    pytest.importorskip("torch")
    from transformers import AutoTokenizer

    from trainers.config import TrainConfig
    from trainers.start import tiny_model_dir

    words = " aM bE cT dE eM fE gE hT iE"
    pieces = {}
    for layout in ("cells", "grid"):
        config = TrainConfig.build({"recipe": "tiny", "games": f"TicTacToe-v0:board={layout}", "game_weights": ""})
        tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir(config, tmp_path / layout))
        pieces[layout] = len(tokenizer(words, add_special_tokens=False)["input_ids"])
    assert pieces["cells"] == 9 and pieces["grid"] > 9, pieces
