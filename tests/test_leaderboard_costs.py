"""What API agents spend, on the leaderboard: token counts and latency recorded per move, charged to the
game and seat they belong to (also with many games in flight), stored per game and seat (NULL for
scripted seats), and shown as tokens per game, latency per move, cost per game and rating per cent with
``--price``. A real chat endpoint on 127.0.0.1 states known ``usage`` numbers and waits a known time; the
expected sums are computed independently, by replaying each stored transcript in a fresh env."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from conftest import JSONEndpoint, stored_rows

import spiral_arena
from leaderboard import report, store
from spiral_arena.agents import APIAgent
from spiral_arena.cli import main as cli_main
from spiral_arena.llm import ChatClient

pytest.importorskip("httpx", reason="API agents need the api extra")

SECRET = "sk-test-COSTS-SECRET-4242"
COMPLETION_TOKENS = {"alpha": 7, "beta": 11}  # what each model's replies cost; "mute" states no usage
MIN_DELAY_S = 0.02  # every reply waits at least this long
GAMES = ["TicTacToe-v0", "KuhnPoker-v0"]
PRICES = {"alpha": (2.5, 10.0), "beta": (1.0, 4.0)}  # alpha priced by its label, b by its model id (beta)


class UsageServer:
    """An OpenAI-compatible endpoint whose replies state ``usage``: prompt tokens = the length of the last
    message, completion tokens = ``COMPLETION_TOKENS[model]`` (model "mute" sends no usage, "odd" a
    malformed one). It plays a legal action picked by a hash of model and observation, and waits 20, 30
    or 40 ms (also picked by that hash, so replies of one wave come back out of order). It records the
    Authorization headers it got and the most requests in flight at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = 0
        self.authorizations: set[str | None] = set()
        self.http = JSONEndpoint(self.answer)
        self.url = self.http.url

    def answer(self, body: dict[str, Any], headers: Message) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.authorizations.add(headers.get("Authorization"))
        return 200, self.reply(body)

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        model, observation = body["model"], body["messages"][-1]["content"]
        pick = zlib.crc32(f"{model}\n{observation}".encode())
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(MIN_DELAY_S + (pick % 3) * 0.01)
        finally:
            with self.lock:
                self.in_flight -= 1
        found = re.findall(r"Legal actions: (.*)\.", observation)
        text = f"\\boxed{{{found[-1].split(', ')[pick % len(found[-1].split(', '))]}}}" if found else observation
        payload: dict[str, Any] = {"choices": [{"message": {"role": "assistant", "content": text}}]}
        if model in COMPLETION_TOKENS:
            payload["usage"] = {
                "prompt_tokens": len(observation),
                "completion_tokens": COMPLETION_TOKENS[model],
                "total_tokens": len(observation) + COMPLETION_TOKENS[model],
            }
        elif model == "odd":
            payload["usage"] = {"prompt_tokens": "12", "completion_tokens": -1}
        return payload

    def stop(self) -> None:
        self.http.stop()


@pytest.fixture
def server() -> Iterator[UsageServer]:
    started = UsageServer()
    yield started
    started.stop()


@pytest.fixture
def secret_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """OPENAI_API_KEY set, so the agents send it (loopback is allowed to receive it)."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    for name in ("OPENAI_BASE_URL", "SPIRAL_ARENA_TRUST_HOSTS"):
        monkeypatch.delenv(name, raising=False)
    return SECRET


def agents(url: str) -> str:
    api = "#max_retries=0"
    return f"alpha=openai:alpha@{url}{api},b=openai:beta@{url}{api},mute=openai:mute@{url}{api},random"


def price_args() -> list[str]:
    return ["--price", "alpha=2.5/10", "--price", "beta=1/4"]


def replay(game: dict[str, Any]) -> dict[int, list[int]]:
    """Seat -> the length of the observation behind each of its moves, from the stored transcript alone."""
    env = spiral_arena.make(game["env_id"])
    env.reset(seed=game["seed"])
    seats = {name: i for i, name in enumerate(env.possible_agents)}
    moves = iter(json.loads(game["transcript"])["moves"])
    lengths: dict[int, list[int]] = {0: [], 1: []}
    for name in env.agent_iter():
        observation, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        seat, action = next(moves)
        assert seat == seats[name]
        lengths[seat].append(len(observation))
        env.step(action)
    assert next(moves, None) is None
    return lengths


def expected_usage(game: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Each seat's usage columns as the server's rule makes them (latency aside)."""
    lengths = replay(game)
    out = {}
    for seat, label in enumerate((game["player0"], game["player1"])):
        model = {"alpha": "alpha", "b": "beta", "mute": "mute"}.get(label)
        if model is None:
            out[seat] = {"prompt_tokens": None, "completion_tokens": None, "api_moves": None}
        elif model == "mute":
            out[seat] = {"prompt_tokens": None, "completion_tokens": None, "api_moves": len(lengths[seat])}
        else:
            out[seat] = {
                "prompt_tokens": sum(lengths[seat]),
                "completion_tokens": COMPLETION_TOKENS[model] * len(lengths[seat]),
                "api_moves": len(lengths[seat]),
            }
    return out


