"""Standings and their outputs: chip games ranked by chips, CSV/JSON/PNG, and the HTML page driven in a
real headless Chromium (rows, sorting by clicking headers, a screenshot)."""

from __future__ import annotations

import csv
import json
import os
import re

import pytest
from rich.console import Console

from leaderboard import report, store
from leaderboard.entrants import parse_entrants
from leaderboard.runner import run
from leaderboard.standings import compute
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
    assert report._num(-1e-17, "+.3f") == "+0.000" and report._num(-0.0004, ".3f") == "0.000"
    assert report._pct(-1e-15) == "0.0%" and report._num(0.25, ".4f") == "0.2500"


def test_long_names_are_wrapped_at_separators():
    label = "hf:runs/20261130-221356/checkpoints/step_000140"
    lines = report.wrap_name(label).split("\n")
    assert "".join(lines) == label and len(lines) == 2 and lines[-1] == "checkpoints/step_000140"
    assert report.wrap_name("expert#alpha=0.3") == "expert#alpha=0.3"
    long = report.wrap_name("x" * 200 + "/step_000140").split("\n")
    assert len(long) == report.NAME_LINES and long[-1].endswith("/step_000140")
    assert all(len(line) <= report.NAME_WIDTH for line in long)
    keys = report.agent_keys(long_name_standings())
    assert list(keys.values()) == list("ABCDEFG") and report._letters(26) == "AA"


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
