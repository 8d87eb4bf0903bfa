"""``spiral-arena web`` as a real subprocess on 127.0.0.1, driven by a real headless Chromium (the one the test
script installs): the page loads, a person plays TicTacToe and a Kuhn hand by clicking, two agents are watched
to the end, the leaderboard table changes when another process stores games, and a page of another origin is
refused. Each browser test keeps a screenshot in its temporary folder; docs/web.md shows two of them."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("uvicorn", reason="needs the api extra")
httpx = pytest.importorskip("httpx", reason="needs the api extra")
sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (dev extra)")

from conftest import stored_rows  # noqa: E402
from test_leaderboard_report import CHROMIUM_FLAGS, find_chromium  # noqa: E402
from test_serve import SCRIPT, Server  # noqa: E402

from leaderboard.report.page import asset  # noqa: E402

TOKEN = "sk-test-WEB-TOKEN"
SCREENSHOTS = os.environ.get("SPIRAL_ARENA_WEB_SCREENSHOTS")  # a folder to copy the pictures to (docs/images)


class Web(Server):
    COMMAND, PATH, PROBE = "web", "", "/api/games"


@pytest.fixture
def web(tmp_path: Path) -> Iterator[Web]:
    server = Web(tmp_path, "--db", str(tmp_path / "lb.sqlite"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    executable = find_chromium()
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: object, web: Web) -> Iterator[object]:
    # bypass_csp: playwright's wait_for_function evaluates its predicate as a string, which the page's own
    # policy (no eval) refuses; the page itself is checked under its policy in the first test
    page = browser.new_page(viewport={"width": 1200, "height": 900}, bypass_csp=True)
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(web.url + "/")
    page.wait_for_selector("#game option", state="attached")
    yield page
    page.close()
    assert errors == [], f"the page's script failed: {errors}"


def shot(page: object, path: Path, name: str, least: int = 10_000) -> None:
    """A screenshot of the whole page, kept in ``path`` (and in ``SCREENSHOTS``), of at least ``least`` bytes."""
    page.screenshot(path=str(path / name), full_page=True)
    assert (path / name).stat().st_size > least
    if SCREENSHOTS:
        Path(SCREENSHOTS, name).write_bytes((path / name).read_bytes())


def start(page: object, game: str, seats: tuple[str, ...], options: str = "", seed: int | None = None) -> None:
    page.select_option("#game", game)
    page.fill("#options", options)
    for seat, spec in enumerate(seats):
        page.fill(f"#seat-{seat}", spec)
    page.fill("#seed", "" if seed is None else str(seed))
    page.click("#start")
    page.wait_for_selector("#match:not([hidden])")


def play_by_clicking(page: object) -> int:
    """Click the first legal move on each turn of the person until the game is over; the clicks made."""
    clicks = 0
    while True:
        page.wait_for_function(
            "!document.querySelector('#result').hidden || "
            "(!document.querySelector('#your-turn').hidden && document.querySelector('#legal button'))"
        )
        if page.is_visible("#result"):
            return clicks
        moves = len(page.query_selector_all("#transcript li"))
        page.click("#legal button >> nth=0")
        clicks += 1
        page.wait_for_function(f"document.querySelectorAll('#transcript li').length > {moves}")


def test_the_page_loads_with_every_game_and_nothing_from_outside(browser, web, tmp_path):
    page = browser.new_page(viewport={"width": 1200, "height": 900})  # under the page's own policy
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text) if message.type == "error" else None)
    page.goto(web.url + "/")
    page.wait_for_selector("#game option", state="attached")
    games = page.eval_on_selector_all("#game option", "options => options.map(o => o.value)")
    registered = [g["id"] for g in httpx.get(web.url + "/api/games").json()["games"]]
    assert games == registered and "TicTacToe-v0" in games and len(games) >= 8
    assert page.input_value("#seat-0") == "human" and page.input_value("#seat-1") == "expert"
    source = httpx.get(web.url + "/").text
    assert "http://" not in source and "https://" not in source, "the page must load nothing from elsewhere"
    headers = httpx.get(web.url + "/app.js").headers
    assert (
        headers["content-type"].startswith("text/javascript")
        and "default-src 'self'" in headers["content-security-policy"]
    )
    page.keyboard.press("Tab")  # the tabs and the form are reachable by keyboard
    assert page.evaluate("document.activeElement.id") == "tab-match"
    shot(page, tmp_path, "web-page.png")
    page.close()
    assert console == [], f"the page broke its own policy or failed: {console}"


def test_a_person_plays_a_whole_tictactoe_game_against_expert_by_clicking(page, web, tmp_path):
    start(page, "TicTacToe-v0", ("human", "expert"), seed=7)
    observation = page.text_content("#observation")
    assert "Your turn. Legal actions: [0], [1]" in observation and "[GAME]" in observation
    page.click("#legal button >> nth=0")  # one move, the expert's answer, and the person's turn again
    page.wait_for_function("document.querySelectorAll('#transcript li').length === 2")
    page.wait_for_selector("#your-turn:not([hidden])")
    shot(page, tmp_path, "web-play.png")
    clicks = 1 + play_by_clicking(page)
    result = page.text_content("#result")
    assert "Stored in" in result and "as game #1" in result
    shot(page, tmp_path, "web-end.png")
    (row,) = stored_rows(tmp_path / "lb.sqlite")
    assert (row["env_id"], row["player0"], row["player1"], row["seed"]) == ("TicTacToe-v0", "human", "expert", 7)
    moves = json.loads(row["transcript"])["moves"]
    shown = page.eval_on_selector_all("#transcript li .answer", "answers => answers.map(a => a.textContent)")
    assert [text for _, text in moves] == shown and sum(seat == 0 for seat, _ in moves) == clicks
    assert row["reward0"] + row["reward1"] == 0 and row["reward1"] >= 0, "expert never loses at TicTacToe"
    # the stored game is the env's: the same seed and moves replay to the same end
    from spiral_arena import make

    env = make("TicTacToe-v0")
    env.reset(seed=7)
    for _, text in moves:
        env.step(text)
    assert env.returns == (row["reward0"], row["reward1"])


def test_a_person_plays_a_kuhn_hand_in_the_second_seat(page, web, tmp_path):
    start(page, "KuhnPoker-v0", ("expert", "human"), options="rounds=1", seed=3)
    page.wait_for_selector("#your-turn:not([hidden])")  # once the expert in seat 0 has answered
    assert "Your turn (player_1, seat 1)" in page.text_content("#turn-title")
    assert "card" in page.text_content("#observation").lower()
    play_by_clicking(page)
    shot(page, tmp_path, "web-kuhn.png")
    (row,) = stored_rows(tmp_path / "lb.sqlite")
    assert (row["env_id"], row["player0"], row["player1"]) == ("KuhnPoker-v0:rounds=1", "expert", "human")
    assert row["payoff0"] == -row["payoff1"] and row["payoff0"] != 0, "a Kuhn hand moves chips"
    assert row["payoff0"] > 0 or "player_1" in page.text_content("#result")


def test_two_scripted_agents_are_watched_to_the_end_step_by_step_then_continuously(page, web, tmp_path):
    start(page, "TicTacToe-v0", ("expert", "random"), seed=1)
    assert page.is_visible("#watch-controls") and not page.is_visible("#your-turn")
    assert page.query_selector_all("#transcript li") == [], "nothing moves until Step or Play"
    page.click("#step")
    page.wait_for_function("document.querySelectorAll('#transcript li').length === 1")
    assert page.text_content("#transcript li .who").startswith("expert (player_0)")
    page.select_option("#pace", "200")
    page.click("#run")
    page.wait_for_selector("#result:not([hidden])")
    (row,) = stored_rows(tmp_path / "lb.sqlite")
    assert len(page.query_selector_all("#transcript li")) == row["steps"] == len(json.loads(row["transcript"])["moves"])
    assert row["reward0"] >= 0, "expert does not lose to random"
    shot(page, tmp_path, "web-watch.png")


def test_a_boxed_move_in_an_answer_is_highlighted(page, web, tmp_path):
    """The transcript marks the \\boxed{} move of a model's answer (here a person types one)."""
    start(page, "TicTacToe-v0", ("human", "expert"), seed=2)
    page.fill("#move-text", "I take the centre: \\boxed{[4]}")
    page.press("#move-text", "Enter")
    page.wait_for_function("document.querySelectorAll('#transcript li').length >= 2")
    assert page.text_content("#transcript li mark") == "\\boxed{[4]}"
    page.fill("#move-text", "[4]")  # taken: the env's reason, and the person tries again
    page.press("#move-text", "Enter")
    page.wait_for_selector("#error:not([hidden])")
    assert "not a valid move" in page.text_content("#error")
    assert not page.is_visible("#result")
    shot(page, tmp_path, "web-invalid.png")


