"""Standings and their outputs: chip games ranked by chips, CSV/JSON/PNG, and the HTML page driven in a
real headless Chromium (rows, sorting by clicking headers, a screenshot)."""

from __future__ import annotations

import base64
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from rich.console import Console

from leaderboard import report, store
from leaderboard.entrants import parse_entrants
from leaderboard.reasoning import ReasoningColumn, ReasoningScore
from leaderboard.report import page
from leaderboard.runner import run
from leaderboard.standings import AgentStanding, apply_prices, compute, parse_prices
from leaderboard.store import AgentRecord, StoredGame

AGENTS = "random,expert,expert#alpha=0,random#seed=2"
LONG_LABELS = [
    "hf:runs/20261130-221356/checkpoints/step_000140",
    "hf:runs/20261130-221356/checkpoints/step_000070",
    "hf:runs/20261201-090512-kuhn-lr3e-4/checkpoints/step_001200",
    "openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1#temperature=0.7#max_tokens=256",
    "expert",
    "random",
    "expert#alpha=0.3",
]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]  # fmt: skip


@pytest.fixture(scope="module")
def standings(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("lb") / "lb.sqlite")
    run(db, parse_entrants(AGENTS), ["TicTacToe-v0", "KuhnPoker-v0"], games_per_pair=20, progress=False)
    conn = store.connect(db)
    return compute(store.load_games(conn), store.load_agents(conn))


def kuhn_game(player0, player1, seed, chips0, invalid0=False, invalid1=False):
    reward0 = -1.0 if invalid0 else 1.0 if invalid1 else (chips0 > 0) - (chips0 < 0)
    return StoredGame(
        "KuhnPoker-v0", player0, player1, seed, reward0, -reward0, chips0, -chips0, invalid0, invalid1, None, None
    )


def test_chip_games_rank_by_chips_not_by_games_won():
    """'nibbler' wins three games in four by a chip and loses the fourth by six: more wins, fewer chips."""
    games = []
    for seed in range(20):
        chips = -6.0 if seed % 4 == 0 else 1.0
        games += [kuhn_game("nibbler", "shark", seed, chips), kuhn_game("shark", "nibbler", seed, -chips)]
    kuhn = compute(games).scopes[0]
    assert kuhn.ranked_by == "mean chips per game" and kuhn.payoff_unit == "chips"
    shark, nibbler = kuhn.agents
    assert (shark.label, nibbler.label) == ("shark", "nibbler")
    assert nibbler.rating > shark.rating and nibbler.score == pytest.approx(0.75)
    assert shark.mean_payoff == pytest.approx(0.75) and nibbler.mean_payoff == pytest.approx(-0.75)


def test_invalid_move_forfeits_the_chips_it_led_by():
    games = [kuhn_game("a", "b", 0, 3.0, invalid0=True), kuhn_game("b", "a", 0, 2.0)]
    a, b = sorted(compute(games).scopes[0].agents, key=lambda r: r.label)
    assert a.invalid_rate == pytest.approx(0.5) and b.invalid_rate == 0.0
    assert a.mean_payoff == pytest.approx((-1.0 - 2.0) / 2)  # the +3 it held when it forfeited becomes -1


def test_terminal_table_lists_every_scope(standings):
    console = Console(record=True, width=200)
    report.print_tables(standings, console)
    text = console.export_text()
    for title in ("Overall (240 games", "TicTacToe-v0 (120 games", "KuhnPoker-v0 (120 games"):
        assert title in text
    assert "Exploit." in text and "0.4583" in text  # random's exact single-hand exploitability, 11/24
    assert text.count("scale: random = 1000 (the anchor") == 3  # random#seed=2 is another agent, not the anchor


