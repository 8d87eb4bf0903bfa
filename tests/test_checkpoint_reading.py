"""A checkpoint plays as it was trained wherever it is used: real ``hf:`` agents on tiny checkpoints built
here, each recording other games (a TicTacToe layout, Kuhn's rules), in ``play``, the leaderboard, ``serve``,
the single-seat env, ``collect``, and the command line."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from leaderboard import store  # noqa: E402
from leaderboard.entrants import parse_entrant  # noqa: E402
from leaderboard.runner import Player, run  # noqa: E402
from leaderboard.schedule import Job  # noqa: E402
from leaderboard.standings import OVERALL, compute  # noqa: E402
from spiral_arena.agents import RandomAgent, options_problem  # noqa: E402
from spiral_arena.agents.hf import HFAgent  # noqa: E402
from spiral_arena.games.tictactoe import TicTacToe  # noqa: E402
from spiral_arena.integrations.text_env import make_text_env  # noqa: E402
from spiral_arena.models.checkpoints import SETTINGS_FILE, games_record  # noqa: E402
from spiral_arena.play import Notes, play_games, seat_texts  # noqa: E402
from spiral_arena.registry import GameSpec, make  # noqa: E402
from spiral_arena.serve import read_info, retold  # noqa: E402
from trainers.sft import play_transcripts  # noqa: E402
from trainers.tiny import create_tiny  # noqa: E402


def checkpoint(base: Path, name: str, games: list[str] | None, obs_format: str = "last") -> str:
    """A copy of the tiny model whose spiral_arena.json says it was trained on ``games`` (None: a checkpoint
    written before checkpoints recorded their games)."""
    path = base / name
    shutil.copytree(base / "model", path)
    settings = {"step": 1, "kind": "spiral-arena checkpoint", "prompt_template": "bare", "obs_format": obs_format}
    settings["sampling"] = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 6}
    if games is not None:
        settings["games"] = games_record((GameSpec.parse(g), obs_format) for g in games)
    (path / SETTINGS_FILE).write_text(json.dumps(settings))
    return str(path)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("checkpoints")
    create_tiny(base / "model", ("KuhnPoker-v0", "TicTacToe-v0"))
    return {
        "lines": checkpoint(base, "lines", ["KuhnPoker-v0:rounds=1;reward=chips", "TicTacToe-v0:board=lines"]),
        "cells": checkpoint(base, "cells", ["TicTacToe-v0:board=cells"], obs_format="full"),
        "old": checkpoint(base, "old", None),
    }


def prompts(agent: HFAgent) -> list[str]:
    """Every prompt text the agent's model was shown (its policy tokenises each once)."""
    return list(agent.policy._known_prompts)


def test_two_checkpoints_trained_on_different_layouts_each_read_their_own_in_one_match(checkpoints):
    lines, cells = HFAgent(checkpoints["lines"], seed=0), HFAgent(checkpoints["cells"], seed=1)
    said = []
    records = list(play_games("TicTacToe-v0", [lines, cells], list(range(8)), concurrency=4, rotate_seats=True,
                              notes=Notes(said.append)))  # fmt: skip
    assert len(records) == 8 and said == []  # the same rules: nothing to say
    seen_lines, seen_cells = prompts(lines), prompts(cells)
    assert seen_lines and seen_cells
    assert all(" Lines: " in p and p.count("[GAME]") == 1 for p in seen_lines)  # lines layout, last message only
    assert all("M yours, T theirs" in p and " Lines: " not in p for p in seen_cells)
    assert all(p.count("[GAME]") > 1 for p in seen_cells)  # full history, as it trained


def test_the_seats_texts_come_from_the_records(checkpoints):
    lines, cells = HFAgent(checkpoints["lines"], seed=0), HFAgent(checkpoints["cells"], seed=1)
    texts = seat_texts(GameSpec.parse("TicTacToe-v0"), [lines, cells], Notes())
    assert texts == ({"board": "lines", "obs_format": "last"}, {"board": "cells", "obs_format": "full"})
    env = make("TicTacToe-v0", seat_text=texts)
    env.reset(seed=5)
    assert env.observe("player_0").startswith("[GAME] Your turn.") and " Lines: " in env.observe("player_0")
    env.step("[4]")
    assert env.observe("player_1").startswith("[GAME] You are Player 1") and "eM" not in env.observe("player_1")
    assert TicTacToe.read_position(env.observe("player_1"))["board"][4] == 0


def test_other_rules_are_played_and_said_once_and_an_old_checkpoint_says_it_has_no_record(checkpoints):
    said = []
    notes = Notes(said.append)
    agent, old = HFAgent(checkpoints["lines"]), HFAgent(checkpoints["old"])
    for _ in range(2):  # two commands' worth of games: one line each
        list(play_games("KuhnPoker-v0", [agent, RandomAgent(0)], range(4), notes=notes))
        list(play_games("TicTacToe-v0", [old, RandomAgent(0)], range(2), notes=notes))
    assert said == [
        f"hf:{checkpoints['lines']} was trained on KuhnPoker-v0 with other rules; it plays this match's: "
        "reward=win (trained chips), rounds=5 (trained 1)",
        f"hf:{checkpoints['old']} has no record of the games it was trained on (written before checkpoints kept "
        "one): it reads TicTacToe-v0 as the match writes it",
    ]
    assert all("Round" in p and " of 5, " in p for p in prompts(agent))  # the match's rules, its own format
    # an old checkpoint plays as before: the match's text, in the format its settings name (the last message)
    assert prompts(old) and all(p.count("[GAME]") == 1 and "numbers are empty cells" in p for p in prompts(old))


