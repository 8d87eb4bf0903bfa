"""Notes on an agent's games of one env id (a checkpoint playing rules or a game it was not trained on):
stored in the database (schema v5), put on that game's standings row only, and shown in every output."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import html
import json
import sqlite3
from pathlib import Path

from rich.console import Console

from leaderboard import report, store
from leaderboard.standings import OVERALL, SoloScope, Standings, compute
from spiral_arena.cli import main as cli_main

CHECKPOINT = "hf:runs/a/checkpoints/step_000200"
KUHN, TICTACTOE, TWENTY = "KuhnPoker-v0", "TicTacToe-v0", "TwentyQuestions-v0:max_questions=20"
NOTE = (
    f"{CHECKPOINT} was trained on KuhnPoker-v0 with other rules; it plays this match's: reward=win (trained chips), "
    "rounds=5 (trained 1)"
)
MARKED = f"{CHECKPOINT}{report.NOTE_MARK}"
LEGEND = f"{report.NOTE_MARK} {NOTE}"


def game_row(env_id: str, player0: str, player1: str, seed: int) -> store.GameRow:
    """A finished game that seat 0 won; Kuhn games keep chips."""
    chips = env_id == KUHN
    return store.GameRow(
        env_id=env_id, env_version="v0", player0=player0, player1=player1, spec0=player0, spec1=player1, seed=seed,
        reward0=1.0, reward1=-1.0, payoff0=2.0 if chips else None, payoff1=-2.0 if chips else None, invalid0=False,
        invalid1=False, invalid_reason=None, error=None, error_seat=None, transcript='{"moves": [], "end": ""}',
        steps=3, duration_s=0.01, started_at=store.now(), finished_at=store.now(), package_version="0.1.0",
    )  # fmt: skip


def fill(conn: sqlite3.Connection) -> None:
    """Kuhn poker and Tic-Tac-Toe between the checkpoint and random, both seats, four seeds."""
    for env_id in (KUHN, TICTACTOE):
        for seed in range(4):
            store.insert_game(conn, game_row(env_id, CHECKPOINT, "random", seed))
            store.insert_game(conn, game_row(env_id, "random", CHECKPOINT, seed))


def noted_database(path: Path, notes: dict[tuple[str, str], str] | None = None) -> Path:
    conn = store.connect(path)
    fill(conn)
    store.record_notes(conn, {(CHECKPOINT, KUHN): NOTE} if notes is None else notes)
    conn.close()
    return path


def standings_of(path: Path) -> Standings:
    conn = store.open_readonly(path)
    try:
        return compute(store.load_games(conn), store.load_agents(conn), resamples=20, notes=store.load_notes(conn))
    finally:
        conn.close()


def v4_database(path: Path) -> None:
    """A database as version 4 made it: no notes table, one stored game."""
    conn = sqlite3.connect(path, isolation_level=None)
    assert store.migrate(conn, 4) == 4
    store.insert_game(conn, game_row(KUHN, CHECKPOINT, "random", 0))
    conn.close()


def tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_a_version_4_database_migrates_keeping_its_games(tmp_path):
    db = tmp_path / "v4.sqlite"
    v4_database(db)
    assert "notes" not in tables(sqlite3.connect(db))
    conn = store.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION == 7
    assert "notes" in tables(conn)
    assert [(g.env_id, g.player0, g.seed) for g in store.load_games(conn)] == [(KUHN, CHECKPOINT, 0)]
    assert store.load_notes(conn) == {}
    store.record_notes(conn, {(CHECKPOINT, KUHN): NOTE})
    conn.close()
    assert store.load_notes(store.connect(db)) == {(CHECKPOINT, KUHN): NOTE}


def test_a_version_4_database_reads_without_notes_and_stays_unchanged(tmp_path, capsys):
    db = tmp_path / "v4.sqlite"
    v4_database(db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    reader = store.open_readonly(db)
    assert store.load_notes(reader) == {} and store.count_games(reader) == 1
    reader.close()
    assert cli_main(["leaderboard", "show", "--db", str(db)]) == 0
    assert KUHN in capsys.readouterr().out
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 4


def test_notes_round_trip_and_replace_on_the_same_key(tmp_path):
    conn = store.connect(tmp_path / "lb.sqlite")
    store.record_notes(conn, {})
    assert conn.execute("SELECT count(*) FROM notes").fetchone()[0] == 0
    store.record_notes(conn, {(CHECKPOINT, KUHN): "first", (CHECKPOINT, TICTACTOE): "never trained on it"})
    store.record_notes(conn, {(CHECKPOINT, KUHN): NOTE})
    assert store.load_notes(conn) == {(CHECKPOINT, KUHN): NOTE, (CHECKPOINT, TICTACTOE): "never trained on it"}
    stamp, version = conn.execute("SELECT recorded_at, package_version FROM notes WHERE env_id = ?", [KUHN]).fetchone()
    assert stamp and version


def test_only_that_games_row_of_that_agent_carries_the_note(tmp_path):
    standings = standings_of(noted_database(tmp_path / "lb.sqlite"))
    notes = {(scope.name, row.label): row.note for scope in standings.scopes for row in scope.agents}
    assert notes == {
        (OVERALL, CHECKPOINT): None,
        (OVERALL, "random"): None,
        (KUHN, CHECKPOINT): NOTE,
        (KUHN, "random"): None,
        (TICTACTOE, CHECKPOINT): None,
        (TICTACTOE, "random"): None,
    }


def test_a_single_player_games_row_carries_its_note_too(tmp_path):
    conn = store.connect(tmp_path / "lb.sqlite")
    for seed in range(2):
        row = game_row(TWENTY, CHECKPOINT, store.NO_PLAYER, seed)
        row = dataclasses.replace(row, spec1=store.NO_PLAYER, reward1=None, payoff1=None, success=seed == 0)
        store.insert_game(conn, row)
    store.record_notes(conn, {(CHECKPOINT, TWENTY): f"{CHECKPOINT} was never trained on Twenty Questions"})
    conn.close()
    standings = standings_of(tmp_path / "lb.sqlite")
    (solo,) = standings.scopes
    assert isinstance(solo, SoloScope) and solo.agents[0].note == f"{CHECKPOINT} was never trained on Twenty Questions"
    assert f"{report.NOTE_MARK} {CHECKPOINT} was never trained on Twenty Questions" in terminal_text(standings)


def test_overall_never_carries_a_note_even_keyed_by_its_name(tmp_path):
    standings = standings_of(noted_database(tmp_path / "lb.sqlite", {(CHECKPOINT, OVERALL): NOTE}))
    assert all(row.note is None for scope in standings.scopes for row in scope.agents)


def terminal_text(standings: Standings) -> str:
    console = Console(record=True, width=400)
    report.print_tables(standings, console)
    return console.export_text()


def test_every_output_marks_the_row_and_gives_the_note(tmp_path):
    standings = standings_of(noted_database(tmp_path / "lb.sqlite"))
    text = terminal_text(standings)
    assert text.count(MARKED) == 1 and text.count(LEGEND) == 1
    assert text.index(f"{KUHN} (") < text.index(MARKED) < text.index(LEGEND) < text.index(f"{TICTACTOE} (")

    page = report.html_page(standings)
    legend = html.escape(LEGEND)  # the note's apostrophe is escaped
    assert page.count(f">{MARKED}</td>") == 1 and page.count(f'<p class="note marked">{legend}</p>') == 1
    kuhn_section = page[page.index('<section id="scope-kuhnpoker-v0"') :]
    assert kuhn_section.index(MARKED) < kuhn_section.index(legend) < kuhn_section.index("</section>")

    report.write_csv(standings, tmp_path / "s.csv")
    rows = list(csv.DictReader(open(tmp_path / "s.csv", encoding="utf-8")))
    assert {(r["scope"], r["agent"]): r["note"] for r in rows if r["note"]} == {(KUHN, CHECKPOINT): NOTE}
    assert len(rows) == 6 and tuple(rows[0]) == report.CSV_COLUMNS

    report.write_json(standings, tmp_path / "s.json")
    data = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    notes = {(s["name"], r["agent"]): r["note"] for s in data["scopes"] for r in s["standings"]}
    assert notes[(KUHN, CHECKPOINT)] == NOTE
    assert [key for key, note in notes.items() if note is not None] == [(KUHN, CHECKPOINT)]


def test_the_plot_marks_the_name(tmp_path):
    standings = standings_of(noted_database(tmp_path / "lb.sqlite"))
    figure = report.png_figure(standings)
    names = [tick.get_text() for tick in figure.axes[0].get_yticklabels()]
    assert sum(report.NOTE_MARK in name for name in names) == 1
    marked = next(name for name in names if report.NOTE_MARK in name)
    assert marked.startswith("hf:") and marked.split("  [")[0].endswith(report.NOTE_MARK)  # the name, then its key


def test_the_plot_says_what_its_mark_means(tmp_path):
    """The PNG has no table legend to point to: the note itself stands under the plot's legend."""
    noted = report.png_figure(standings_of(noted_database(tmp_path / "lb.sqlite"))).legends[0]
    title = " ".join(noted.get_title().get_text().split())  # wrapped to the figure's width
    assert title == f"{report.NOTE_MARK} {NOTE}"
    plain = report.png_figure(standings_of(noted_database(tmp_path / "plain.sqlite", {}))).legends[0]
    assert plain.get_title().get_text() == ""


def test_show_displays_the_stored_note(tmp_path, capsys):
    db = noted_database(tmp_path / "lb.sqlite")
    assert cli_main(["leaderboard", "show", "--db", str(db), "--game", KUHN]) == 0
    out = capsys.readouterr().out
    assert MARKED in out and NOTE in " ".join(out.split())  # a narrow terminal may fold the line


def test_without_notes_no_mark_and_no_legend(tmp_path):
    standings = standings_of(noted_database(tmp_path / "lb.sqlite", {}))
    assert report.NOTE_MARK not in terminal_text(standings)
    assert report.NOTE_MARK not in report.html_page(standings)
    report.write_csv(standings, tmp_path / "s.csv")
    assert all(r["note"] == "" for r in csv.DictReader(open(tmp_path / "s.csv", encoding="utf-8")))
    data = report.to_json(standings)
    assert all(r["note"] is None for s in data["scopes"] for r in s["standings"])
    names = [tick.get_text() for tick in report.png_figure(standings).axes[0].get_yticklabels()]
    assert not any(report.NOTE_MARK in name for name in names)