def test_csv_and_json_hold_the_standings(standings, tmp_path):
    report.write_csv(standings, tmp_path / "s.csv")
    report.write_json(standings, tmp_path / "s.json")
    rows = list(csv.DictReader(open(tmp_path / "s.csv", encoding="utf-8")))
    assert len(rows) == 3 * 4 and tuple(rows[0]) == report.CSV_COLUMNS
    data = json.loads((tmp_path / "s.json").read_text())
    assert [s["name"] for s in data["scopes"]] == ["overall", "TicTacToe-v0", "KuhnPoker-v0"]
    for scope, payload in zip(standings.scopes, data["scopes"], strict=True):
        assert [r["agent"] for r in payload["standings"]] == [r.label for r in scope.agents]
        csv_rows = [r for r in rows if r["scope"] == scope.name]
        assert [r["agent"] for r in csv_rows] == [r.label for r in scope.agents]
        assert [float(r["rating"]) for r in csv_rows] == pytest.approx([r.rating for r in scope.agents])
        for row in payload["standings"]:
            record = payload["head_to_head"][row["agent"]]
            assert sum(c["wins"] + c["draws"] + c["losses"] for c in record.values()) == row["games"]
    for payload in data["scopes"]:
        random_row = next(r for r in payload["standings"] if r["agent"] == "random")
        assert payload["anchor"] == "random" and random_row["rating"] == random_row["ci_low"] == 1000.0
    kuhn = data["scopes"][2]["standings"]
    exploit = {r["agent"]: r["exploitability"] for r in kuhn}
    assert exploit["random"] == pytest.approx(11 / 24) and exploit["expert"] == pytest.approx(0.0, abs=1e-12)


def test_png_plot(standings, tmp_path):
    from matplotlib.image import imread

    report.write_png(standings, tmp_path / "plot.png")
    image = imread(tmp_path / "plot.png")
    assert image.shape[0] > 200 and image.shape[1] > 400


def long_name_standings():
    """Seven agents, most with checkpoint-path labels, in TicTacToe and Kuhn poker; the earlier listed
    wins four games in five. The expert's exploitability is the float noise of an exact 0."""
    games = []
    for env in ("TicTacToe-v0", "KuhnPoker-v0"):
        for i, a in enumerate(LONG_LABELS):
            for j, b in enumerate(LONG_LABELS):
                for seed in range(5) if i != j else ():
                    reward = 1.0 if (i < j) != (seed == 0) else -1.0
                    chips = None if env == "TicTacToe-v0" else 2 * reward
                    minus = None if chips is None else -chips
                    games.append(StoredGame(env, a, b, seed, reward, -reward, chips, minus, False, False, None, None))
    agents = {a: AgentRecord(a, a, None, 2.78e-17 if a == "expert" else 0.25) for a in LONG_LABELS}
    return compute(games, agents, resamples=50)


def test_float_noise_around_zero_prints_as_zero(tmp_path):
    standings = long_name_standings()
    report.write_csv(standings, tmp_path / "s.csv")
    rows = list(csv.DictReader(open(tmp_path / "s.csv", encoding="utf-8")))
    expert = next(r for r in rows if r["scope"] == "KuhnPoker-v0" and r["agent"] == "expert")
    assert expert["exploitability"] == "0.0"
    assert "e-17" not in (tmp_path / "s.csv").read_text()
    kuhn = report.to_json(standings)["scopes"][2]["standings"]
    assert next(r for r in kuhn if r["agent"] == "expert")["exploitability"] == 0.0
    console = Console(record=True, width=250)
    report.print_tables(standings, console)
    text = console.export_text()
    assert "e-17" not in text and "0.0000" in text
    assert "e-17" not in report.html_page(standings)
    assert report.columns.num(-1e-17, "+.3f") == "+0.000" and report.columns.num(-0.0004, ".3f") == "0.000"
    assert report.columns._pct(-1e-15) == "0.0%" and report.columns.num(0.25, ".4f") == "0.2500"


