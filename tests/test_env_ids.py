"""One env-id grammar, ``ID:key=value;key=value``, in make, the CLI and the leaderboard's identity."""

from __future__ import annotations

import sqlite3

import pytest

import spiral_arena
from leaderboard import store
from spiral_arena.cli import main as cli_main
from spiral_arena.registry import GameSpec, parse_env_id


def transcript(env, seed: int) -> list[str]:
    env.reset(seed=seed)
    seen = []
    for _agent in env.agent_iter():
        observation, _, terminated, truncated, info = env.last()
        seen.append(observation)
        env.step(None if terminated or truncated else info["legal_actions"][0])
    return seen


def test_options_in_the_id_equal_keyword_options():
    by_id = spiral_arena.make("KuhnPoker-v0:rounds=1;reward=chips")
    by_kwargs = spiral_arena.make("KuhnPoker-v0", rounds=1, reward="chips")
    assert transcript(by_id, 3) == transcript(by_kwargs, 3)
    assert by_id.game.rounds == 1 and transcript(by_id, 3) != transcript(spiral_arena.make("KuhnPoker-v0"), 3)
    assert parse_env_id(" Snake-v0: width=6 ; apples=1 ") == ("Snake-v0", {"width": 6, "apples": 1})
    assert parse_env_id("X-v0:flag=true;ratio=0.5;name=x") == ("X-v0", {"flag": True, "ratio": 0.5, "name": "x"})


def test_bad_ids_are_clear_errors():
    with pytest.raises(TypeError, match="rounds both in the env id and as keyword"):
        spiral_arena.make("KuhnPoker-v0:rounds=1", rounds=2)
    with pytest.raises(ValueError, match=r"game option 'rounds' of KuhnPoker-v0 must look like key=value"):
        spiral_arena.make("KuhnPoker-v0:rounds")
    with pytest.raises(TypeError, match="valid: rounds, reward, ante, first_player"):
        spiral_arena.make("KuhnPoker-v0:colour=red")
    with pytest.raises(ValueError, match="looks like a secret") as error:
        spiral_arena.make("TwentyQuestions-v0:oracle_api_key=sk-live-123")
    assert "sk-live-123" not in str(error.value)


def test_an_option_given_twice_is_refused_for_games_and_agents():
    """Issue 41: ``KuhnPoker-v0:rounds=1;rounds=2`` played 2 rounds; either value would be a guess."""
    from spiral_arena.agents import split_options
    from spiral_arena.registry import GameSpec, env_id_problem, parse_env_id

    twice = "game option 'rounds' of KuhnPoker-v0 is given twice; give each option once"
    for text in ("KuhnPoker-v0:rounds=1;rounds=2", "KuhnPoker-v0: rounds=1 ; ante=2; rounds =1"):
        with pytest.raises(ValueError, match=twice):
            parse_env_id(text)
        with pytest.raises(ValueError, match=twice):
            spiral_arena.make(text)
        with pytest.raises(ValueError, match=twice):
            GameSpec.parse(text)
    assert env_id_problem("KuhnPoker-v0:rounds=1;rounds=2") == twice
    with pytest.raises(ValueError, match="option 'alpha' is given twice in agent spec 'expert'; give each option"):
        split_options("expert#alpha=0.1#alpha=0.2")


def test_canonical_spelling_sorts_options():
    assert GameSpec.parse(" KuhnPoker-v0: rounds=1 ; ante=2 ").canonical == "KuhnPoker-v0:ante=2;rounds=1"
    assert GameSpec.parse("TicTacToe-v0").canonical == "TicTacToe-v0"


def test_options_at_their_default_are_not_part_of_a_games_name():
    """One game, one name: an option spelled at its default is the plain game (1 and 1.0 are the same
    value, true and 1 are not); the checkpoint record still spells every option out."""
    assert GameSpec.parse("LeducHoldem-v0:reward=chips").canonical == "LeducHoldem-v0"
    assert GameSpec.parse("LeducHoldem-v0:reward=win").canonical == "LeducHoldem-v0:reward=win"
    assert GameSpec.parse("KuhnPoker-v0:rounds=5;ante=1.0").canonical == "KuhnPoker-v0"
    assert GameSpec.parse("KuhnPoker-v0:reward=win;rounds=1").canonical == "KuhnPoker-v0:rounds=1"
    assert GameSpec.parse("TicTacToe-v0:board=grid").canonical == "TicTacToe-v0"
    assert GameSpec.parse("SimpleNegotiation-v0:brief=0").canonical == "SimpleNegotiation-v0:brief=0"
    assert GameSpec.parse("LeducHoldem-v0:reward=chips").complete().label == "LeducHoldem-v0:reward=chips"


