"""``leaderboard run --reference-pool FILE``: a frozen benchmark whose stored games every later run reuses.
Real SQLite files written by the real ``spiral-arena leaderboard run``, scripted agents only."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from leaderboard import store
from leaderboard.entrants import parse_entrants
from leaderboard.reference_pool import load_pool, stored_problems
from spiral_arena.cli import main as cli_main

POOL = """\
agents = ["random", "expert", "random#seed=1"]
games = ["TicTacToe-v0", "KuhnPoker-v0"]
games_per_pair = 10
seed = 100
"""
POOL_GAMES = 3 * 2 * 10  # pairs x games x games per pair
ADDED = 3 * 2 * 10  # one added agent: a pair with each pool agent


def write_pool(folder: Path, text: str = POOL) -> Path:
    path = folder / "pool.toml"
    path.write_text(text)
    return path


def rows(db: Path) -> dict[int, tuple]:
    """Every stored game, all columns, by row id."""
    conn = sqlite3.connect(db)
    try:
        return {r[0]: r for r in conn.execute("SELECT * FROM games")}
    finally:
        conn.close()


def agent_records(db: Path) -> dict[str, tuple]:
    conn = sqlite3.connect(db)
    try:
        return {r[0]: r for r in conn.execute("SELECT * FROM agents")}
    finally:
        conn.close()


def pool_run(capsys, monkeypatch, pool: Path, db: Path, *flags: str) -> tuple[str, dict[str, dict]]:
    """``leaderboard run --reference-pool`` that must succeed: (stdout, the standings it shows: scope name ->
    label -> rating row)."""
    shown = []
    monkeypatch.setattr("leaderboard.cli._show", lambda standings, args: shown.append(standings))
    args = ["leaderboard", "run", "--reference-pool", str(pool), "--db", str(db), "--no-progress"]
    assert cli_main([*args, *flags]) == 0
    (standings,) = shown
    return capsys.readouterr().out, {s.name: {r.label: r for r in s.agents} for s in standings.scopes}


def test_an_added_agent_reuses_every_pool_game_and_plays_on_the_pool_seeds(tmp_path, capsys, monkeypatch):
    pool, db = write_pool(tmp_path), tmp_path / "lb.sqlite"
    out, first = pool_run(capsys, monkeypatch, pool, db)
    assert f"{POOL_GAMES} games scheduled: 0 already stored, {POOL_GAMES} played" in out
    pool_rows, pool_agents = rows(db), agent_records(db)
    assert len(pool_rows) == POOL_GAMES

    out, second = pool_run(capsys, monkeypatch, pool, db, "--agents", "newcomer=expert#alpha=0.2")
    assert "added: newcomer" in out
    total = POOL_GAMES + ADDED
    assert f"{total} games scheduled: {POOL_GAMES} already stored, {ADDED} played" in out
    after = rows(db)
    assert len(after) == total
    assert {i: after[i] for i in pool_rows} == pool_rows  # every column, timestamps included: not replayed
    assert {k: v for k, v in agent_records(db).items() if k in pool_agents} == pool_agents

    conn = sqlite3.connect(db)
    new_games = conn.execute(
        "SELECT env_id, player0, player1, seed FROM games WHERE 'newcomer' IN (player0, player1)"
    ).fetchall()
    conn.close()
    assert len(new_games) == ADDED
    assert {seed for *_, seed in new_games} == {100, 101, 102, 103, 104}  # the pool's seeds, not --seed's 0
    for opponent in ("random", "expert", "random#seed=1"):
        for env_id in ("TicTacToe-v0", "KuhnPoker-v0"):
            keys = {(p0, p1, s) for e, p0, p1, s in new_games if e == env_id and opponent in (p0, p1)}
            assert keys == {k for s in range(100, 105) for k in (("newcomer", opponent, s), (opponent, "newcomer", s))}

    # The scale stays anchored on random, and the pool's ratings barely move: the fit is joint, so the added
    # games nudge them, by less than an eighth of their intervals.
    assert list(second) == list(first) == ["overall", "TicTacToe-v0", "KuhnPoker-v0"]
    for scope in first:
        before, now = first[scope], second[scope]
        assert before["random"].anchor and now["random"].anchor
        assert before["random"].rating == now["random"].rating == 1000.0
        for label in ("expert", "random#seed=1"):
            moved = now[label].rating - before[label].rating
            assert abs(moved) < (before[label].high - before[label].low) / 8, (scope, label)  # 21 of 334 at most
    assert second["overall"]["newcomer"].games == ADDED

    # The same command again plays nothing and changes nothing.
    out, third = pool_run(capsys, monkeypatch, pool, db, "--agents", "newcomer=expert#alpha=0.2")
    assert f"{total} games scheduled: {total} already stored, 0 played" in out
    assert rows(db) == after
    assert {k: {a: r.rating for a, r in v.items()} for k, v in third.items()} == {
        k: {a: r.rating for a, r in v.items()} for k, v in second.items()
    }


def test_added_agents_play_the_pool_only_and_only_the_pool_games_are_rated(tmp_path, capsys, monkeypatch):
    pool, db = write_pool(tmp_path), tmp_path / "lb.sqlite"
    # Games already stored between these labels on other seeds, and between the two added agents.
    plain = ["leaderboard", "run", "--agents", "random,expert,a=random#seed=5,b=expert#alpha=0.1"]
    plain += ["--games", "TicTacToe-v0", "--games-per-pair", "2", "--seed", "7", "--db", str(db), "--no-progress"]
    assert cli_main(plain) == 0
    capsys.readouterr()
    out, data = pool_run(capsys, monkeypatch, pool, db, "--agents", "a=random#seed=5,b=expert#alpha=0.1,random")
    assert "added: a, b" in out  # random is the pool's own
    total = POOL_GAMES + 2 * ADDED
    assert f"{total} games scheduled: 0 already stored, {total} played" in out
    conn = sqlite3.connect(db)
    between = "SELECT seed FROM games WHERE player0 IN ('a', 'b') AND player1 IN ('a', 'b')"
    assert {seed for (seed,) in conn.execute(between)} == {7}  # from the plain run only
    conn.close()
    assert sum(r.games for r in data["overall"].values()) == 2 * total  # no game of seed 7, none of a against b


def test_pool_games_stored_by_a_plain_run_are_reused(tmp_path, capsys, monkeypatch):
    """The reuse rule is the game key: a plain run of the same labels, games and seeds stored them already."""
    pool, db = write_pool(tmp_path), tmp_path / "lb.sqlite"
    plain = ["leaderboard", "run", "--agents", "expert,random,random#seed=1", "--games", "KuhnPoker-v0,TicTacToe-v0"]
    assert cli_main([*plain, "--games-per-pair", "10", "--seed", "100", "--db", str(db), "--no-progress"]) == 0
    capsys.readouterr()
    before = rows(db)
    out, _ = pool_run(capsys, monkeypatch, pool, db)
    assert f"{POOL_GAMES} games scheduled: {POOL_GAMES} already stored, 0 played" in out
    assert rows(db) == before


def test_the_example_file_is_a_valid_pool():
    pool = load_pool(Path(__file__).parents[1] / "leaderboard" / "reference_pool.example.toml")
    assert pool.labels == ["random", "expert", "cautious"] and pool.entrants[2].stored_spec == "expert#alpha=0.3"
    assert (pool.games, pool.games_per_pair, pool.seed) == (("TicTacToe-v0", "KuhnPoker-v0"), 20, 0)


GOOD = dict(agents='["random", "expert"]', games='["TicTacToe-v0"]', games_per_pair="2", seed="0")


def pool_text(**changes: str | None) -> str:
    fields = {**GOOD, **changes}
    return "".join(f"{key} = {value}\n" for key, value in fields.items() if value is not None)


BAD_FILES = {
    "not TOML": ("agents = [random]\n", "not valid TOML: Invalid value (at line 1, column 11)"),
    "unknown key": (pool_text(seeds="[1, 2]"), "unknown key(s) seeds; valid: agents, games, games_per_pair, seed"),
    "missing key": (pool_text(seed=None, games=None), "missing key(s) games, seed"),
    "wrong types": (
        pool_text(agents='"random"', games_per_pair="2.0"),
        "agents must be a list of entries such as",
    ),
    "bad spec": (
        pool_text(agents='["random", "expert#alpha=2"]'),
        "'expert#alpha=2': alpha must be a number in [0, 1/3]",
    ),
    "unknown spec": (pool_text(agents='["random", "nobody"]'), "nobody"),
    "bad option": (pool_text(agents='["random", "random#bogus=1"]'), "unexpected keyword argument 'bogus'"),
    "duplicate labels": (pool_text(agents='["random", "x=expert", "x=random"]'), "agent 'x' is listed twice"),
    "one agent": (pool_text(agents='["random"]'), "a leaderboard needs at least 2 agents, got 1"),
    "unknown game": (pool_text(games='["Nope-v0"]'), "unknown env id 'Nope-v0'"),
    "odd games per pair": (pool_text(games_per_pair="3"), "games per pair must be an even number >= 2"),
    "negative seed": (pool_text(seed="-1"), "seed must be an integer >= 0, got -1"),
    "games per pair past the limit": (  # issue 27: was accepted, and memory grew by GBs before any game
        pool_text(games_per_pair="1000000000000"),
        "1,000,000,000,000 games per pair; a run plays at most 1,000,000 per pair and game id",
    ),
    "seed past the store": (
        pool_text(games_per_pair="4", seed=str(2**63 - 1)),
        f"seeds run from {2**63 - 1} to {2**63}; the last must be at most {2**63 - 1}",
    ),
}


@pytest.mark.parametrize("case", BAD_FILES, ids=list(BAD_FILES))
def test_a_bad_pool_file_is_one_line_and_writes_nothing(tmp_path, capsys, case):
    text, message = BAD_FILES[case]
    pool, db = write_pool(tmp_path, text), tmp_path / "lb.sqlite"
    assert cli_main(["leaderboard", "run", "--reference-pool", str(pool), "--db", str(db), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"spiral-arena leaderboard: error: --reference-pool {pool}: ") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pool.toml"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--reference-pool", "missing.toml"], "--reference-pool missing.toml: no such file"),
        (["--reference-pool", "."], "--reference-pool .: not a file"),
        (["--reference-pool", "pool.toml", "--seed", "3"], "--seed: the reference pool pool.toml fixes the games"),
        (["--reference-pool", "pool.toml", "--games-per-pair", "4"], "--games-per-pair: the reference pool"),
        (
            ["--reference-pool", "pool.toml", "--agents", "expert=expert#alpha=0.2"],
            "--agents: 'expert' is the reference pool's label for 'expert', not 'expert#alpha=0.2'",
        ),
        (["--reference-pool", "pool.toml", "--agents", "a=random,a=expert"], "--agents: 'a' is listed twice"),
    ],
    ids=["missing", "directory", "seed", "games-per-pair", "label-clash", "added-twice"],
)
def test_bad_pool_arguments_are_one_line_and_write_nothing(tmp_path, capsys, monkeypatch, flags, message):
    monkeypatch.chdir(tmp_path)
    write_pool(tmp_path)
    assert cli_main(["leaderboard", "run", *flags, "--db", "lb.sqlite", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pool.toml"]


def test_a_label_stored_for_another_agent_is_refused(tmp_path, capsys, monkeypatch):
    """Games are found again by label: under a pool label, another agent's games would be reused as the pool's."""
    db = tmp_path / "lb.sqlite"
    plain = ["leaderboard", "run", "--agents", "random,expert=expert#alpha=0.3", "--games", "TicTacToe-v0"]
    assert cli_main([*plain, "--games-per-pair", "2", "--db", str(db), "--no-progress"]) == 0
    capsys.readouterr()
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    pool = write_pool(tmp_path)
    assert cli_main(["leaderboard", "run", "--reference-pool", str(pool), "--db", str(db), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{db} stores 'expert' as expert#alpha=0.3, not expert" in err and err.count("\n") == 1, err
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


def test_a_plain_run_refuses_a_label_stored_for_another_agent_naming_both_specs(tmp_path, capsys):
    """Issue 27: only a pool run checked labels, so ``foo=expert#alpha=0.2`` on a database where ``foo`` is
    ``expert`` exited 0, played nothing and showed foo's old games as the new agent's."""
    db = tmp_path / "lb.sqlite"
    plain = ["leaderboard", "run", "--games", "TicTacToe-v0", "--games-per-pair", "2", "--db", str(db), "--no-progress"]
    assert cli_main([*plain, "--agents", "random,foo=expert"]) == 0
    capsys.readouterr()
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    assert cli_main([*plain, "--agents", "random,foo=expert#alpha=0.2"]) == 2
    err = capsys.readouterr().err
    assert f"{db} stores 'foo' as expert, not expert#alpha=0.2: a label names one agent" in err, err
    assert err.count("\n") == 1 and hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert cli_main([*plain, "--agents", "random,foo=expert,bar=expert#alpha=0.2"]) == 0  # the same agents again
    assert "0 played" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("window", "workers"), [("after the check", 1), ("after the check", 2), ("after the run started", 1)], ids=str
)
def test_a_label_another_run_stores_after_this_runs_check_stops_this_run_before_its_games(
    tmp_path, capsys, monkeypatch, window, workers
):
    """Two runs that give one label two specs, started together, could both pass the check before any game
    (each read before the other wrote). The check is made again where the run writes: here another run
    stores foo=expert between this run's check and its start, or after its start and before its first
    record of foo. This run (foo=expert#alpha=0.2) stops with the same one-line message, with workers too,
    and stores no game of foo."""
    import leaderboard.reference_pool

    db = tmp_path / "lb.sqlite"

    def other_run_records_foo() -> None:
        conn = store.connect(db)
        store.record_agent(conn, "foo", "expert")
        conn.close()

    def after(module, name: str):
        real = getattr(module, name)

        def wrapped(*args, **kwargs):
            result = real(*args, **kwargs)
            monkeypatch.setattr(module, name, real)  # once
            other_run_records_foo()
            return result

        monkeypatch.setattr(module, name, wrapped)

    if window == "after the check":
        after(leaderboard.reference_pool, "stored_problems")
    else:
        after(store, "load_agents")  # the run's player reads the recorded agents once it has checked its labels
    plain = ["leaderboard", "run", "--games", "TicTacToe-v0", "--games-per-pair", "2", "--db", str(db), "--no-progress"]
    assert cli_main([*plain, "--workers", str(workers), "--agents", "random,foo=expert#alpha=0.2"]) == 2
    err = capsys.readouterr().err
    assert "stores 'foo' as expert, not expert#alpha=0.2: a label names one agent" in err, err
    assert err.count("\n") == 1, err
    assert store.read_specs(db, ["foo"]) == {"foo": {"expert"}}
    assert rows(db) == {}


def test_a_database_another_run_is_still_making_holds_no_labels_yet(tmp_path, capsys):
    """Two runs started together on a new --db: the second found the first's file made but not yet migrated
    (schema version 0) and refused it as "not a leaderboard database" (CI, stop 32). It stores nothing yet:
    the run goes on and its own connect waits for the first's migration."""
    db = tmp_path / "lb.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")  # what the first run's connect has done before it migrates
    conn.close()
    assert db.stat().st_size > 0
    assert stored_problems(db, parse_entrants("random,foo=expert")) == []
    plain = ["leaderboard", "run", "--games", "TicTacToe-v0", "--games-per-pair", "2", "--db", str(db), "--no-progress"]
    assert cli_main([*plain, "--agents", "random,foo=expert"]) == 0, capsys.readouterr().err
    assert store.read_specs(db, ["foo", "random", "bar"]) == {"foo": {"expert"}, "random": {"random"}}


@pytest.mark.parametrize(
    "source", ["--agents random=expert,expert", "--agents expert,random=random#seed=3", "pool"], ids=str
)
def test_the_label_random_is_the_plain_random_agent_or_refused(tmp_path, capsys, monkeypatch, source):
    """Issue 27: ``random=expert`` stored games in which the label of the 1000 anchor was played by the expert."""
    monkeypatch.chdir(tmp_path)
    if source == "pool":
        write_pool(tmp_path, pool_text(agents='["random=expert#alpha=0.2", "expert"]'))
        flags = ["--reference-pool", "pool.toml"]
    else:
        flags = source.split()
        flags += ["--games", "TicTacToe-v0", "--games-per-pair", "2"]
    assert cli_main(["leaderboard", "run", *flags, "--db", "lb.sqlite", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "the label 'random' means the plain random agent (the rating anchor, 1000)" in err, err
    assert err.count("\n") == 1 and not (tmp_path / "lb.sqlite").exists()