def test_long_names_are_wrapped_at_separators():
    label = "hf:runs/20261130-221356/checkpoints/step_000140"
    lines = report.wrap_name(label).split("\n")
    assert "".join(lines) == label and len(lines) == 2 and lines[-1] == "checkpoints/step_000140"
    assert report.wrap_name("expert#alpha=0.3") == "expert#alpha=0.3"
    long = report.wrap_name("x" * 200 + "/step_000140").split("\n")
    assert len(long) == report.NAME_LINES and long[-1].endswith("/step_000140")
    assert all(len(line) <= report.NAME_WIDTH for line in long)
    keys = report.agent_keys(long_name_standings())
    assert list(keys.values()) == list("ABCDEFG") and report.columns._letters(26) == "AA"


def test_png_matrix_dominates_with_long_names(tmp_path):
    from matplotlib.image import imread

    standings = long_name_standings()
    fig = report.png_figure(standings)
    fig.draw_without_rendering()
    (heat,) = [ax for ax in fig.axes if ax.images]
    assert heat.get_position().height >= 0.5  # not 60% of the height given to rotated names
    image = heat.images[0]
    assert image.get_clim() == (0, 100) and "%" in image.colorbar.ax.get_ylabel()
    assert [t.get_text() for t in heat.get_xticklabels()] == list("ABCDEFG")
    ratings = next(ax for ax in fig.axes if ax.get_title() == "Rating")
    names = [t.get_text() for t in ratings.get_yticklabels()]
    assert names[0] == "hf:runs/20261130-221356/\ncheckpoints/step_000140  [A]"
    report.write_png(standings, tmp_path / "plot.png")
    height, width = imread(tmp_path / "plot.png").shape[:2]
    assert width >= 800 and height >= 400


def find_chromium():
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    reason = "needs Debian's chromium (apt-get install -y chromium)"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def test_html_page_in_headless_chromium(standings, tmp_path):
    executable = find_chromium()
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (dev extra)")
    page_file = tmp_path / "leaderboard.html"
    report.write_html(standings, page_file)
    source = page_file.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", source), "the page must not load anything"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(page_file.as_uri())
            assert page.evaluate("document.images[0].complete && document.images[0].naturalWidth") > 400

            def column(table, index):
                return page.eval_on_selector_all(
                    f"#{table} tbody tr", f"rows => rows.map(r => r.cells[{index}].textContent)"
                )

            for scope in standings.scopes:
                assert column(report.table_id(scope.name), 1) == [r.label for r in scope.agents]
            kuhn = report.table_id("KuhnPoker-v0")
            headers = page.eval_on_selector_all(f"#{kuhn} thead th", "hs => hs.map(h => h.textContent)")
            agent, chips = headers.index("Agent"), headers.index("Chips/game")
            page.click(f"#{kuhn} thead th >> nth={agent}")
            assert column(kuhn, agent) == sorted(r.label for r in standings.scopes[2].agents)
            page.click(f"#{kuhn} thead th >> nth={agent}")
            assert column(kuhn, agent) == sorted((r.label for r in standings.scopes[2].agents), reverse=True)
            page.click(f"#{kuhn} thead th >> nth={chips}")
            values = [float(v) for v in column(kuhn, chips)]
            assert values == sorted(values)
            page.click(f"#{kuhn} thead th >> nth={chips}")
            assert [float(v) for v in column(kuhn, chips)] == sorted(values, reverse=True)
            page.screenshot(path=str(tmp_path / "leaderboard.png"), full_page=True)
        finally:
            browser.close()
    assert (tmp_path / "leaderboard.png").stat().st_size > 10_000


def test_html_page_with_long_names_fits_1280_pixels(tmp_path):
    executable = find_chromium()
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (dev extra)")
    page_file = tmp_path / "leaderboard.html"
    report.write_html(long_name_standings(), page_file)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(page_file.as_uri())
            assert page.evaluate("document.documentElement.scrollWidth") <= 1280
            right = page.evaluate(
                "Math.max(...Array.from(document.body.querySelectorAll('*'), e => e.getBoundingClientRect().right))"
            )
            assert right <= 1280  # no element wider than the window, nor scrolling inside its box
            headers = page.eval_on_selector_all(
                "#matrix-overall thead th", "hs => hs.map(h => [h.textContent, h.title])"
            )
            assert headers[1] == ["A", LONG_LABELS[0]]
        finally:
            browser.close()