def played(tmp_path: Path, url: str, *extra: str) -> tuple[Path, int]:
    db = tmp_path / "lb.sqlite"
    args = ["leaderboard", "run", "--agents", agents(url), "--games", ",".join(GAMES), "--games-per-pair", "4"]
    code = cli_main([*args, "--concurrency", "6", "--db", str(db), "--no-progress", *extra])
    return db, code


def test_usage_is_charged_to_each_game_and_seat_with_games_in_flight(tmp_path, server, secret_key, capsys):
    db, code = played(tmp_path, server.url, *price_args())
    out = capsys.readouterr().out
    assert code == 0
    assert server.max_in_flight > 1  # games were in flight together, so requests of many games overlapped
    assert server.authorizations == {f"Bearer {secret_key}"}  # the key was used ...
    for path in tmp_path.iterdir():  # ... and written nowhere: database (and any -wal/-shm), outputs
        assert secret_key.encode() not in path.read_bytes(), path
    assert "Tokens/game" in out and "Latency/move" in out and "$/game" in out and "Elo/cent" in out

    games = stored_rows(db)
    assert len(games) == 2 * 6 * 4 and all(g["error"] is None for g in games)
    api_seats = 0
    for game in games:
        for seat, expected in expected_usage(game).items():
            stored = {name: game[f"{name}{seat}"] for name in ("prompt_tokens", "completion_tokens", "api_moves")}
            assert stored == expected, (game["env_id"], game["player0"], game["player1"], game["seed"], seat)
            latency = game[f"latency_s{seat}"]
            if expected["api_moves"] is None:
                assert latency is None  # a scripted seat: not applicable, not 0
            else:
                api_seats += 1
                assert latency >= MIN_DELAY_S * expected["api_moves"]
    assert api_seats == 2 * 3 * 4 * 2 + 2 * 3 * 4  # every API agent's seat of every game


def _by_agent(scope: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["agent"]: row for row in scope["standings"]}


