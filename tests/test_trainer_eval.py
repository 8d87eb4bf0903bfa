"""The trainer's evaluation (``trainers.evaluate.play_against``) plays through the shared runner
(``spiral_arena.inflight`` via ``spiral_arena.play.play_games``): the policy's decisions of a wave go to
the engine in one call, seats alternate, invalid answers and truncations are charged to the right seat,
and an API opponent's requests go out concurrently. The engine is a scripted stand-in (no model)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from test_trainer_units import CharTokenizer, EchoEngine, kuhn_answer  # noqa: E402

from spiral_arena.models import Sampling  # noqa: E402
from spiral_arena.models.policy import Policy  # noqa: E402
from spiral_arena.registry import GameSpec  # noqa: E402
from trainers.evaluate import play_against  # noqa: E402

GENERATION = {"sampling": Sampling(1.0, 1.0, 8), "max_game_actions": 50}


def evaluate(answer, game: str, opponents: list[str], n_games: int, seed: int = 5, **options):
    engine = EchoEngine(CharTokenizer(), answer)
    policy = Policy(engine, CharTokenizer(), "bare")
    settings = {**GENERATION, "obs_format": "last", **options}
    return play_against(policy, [GameSpec.parse(game)], opponents, n_games, seed=seed, **settings), engine


def test_a_wave_of_decisions_is_one_engine_call_and_seeds_fix_the_games():
    metrics, engine = evaluate(kuhn_answer, "KuhnPoker-v0:rounds=1", ["random"], 5)  # 5 games per seat
    # wave 1: the five games where the policy opens and the five where random opened already;
    # a single hand then leaves at most the opener's answer to a bet: at most one more call
    assert [len(prompts) for prompts in engine.calls][0] == 10
    assert len(engine.calls) <= 2
    key = "eval/KuhnPoker-v0:rounds=1/random"
    assert metrics[f"{key}/win"] + metrics[f"{key}/draw"] + metrics[f"{key}/loss"] == pytest.approx(1.0)
    assert metrics[f"{key}/invalid"] == 0.0
    again, _ = evaluate(kuhn_answer, "KuhnPoker-v0:rounds=1", ["random"], 5)
    assert again == metrics
    seen = {tuple(p) for p in engine.calls[0]}
    _, other = evaluate(kuhn_answer, "KuhnPoker-v0:rounds=1", ["random"], 5, seed=6)
    assert {tuple(p) for p in other.calls[0]} != seen  # another evaluation seed deals other hands


def test_invalid_answers_lose_in_either_seat():
    metrics, engine = evaluate(lambda prompt: "no idea", "TicTacToe-v0", ["random"], 3)
    key = "eval/TicTacToe-v0/random"
    assert metrics[f"{key}/invalid"] == 1.0 and metrics[f"{key}/loss"] == 1.0
    # seats alternate: in three games the policy opened on an empty board, in three random had moved
    boards = ["".join(chr(i) for i in prompt) for prompt in engine.calls[0]]
    assert sum(board.count("X") == 0 for board in boards) == 3


def test_a_game_cut_at_max_game_actions_is_a_draw():
    metrics, _ = evaluate(lambda prompt: "\\boxed{[4]}", "TicTacToe-v0", ["random"], 2, max_game_actions=1)
    key = "eval/TicTacToe-v0/random"
    assert metrics[f"{key}/draw"] == 1.0 and metrics[f"{key}/invalid"] == 0.0


def test_an_api_opponent_answers_its_games_concurrently(endpoint):
    server = endpoint(delay_s=0.05)
    opponent = f"openai:a@{server.url}#max_retries=0"
    metrics, _ = evaluate(kuhn_answer, "KuhnPoker-v0:rounds=1", [opponent], 4)
    key = f"eval/KuhnPoker-v0:rounds=1/{opponent}"
    assert metrics[f"{key}/win"] + metrics[f"{key}/draw"] + metrics[f"{key}/loss"] == pytest.approx(1.0)
    assert server.max_in_flight > 1


def test_a_single_player_game_is_scored_by_its_own_verdict():
    def guess_octopus(prompt: list[int]) -> str:
        return "\\boxed{Is it an octopus?}"

    for secret, wins in (("octopus", 1.0), ("piano", 0.0)):
        game = f"TwentyQuestions-v0:secret={secret};max_questions=3"
        metrics, _ = evaluate(guess_octopus, game, ["random"], 6)
        key = f"eval/{game}/solo"
        assert metrics[f"{key}/win"] == wins and metrics[f"{key}/loss"] == 1.0 - wins
        assert metrics[f"{key}/draw"] == 0.0
        assert not any("/random/" in k for k in metrics)  # no opponent in a one-player game


@pytest.mark.parametrize("out_of_domain", [True, False])
def test_out_of_domain_games_are_evaluated_unless_turned_off(out_of_domain):
    """The trainer's evaluation adds Snake, Pig Dice, Liar's Dice and Truth and Deception to the
    training games; the tiny recipe turns that off (its model cannot read them)."""
    import torch

    from trainers.config import TrainConfig
    from trainers.evaluate import evaluate as trainer_evaluate

    assert TrainConfig.build({"recipe": "tiny"}).eval_out_of_domain is False
    config = TrainConfig.build(
        {"eval_games": 1, "eval_opponents": "random", "eval_out_of_domain": out_of_domain, "eval_tactics": False}
    )  # a stand-in engine, no model to read tactics off
    policy = Policy(EchoEngine(CharTokenizer(), lambda prompt: "\\boxed{[4]}"), CharTokenizer(), "bare")
    metrics = trainer_evaluate(torch.nn.Linear(1, 1), policy, config, [GameSpec.parse("TicTacToe-v0")])
    played = {key.split("/")[1] for key in metrics if key.endswith("/win")}
    out = {"Snake-v0", "PigDice-v0", "LiarsDice-v0", "TruthAndDeception-v0"}
    assert played == ({"TicTacToe-v0"} | out if out_of_domain else {"TicTacToe-v0"})
