"""``spiral-arena play --games N`` plays its games in flight through ``spiral_arena.inflight``, the runner
the leaderboard uses: the games are those one-at-a-time play gives (same seeds, same moves) for scripted,
API and ``hf:`` agents, API requests overlap, and an API failure stops only its own game. A real chat
endpoint on 127.0.0.1, a real tiny model, the real command."""

from __future__ import annotations

import pytest

from spiral_arena import make
from spiral_arena.agents import make_agent
from spiral_arena.cli import main as cli_main
from spiral_arena.play import play_game, play_games

pytest.importorskip("httpx", reason="API agents need the api extra")

SEEDS = list(range(40, 52))


def one_at_a_time(env_id: str, specs: list[str]) -> list:
    agents = [make_agent(s) for s in specs]
    return [play_game(make(env_id, render_mode="ansi"), agents, seed=seed) for seed in SEEDS]


def in_flight(env_id: str, specs: list[str], concurrency: int) -> list:
    agents = [make_agent(s) for s in specs]
    played = dict(play_games(env_id, agents, SEEDS, concurrency))
    assert sorted(played) == list(range(len(SEEDS)))
    return [played[i] for i in range(len(SEEDS))]


@pytest.mark.parametrize("env_id", ["TicTacToe-v0", "KuhnPoker-v0", "LiarsDice-v0"])
def test_scripted_games_in_flight_are_the_games_played_one_at_a_time(env_id):
    specs = ["random", "expert#alpha=0.2"]
    expected = one_at_a_time(env_id, specs)
    assert in_flight(env_id, specs, concurrency=5) == expected
    assert len({(r.returns, r.steps) for r in expected}) > 1  # the seeds do give different games


def test_api_games_in_flight_are_the_games_played_one_at_a_time(endpoint):
    server = endpoint(delay_s=0.02)
    specs = [f"openai:a@{server.url}#max_retries=0", "random"]
    expected = one_at_a_time("TicTacToe-v0", specs)
    assert server.max_in_flight == 1
    assert in_flight("TicTacToe-v0", specs, concurrency=6) == expected
    assert server.max_in_flight > 1  # the requests of a wave did overlap
    assert all(r.error is None for r in expected)


def test_hf_games_in_flight_are_the_games_played_one_at_a_time(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from trainers.tiny import create_tiny

    model = create_tiny(tmp_path / "tiny", env_ids=["KuhnPoker-v0"])
    specs = [f"hf:{model}#temperature=1#max_new_tokens=6", f"hf:{model}#temperature=1#max_new_tokens=6#seed=1"]
    expected = one_at_a_time("KuhnPoker-v0:rounds=1", specs)
    assert in_flight("KuhnPoker-v0:rounds=1", specs, concurrency=12) == expected
    assert len({tuple(r.moves) for r in expected}) > 1  # the copies do sample


def run_play(capsys, *args: str) -> tuple[int, str]:
    code = cli_main(["play", *args])
    return code, capsys.readouterr().out


def test_the_command_plays_in_flight_by_default_for_api_agents_with_the_same_summary(endpoint, capsys):
    server = endpoint(delay_s=0.02)
    args = ["TicTacToe-v0", "--p0", f"openai:a@{server.url}#max_retries=0", "--p1", "random", "--games", "12"]
    code, sequential = run_play(capsys, *args, "--seed", "7", "--quiet", "--concurrency", "1")
    assert code == 0 and server.max_in_flight == 1
    code, default = run_play(capsys, *args, "--seed", "7", "--quiet")
    assert code == 0 and default == sequential and "12 game(s) of TicTacToe-v0" in default
    assert 1 < server.max_in_flight <= 12
    code, shown = run_play(capsys, *args, "--seed", "7")  # not quiet: each game's verdict, moves left out
    assert code == 0 and shown.endswith(default) and shown.count("game ") >= 12 and " a: " not in shown


def test_an_api_failure_stops_only_its_own_game(endpoint, capsys):
    server = endpoint(fails=lambda model, nth, legal: nth == 5)
    args = ["KuhnPoker-v0:rounds=1", "--p0", f"openai:a@{server.url}#max_retries=0", "--p1", "expert"]
    code, out = run_play(capsys, *args, "--games", "10", "--seed", "3", "--concurrency", "4", "--quiet")
    assert code == 1
    assert out.count("stopped by APIError") == 1 and "is down" in out
    assert "9 game(s) of KuhnPoker-v0:rounds=1, 1 stopped by errors (not scored)" in out


def test_one_at_a_time_shows_every_move(capsys):
    code, out = run_play(capsys, "TicTacToe-v0", "--p0", "expert", "--p1", "random", "--games", "2", "--seed", "1")
    assert code == 0 and out.count("--- game ") == 2 and "  player_0: " in out and "  player_1: " in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--p0", "human", "--concurrency", "2"], "a human player plays one game at a time"),
        (["--p0", "random", "--concurrency", "0"], "--concurrency"),
    ],
)
def test_bad_concurrency_is_one_line(capsys, args, message):
    assert cli_main(["play", "TicTacToe-v0", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
