"""Leaderboard building blocks: entrant strings, checkpoint discovery, Kuhn policies, the duplicate
schedule, and the SQLite store with its migrations."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import time
import tracemalloc

import pytest

from leaderboard import store
from leaderboard.entrants import default_entrants, find_checkpoints, kuhn_policy_of, parse_entrant, parse_entrants
from leaderboard.schedule import DEFAULT_GAMES, MAX_GAMES, MAX_GAMES_PER_PAIR, Job, round_robin, schedule
from spiral_arena.agents import BaseAgent, make_agent
from spiral_arena.agents.expert import nash_policy
from spiral_arena.analysis import KUHN_INFO_STATES, kuhn_exploitability
from spiral_arena.cli import main as cli_main

# -- entrants -----------------------------------------------------------------------------


def test_entrant_options_names_and_labels():
    plain = parse_entrant("expert")
    assert (plain.label, plain.spec, plain.kwargs) == ("expert", "expert", {})
    tuned = parse_entrant("expert#seed=3#alpha=0.2")
    assert tuned.kwargs == {"alpha": 0.2, "seed": 3}
    assert tuned.label == tuned.stored_spec == "expert#alpha=0.2#seed=3"  # options in a canonical order
    assert tuned.seed == 3
    named = parse_entrant("bluffer=expert#alpha=0.3")
    assert (named.label, named.stored_spec) == ("bluffer", "expert#alpha=0.3")
    agent = make_agent(tuned.spec, **tuned.kwargs)
    assert agent.experts["KuhnPoker"].alpha == 0.2


def test_entrant_labels_carry_no_secrets():
    entrant = parse_entrant("openai:m@http://user:hunter2@127.0.0.1:9/v1?token=abc")
    assert "hunter2" not in entrant.label and "abc" not in entrant.label
    assert "hunter2" in entrant.spec  # kept in memory to build the agent, never stored
    for option in ("api_key", "token", "access_token", "client_secret", "password"):
        with pytest.raises(ValueError, match="secret"):
            parse_entrant(f"openai:gpt#{option}=sk-123")
    assert parse_entrant("openai:gpt#max_tokens=64").kwargs == {"max_tokens": 64}


@pytest.mark.parametrize(
    "text, message",
    [
        ("human", "human cannot play"),
        ("expert#alpha", "bad option"),
        ("expert#alpha=1#alpha=2", "given twice"),
        ("nonsense", "unknown agent spec"),
        ("", "empty agent entry"),
    ],
)
def test_bad_entrants_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_entrant(text)


def test_entrant_lists():
    assert [e.label for e in parse_entrants("random, expert,a=random")] == ["random", "expert", "a"]
    with pytest.raises(ValueError, match="listed twice"):
        parse_entrants("random,random")
    with pytest.raises(ValueError, match="at least 2"):
        parse_entrants("random")


def test_latest_checkpoint_of_each_run(tmp_path):
    def checkpoint(run, step, marker=True):
        path = tmp_path / run / "checkpoints" / f"step_{step:06d}"
        path.mkdir(parents=True)
        if marker:
            (path / "spiral_arena.json").write_text(json.dumps({"step": step}))
        return path

    checkpoint("alpha", 10)
    latest_alpha = checkpoint("alpha", 200)
    checkpoint("alpha", 300, marker=False)  # half written: no marker yet
    (tmp_path / "alpha" / "checkpoints" / ".tmp_step_000400").mkdir()
    latest_beta = checkpoint("beta", 5)
    (tmp_path / "empty-run").mkdir()
    assert find_checkpoints(tmp_path) == [f"hf:{latest_alpha}", f"hf:{latest_beta}"]
    assert [e.label for e in default_entrants(tmp_path)] == [
        "random",
        "expert",
        f"hf:{latest_alpha}",
        f"hf:{latest_beta}",
    ]
    assert [e.label for e in default_entrants(tmp_path / "missing")] == ["random", "expert"]


class StatedPolicy(BaseAgent):
    """An agent that states its Kuhn policy through the ``kuhn_policy`` method."""

    def kuhn_policy(self):
        return dict.fromkeys(KUHN_INFO_STATES, 1.0)


def test_kuhn_policies_that_agents_state():
    assert kuhn_policy_of(make_agent("expert")) == nash_policy()
    assert kuhn_policy_of(make_agent("expert", alpha=0.0)) == nash_policy(0.0)
    random_policy = kuhn_policy_of(make_agent("random"))
    assert kuhn_exploitability(random_policy) == pytest.approx(11 / 24)
    assert kuhn_exploitability(kuhn_policy_of(StatedPolicy())) == pytest.approx(1 / 3)  # always bet/call
    assert kuhn_policy_of(BaseAgent()) is None


# -- schedule -----------------------------------------------------------------------------


def test_round_robin_is_duplicate():
    jobs = round_robin(["a", "b", "c"], ["KuhnPoker-v0"], games_per_pair=4, seed=10)
    assert len(jobs) == 3 * 4
    assert jobs[:4] == [
        Job("KuhnPoker-v0", "a", "b", 10),
        Job("KuhnPoker-v0", "b", "a", 10),
        Job("KuhnPoker-v0", "a", "b", 11),
        Job("KuhnPoker-v0", "b", "a", 11),
    ]
    assert len({job.key for job in jobs}) == len(jobs)
    for label in "abc":
        seat0 = sum(job.player0 == label for job in jobs)
        seat1 = sum(job.player1 == label for job in jobs)
        assert seat0 == seat1 == 4


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"games_per_pair": 3}, "even"),
        ({"games_per_pair": 0}, "even"),
        ({"seed": -1}, "seed"),
        ({"env_ids": ["Chess-v0"]}, "unknown env id"),
        ({"env_ids": []}, "at least one game"),
        ({"env_ids": ["KuhnPoker-v0", "KuhnPoker-v0"]}, "twice"),
    ],
)
def test_bad_schedules_are_refused(kwargs, message):
    args = {"labels": ["a", "b"], "env_ids": list(DEFAULT_GAMES), "games_per_pair": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        round_robin(**args)


def test_a_schedule_is_lazy_and_counts_and_finds_its_games_without_building_them():
    """Issue 27: a schedule was a list of every game, so memory grew with the count asked for (2 GB in 18 s
    for 10**12 games per pair, before any game). Now it is built game by game; its length and membership
    are arithmetic, the same as the list's."""
    labels = [f"a{i}" for i in range(10)]
    small = schedule(labels[:3], ["KuhnPoker-v0", "TwentyQuestions-v0"], 4, seed=7, reference=["a0"])
    listed = list(small)
    assert len(small) == len(listed) == 2 * 4 + 3 * 4  # 2 pairs with a0 x 4 games; 3 agents alone x 4
    assert all(job.key in small for job in listed) and len({job.key for job in listed}) == len(listed)
    outside = [("KuhnPoker-v0", "a1", "a2", 7), ("KuhnPoker-v0", "a0", "a1", 9), ("TwentyQuestions-v0", "a1", "a2", 7)]
    assert not any(key in small for key in outside)
    tracemalloc.start()
    try:
        big = schedule(labels, ["TicTacToe-v0"], 12_000, seed=0)  # 45 pairs x 12,000: 540,000 games
        assert len(big) == 540_000 and ("TicTacToe-v0", "a9", "a3", 5_999) in big
        first = [job for job, _ in zip(big, range(4), strict=False)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert first == [Job("TicTacToe-v0", p0, p1, s) for s in (0, 1) for p0, p1 in (("a0", "a1"), ("a1", "a0"))]
    assert peak < 1 << 20, f"{peak} bytes for a schedule of 540,000 games"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--games-per-pair", "1000000000000"],
            f"1,000,000,000,000 games per pair; a run plays at most {MAX_GAMES_PER_PAIR:,}",
        ),
        (
            ["--games-per-pair", "1000000", "--games", "TicTacToe-v0,KuhnPoker-v0,PigDice-v0,LiarsDice-v0"],
            f"12,000,000 games scheduled (3 agents, 4 game id(s), 1,000,000 games per pair); a run plays at most "
            f"{MAX_GAMES:,}",
        ),
        (["--seed", str(2**63 - 2)], "seeds run from"),
    ],
    ids=["games-per-pair", "total", "seeds"],
)
def test_limits_are_one_line_before_anything_is_built(tmp_path, capsys, flags, message):
    db = tmp_path / "lb.sqlite"
    clock = time.perf_counter()
    args = ["leaderboard", "run", "--agents", "random,expert,r2=random", *flags, "--db", str(db), "--no-progress"]
    code = cli_main(args)
    elapsed = time.perf_counter() - clock
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("spiral-arena leaderboard: error: ") and message in err, err
    assert elapsed < 5 and not db.exists()