def test_a_spec_option_overrides_the_record_and_a_bad_one_is_refused(checkpoints):
    agent = HFAgent(checkpoints["lines"], board="grid")
    list(play_games("TicTacToe-v0", [agent, RandomAgent(0)], range(2)))
    assert prompts(agent) and all("numbers are empty cells" in p for p in prompts(agent))
    assert options_problem(f"hf:{checkpoints['lines']}", {"board": "hexagons"}) == (
        f"'hf:{checkpoints['lines']}': board must be one of grid, cells, lines (TicTacToe-v0), got 'hexagons'"
    )
    assert "unknown option(s) boards" in options_problem(f"hf:{checkpoints['lines']}", {"boards": "grid"})


def test_the_leaderboard_shows_each_checkpoint_its_text_and_stores_its_notes(checkpoints, tmp_path):
    entrants = [parse_entrant(f"lines=hf:{checkpoints['lines']}"), parse_entrant(f"cells=hf:{checkpoints['cells']}")]
    conn = store.connect(tmp_path / "board.sqlite")
    player = Player(entrants, conn, concurrency=4)
    jobs = [Job("TicTacToe-v0", "lines", "cells", 0), Job("TicTacToe-v0", "cells", "lines", 0)]
    rows = list(player.play(jobs))
    assert [r.error for r in rows] == [None, None]
    # (the player also read each agent's Kuhn policy, for the exploitability column: those prompts are Kuhn's)
    boards = {label: [p for p in prompts(player.agents[label]) if "Board" in p] for label in ("lines", "cells")}
    assert boards["lines"] and all(" Lines: " in p for p in boards["lines"])
    assert boards["cells"] and all(" Lines: " not in p and "M yours" in p for p in boards["cells"])
    player.close()


def test_a_leaderboard_run_says_each_checkpoints_note_once_and_stores_it_for_the_tables(checkpoints, tmp_path, capsys):
    entrants = [parse_entrant(f"lines=hf:{checkpoints['lines']}"), parse_entrant("random")]
    db = tmp_path / "board.sqlite"
    for _ in range(2):  # a second run of the same board plays nothing new and says its note again, once
        run(str(db), entrants, ["KuhnPoker-v0", "TicTacToe-v0"], 2, progress=False)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: ")]
    note = "lines was trained on KuhnPoker-v0 with other rules; it plays this match's: reward=win (trained chips), "
    assert said == [f"note: {note}rounds=5 (trained 1)"] * 2
    conn = store.connect(db)
    assert store.load_notes(conn) == {("lines", "KuhnPoker-v0"): f"{note}rounds=5 (trained 1)"}
    marked = compute(store.load_games(conn), store.load_agents(conn), notes=store.load_notes(conn))
    rows = {scope.name: {r.label: r.note for r in scope.agents} for scope in marked.scopes}
    assert rows["KuhnPoker-v0"]["lines"] and rows["TicTacToe-v0"]["lines"] is None and rows[OVERALL]["lines"] is None
    conn.close()


def test_a_served_checkpoint_reads_a_grid_observation_in_its_own_layout(checkpoints):
    agent = HFAgent(checkpoints["lines"])
    grid, lines = make("TicTacToe-v0", obs_format="last"), make("TicTacToe-v0:board=lines", obs_format="last")
    for env in (grid, lines):
        env.reset(seed=0)
        for move in ("[4]", "[0]", "[8]"):
            env.step(move)
    sent = grid.observe("player_1")
    assert retold(sent, read_info(sent), agent, {}) == lines.observe("player_1")
    assert retold(sent, read_info(sent), RandomAgent(0), {}) == sent  # only a checkpoint's text is rewritten


def test_the_single_seat_env_shows_a_checkpoint_opponent_its_text(checkpoints):
    text_env = make_text_env("TicTacToe-v0", seat=0, opponent=f"hf:{checkpoints['lines']}")
    observation, info = text_env.reset(seed=0)
    assert "numbers are empty cells" in observation  # the learner's seat: the text asked for
    text_env.step(info["legal_actions"][0])
    assert prompts(text_env.opponent) and all(" Lines: " in p for p in prompts(text_env.opponent))


def test_collect_records_a_checkpoint_in_the_text_it_read(checkpoints):
    records = list(play_transcripts(f"hf:{checkpoints['lines']}", [GameSpec.parse("TicTacToe-v0")], [1.0], 2, 0))
    assert records and all(" Lines: " in r["prompt"] and r["obs_format"] == "last" for r in records)


def test_play_on_the_command_line_says_the_rules_it_plays_in_one_line(checkpoints):
    command = [sys.executable, "-m", "spiral_arena.cli", "play", "KuhnPoker-v0", "--p0", f"hf:{checkpoints['lines']}"]
    done = subprocess.run([*command, "--p1", "random", "--games", "4", "--quiet"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [
        f"note: hf:{checkpoints['lines']} was trained on KuhnPoker-v0 with other rules; it plays this match's: "
        "reward=win (trained chips), rounds=5 (trained 1)"
    ]
