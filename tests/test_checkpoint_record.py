"""Issue 56: a checkpoint's ``spiral_arena.json`` is checked field by field where it is read: a bad field is
one line naming the file, the field, what it holds and what is valid, before any model loads; never an
8 TB allocation (``max_new_tokens: 10**12``), Python's own words ("string indices must be integers"), or a
bad value played as if it were good (``thinking: "yes"``, an unknown game)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spiral_arena.models.checkpoints import SETTINGS_FILE, read_settings

GOOD = {  # every field a trainer or SFT writes
    "step": 4,
    "kind": "spiral-arena checkpoint",
    "prompt_template": "bare",
    "obs_format": "last",
    "thinking": True,
    "games": [
        {"game": "KuhnPoker-v0:ante=1;first_player=0;reward=chips;rounds=1", "obs_format": "last"},
        {"game": "TicTacToe-v0:board=lines", "obs_format": "last"},
    ],
    "base_model": "",
    "stopped_early": "at step 4 of 8 by time_limit_s=60",
    "sampling": {"temperature": 0.6, "top_p": 1.0, "max_new_tokens": 12},
    "loss_first": 2.5,
    "loss_last": float("nan"),  # a diverged SFT run still records its loss
}

BAD: list[tuple[dict[str, Any], str, str]] = [  # (fields changed, the field named, what it is said to hold)
    ({"sampling": {"max_new_tokens": 10**12}}, "sampling.max_new_tokens", "1000000000000"),
    ({"sampling": {"max_new_tokens": 10**7}}, "sampling.max_new_tokens", "10000000"),
    ({"sampling": {"max_new_tokens": 0}}, "sampling.max_new_tokens", "0"),
    ({"sampling": {"max_new_tokens": "256"}}, "sampling.max_new_tokens", '"256"'),
    ({"sampling": {"temperature": -1}}, "sampling.temperature", "-1"),
    ({"sampling": {"top_p": 0}}, "sampling.top_p", "0"),
    ({"sampling": "greedy"}, "sampling", '"greedy"'),
    ({"thinking": "yes"}, "thinking", '"yes"'),
    ({"obs_format": "weird"}, "obs_format", '"weird"'),
    ({"kind": "other"}, "kind", '"other"'),
    ({"prompt_template": "fancy"}, "prompt_template", '"fancy"'),
    ({"games": [{"game": "Nope-v0", "obs_format": "full"}]}, "games[0].game", '"Nope-v0"'),
    ({"games": [{"game": "KuhnPoker-v0:rounds=abc"}]}, "games[0].game", '"KuhnPoker-v0:rounds=abc"'),
    (
        {"games": [{"game": "KuhnPoker-v0"}, {"game": "TicTacToe-v0", "obs_format": "weird"}]},
        "games[1].obs_format",
        '"weird"',
    ),  # fmt: skip
    ({"games": [{"obs_format": "full"}]}, "games[0].game", "nothing"),
    ({"games": [None]}, "games[0]", "null"),
    ({"games": "KuhnPoker-v0"}, "games", '"KuhnPoker-v0"'),
    ({"step": -1}, "step", "-1"),
    ({"step": "1"}, "step", '"1"'),
    ({"base_model": 3}, "base_model", "3"),
    ({"stopped_early": True}, "stopped_early", "true"),
    ({"loss_first": "low"}, "loss_first", '"low"'),
]


def record(folder: Path, settings: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SETTINGS_FILE).write_text(json.dumps(settings))
    return folder


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text, text
    return text


def test_every_field_a_trainer_writes_passes(tmp_path):
    assert read_settings(record(tmp_path, GOOD))["games"] == GOOD["games"]
    assert read_settings(record(tmp_path / "plain", {})) == {}
    assert read_settings(tmp_path / "no-record") == {}  # a plain model directory
    assert read_settings(record(tmp_path / "newer", {"added_later": [1]}))["added_later"] == [1]  # left alone


@pytest.mark.parametrize(("changes", "field", "held"), BAD, ids=[f"{b[1]}={b[2]}" for b in BAD])
def test_a_bad_field_is_one_line_naming_the_file_the_field_and_what_it_holds(tmp_path, changes, field, held):
    """Before the fix each of these read without a word (or with Python's own text)."""
    folder = record(tmp_path, {**GOOD, **changes})
    with pytest.raises(ValueError) as refused:
        read_settings(folder)
    line = one_line(refused.value)
    assert line.startswith(f"{folder / SETTINGS_FILE}: {field} holds {held};"), line
    assert "valid:" in line, line


def test_the_bound_on_answer_length_is_said(tmp_path):
    with pytest.raises(ValueError, match=r"valid: a whole number of tokens from 1 to 32768"):
        read_settings(record(tmp_path, {"sampling": {"max_new_tokens": 10**12}}))


@pytest.mark.parametrize(
    ("text", "said"),
    [("{bad", "is not valid JSON"), ("[1, 2]", "holds a JSON list, not an object"), ('"x"', "holds a JSON str")],
)
def test_a_record_that_is_no_json_object_is_one_line(tmp_path, text, said):
    (tmp_path / SETTINGS_FILE).write_text(text)
    with pytest.raises(ValueError) as refused:
        read_settings(tmp_path)
    line = one_line(refused.value)
    assert line.startswith(str(tmp_path / SETTINGS_FILE)) and said in line, line


# -- through the commands, on a real checkpoint ------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from trainers.tiny import create_tiny

    return create_tiny(tmp_path_factory.mktemp("tiny") / "model")


def checkpoint(tiny: Path, folder: Path, **changes: Any) -> Path:
    """A copy of the tiny model with the record a trainer writes, ``changes`` applied."""
    shutil.copytree(tiny, folder)
    return record(folder, {**GOOD, "sampling": {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 6}, **changes})


def test_play_refuses_a_huge_answer_length_in_one_line_before_loading(tiny, tmp_path):
    """Before the fix: a RuntimeError traceback from an 8 TB allocation."""
    path = checkpoint(tiny, tmp_path / "ck", sampling={"max_new_tokens": 10**12})
    played = subprocess.run(
        [sys.executable, "-m", "spiral_arena.cli", "play", "KuhnPoker-v0", "--p0", f"hf:{path}", "--p1", "random"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert played.returncode == 2 and "Traceback" not in played.stderr, played.stderr
    assert played.stderr.count("\n") == 1, played.stderr
    assert f"{path / SETTINGS_FILE}: sampling.max_new_tokens holds 1000000000000" in played.stderr


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"thinking": "yes"}, "thinking"),
        ({"obs_format": "weird"}, "obs_format"),
        ({"kind": "other"}, "kind"),
        ({"games": [{"game": "Nope-v0", "obs_format": "full"}]}, "games[0].game"),
        ({"games": [{"game": 3}]}, "games[0].game"),
    ],  # fmt: skip
)
def test_play_and_the_leaderboard_refuse_a_bad_field_in_one_line(tiny, tmp_path, capsys, changes, field):
    """Before the fix these played (or ended in "string indices must be integers")."""
    from spiral_arena.cli import main as cli_main

    path = checkpoint(tiny, tmp_path / "ck", **changes)
    play = ["play", "KuhnPoker-v0", "--p0", f"hf:{path}", "--p1", "random", "--games", "1", "--quiet"]
    board = ["leaderboard", "run", "--agents", f"random,hf:{path}", "--games", "KuhnPoker-v0", "--games-per-pair", "2"]
    for argv in (play, [*board, "--db", str(tmp_path / "lb.sqlite"), "--no-progress"]):
        assert cli_main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{path / SETTINGS_FILE}: {field} holds " in err, err
    assert not (tmp_path / "lb.sqlite").exists()


def test_an_agent_of_the_checkpoint_refuses_its_record_before_loading_the_model(tiny, tmp_path, monkeypatch):
    """``serve --agent``, ``eval`` and any code that builds the agent itself, without a command's checks first."""
    from spiral_arena.agents import hf

    def playing_model(*args: Any) -> None:
        raise AssertionError("the model loaded before its record was checked")

    monkeypatch.setattr(hf, "playing_model", playing_model)
    path = checkpoint(tiny, tmp_path / "ck", sampling={"max_new_tokens": 10**7})
    with pytest.raises(ValueError, match=r"spiral_arena\.json: sampling\.max_new_tokens holds 10000000; valid: "):
        hf.HFAgent(str(path))


def test_a_run_never_records_an_answer_length_its_checkpoints_would_refuse(tmp_path, capsys):
    """The trainer's own bound is the record's: before, ``--max-new-tokens 40000`` trained for hours and wrote
    checkpoints no command would then play."""
    from spiral_arena.cli import main as cli_main

    out = tmp_path / "run"
    assert cli_main(["train", "--max-new-tokens", "40000", "--steps", "1", "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == "spiral-arena train: error: max_new_tokens: must be in [1, 32768], got 40000\n", err
    assert not out.exists()