def test_show_reports_tokens_cost_and_rating_per_cent(tmp_path, server, secret_key, capsys):
    db, code = played(tmp_path, server.url)
    assert code == 0
    capsys.readouterr()
    out_json, out_csv, out_html = tmp_path / "lb.json", tmp_path / "lb.csv", tmp_path / "lb.html"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    show = ["leaderboard", "show", "--db", str(db), "--json", str(out_json), "--csv", str(out_csv)]
    assert cli_main([*show, "--html", str(out_html), *price_args()]) == 0
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    terminal = capsys.readouterr().out
    assert "Elo/cent: (rating - 1000) / (100 x cost per game)" in terminal
    assert "--price alpha=$2.5/$10, beta=$1/$4" in terminal

    payload = json.loads(out_json.read_text())
    assert payload["costs"]["prices_usd_per_million_tokens"] == {
        "alpha": {"input": 2.5, "output": 10.0},
        "beta": {"input": 1.0, "output": 4.0},
    }
    games = [g for g in stored_rows(db) if g["error"] is None]
    for scope in payload["scopes"]:
        rows = _by_agent(scope)
        mine = [g for g in games if scope["name"] in ("overall", g["env_id"])]
        for label, model in (("alpha", "alpha"), ("b", "beta"), ("mute", "mute")):
            seats = [(g, seat) for g in mine for seat in (0, 1) if (g["player0"], g["player1"])[seat] == label]
            usage = [expected_usage(g)[seat] for g, seat in seats]
            row = rows[label]
            assert row["api_games"] == len(seats) == row["games"]
            assert row["api_moves"] == sum(u["api_moves"] for u in usage)
            assert row["latency_per_move_s"] >= MIN_DELAY_S
            if model == "mute":  # no usage stated: unknown, neither counted as 0 nor priced
                assert row["token_games"] == 0 and row["tokens_per_game"] is None
                assert row["price"] is None and row["cost_per_game_usd"] is None and row["rating_per_cent"] is None
                continue
            prompt = sum(u["prompt_tokens"] for u in usage) / len(usage)
            completion = sum(u["completion_tokens"] for u in usage) / len(usage)
            assert row["token_games"] == len(seats)
            assert row["prompt_tokens_per_game"] == pytest.approx(prompt)
            assert row["completion_tokens_per_game"] == pytest.approx(completion)
            assert row["tokens_per_game"] == pytest.approx(prompt + completion)
            per_in, per_out = PRICES[model]
            cost = (prompt * per_in + completion * per_out) / 1e6
            assert row["price"] == model  # alpha by its label, b by its model id
            assert row["cost_per_game_usd"] == pytest.approx(cost)
            assert row["rating_per_cent"] == pytest.approx((row["rating"] - 1000) / (100 * cost))
        random_row = rows["random"]
        assert all(random_row[k] is None for k in (*report.USAGE_COLUMNS, *report.COST_COLUMNS))

    with open(out_csv, newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0]) == report.CSV_COLUMNS + report.USAGE_COLUMNS + report.COST_COLUMNS
    alpha = next(r for r in table if r["scope"] == "overall" and r["agent"] == "alpha")
    overall = _by_agent(payload["scopes"][0])["alpha"]
    assert float(alpha["cost_per_game_usd"]) == pytest.approx(overall["cost_per_game_usd"])
    page = out_html.read_text()
    assert "Tokens/game" in page and "Elo/cent" in page and "$/game" in page


def test_scripted_tables_look_as_before_and_store_null(tmp_path, capsys):
    db = tmp_path / "lb.sqlite"
    args = ["leaderboard", "run", "--agents", "random,expert", "--games", "KuhnPoker-v0", "--games-per-pair", "2"]
    assert cli_main([*args, "--db", str(db), "--no-progress", "--price", "gpt-4o=2.5/10"]) == 0
    captured = capsys.readouterr()
    assert "Tokens/game" not in captured.out and "$/game" not in captured.out
    assert "--price gpt-4o matches no agent with token counts" in captured.err
    out_json, out_csv = tmp_path / "lb.json", tmp_path / "lb.csv"
    outputs = ["--json", str(out_json), "--csv", str(out_csv), "--price", "gpt-4o=2.5/10"]
    assert cli_main(["leaderboard", "show", "--db", str(db), *outputs]) == 0
    assert "Tokens/game" not in capsys.readouterr().out
    games = stored_rows(db)
    assert games and all(g[c] is None for g in games for c in store.USAGE_COLUMNS)
    with open(out_csv, newline="", encoding="utf-8") as f:
        assert tuple(next(csv.reader(f))) == report.CSV_COLUMNS
    payload = json.loads(out_json.read_text())
    assert "costs" not in payload
    assert set(payload["scopes"][0]["standings"][0]) == set(report.CSV_COLUMNS)


BAD_PRICES = ["gpt-4o", "gpt-4o=2.5", "gpt-4o=2.5/ten", "=2.5/10", "gpt-4o=-1/10", "gpt-4o=1/2/3", "gpt-4o=nan/1"]