GOLDEN = Path(__file__).resolve().parent / "data" / "leaderboard_report"
API_LABEL = "openai:gpt-4o-mini@http://127.0.0.1:9/v1"
ODD_LABEL = 'newcomer <b>&"x"'  # few games (provisional) and every character HTML escapes
FIELD = ("random", "expert", API_LABEL, "flaky")


def golden_row(env_id, player0, player1, seed, **columns):
    """One stored game, with the bookkeeping columns the standings never read fixed."""
    base = dict(env_version="1", spec0=player0, spec1=player1, transcript="{}", steps=5, duration_s=0.5)
    base |= dict(started_at="2026-12-01T00:00:00", finished_at="2026-12-01T00:00:01", package_version="0")
    base |= dict(reward0=None, reward1=None, payoff0=None, payoff1=None, invalid0=False, invalid1=False)
    base |= dict(invalid_reason=None, error=None, error_seat=None)
    return store.GameRow(env_id=env_id, player0=player0, player1=player1, seed=seed, **(base | columns))


def golden_games():
    """Tic-tac-toe (with draws) and Kuhn poker (chips) among ``FIELD``, one game of each for ``ODD_LABEL``,
    API usage on the API agent's seats, agent errors by 'flaky', and Twenty Questions played alone."""
    rows = []
    for env_id in ("TicTacToe-v0", "KuhnPoker-v0"):
        for i, a in enumerate(FIELD):
            for j, b in enumerate(FIELD):
                for seed in range(4) if i != j else ():
                    pick = (3 * i + 5 * j + seed) % 7
                    if b == "flaky" and pick == 0:
                        rows.append(golden_row(env_id, a, b, seed, error="flaky: HTTP 500", error_seat=1))
                        continue
                    reward = 0.0 if env_id == "TicTacToe-v0" and pick == 3 else 1.0 if (i < j) != (pick < 2) else -1.0
                    chips = None if env_id == "TicTacToe-v0" else reward * (1 + pick % 2)
                    minus = None if chips is None else -chips
                    columns = dict(reward0=reward, reward1=-reward, payoff0=chips, payoff1=minus)
                    columns["invalid1"] = pick == 6 and reward > 0
                    for seat, player in enumerate((a, b)):
                        if player == API_LABEL:
                            columns |= {f"prompt_tokens{seat}": 300 + 10 * seed, f"completion_tokens{seat}": 40 + pick}
                            columns |= {f"api_moves{seat}": 3, f"latency_s{seat}": 0.25 + 0.01 * pick}
                    rows.append(golden_row(env_id, a, b, seed, **columns))
        chips = dict(payoff0=1.0, payoff1=-1.0) if env_id == "KuhnPoker-v0" else {}
        rows.append(golden_row(env_id, ODD_LABEL, "random", 0, reward0=1.0, reward1=-1.0, **chips))
    twenty = "TwentyQuestions-v0:max_questions=20"
    for k, player in enumerate(("expert", "random", API_LABEL)):
        for seed in range(3):
            columns = dict(reward0=1.0, reward1=None, success=seed <= 2 - k, steps=6 + 2 * k + seed)
            if player == API_LABEL:
                columns |= dict(prompt_tokens0=900, completion_tokens0=70, api_moves0=8, latency_s0=0.4)
            rows.append(golden_row(twenty, player, store.NO_PLAYER, seed, spec1=store.NO_PLAYER, **columns))
    return rows


