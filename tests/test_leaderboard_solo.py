"""Single-player games on the leaderboard: every agent plays Twenty Questions alone on the same seeds, and
the standings rank them by success rate with a Wilson interval, apart from the two-player ratings. Real
SQLite files and the real ``spiral-arena leaderboard`` command throughout."""

from __future__ import annotations

import csv
import json
import re
import sqlite3

import pytest
from conftest import stored_rows

import spiral_arena
from leaderboard import report, store
from leaderboard.entrants import parse_entrants
from leaderboard.runner import run
from leaderboard.schedule import round_robin, solo_runs
from leaderboard.standings import Scope, SoloScope, compute, wilson_interval
from spiral_arena.cli import main as cli_main

TWENTY = "TwentyQuestions-v0:max_questions=20"
NAME = "TwentyQuestions-v0"  # its name in the store and the tables: 20 questions is the default


def leaderboard_run(db, games, agents="expert,random", per_agent=6, *extra):
    return cli_main(
        ["leaderboard", "run", "--agents", agents, "--games", games, "--games-per-pair", str(per_agent)]
        + ["--db", str(db), "--no-progress", *extra]
    )


def games_of(db):
    conn = store.connect(db, create=False)
    try:
        return store.load_games(conn)
    finally:
        conn.close()


def standings_of(db):
    return compute(games_of(db))


def scope(standings, name):
    return next(s for s in standings.scopes if s.name == name)


def row_of(scope_, label):
    return next(r for r in scope_.agents if r.label == label)


def test_agents_are_ranked_by_success_rate_with_wilson_intervals(tmp_path, capsys):
    """The expert finds every built-in noun within 11 questions; random play only asks the table's
    questions and never names a noun, so it never succeeds."""
    db = tmp_path / "lb.sqlite"
    assert leaderboard_run(db, TWENTY) == 0
    out = capsys.readouterr().out
    assert "12 games scheduled: 0 already stored, 12 played, 0 ended by an agent error" in out
    assert f"{NAME} (12 games, one player; ranked by success rate)" in out
    assert report.SUCCESS_HEADER == "Success [95% CI]" and report.SUCCESS_HEADER in out
    assert "Rating" not in out and "Overall" not in out  # a single-player game is never rated
    assert out.index("100.0% [61.0-100.0]") < out.index("0.0% [0.0-39.0]")

    standings = standings_of(db)
    (table,) = standings.scopes
    assert isinstance(table, SoloScope) and table.ranked_by == "success rate"
    assert (table.games, table.errors) == (12, 0)
    expert, random_ = table.agents
    assert (expert.label, random_.label) == ("expert", "random")
    assert (expert.games, expert.successes, expert.success_rate) == (6, 6, 1.0)
    assert (random_.games, random_.successes, random_.success_rate) == (6, 0, 0.0)
    for row in table.agents:
        assert 0.0 <= row.low <= row.success_rate <= row.high <= 1.0
        assert (row.invalid_rate, row.errors) == (0.0, 0)
    assert expert.low > random_.high
    assert (expert.low, random_.high) == pytest.approx((0.6097, 0.3903), abs=1e-4)
    assert 1 <= expert.mean_turns <= 11 and random_.mean_turns == 20  # random uses up every question


def test_wilson_interval():
    assert wilson_interval(3, 6) == pytest.approx((0.1876, 0.8124), abs=1e-4)
    assert wilson_interval(50, 100) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    assert wilson_interval(0, 6)[0] == 0.0 and wilson_interval(6, 6)[1] == 1.0  # exact at the edges
    low, high = wilson_interval(2, 9)
    assert (1 - high, 1 - low) == pytest.approx(wilson_interval(7, 9))
    assert wilson_interval(5, 10, confidence=0.99)[0] < wilson_interval(5, 10)[0]


def test_every_agent_meets_the_same_secrets(tmp_path):
    db = tmp_path / "lb.sqlite"
    assert leaderboard_run(db, TWENTY, "expert,random,random#seed=4", 6, "--seed", "3") == 0
    rows = stored_rows(db)
    assert len(rows) == 3 * 6
    secrets: dict[str, dict[int, str]] = {}
    for row in rows:
        assert (row["player1"], row["spec1"], row["reward1"], row["invalid1"]) == ("", "", None, 0)
        assert row["steps"] == len(json.loads(row["transcript"])["moves"])
        end = json.loads(row["transcript"])["end"]
        secrets.setdefault(row["player0"], {})[row["seed"]] = re.search(r"secret(?: was)? '([^']+)'", end).group(1)
        assert row["success"] == (row["player0"] == "expert")
    assert set(secrets) == {"expert", "random", "random#seed=4"}
    assert all(set(by_seed) == set(range(3, 9)) for by_seed in secrets.values())  # seeds SEED .. SEED+N-1
    env = spiral_arena.make(TWENTY)
    for seed in range(3, 9):
        env.reset(seed=seed)
        assert {by_seed[seed] for by_seed in secrets.values()} == {env.state_.secret}
    assert len(set(secrets["expert"].values())) > 1  # the seed draws the secret