def test_the_leaderboard_table_changes_when_another_process_stores_games(page, web, tmp_path):
    page.click("#tab-board")
    page.wait_for_function("document.querySelector('#board-status').textContent.includes('no database')")
    db = tmp_path / "lb.sqlite"
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "spiral_arena.cli"]
    run = [*command, "leaderboard", "run", "--agents", "random,expert", "--games", "KuhnPoker-v0:rounds=1"]
    subprocess.run([*run, "--games-per-pair", "4", "--db", str(db), "--no-progress"], check=True, timeout=300)
    page.wait_for_selector("#standings-kuhnpoker-v0-rounds-1")
    assert "4 games stored" in page.text_content("#board-status")
    labels = page.eval_on_selector_all(
        "#standings-kuhnpoker-v0-rounds-1 tbody tr", "rs => rs.map(r => r.cells[1].textContent)"
    )
    assert sorted(labels) == ["expert", "random"]
    subprocess.run([*run, "--games-per-pair", "8", "--db", str(db), "--no-progress"], check=True, timeout=300)
    page.wait_for_function("document.querySelector('#board-status').textContent.includes('8 games stored')")
    shown = page.text_content("#scope-kuhnpoker-v0-rounds-1 h2")
    assert "8 games" in shown
    # the same numbers as leaderboard show
    out = subprocess.run([*command, "leaderboard", "show", "--db", str(db)], capture_output=True, text=True, check=True)
    assert "8 games" in out.stdout
    # each game's transcript one click away
    page.click("#standings-kuhnpoker-v0-rounds-1 tbody tr >> nth=0")
    page.wait_for_selector("#stored tbody tr")
    assert len(page.query_selector_all("#stored tbody tr")) == 8
    page.click("#stored tbody tr >> nth=0 >> button")
    page.wait_for_selector("#stored-game-view:not([hidden])")
    assert page.query_selector_all("#stored-transcript li") and "KuhnPoker-v0:rounds=1" in page.text_content(
        "#stored-title"
    )
    shot(page, tmp_path, "web-leaderboard.png")