@pytest.fixture(scope="module")
def golden_standings(tmp_path_factory):
    """The standings of a fixed database (a real SQLite file), priced, with a reasoning column. The fitted
    ratings are rounded to 3 decimals: their last bits hang on the LAPACK build, and the outputs, not the
    fit, are what is compared."""
    conn = store.connect(tmp_path_factory.mktemp("golden") / "lb.sqlite")
    for row in golden_games():
        assert store.insert_game(conn, row)
    store.record_agent(conn, "random", "random", store.StatedPolicy({}, 11 / 24))
    store.record_agent(conn, "expert", "expert", store.StatedPolicy({}, 2.78e-17))
    store.record_agent(conn, API_LABEL, API_LABEL)
    agents = store.load_agents(conn)
    standings = compute(store.load_games(conn), agents, resamples=60, min_games=10)
    for row in (r for scope in standings.scopes for r in scope.agents if isinstance(r, AgentStanding)):
        row.rating, row.low, row.high = (None if v is None else round(v, 3) for v in (row.rating, row.low, row.high))
    apply_prices(standings, parse_prices(["gpt-4o-mini=0.15/0.6"]), {k: a.spec for k, a in agents.items()})
    standings.reasoning = ReasoningColumn(
        {"expert": ReasoningScore(0.625, 0.5, 0.75, Path("evals/expert"))},
        preset="quick",
        protocol_hash="0123456789abcdef",
        benchmarks=("aime24", "amc23"),
        notes=["random: no eval run found"],
    )
    return standings


def stamped(text, pattern, fixed):
    """``text`` with its one timestamp, matched by ``pattern``, replaced by ``fixed``."""
    text, count = re.subn(pattern, fixed, text)
    assert count == 1, f"expected one timestamp matching {pattern!r}, found {count}"
    return text


def test_every_output_is_byte_for_byte_as_recorded(golden_standings, tmp_path):
    """The page, CSV, JSON and terminal tables of a fixed database, compared byte for byte with the files in
    tests/data/leaderboard_report (recorded from the code before the report was split into modules); only
    the time stamps and the page's embedded PNG, recomputed here (its pixels hang on matplotlib's version
    and fonts), are replaced. After a deliberate change to an output, copy the new file over the old one."""
    report.write_html(golden_standings, tmp_path / "page.html")
    report.write_csv(golden_standings, tmp_path / "standings.csv")
    report.write_json(golden_standings, tmp_path / "standings.json")
    console = Console(record=True, width=200)
    report.print_tables(golden_standings, console)
    (tmp_path / "tables.txt").write_text(console.export_text(), encoding="utf-8")
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    picture = base64.b64encode(report.png_bytes(golden_standings)).decode("ascii")
    assert page.count(picture) == 1
    page = stamped(page.replace(picture, "PNG"), r"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC\.", "Generated STAMP.")
    (tmp_path / "page.html").write_text(page, encoding="utf-8")
    data = (tmp_path / "standings.json").read_text(encoding="utf-8")
    data = stamped(data, r'"generated_at": "[^"]+"', '"generated_at": "STAMP"')
    (tmp_path / "standings.json").write_text(data, encoding="utf-8")
    for name in ("page.html", "standings.csv", "standings.json", "tables.txt"):
        recorded, made = (GOLDEN / name).read_bytes(), (tmp_path / name).read_bytes()
        assert made == recorded, f"{name} differs from {GOLDEN / name}; the new one is {tmp_path / name}"


def test_a_wheel_ships_the_pages_style_and_script(tmp_path):
    """A non-editable install gets ``page.css`` and ``page.js`` (read with importlib.resources when a page is
    written), and every other data file of the leaderboard package: a wheel built from a copy of the sources
    (pyproject.toml, README.md, leaderboard/) holds each, byte for byte."""
    pytest.importorskip("setuptools", reason="building a wheel needs setuptools in this venv")
    root = Path(__file__).resolve().parents[1]
    source = tmp_path / "src"
    shutil.copytree(root / "leaderboard", source / "leaderboard", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    subprocess.run([*command, "-w", str(tmp_path / "dist"), str(source)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    data = [p for p in (source / "leaderboard").rglob("*") if p.is_file() and p.suffix != ".py"]
    assert {f"leaderboard/report/{name}" for name in page.ASSETS} <= {p.relative_to(source).as_posix() for p in data}
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
        for path in data:
            name = path.relative_to(source).as_posix()
            assert name in shipped, f"{name} is not package data: add it to [tool.setuptools.package-data]"
            assert archive.read(name) == path.read_bytes()