def test_mixed_runs_rate_two_player_games_apart_from_single_player_ones(tmp_path, capsys):
    db = tmp_path / "lb.sqlite"
    assert leaderboard_run(db, f"TicTacToe-v0,{TWENTY}", "expert,random", 2) == 0
    out = capsys.readouterr().out
    assert "6 games scheduled: 0 already stored, 6 played" in out  # 2 TicTacToe games, 2 x 2 alone
    assert "TicTacToe-v0 (2 games; ranked by rating)" in out and report.SUCCESS_HEADER in out
    standings = standings_of(db)
    # One two-player game: an overall scope would only repeat its table.
    assert [s.name for s in standings.scopes] == ["TicTacToe-v0", NAME]
    assert isinstance(standings.scopes[0], Scope) and isinstance(standings.scopes[1], SoloScope)

    assert leaderboard_run(db, f"TicTacToe-v0,{TWENTY},KuhnPoker-v0", "expert,random", 2) == 0
    assert "8 games scheduled: 6 already stored, 2 played" in capsys.readouterr().out
    standings = standings_of(db)
    assert [s.name for s in standings.scopes] == ["overall", "TicTacToe-v0", "KuhnPoker-v0", NAME]
    overall = scope(standings, "overall")
    assert overall.games == 4 and overall.head_to_head["expert"]["random"].games == 4  # no Twenty Questions
    assert all(row.games == 4 and row.rating is not None for row in overall.agents)
    assert [r.success_rate for r in scope(standings, NAME).agents] == [1.0, 0.0]

    assert cli_main(["leaderboard", "show", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "Overall (4 games; ranked by rating)" in out
    assert f"{NAME} (4 games, one player; ranked by success rate)" in out and report.SUCCESS_HEADER in out
    assert cli_main(["leaderboard", "show", "--db", str(db), "--game", "TwentyQuestions-v0: max_questions=20"]) == 0
    out = capsys.readouterr().out
    assert report.SUCCESS_HEADER in out and "TicTacToe-v0" not in out and "Rating" not in out


def test_every_output_shows_the_success_column(tmp_path, capsys):
    db = tmp_path / "lb.sqlite"
    assert leaderboard_run(db, f"TicTacToe-v0,{TWENTY}", "expert,random", 4) == 0
    paths = {kind: tmp_path / f"board.{kind}" for kind in ("html", "png", "csv", "json")}
    args = [f"--{kind}={path}" for kind, path in paths.items()]
    assert cli_main(["leaderboard", "show", "--db", str(db), *args]) == 0
    assert report.SUCCESS_HEADER in capsys.readouterr().out

    page = paths["html"].read_text()
    solo_table = re.search(rf'<table class="sortable" id="{report.table_id(NAME)}">.*?</table>', page).group(0)
    assert f'<th data-type="num">{report.SUCCESS_HEADER}</th>' in solo_table
    assert "100.0% [51.0-100.0]" in solo_table and "Wilson score interval" in page
    assert 'id="matrix-tictactoe-v0"' in page and "matrix-twentyquestions" not in page  # no head to head alone

    rows = [r for r in csv.DictReader(open(paths["csv"], encoding="utf-8")) if r["scope"] == NAME]
    assert [(r["agent"], r["success_rate"], r["successes"], r["rating"]) for r in rows] == [
        ("expert", "1.0", "4", ""),
        ("random", "0.0", "0", ""),
    ]
    assert float(rows[0]["success_ci_low"]) == pytest.approx(wilson_interval(4, 4)[0])

    data = json.loads(paths["json"].read_text())
    solo = next(s for s in data["scopes"] if s["name"] == NAME)
    assert (solo["players"], solo["ranked_by"], solo["success_interval"]) == (
        1,
        "success rate",
        "95% Wilson score interval",
    )
    assert "head_to_head" not in solo and [r["success_rate"] for r in solo["standings"]] == [1.0, 0.0]
    assert next(s for s in data["scopes"] if s["name"] == "TicTacToe-v0")["players"] == 2

    assert paths["png"].stat().st_size > 10_000
    fig = report.png_figure(standings_of(db))
    assert {ax.get_title() for ax in fig.axes} >= {"Rating", "Success rate", "TicTacToe-v0: head to head"}
    alone = report.png_figure(compute([g for g in games_of(db) if g.env_id == NAME]))
    assert [ax.get_title() for ax in alone.axes] == ["Success rate"]


def test_a_rerun_stores_nothing_twice_and_extends(tmp_path, capsys):
    db = tmp_path / "lb.sqlite"
    assert leaderboard_run(db, TWENTY, "expert,random", 3) == 0
    before = {(r["player0"], r["seed"]): r for r in stored_rows(db)}
    capsys.readouterr()
    assert leaderboard_run(db, TWENTY, "expert,random", 3) == 0
    assert "6 games scheduled: 6 already stored, 0 played" in capsys.readouterr().out
    assert {(r["player0"], r["seed"]): r for r in stored_rows(db)} == before
    assert leaderboard_run(db, TWENTY, "expert,random", 5) == 0  # an odd number is fine alone
    assert "10 games scheduled: 6 already stored, 4 played" in capsys.readouterr().out
    after = {(r["player0"], r["seed"]): r for r in stored_rows(db)}
    assert len(after) == 10 and all(after[key] == row for key, row in before.items())


def test_worker_processes_store_what_one_process_stores(tmp_path):
    entrants = parse_entrants("expert,random")
    games = ["TicTacToe-v0", TWENTY]
    one, two = tmp_path / "one.sqlite", tmp_path / "two.sqlite"
    run(str(one), entrants, games, 4, progress=False)
    summary = run(str(two), entrants, games, 4, workers=2, progress=False)
    assert summary.played == summary.scheduled == 4 + 2 * 4
    volatile = ("id", "duration_s", "started_at", "finished_at")

    def key(row):
        return (row["env_id"], row["player0"], row["player1"], row["seed"])

    def kept(db):
        return sorted(({k: v for k, v in r.items() if k not in volatile} for r in stored_rows(db)), key=key)

    assert kept(two) == kept(one)


def test_agent_errors_are_counted_and_left_out_of_the_rates(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)  # so "broken" cannot be built
    db = tmp_path / "lb.sqlite"
    assert leaderboard_run(db, TWENTY, "expert,broken=mistral:some-model", 3) == 1
    captured = capsys.readouterr()
    assert "3 game(s) ended by an agent error; fix the agent" in captured.err
    table = standings_of(db).scopes[0]
    assert (table.games, table.errors) == (3, 3)
    broken = row_of(table, "broken")
    assert table.agents[-1] is broken
    assert (broken.games, broken.errors, broken.success_rate, broken.low, broken.mean_turns) == (0, 3, None, None, None)
    assert row_of(table, "expert").success_rate == 1.0
    assert all(g.success is None for g in games_of(db) if g.error is not None)


@pytest.mark.parametrize(
    "games, per_agent, message",
    [
        (TWENTY, 0, "games per agent (--games-per-pair, in single-player games) must be an integer >= 1, got 0"),
        (TWENTY, -2, "must be an integer >= 1, got -2"),
        (f"TicTacToe-v0,{TWENTY}", 3, "games per pair must be an even number >= 2"),
        ("TwentyQuestions-v0:max_questions=0", 2, "max_questions must be a positive integer"),
        (f"{TWENTY},TwentyQuestions-v0: max_questions = 20", 2, "listed twice"),
    ],
)
def test_bad_input_fails_before_any_game(tmp_path, capsys, games, per_agent, message):
    db = tmp_path / "lb.sqlite"
    assert leaderboard_run(db, games, "expert,random", per_agent) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not db.exists()


def test_each_schedule_keeps_to_its_kind_of_game():
    jobs = solo_runs(["a", "b"], [TWENTY], games_per_agent=3, seed=5)
    assert [(j.player0, j.player1, j.seed) for j in jobs] == [(p, "", s) for p in "ab" for s in (5, 6, 7)]
    assert jobs[0].players == ("a",)
    with pytest.raises(ValueError, match="single-player, so not for a round robin"):
        round_robin(["a", "b"], [TWENTY], games_per_pair=2)
    with pytest.raises(ValueError, match="two-player, so not for solo runs"):
        solo_runs(["a", "b"], ["TicTacToe-v0"], games_per_agent=2)


def test_a_version_2_database_gains_the_success_column(tmp_path):
    path = tmp_path / "v2.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    assert store.migrate(conn, target=2) == 2
    columns = [c for c in store.GameRow.__dataclass_fields__ if c not in ("success", *store.USAGE_COLUMNS)]
    values = dict(
        env_id="TicTacToe-v0", env_version="v0", player0="a", player1="b", spec0="random", spec1="expert", seed=0,
        reward0=1.0, reward1=-1.0, payoff0=None, payoff1=None, invalid0=False, invalid1=False, invalid_reason=None,
        error=None, error_seat=None, transcript='{"moves": [], "end": ""}', steps=5, duration_s=0.01,
        started_at=store.now(), finished_at=store.now(), package_version="0.1.0",
    )  # fmt: skip
    conn.execute(
        f"INSERT INTO games ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
        [values[c] for c in columns],
    )
    conn.close()
    upgraded = store.connect(path)
    assert upgraded.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION == 7
    (game,) = store.load_games(upgraded)
    assert (game.steps, game.success) == (5, None)
