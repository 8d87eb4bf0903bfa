"""Seats that read one match in different texts (``registry.make(seat_text=...)``), and what a checkpoint's
record says each seat reads (``models.checkpoints.Trained``): no model is loaded here."""

from __future__ import annotations

import pytest

import spiral_arena
from spiral_arena.agents import RandomAgent
from spiral_arena.games.tictactoe import TicTacToe
from spiral_arena.models.checkpoints import Trained, games_record
from spiral_arena.registry import GameSpec, make
from tests.conftest import play_random_game


def turns(env, seat: int) -> list[str]:
    """The turn messages the seat was told, in order."""
    return [line for line in env.log.lines[seat] if line.startswith("[GAME] Your turn.")]


def test_each_seat_reads_its_own_layout_of_one_board():
    env = make("TicTacToe-v0", seat_text=[{"board": "lines"}, {"board": "cells"}])
    agents = [RandomAgent(0), RandomAgent(1)]
    for seed in range(30):
        play_random_game(env, agents, seed=seed)
        for seat, word in ((0, " Lines: "), (1, "M yours, T theirs")):
            assert turns(env, seat), seed
            for message in turns(env, seat):
                assert word in message
                assert ("Lines:" in message) == (seat == 0)
        # both texts are of the same position: each reads back to the board the other saw at that move
        for first, second in zip(turns(env, 0), turns(env, 1), strict=False):
            one, other = TicTacToe.read_position(first), TicTacToe.read_position(second)
            assert sum(c != -1 for c in one["board"]) + 1 == sum(c != -1 for c in other["board"])


def test_views_change_no_move_no_reward_and_no_info():
    """The same seeds and moves give the same game whoever reads which text."""
    plain, mixed = make("TicTacToe-v0"), make("TicTacToe-v0", seat_text=[{"board": "lines"}, {"obs_format": "last"}])
    for seed in range(50):
        a = play_random_game(plain, [RandomAgent(seed), RandomAgent(seed + 1)], seed=seed)
        b = play_random_game(mixed, [RandomAgent(seed), RandomAgent(seed + 1)], seed=seed)
        assert a == b
        assert plain.infos == mixed.infos
        assert plain.log.lines[1][-1] == mixed.log.lines[1][-1]  # the end: the same final board for everyone


def test_each_seat_reads_its_own_observation_format():
    env = make("KuhnPoker-v0", seat_text=[{"obs_format": "last"}, {}])
    env.reset(seed=3)
    env.step("[check]")
    assert env.observe("player_0").count("[GAME]") == 1
    assert env.observe("player_1").startswith("[GAME] You are Player 1")  # full, the game's own default
    assert env.observe("player_1").count("[GAME]") > 2


def test_one_text_for_every_seat_builds_no_second_game():
    env = make("TicTacToe-v0", seat_text=[{"board": "lines"}, {"board": "lines"}])
    assert env._views is None and env.game.layout == "lines"
    solo = make("TwentyQuestions-v0:world=8", seat_text=[{"recap": True, "obs_format": "last"}])
    solo.reset(seed=0)
    assert solo.game.recap is True and solo.obs_formats == ("last",)


@pytest.mark.parametrize(
    ("seat_text", "message"),
    [
        ([{"rounds": 1}, {}], "seat 0 reads unknown text option(s) rounds; valid: obs_format"),
        ([{"board": "lines"}], "seats 2 player(s); seat_text gives 1"),
        ([{"obs_format": "everything"}, {}], "obs_format='everything' is not one of"),
    ],
)
def test_bad_seat_text_is_refused_naming_what_is_valid(seat_text, message):
    env_id = "KuhnPoker-v0" if "rounds" in seat_text[0] else "TicTacToe-v0"
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make(env_id, seat_text=seat_text)