class _Foreign(http.server.BaseHTTPRequestHandler):
    """Another origin (another port of this machine) whose page tries to start a match on the web server."""

    target = ""

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        script = f"""
        window.outcome = [];
        for (const type of ["application/json", "text/plain"]) {{
          fetch("{self.target}/api/matches", {{method: "POST", headers: {{"Content-Type": type}},
            body: JSON.stringify({{game: "TicTacToe-v0", seats: ["expert", "random"]}})}})
            .then(r => window.outcome.push(r.status), e => window.outcome.push("blocked"))
            .then(() => {{ document.body.textContent = "requests to the arena: " + window.outcome.join(", "); }});
        }}"""
        body = f"<!DOCTYPE html><html><body><script>{script}</script></body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_page_of_another_origin_cannot_start_a_match(browser, web, tmp_path):
    _Foreign.target = web.url
    foreign = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Foreign)
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    try:
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{foreign.server_address[1]}/")
        page.wait_for_function("window.outcome.length === 2", timeout=30_000)
        assert page.evaluate("window.outcome") == ["blocked", "blocked"]
        shot(page, tmp_path, "web-foreign.png", least=1_000)
        page.close()
    finally:
        foreign.shutdown()
    refused = httpx.post(web.url + "/api/matches", json={"game": "TicTacToe-v0", "seats": ["expert", "random"]},
                         headers={"Origin": f"http://127.0.0.1:{foreign.server_address[1]}"})  # fmt: skip
    assert refused.status_code == 403 and "cross-site" in refused.json()["error"]["message"]
    assert not (tmp_path / "lb.sqlite").exists(), "no match was played, so nothing was stored"
    assert "Traceback" not in web.log()