def test_a_game_spec_is_parsed_once_and_builds_its_env():
    """The label keeps the text as given, options are values, and the env built is the one ``make``
    builds from the text; ``with_options`` replaces an option and keeps the others."""
    game = GameSpec.parse(" TwentyQuestions-v0: max_questions=3 ; recap=true ")
    assert (game.env_id, game.options, game.label) == (
        "TwentyQuestions-v0",
        {"max_questions": 3, "recap": True},
        "TwentyQuestions-v0: max_questions=3 ; recap=true",
    )
    assert game.players == 1 and GameSpec.parse("KuhnPoker-v0").players == 2
    assert game.make().game.max_questions == 3
    longer = game.with_options(max_questions=8)
    assert longer.label == "TwentyQuestions-v0:recap=true;max_questions=8"
    assert longer.options == {"recap": True, "max_questions": 8} and game.options["max_questions"] == 3
    assert GameSpec("KuhnPoker-v0", {"rounds": 1}).label == "KuhnPoker-v0:rounds=1"
    with pytest.raises(ValueError, match="unknown env id 'Kuhn-v0'.*KuhnPoker-v0"):
        _ = GameSpec.parse("Kuhn-v0").players


def test_the_leaderboard_stores_options_as_part_of_the_game(tmp_path, capsys):
    db = tmp_path / "lb.sqlite"
    games = "KuhnPoker-v0, KuhnPoker-v0: rounds=1"
    args = ["leaderboard", "run", "--agents", "random,expert", "--games", games, "--games-per-pair", "4"]
    assert cli_main([*args, "--db", str(db), "--no-progress"]) == 0
    with sqlite3.connect(db) as conn:
        stored = dict(conn.execute("SELECT env_id, env_version FROM games GROUP BY env_id").fetchall())
    assert stored == {"KuhnPoker-v0": "v0", "KuhnPoker-v0:rounds=1": "v0"}
    conn = store.connect(str(db), create=False)
    try:
        assert len(store.load_games(conn, ["KuhnPoker-v0:rounds=1"])) == 4
    finally:
        conn.close()
    capsys.readouterr()
    # any spelling of the same options finds the same games; the run is not repeated
    assert cli_main(["leaderboard", "show", "--db", str(db), "--game", "KuhnPoker-v0:rounds = 1"]) == 0
    assert "KuhnPoker-v0:rounds=1" in capsys.readouterr().out
    assert cli_main([*args[:-4], "--games", "KuhnPoker-v0:rounds=1", "--games-per-pair", "4", "--db", str(db)]) == 0
    assert "4 already stored, 0 played" in capsys.readouterr().out
    assert cli_main([*args[:-4], "--games", "KuhnPoker-v0:rounds=0", "--db", str(db)]) == 2
    assert "rounds must be a positive integer" in capsys.readouterr().err


def test_one_secret_rule_for_game_options_and_agent_options():
    """Game ids and agent specs refuse the same option names (whole words between underscores), and
    read values the same way."""
    from spiral_arena.agents import split_options
    from spiral_arena.registry import looks_like_secret, option_value, parse_env_id

    secrets = ("api_key", "oracle_api_key", "apikey", "key", "auth_token", "password", "credentials", "client_secret")
    for name in secrets:
        assert looks_like_secret(name), name
    for name in ("max_new_tokens", "secret", "keyboard", "monkey", "authors"):
        assert not looks_like_secret(name), name
    assert split_options("hf:x#max_new_tokens=4#temperature=0.5")[1] == {"max_new_tokens": 4, "temperature": 0.5}
    with pytest.raises(ValueError, match="looks like a secret"):
        split_options("openai:m#auth_token=abc")
    assert [option_value(t) for t in ("3", "0.2", "true", "x")] == [3, 0.2, True, "x"]
    assert parse_env_id("TwentyQuestions-v0:secret=cat;max_questions=8")[1] == {"secret": "cat", "max_questions": 8}