def test_games_declare_which_options_are_text():
    assert TicTacToe.text_options == {"board": ("grid", "cells", "lines")}
    assert set(spiral_arena.registry.REGISTRY["TwentyQuestions-v0"].game.text_options) == {"recap", "candidates"}
    kuhn = GameSpec.parse("KuhnPoker-v0:rounds=1;reward=chips")
    assert kuhn.rules() == {"rounds": 1, "reward": "chips", "ante": 1, "first_player": 0}
    assert GameSpec.parse("TicTacToe-v0:board=lines").rules() == {} and GameSpec.parse("TicTacToe-v0:board=lines").text
    assert "oracle_api_key" not in GameSpec.parse("TwentyQuestions-v0").complete().options  # never recorded


def settings(*games: str, obs_format: str = "last", **more) -> dict:
    """A checkpoint's spiral_arena.json as the trainer writes it, trained on ``games``."""
    record = games_record((GameSpec.parse(g), obs_format) for g in games)
    return {"kind": "spiral-arena checkpoint", "obs_format": obs_format, "games": record, **more}


TINY = settings("KuhnPoker-v0:rounds=1;reward=chips", "TicTacToe-v0:board=lines")


def test_a_checkpoint_reads_a_game_it_trained_on_in_its_own_text_whatever_the_match_writes():
    trained = Trained(TINY, "hf:ck")
    for match in ("TicTacToe-v0", "TicTacToe-v0:board=cells"):
        reading = trained.reading(GameSpec.parse(match))
        assert reading.text == {"board": "lines", "obs_format": "last"} and reading.note is None
    # the default layout is recorded too: a grid-trained model is shown the grid in a lines match
    grid = Trained(settings("TicTacToe-v0", obs_format="first_last"), "hf:grid")
    expected = {"board": "grid", "obs_format": "first_last"}
    assert grid.reading(GameSpec.parse("TicTacToe-v0:board=lines")).text == expected


def test_other_rules_play_the_match_and_say_so_naming_each_option():
    reading = Trained(TINY, "hf:ck").reading(GameSpec.parse("KuhnPoker-v0"))
    assert reading.text == {"obs_format": "last"}
    assert reading.note == (
        "hf:ck was trained on KuhnPoker-v0 with other rules; it plays this match's: "
        "reward=win (trained chips), rounds=5 (trained 1)"
    )
    assert Trained(TINY, "hf:ck").reading(GameSpec.parse("KuhnPoker-v0:reward=chips;rounds=1")).note is None


def test_a_game_never_trained_and_a_checkpoint_without_a_record_each_say_so():
    never = Trained(TINY, "hf:ck").reading(GameSpec.parse("Snake-v0"))
    assert never.text == {"obs_format": "last"}
    assert never.note == (
        "hf:ck was never trained on Snake-v0 (it trained on KuhnPoker-v0, TicTacToe-v0); it reads the match's text"
    )
    old_settings = {"kind": "spiral-arena checkpoint", "obs_format": "last"}
    old = Trained(old_settings, "hf:old").reading(GameSpec.parse("TicTacToe-v0"))
    assert old.text == {"obs_format": "last"} and "has no record of the games it was trained on" in old.note
    plain = Trained({}, "hf:Qwen").reading(GameSpec.parse("TicTacToe-v0"))  # not ours: nothing to say
    assert plain.text == {} and plain.note is None


def test_spec_options_override_the_record():
    trained = Trained(TINY, "hf:ck", {"board": "cells", "obs_format": "full"})
    assert trained.reading(GameSpec.parse("TicTacToe-v0")).text == {"board": "cells", "obs_format": "full"}
    assert trained.reading(GameSpec.parse("KuhnPoker-v0")).text == {"obs_format": "full"}  # no board in Kuhn


def test_the_kuhn_read_out_is_the_trained_kuhn_on_single_hands():
    assert Trained(TINY, "hf:ck").kuhn_game().canonical == "KuhnPoker-v0:reward=chips;rounds=1"  # defaults unnamed
    assert Trained({}, "hf:x").kuhn_game().canonical == "KuhnPoker-v0:rounds=1"