def test_with_a_token_the_page_loads_and_asks_for_it_before_any_data(browser, tmp_path):
    server = Web(tmp_path, "--db", str(tmp_path / "lb.sqlite"), "--api-key", TOKEN)
    try:
        assert httpx.get(server.url + "/").status_code == 200
        assert httpx.get(server.url + "/api/games").status_code == 401
        page = browser.new_page()
        page.goto(server.url + "/")
        page.wait_for_selector("#token-form:not([hidden])")
        assert page.query_selector_all("#game option") == []
        page.fill("#token", TOKEN)
        page.press("#token", "Enter")
        page.wait_for_selector("#game option", state="attached")
        shot(page, tmp_path, "web-token.png")
        page.close()
    finally:
        server.stop()
    assert TOKEN not in server.log()


def test_a_wheel_ships_the_page(tmp_path):
    """A non-editable install serves the page too: a wheel built from a copy of the sources holds every file
    of leaderboard/web/static, byte for byte."""
    pytest.importorskip("setuptools", reason="building a wheel needs setuptools in this venv")
    root = Path(__file__).resolve().parents[1]
    source = tmp_path / "src"
    shutil.copytree(root / "leaderboard" / "web", source / "leaderboard" / "web",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for name in ("pyproject.toml", "README.md", "leaderboard/__init__.py"):
        shutil.copy(root / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    subprocess.run([*command, "-w", str(tmp_path / "dist"), str(source)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    static = sorted((source / "leaderboard" / "web" / "static").iterdir())
    assert {p.name for p in static} == {"index.html", "app.js", "app.css"}
    with zipfile.ZipFile(wheel) as archive:
        for path in static:
            name = path.relative_to(source).as_posix()
            assert archive.read(name) == path.read_bytes(), f"{name} is not package data"


def test_the_api_refuses_what_it_cannot_play_with_one_sentence_and_loses_nothing(web, tmp_path):
    def post(path: str, body: object) -> httpx.Response:
        return httpx.post(web.url + path, json=body, timeout=60)

    match = post("/api/matches", {"game": "TicTacToe-v0", "seats": ["human", "expert"], "seed": 5}).json()
    first = match["turn"]["observation"]
    refused = {
        "an agent's step on a person's turn": post(f"/api/matches/{match['id']}/step", {"at": 0}),
        "a move for an earlier position": post(f"/api/matches/{match['id']}/move", {"text": "[0]", "at": 3}),
        "an invalid move": post(f"/api/matches/{match['id']}/move", {"text": "[9]", "at": 0}),
        "an unknown match": post("/api/matches/999/step", {"at": 0}),
        "an unknown game": post("/api/matches", {"game": "Chess-v0", "seats": ["human", "expert"]}),
        "a seat too many": post("/api/matches", {"game": "KuhnPoker-v0", "seats": ["human", "expert", "random"]}),
        "a bad agent spec": post("/api/matches", {"game": "KuhnPoker-v0", "seats": ["human", "nonsense:x"]}),
        "a bad seed": post("/api/matches", {"game": "KuhnPoker-v0", "seats": ["human", "expert"], "seed": -1}),
        "a body that is not JSON": httpx.post(
            web.url + "/api/matches", content=b"{", headers={"Content-Type": "application/json"}
        ),
        "a body sent as a form": httpx.post(web.url + "/api/matches", data={"game": "KuhnPoker-v0"}),
    }
    statuses = {what: reply.status_code for what, reply in refused.items()}
    assert statuses == {
        "an agent's step on a person's turn": 409,
        "a move for an earlier position": 409,
        "an invalid move": 422,
        "an unknown match": 404,
        "an unknown game": 422,
        "a seat too many": 422,
        "a bad agent spec": 422,
        "a bad seed": 422,
        "a body that is not JSON": 400,
        "a body sent as a form": 415,
    }
    assert "not a valid move" in refused["an invalid move"].json()["error"]["message"]
    assert "Registered: TicTacToe-v0" in refused["an unknown game"].json()["error"]["message"]
    assert "nonsense" in refused["a bad agent spec"].json()["error"]["message"]
    again = httpx.get(f"{web.url}/api/matches/{match['id']}").json()  # nothing was played by the refusals
    assert again["moves"] == [] and again["turn"]["observation"] == first
    played = post(f"/api/matches/{match['id']}/move", {"text": "[4]", "at": 0}).json()
    assert [m["text"] for m in played["moves"]] == ["[4]"] and played["turn"]["label"] == "expert"
    answered = post(f"/api/matches/{match['id']}/step", {"at": 1}).json()
    assert len(answered["moves"]) == 2 and answered["turn"]["human"]
    assert "Traceback" not in web.log()


def test_a_checkpoint_and_an_api_model_play_on_the_page_and_are_stored_under_their_specs(browser, tmp_path):
    """An API model the server offers (``--agents``; here `spiral-arena serve --agent expert` behind the OpenAI
    protocol, a real HTTP server) against an hf: checkpoint under its ``--model-root`` (the tiny model,
    untrained: its answer is stored as given, invalid or not), watched in the browser to the end."""
    pytest.importorskip("transformers", reason="needs the train extra")
    from trainers.tiny import create_tiny

    model = create_tiny(tmp_path / "tiny", ["TicTacToe-v0"])
    upstream = Server(tmp_path, "--agent", "expert")
    web = Web(tmp_path, "--db", str(tmp_path / "lb.sqlite"), "--agents", f"openai:m@{upstream.url}",
              "--model-root", str(tmp_path))  # fmt: skip
    try:
        page = browser.new_page(viewport={"width": 1200, "height": 900}, bypass_csp=True)
        page.set_default_timeout(120_000)
        page.goto(web.url + "/")
        page.wait_for_selector("#game option", state="attached")
        start(page, "TicTacToe-v0", (f"openai:m@{upstream.url}", f"hf:{model}#max_new_tokens=24"), seed=4)
        page.click("#run")
        page.wait_for_selector("#result:not([hidden])")
        shot(page, tmp_path, "web-models.png")
        page.close()
    finally:
        web.stop()
        upstream.stop()
    (row,) = stored_rows(tmp_path / "lb.sqlite")
    assert row["player0"] == f"openai:m@{upstream.url}" and row["spec1"] == f"hf:{model}#max_new_tokens=24"
    moves = json.loads(row["transcript"])["moves"]
    assert moves[0][0] == 0 and moves[0][1].startswith("[") and any(seat == 1 for seat, _ in moves)
    assert row["error"] is None and row["api_moves0"] == sum(seat == 0 for seat, _ in moves)
    assert "Traceback" not in web.log()


# -- boards, seeds and the page's own policy --------------------------------------------------------


def board_cells(page: object) -> dict[tuple[int, int], str]:
    """The board on the page: each cell's mark by (row, column), row 0 the top row."""
    cells = page.eval_on_selector_all(
        "#grid .cell", "cs => cs.map(c => [+c.dataset.row, +c.dataset.col, c.textContent])"
    )
    return {(row, col): mark for row, col, mark in cells}


def marked(page: object) -> list[tuple[int, int]]:
    """The cells the board outlines as the last move."""
    cells = page.eval_on_selector_all("#grid .cell.last", "cs => cs.map(c => [+c.dataset.row, +c.dataset.col])")
    return [tuple(cell) for cell in cells]


def transcript(page: object) -> list[str]:
    return page.eval_on_selector_all("#transcript li .answer", "answers => answers.map(a => a.textContent)")


def played_number(answer: str) -> int:
    """The cell or column an answer names (its last bracketed number: the expert answers "[4]")."""
    return int(re.findall(r"\[(\d+)\]", answer)[-1])


def play_on_the_board(page: object, target: str, check: Callable[[object], None]) -> list[str]:
    """On each of the person's turns click the first clickable ``target`` of the board (``button.cell``, a
    column's ``button.line``) until the game is over, calling ``check(page)`` whenever a move has been made;
    the actions clicked, as the buttons carry them."""
    clicked = []
    while True:
        page.wait_for_function(
            "!document.querySelector('#result').hidden || "
            "(!document.querySelector('#your-turn').hidden && document.querySelector('#grid button'))"
        )
        if transcript(page):
            check(page)
        if page.is_visible("#result"):
            return clicked
        moves = len(transcript(page))
        button = page.locator(f"#grid {target}").first
        clicked.append(button.get_attribute("data-action"))
        button.click()
        page.wait_for_function(f"document.querySelectorAll('#transcript li').length > {moves}")


def check_tictactoe_mark(page: object) -> None:
    """The outlined cell is the one the last answer of the transcript names, and holds a mark."""
    cell = divmod(played_number(transcript(page)[-1]), 3)
    assert marked(page) == [cell] and board_cells(page)[cell] in ("O", "X")


def check_connect_four_mark(page: object) -> None:
    """The outlined cell is the top piece of the column the last answer of the transcript names."""
    column = played_number(transcript(page)[-1])
    cells = board_cells(page)
    top = min(row for (row, col), mark in cells.items() if col == column and mark)
    assert marked(page) == [(top, column)]


def test_a_person_plays_tictactoe_by_clicking_the_board_with_the_last_move_marked(page, web, tmp_path):
    start(page, "TicTacToe-v0", ("human", "expert"), seed=11)
    assert page.is_visible("#match-board") and len(page.query_selector_all("#grid .cell")) == 9
    assert marked(page) == [] and set(board_cells(page).values()) == {""}
    legal = page.eval_on_selector_all("#legal button", "bs => bs.map(b => b.textContent)")
    actions = page.eval_on_selector_all("#grid button.cell", "bs => bs.map(b => b.dataset.action)")
    assert actions == legal == [f"[{c}]" for c in range(9)], "each cell carries the env's own legal action"
    page.click("#grid button.cell[data-row='1'][data-col='1']")  # the centre
    page.wait_for_function("document.querySelectorAll('#transcript li').length === 2")
    page.wait_for_selector("#grid button.cell")
    assert transcript(page)[0] == "[4]" and board_cells(page)[(1, 1)] == "O"
    check_tictactoe_mark(page)
    # the text a model reads is one click away
    assert not page.is_visible("#observation")
    shot(page, tmp_path, "web-board-tictactoe.png")
    page.click("#reads summary")
    assert page.is_visible("#observation") and "Legal actions: [" in page.text_content("#observation")
    clicked = ["[4]", *play_on_the_board(page, "button.cell", check_tictactoe_mark)]
    assert "Stored in" in page.text_content("#result") and page.query_selector_all("#grid button") == []
    (row,) = stored_rows(tmp_path / "lb.sqlite")
    moves = json.loads(row["transcript"])["moves"]
    assert [text for seat, text in moves if seat == 0] == clicked, "a click sends the cell's action, as typed"
    assert [text for _, text in moves] == transcript(page)
    assert row["reward1"] >= 0 and row["invalid_reason"] is None


def test_a_person_plays_connect_four_by_clicking_columns(page, web, tmp_path):
    start(page, "ConnectFour-v0", ("human", "expert"), seed=5)
    assert page.is_visible("#match-board") and len(page.query_selector_all("#grid .cell")) == 42
    columns = page.eval_on_selector_all("#grid button.line", "bs => bs.map(b => [+b.dataset.col, b.dataset.action])")
    assert columns == [[c, f"[{c}]"] for c in range(7)], "each column carries the env's own legal action"
    page.click("#grid button.line[data-col='2']")
    page.wait_for_function("document.querySelectorAll('#transcript li').length === 2")
    page.wait_for_selector("#grid button.line")
    assert transcript(page)[0] == "[2]" and board_cells(page)[(5, 2)] == "X", "a piece falls to the bottom row"
    check_connect_four_mark(page)
    page.mouse.move(0, 0)  # no column lit by the pointer in the picture (docs/web.md shows it)
    shot(page, tmp_path, "web-board.png")
    clicked = ["[2]", *play_on_the_board(page, "button.line", check_connect_four_mark)]
    assert page.query_selector_all("#grid button") == [], "no column is clickable once the game is over"
    (row,) = stored_rows(tmp_path / "lb.sqlite")
    assert (row["env_id"], row["player0"], row["player1"]) == ("ConnectFour-v0", "human", "expert")
    moves = json.loads(row["transcript"])["moves"]
    assert [text for seat, text in moves if seat == 0] == clicked and [text for _, text in moves] == transcript(page)
    assert row["invalid_reason"] is None and row["reward1"] >= 0
    shot(page, tmp_path, "web-board-connectfour-end.png")


def test_two_agents_at_snake_are_drawn_without_clickable_cells(page, web, tmp_path):
    start(page, "Snake-v0", ("expert", "random"), options="rounds=3", seed=2)
    assert page.is_visible("#match-board") and len(page.query_selector_all("#grid .cell")) == 25
    assert sorted(m for m in board_cells(page).values() if m in ("0", "1")) == ["0", "1"]
    for moves in (1, 2):  # a round: both snakes moved, both heads outlined
        page.click("#step")
        page.wait_for_function(f"document.querySelectorAll('#transcript li').length === {moves}")
    cells = board_cells(page)
    assert sorted(cells[cell] for cell in marked(page)) == ["0", "1"]
    assert page.query_selector_all("#grid button") == [], "nobody on this page plays a seat"


def test_the_page_sends_the_seed_as_typed(page, web, tmp_path):
    """A seed is sent as the text in the field: JavaScript numbers would round one above 2**53."""
    seed = 2**53 - 1
    with page.expect_request(lambda request: request.url.endswith("/api/matches")) as sent:
        start(page, "KuhnPoker-v0", ("expert", "random"), options="rounds=1", seed=seed)
    assert json.loads(sent.value.post_data)["seed"] == str(seed)


def test_the_page_keeps_its_own_policy_with_a_heatmap_and_a_board(browser, web, tmp_path):
    """Under the server's Content-Security-Policy (no bypass): the leaderboard tab with its head-to-head heatmap
    and a board played by clicking trigger no securitypolicyviolation and no console error, and the heatmap's
    colours apply (classes of the page's style, as in the report page of leaderboard show --html)."""
    db = tmp_path / "lb.sqlite"
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "spiral_arena.cli"]
    run = [*command, "leaderboard", "run", "--agents", "random,expert", "--games", "TicTacToe-v0,KuhnPoker-v0:rounds=1"]
    subprocess.run([*run, "--games-per-pair", "4", "--db", str(db), "--no-progress"], check=True, timeout=300)
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.add_init_script(
        "window.violations = [];"
        "document.addEventListener('securitypolicyviolation', e =>"
        "  window.violations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sample}`));"
    )
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: console.append(str(error)))
    page.goto(web.url + "/")
    page.wait_for_selector("#game option", state="attached")
    page.click("#tab-board")
    page.wait_for_selector("#board table.matrix td[title]")
    heat = "cells => cells.map(c => getComputedStyle(c).backgroundColor)"
    shown = page.eval_on_selector_all("#board table.matrix td[title]", heat)
    shot(page, tmp_path, "web-heatmap.png")
    page.click("#tab-match")
    start(page, "TicTacToe-v0", ("human", "expert"), seed=3)
    page.click("#grid button.cell >> nth=0")
    page.wait_for_selector("#transcript li:nth-child(2)")
    page.wait_for_selector("#grid .cell.last")
    page.click("#reads summary")
    page.wait_for_selector("#observation", state="visible")
    violations = page.evaluate("window.violations")
    page.close()
    assert violations == [] and console == [], f"the page broke its own policy: {violations} {console}"
    assert len(shown) >= 4 and "rgba(0, 0, 0, 0)" not in shown, f"the heatmap has no colours: {shown}"
    # the report page of leaderboard show --html colours the same cells alike
    subprocess.run([*command, "leaderboard", "show", "--db", str(db), "--html", str(tmp_path / "lb.html")],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    assert "style=" not in (tmp_path / "lb.html").read_text()
    report = browser.new_page(viewport={"width": 1200, "height": 900})
    report.goto((tmp_path / "lb.html").as_uri())
    assert report.eval_on_selector_all("table.matrix td[title]", heat) == shown
    report.close()


def test_the_heatmap_steps_of_the_report_are_the_pages(web):
    """The page colours the head to head of the leaderboard tab with the report's own steps: it links the report's
    heat.css, which the server serves as the report embeds it."""
    rule = re.compile(r"^\.matrix td\.heat-\d+ \{.*\}$", re.MULTILINE)
    report_rules = rule.findall(asset("heat.css"))
    assert len(report_rules) == 11
    assert '<link rel="stylesheet" href="/heat.css">' in httpx.get(web.url + "/").text
    assert report_rules == rule.findall(httpx.get(web.url + "/heat.css").text)


def test_boards_of_real_games_after_known_moves():
    from leaderboard.web.boards import board
    from spiral_arena import make

    def played(env_id: str, answers: list[str], seed: int = 0, **options: object) -> tuple[object, dict]:
        env = make(env_id, **options)
        env.reset(seed=seed)
        for text in answers:
            env.step(text)
        return env, board(env, answers)

    env, drawn = played("TicTacToe-v0", ["[4]", "[0]", "I take a corner: \\boxed{[8]}"])
    assert drawn["cells"] == [["X", "", ""], ["", "O", ""], ["", "", "O"]] and (drawn["rows"], drawn["cols"]) == (3, 3)
    assert drawn["last"] == [[2, 2]] and drawn["seats"] == ["O", "X"] and drawn["click"] == "cell"
    assert (
        [a["text"] for a in drawn["actions"]]
        == env.infos["player_1"]["legal_actions"]
        == ["[1]", "[2]", "[3]", "[5]", "[6]", "[7]"]
    )
    assert all(
        drawn["cells"][a["row"]][a["col"]] == "" and a["text"] == f"[{3 * a['row'] + a['col']}]"
        for a in drawn["actions"]
    )
    _, drawn = played("TicTacToe-v0", ["[4]", "[4]"], invalid_move="retry")  # refused: nothing moved
    assert drawn["last"] == [[1, 1]] and len(drawn["actions"]) == 8
    _, drawn = played("TicTacToe-v0", ["[0]", "[3]", "[1]", "[4]", "[2]"])  # O completes the top row
    assert drawn["cells"][0] == ["O", "O", "O"] and drawn["last"] == [[0, 2]] and drawn["actions"] == []

    env, drawn = played("ConnectFour-v0", ["[3]", "[3]", "[4]"])
    assert (drawn["rows"], drawn["cols"], drawn["click"], drawn["seats"]) == (6, 7, "column", ["X", "O"])
    assert drawn["cells"][5] == ["", "", "", "X", "X", "", ""] and drawn["cells"][4][3] == "O"
    assert drawn["last"] == [[5, 4]]
    assert {a["col"]: (a["row"], a["text"]) for a in drawn["actions"]} == {
        0: (5, "[0]"),
        1: (5, "[1]"),
        2: (5, "[2]"),
        3: (3, "[3]"),
        4: (4, "[4]"),
        5: (5, "[5]"),
        6: (5, "[6]"),
    }  # each column's action, on the cell its piece would land on
    _, drawn = played("ConnectFour-v0", ["[0]"] * 6)
    assert [row[0] for row in drawn["cells"]] == ["O", "X", "O", "X", "O", "X"] and drawn["last"] == [[0, 0]]
    assert [a["col"] for a in drawn["actions"]] == [1, 2, 3, 4, 5, 6], "a full column is not offered"

    env, drawn = played("Snake-v0", [], seed=1)
    assert drawn["last"] == [] and (drawn["rows"], drawn["cols"]) == (5, 5)
    drawing = [line.split("|")[1].split() for line in env.game.render(env.state_).splitlines()[1:-2]]
    assert drawn["cells"] == [["" if mark == "." else mark for mark in row] for row in drawing]
    env, drawn = played("Snake-v0", ["[up]", "[left]"], seed=1)  # one round: both heads moved
    heads = {drawn["cells"][row][col] for row, col in drawn["last"]}
    assert heads == {"0", "1"} and len(drawn["last"]) == 2
    (x, y), (row, col) = env.state_.bodies[0][0], drawn["last"][0]
    assert (row, col) == (4 - y, x)
    steps = {"[up]": (-1, 0), "[down]": (1, 0), "[left]": (0, -1), "[right]": (0, 1)}
    on_board = {
        text: (row + dr, col + dc) for text, (dr, dc) in steps.items() if 0 <= row + dr < 5 and 0 <= col + dc < 5
    }
    assert {a["text"]: (a["row"], a["col"]) for a in drawn["actions"]} == on_board, "player 0's head's neighbours"

    env = make("KuhnPoker-v0")
    assert board(env, []) is None, "before reset"
    env.reset(seed=0)
    assert board(env, []) is None, "a game without a board"


def test_the_page_offers_the_servers_own_agents_in_each_seat(browser, tmp_path):
    """A client names API agents only from the server's --agents, so the page lists those in the seats' choices
    and no longer suggests a spec of one's own (openai:MODEL) that the server refuses."""
    server = Web(tmp_path, "--db", str(tmp_path / "lb.sqlite"), "--agents", "bluffer=expert#alpha=0.3")
    try:
        page = browser.new_page()
        page.goto(server.url + "/")
        page.wait_for_selector("#game option", state="attached")
        offered = page.eval_on_selector_all("#agent-specs option", "options => options.map(o => o.value)")
        assert offered == ["human", "expert", "random", "bluffer"]
        assert "openai:MODEL" not in page.text_content("#new-match")
        page.close()
    finally:
        server.stop()