@pytest.mark.parametrize("bad", BAD_PRICES)
def test_a_bad_price_is_one_line_before_any_game(tmp_path, capsys, bad):
    db = tmp_path / "lb.sqlite"
    args = ["leaderboard", "run", "--agents", "random,expert", "--games", "TicTacToe-v0", "--db", str(db)]
    assert cli_main([*args, "--price", "ok=1/2", "--price", bad, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"spiral-arena leaderboard: error: --price {bad!r}: write MODEL=IN/OUT")
    assert "e.g. --price gpt-4o=2.5/10" in err and "'ok=1/2'" not in err
    assert list(tmp_path.iterdir()) == []  # nothing played, nothing written

    store.connect(db).close()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    out_json = tmp_path / "lb.json"
    assert cli_main(["leaderboard", "show", "--db", str(db), "--json", str(out_json), "--price", bad]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--price {bad!r}: write MODEL=IN/OUT" in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_model_priced_twice_is_refused(tmp_path, capsys):
    db = tmp_path / "lb.sqlite"
    args = ["leaderboard", "run", "--agents", "random,expert", "--db", str(db), "--price", "m=1/2", "--price", "m=1/3"]
    assert cli_main(args) == 2
    assert capsys.readouterr().err.strip() == (
        "spiral-arena leaderboard: error: --price: m priced more than once; give each model one price"
    )
    assert not db.exists()


def test_act_batch_reports_each_requests_own_usage(server, secret_key):
    """Concurrent requests of one batch: each answer carries the usage and latency of its own request."""
    observations = [f"Your turn. Legal actions: [{i}]." + "x" * i for i in range(8)]
    agent = APIAgent(f"openai:alpha@{server.url}", concurrency=8)
    replies = agent.answer_batch(observations, [{}] * len(observations))
    assert server.max_in_flight > 1
    assert [r.text for r in replies] == [f"\\boxed{{[{i}]}}" for i in range(8)]
    assert [r.prompt_tokens for r in replies] == [len(o) for o in observations]
    assert all(r.completion_tokens == 7 and r.latency_s >= MIN_DELAY_S for r in replies)
    assert agent.act_batch(observations[:2], [{}, {}]) == [r.text for r in replies[:2]]


@pytest.mark.parametrize("model", ["mute", "odd"])
def test_absent_or_malformed_usage_is_unknown_not_zero(server, secret_key, model):
    reply = ChatClient(model, server.url, max_retries=0).complete([{"role": "user", "content": "hi"}])
    assert (reply.prompt_tokens, reply.completion_tokens) == (None, None)
    assert reply.latency_s >= MIN_DELAY_S and reply.text == "hi"


def _v3_database(db: Path) -> None:
    """A database as the previous schema (version 3) made it, with one finished game."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    assert store.migrate(conn, target=3) == 3
    columns = [c for c in store.GameRow.__dataclass_fields__ if c not in store.USAGE_COLUMNS]
    values = dict(
        env_id="TicTacToe-v0", env_version="v0", player0="alpha", player1="random", spec0="openai:alpha",
        spec1="random", seed=0, reward0=1.0, reward1=-1.0, payoff0=None, payoff1=None, invalid0=False,
        invalid1=False, invalid_reason=None, error=None, error_seat=None, transcript='{"moves": [], "end": ""}',
        steps=5, duration_s=0.01, started_at=store.now(), finished_at=store.now(), package_version="0.1.0",
        success=None,
    )  # fmt: skip
    conn.execute(
        f"INSERT INTO games ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
        [values[c] for c in columns],
    )
    conn.close()


def test_a_version_3_database_shows_read_only_and_migrates_to_null_usage(tmp_path, capsys):
    db = tmp_path / "v3.sqlite"
    _v3_database(db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    out_json = tmp_path / "v3.json"
    assert cli_main(["leaderboard", "show", "--db", str(db), "--json", str(out_json), *price_args()]) == 0
    assert "Tokens/game" not in capsys.readouterr().out  # older games have no usage: nothing to show
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 3
    assert "costs" not in json.loads(out_json.read_text())

    conn = store.connect(db)  # what a run does: migrate the file
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION == 7
    (old,) = stored_rows(db)
    assert all(old[c] is None for c in store.USAGE_COLUMNS)  # unknown, not 0
    columns = {k: v for k, v in old.items() if k in store.GameRow.__dataclass_fields__}
    usage = {"prompt_tokens0": 120, "completion_tokens0": 21, "api_moves0": 3, "latency_s0": 0.5}
    fresh = store.GameRow(**{**columns, "seed": 1, **usage})
    assert store.insert_game(conn, fresh)
    conn.close()
    reader = store.open_readonly(db)
    first, second = store.load_games(reader)
    reader.close()
    assert first.api_moves0 is None and first.prompt_tokens0 is None
    assert (second.prompt_tokens0, second.completion_tokens0, second.api_moves0, second.latency_s0) == (120, 21, 3, 0.5)
    assert second.prompt_tokens1 is None and second.api_moves1 is None