# -- store --------------------------------------------------------------------------------


def game_row(seed=0, **changes):
    row = dict(
        env_id="KuhnPoker-v0", env_version="v0", player0="a", player1="b", spec0="random", spec1="expert",
        seed=seed, reward0=1.0, reward1=-1.0, payoff0=2.0, payoff1=-2.0, invalid0=False, invalid1=False,
        invalid_reason=None, error=None, error_seat=None, transcript='{"moves": [], "end": ""}', steps=3,
        duration_s=0.01, started_at=store.now(), finished_at=store.now(), package_version="0.1.0",
    )  # fmt: skip
    row.update(changes)
    return store.GameRow(**row)


def test_new_database_is_wal_and_current(tmp_path):
    conn = store.connect(tmp_path / "sub" / "lb.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION == 7
    assert store.insert_game(conn, game_row()) is True
    assert store.insert_game(conn, game_row(reward0=-1.0)) is False  # same key: ignored, first kept
    assert store.insert_game(conn, game_row(seed=1)) is True
    games = store.load_games(conn)
    assert [(g.seed, g.reward0) for g in games] == [(0, 1.0), (1, 1.0)]
    assert store.load_games(conn, ["TicTacToe-v0"]) == []
    assert store.load_games(conn, labels=["a", "c"]) == []


def test_migrating_a_version_1_database(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    assert store.migrate(conn, target=1) == 1
    later = ("spec0", "spec1", "success", *store.USAGE_COLUMNS)  # columns added since version 1
    v1_columns = [c for c in store.GameRow.__dataclass_fields__ if c not in later]
    row = game_row()
    conn.execute(
        f"INSERT INTO games ({', '.join(v1_columns)}) VALUES ({', '.join('?' * len(v1_columns))})",
        [getattr(row, c) for c in v1_columns],
    )
    assert not conn.execute("SELECT name FROM sqlite_master WHERE name = 'agents'").fetchall()
    conn.close()

    upgraded = store.connect(path)
    assert upgraded.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    assert upgraded.execute("SELECT player0, spec0, player1, spec1, payoff0 FROM games").fetchall() == [
        ("a", "a", "b", "b", 2.0)
    ]
    store.record_agent(upgraded, "a", "a", store.StatedPolicy({"K": 1.0}, 0.5))  # a version-1 label is its spec
    assert store.load_agents(upgraded)["a"].kuhn_policy == {"K": 1.0}
    assert store.insert_game(upgraded, game_row(seed=1)) is True
    upgraded.close()
    assert store.connect(path).execute("SELECT count(*) FROM games").fetchone()[0] == 2  # reopening changes nothing


def test_databases_that_cannot_be_used(tmp_path):
    with pytest.raises(ValueError, match="no leaderboard database"):
        store.connect(tmp_path / "missing.sqlite", create=False)
    newer = tmp_path / "newer.sqlite"
    sqlite3.connect(newer).execute("PRAGMA user_version = 99")
    with pytest.raises(ValueError, match="newer than this spiral-arena"):
        store.connect(newer)
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ValueError, match=f"cannot open the leaderboard database {garbage}: file is not a database"):
        store.connect(garbage)


def test_error_games_can_be_forgotten(tmp_path):
    conn = store.connect(tmp_path / "lb.sqlite")
    store.insert_game(conn, game_row(seed=0))
    store.insert_game(conn, game_row(seed=1, reward0=None, reward1=None, error="boom", error_seat=0))
    keys = {("KuhnPoker-v0", "a", "b", 0), ("KuhnPoker-v0", "a", "b", 1)}
    assert store.delete_errors(conn, keys) == 1
    assert store.stored_keys(conn, ["KuhnPoker-v0"]) == {("KuhnPoker-v0", "a", "b", 0)}


def _open_together(path, barrier):
    barrier.wait()
    store.connect(path).close()


def test_many_processes_open_a_new_database_at_once(tmp_path):
    """Workers and parallel runs may all create the file together: none may fail on SQLite's lock, nor take
    the schema another has just made for another program's (about one trial in ten did, reading the version
    and the tables in two snapshots)."""
    context = multiprocessing.get_context("fork")
    for trial in range(40):
        path = tmp_path / f"new{trial}.sqlite"
        barrier = context.Barrier(6)
        processes = [context.Process(target=_open_together, args=(path, barrier)) for _ in range(6)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(60)
        assert [p.exitcode for p in processes] == [0] * 6
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
