"""Ratings people can trust: the scale anchored on ``random``, provisional ratings, the overall weighting of
game ids, the flags that set them, and whether the 95% intervals hold the truth 95% of the time (simulated
tournaments of known strengths). Databases are real SQLite files written through the store and read by
the real ``spiral-arena leaderboard show``."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.special import expit

from leaderboard import report, store
from leaderboard.ratings import ELO_CENTRE, ELO_PER_NAT, equal_group_weights, rate
from leaderboard.standings import OVERALL, compute
from leaderboard.store import AgentRecord, StoredGame
from spiral_arena.cli import main as cli_main

TRUE_ELO = np.array([0.0, 75.0, 150.0, 225.0, 300.0])  # agent 0 plays the part of random, the anchor


def duplicate_games(elo, seeds_per_pair, rng, draw_rate=0.0):
    """Every pair on seeds 0.. from both seats. Seat 0's expected score is exactly the Bradley-Terry
    ``expit(difference)``: a draw (probability ``draw_rate``) counts half, and the win probability is
    lowered by half the draw rate to make up for it, so the fit's target is ``elo``'s differences."""
    p0, p1, score, seeds = [], [], [], []
    for a, b in itertools.combinations(range(len(elo)), 2):
        for seed in range(seeds_per_pair):
            for i, j in ((a, b), (b, a)):
                win = expit((elo[i] - elo[j]) / ELO_PER_NAT) - draw_rate / 2
                u = rng.random()
                p0.append(i), p1.append(j), seeds.append(seed)
                score.append(1.0 if u < win else 0.5 if u < win + draw_rate else 0.0)
    return p0, p1, score, seeds


def stored(env_id, player0, player1, seed, points0):
    reward0 = 2.0 * points0 - 1.0  # win 1, draw 0, loss -1
    return StoredGame(env_id, player0, player1, seed, reward0, -reward0, None, None, False, False, None, None)


def labelled_games(labels, elo, seeds_per_pair, seed=0, env_id="TicTacToe-v0", draw_rate=0.2):
    games = duplicate_games(elo, seeds_per_pair, np.random.default_rng(seed), draw_rate)
    return [stored(env_id, labels[i], labels[j], s, x) for i, j, x, s in zip(*games, strict=True)]


def write_db(path, games, specs):
    """``games`` stored through the store as a run would store them; ``specs``: label -> stored spec."""
    conn = store.connect(path)
    try:
        for g in games:
            now = store.now()
            row = store.GameRow(
                env_id=g.env_id, env_version="test", player0=g.player0, player1=g.player1, spec0=specs[g.player0],
                spec1=specs[g.player1], seed=g.seed, reward0=g.reward0, reward1=g.reward1, payoff0=None, payoff1=None,
                invalid0=False, invalid1=False, invalid_reason=None, error=None, error_seat=None, transcript="{}",
                steps=5, duration_s=0.0, started_at=now, finished_at=now, package_version="test",
            )  # fmt: skip
            assert store.insert_game(conn, row)
        for label, spec in specs.items():
            store.record_agent(conn, label, spec)
    finally:
        conn.close()
    return path


def show(capsys, db, *flags):
    """``leaderboard show`` with ``flags``: (exit code, terminal text, JSON written)."""
    out_json = db.with_suffix(".json")
    code = cli_main(["leaderboard", "show", "--db", str(db), "--json", str(out_json), *flags])
    text = capsys.readouterr().out
    return code, text, json.loads(out_json.read_text()) if code == 0 else None


def interval(row):
    return row.rating, row.low, row.high


def rows_of(data, scope=OVERALL):
    return {r["agent"]: r for r in next(s for s in data["scopes"] if s["name"] == scope)["standings"]}


# -- the anchored scale -------------------------------------------------------------------


def test_the_anchor_is_exactly_1000_and_differences_do_not_move():
    games = duplicate_games(np.array([0.0, 100.0, 250.0, 400.0]), 30, np.random.default_rng(0), 0.2)
    anchored, free = rate(4, *games, resamples=200, anchor=0), rate(4, *games, resamples=200)
    assert anchored.rating[0] == anchored.low[0] == anchored.high[0] == ELO_CENTRE and anchored.anchor == 0
    assert free.rating.mean() == pytest.approx(ELO_CENTRE) and free.anchor is None
    assert np.diff(anchored.rating) == pytest.approx(np.diff(free.rating), abs=1e-9)
    assert np.all(anchored.low[1:] < anchored.rating[1:]) and np.all(anchored.rating[1:] < anchored.high[1:])


def test_each_resample_is_anchored_not_just_the_point():
    """Two agents, the same resamples: on the mean scale agent 1 sits at 1000 + d/2 in every resample, anchored
    on agent 0 at 1000 + d, so the anchored interval is exactly twice as far from 1000. Shifting the
    mean-scale interval by the point estimate alone would keep its width instead."""
    games = duplicate_games(np.array([0.0, 120.0]), 40, np.random.default_rng(1), 0.2)
    anchored, free = rate(2, *games, resamples=300, anchor=0), rate(2, *games, resamples=300)
    assert anchored.low[1] - ELO_CENTRE == pytest.approx(2 * (free.low[1] - ELO_CENTRE))
    assert anchored.high[1] - ELO_CENTRE == pytest.approx(2 * (free.high[1] - ELO_CENTRE))
    assert anchored.high[1] - anchored.low[1] == pytest.approx(2 * (free.high[1] - free.low[1]))


def test_only_the_plain_random_agent_anchors_a_scope():
    elo = np.array([0.0, 150.0, 300.0])
    with_random = compute(labelled_games(["random", "a", "b"], elo, 30), resamples=100).scopes[0]
    assert with_random.anchor == "random" and with_random.scale == "random = 1000"
    rows = {r.label: r for r in with_random.agents}
    assert rows["random"].anchor and (rows["random"].rating, rows["random"].low) == (ELO_CENTRE, ELO_CENTRE)
    # The same games without an agent called random: the mean is 1000 and only the offset changes.
    renamed = compute(labelled_games(["rnd", "a", "b"], elo, 30), resamples=100).scopes[0]
    assert renamed.anchor is None and renamed.scale == "mean = 1000"
    moved = {r.label: r.rating for r in renamed.agents}
    assert np.mean(list(moved.values())) == pytest.approx(ELO_CENTRE)
    assert moved["b"] - moved["a"] == pytest.approx(rows["b"].rating - rows["a"].rating, abs=1e-9)
    assert moved["b"] - moved["rnd"] == pytest.approx(rows["b"].rating - ELO_CENTRE, abs=1e-9)
    # A name is not the agent: "random=expert" is stored with the spec expert.
    impostor = {"random": AgentRecord("random", "expert", None, None)}
    assert compute(labelled_games(["random", "a", "b"], elo, 30), impostor, resamples=20).scopes[0].anchor is None


def test_the_scale_is_in_every_output(tmp_path, capsys):
    specs = {"random": "random", "a": "expert", "b": "expert#alpha=0.2"}
    db = write_db(tmp_path / "lb.sqlite", labelled_games(list(specs), np.array([0.0, 150.0, 300.0]), 60), specs)
    code, text, data = show(capsys, db, "--html", str(tmp_path / "board.html"), "--csv", str(tmp_path / "b.csv"))
    assert code == 0
    assert "scale: random = 1000 (the anchor; intervals are for differences from it)" in text
    random_line = next(line for line in text.splitlines() if " random " in line)
    assert " 1000 " in random_line and report.ANCHOR_TEXT in random_line and "1000-1000" not in random_line
    (scope,) = data["scopes"]
    assert (scope["scale"], scope["anchor"], scope["weighting"]) == ("random = 1000", "random", None)
    rows = rows_of(data, "TicTacToe-v0")
    assert rows["random"]["anchor"] is True and rows["random"]["rating"] == ELO_CENTRE
    assert rows["a"]["anchor"] is False
    assert "scale: random = 1000" in (tmp_path / "board.html").read_text()
    csv_random = next(line for line in (tmp_path / "b.csv").read_text().splitlines() if ",random," in line)
    assert csv_random.endswith(",True")  # the anchor column

    renamed = {"rnd": "random#seed=1", "a": "expert", "b": "expert#alpha=0.2"}
    other = write_db(
        tmp_path / "mean.sqlite", labelled_games(list(renamed), np.array([0.0, 150.0, 300.0]), 60), renamed
    )
    code, text, data = show(capsys, other)
    assert code == 0 and "scale: mean = 1000 (no plain random agent to anchor on)" in text
    assert data["scopes"][0]["scale"] == "mean = 1000" and data["scopes"][0]["anchor"] is None
    assert report.ANCHOR_TEXT not in text.split("scale:")[0]


# -- provisional ratings ------------------------------------------------------------------


@pytest.fixture
def newcomer_db(tmp_path):
    """random, a and b with 240 games each (intervals about 100 Elo wide); "newcomer" played 10 seeds, 20
    games, against random and a, which leaves its interval about 300 Elo wide."""
    specs = {"random": "random", "a": "expert", "b": "expert#alpha=0.2", "newcomer": "expert#alpha=0.5"}
    games = labelled_games(["random", "a", "b"], np.array([0.0, 150.0, 300.0]), 60)
    games += [
        g
        for g in labelled_games(["random", "newcomer", "a"], np.array([0.0, 200.0, 150.0]), 5, seed=1)
        if "newcomer" in (g.player0, g.player1)
    ]
    return write_db(tmp_path / "lb.sqlite", games, specs)


def test_a_thin_agent_is_provisional_in_every_output(newcomer_db, tmp_path, capsys):
    html_file = tmp_path / "board.html"
    code, text, data = show(capsys, newcomer_db, "--html", str(html_file))
    assert code == 0
    rows = rows_of(data, "TicTacToe-v0")
    assert rows["newcomer"]["games"] == 20 and rows["newcomer"]["provisional"] is True
    assert [rows[label]["provisional"] for label in ("random", "a", "b")] == [False, False, False]
    assert data["provisional_rule"] == {
        "min_games": 100,
        "max_interval": 200.0,
        "legend": "* provisional: fewer than 100 games in that table, or a 95% interval wider than 200 Elo points",
    }
    lines = {line.split()[1]: line for line in text.splitlines() if line.strip()[:1].isdigit()}
    assert f"{rows['newcomer']['rating']:.0f}*" in lines["newcomer"]
    assert f"{rows['a']['rating']:.0f}*" not in lines["a"] and f"{rows['a']['rating']:.0f}" in lines["a"]
    assert data["provisional_rule"]["legend"] in text.splitlines()
    page = html_file.read_text()
    assert f"{rows['newcomer']['rating']:.0f}*</td>" in page and "in that table, or a 95% interval wider" in page


def test_a_wide_interval_is_provisional_however_many_games(newcomer_db, capsys):
    # Ten games are enough here, so only its interval, about 300 Elo wide, keeps the newcomer provisional.
    code, text, data = show(capsys, newcomer_db, "--min-games", "10")
    rows = rows_of(data, "TicTacToe-v0")
    newcomer = rows["newcomer"]
    assert code == 0 and newcomer["ci_high"] - newcomer["ci_low"] > 200 and newcomer["provisional"] is True
    assert "fewer than 10 games in that table, or a 95% interval wider than 200 Elo points" in text
    # A tighter rule catches the established agents (intervals about 100 wide, 240 games), never the anchor.
    code, text, data = show(capsys, newcomer_db, "--max-interval", "50")
    rows = rows_of(data, "TicTacToe-v0")
    assert code == 0 and rows["a"]["games"] >= 100 and rows["a"]["ci_high"] - rows["a"]["ci_low"] > 50
    assert [rows[label]["provisional"] for label in ("a", "b", "newcomer", "random")] == [True, True, True, False]
    assert data["provisional_rule"]["max_interval"] == 50.0
    # More games asked for than random has played: everyone else is provisional, the anchor is exact.
    code, text, data = show(capsys, newcomer_db, "--min-games", "1000")
    rows = rows_of(data, "TicTacToe-v0")
    assert code == 0 and rows["random"]["games"] < 1000 and rows["random"]["rating"] == 1000
    assert [rows[label]["provisional"] for label in ("a", "b", "newcomer", "random")] == [True, True, True, False]


def test_provisional_markers_are_hollow_in_the_plot(newcomer_db):
    conn = store.connect(newcomer_db, create=False)
    standings = compute(store.load_games(conn), store.load_agents(conn), resamples=100)
    conn.close()
    ratings_ax = next(ax for ax in report.png_figure(standings).axes if ax.get_title() == "Rating")
    (hollow,) = [c for c in ratings_ax.collections if c.get_facecolor().tolist() == [[1.0, 1.0, 1.0, 1.0]]]
    newcomer = next(r for r in standings.scopes[0].agents if r.label == "newcomer")
    row = list(report.agent_keys(standings)).index("newcomer")  # one scope: its markers sit on the rows
    assert hollow.get_offsets().tolist() == [[newcomer.rating, row]]
    assert "hollow: provisional" in ratings_ax.get_xlabel()


def test_nothing_provisional_means_no_legend(newcomer_db, capsys):
    code, text, data = show(capsys, newcomer_db, "--min-games", "0", "--max-interval", "1000")
    assert code == 0 and not any(r["provisional"] for r in rows_of(data, "TicTacToe-v0").values())
    assert data["provisional_rule"]["legend"] not in text and "*" not in text


# -- weighting of game ids in the overall table ---------------------------------------------


def lopsided_games():
    """a against b: in TicTacToe 200 games (100 seeds), a wins both seatings of seeds 0-59 and loses both of
    the rest, 120 to 80; in Pig 20 games (10 seeds), a wins only as seat 0 on seeds 0 and 1, 2 to 18."""
    games = []
    for seed in range(100):
        points = 1.0 if seed < 60 else 0.0
        games += [stored("TicTacToe-v0", "a", "b", seed, points), stored("TicTacToe-v0", "b", "a", seed, 1 - points)]
    for seed in range(10):
        games += [
            stored("PigDice-v0", "a", "b", seed, 1.0 if seed < 2 else 0.0),
            stored("PigDice-v0", "b", "a", seed, 1.0),
        ]
    return games


def test_equal_weighting_lets_the_little_played_game_count():
    """Weights by hand: 110 games per game id on average, so TicTacToe's games count 110/200 = 0.55 and
    Pig's 110/20 = 5.5. Pooled, a scores 122 of 220 and leads; weighted, a scores 0.55 * 120 + 5.5 * 2 = 77
    of 220 and trails. With one virtual draw per pair, a's lead over b in Elo is ELO_PER_NAT times
    log((122 + 0.5) / (98 + 0.5)), then log((77 + 0.5) / (143 + 0.5))."""
    games = lopsided_games()
    assert equal_group_weights([0] * 200 + [1] * 20) == pytest.approx([0.55, 5.5])
    pooled = compute(games, resamples=300)
    equal = compute(games, resamples=300, weighting="equal")
    for standings, (a_wins, b_wins) in ((pooled, (122, 98)), (equal, (77, 143))):
        overall = standings.scopes[0]
        a, b = sorted(overall.agents, key=lambda r: r.label)
        assert a.rating - b.rating == pytest.approx(ELO_PER_NAT * math.log((a_wins + 0.5) / (b_wins + 0.5)))
        # The bootstrap uses the weights too: unweighted resamples would centre on the pooled fit.
        assert a.low < a.rating < a.high and b.low < b.rating < b.high
        assert overall.weighting == standings.weighting and a.games == 220  # games still count as played
    assert [r.label for r in pooled.scopes[0].agents] == ["a", "b"]
    assert [r.label for r in equal.scopes[0].agents] == ["b", "a"]
    for name in ("TicTacToe-v0", "PigDice-v0"):  # per-game tables are unaffected
        by_game = [next(s for s in st.scopes if s.name == name) for st in (pooled, equal)]
        assert [interval(r) for r in by_game[0].agents] == [interval(r) for r in by_game[1].agents]
        assert by_game[1].weighting is None


def test_weighting_flag_reaches_the_overall_table(tmp_path, capsys):
    db = write_db(tmp_path / "lb.sqlite", lopsided_games(), {"a": "expert", "b": "random#seed=3"})
    for flags, weighting, order in (([], "games", ["a", "b"]), (["--weighting", "equal"], "equal", ["b", "a"])):
        code, text, data = show(capsys, db, *flags)
        overall = data["scopes"][0]
        assert code == 0 and f"weighting: {weighting} ({report.WEIGHTING_TEXT[weighting]})" in text
        assert overall["weighting"] == weighting and [r["agent"] for r in overall["standings"]] == order


# -- flags --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--weighting", "bogus"], "--weighting: must be games or equal, got 'bogus'"),
        (["--min-games", "-1"], "--min-games: must be a whole number of games >= 0, got '-1'"),
        (["--min-games", "2.5"], "--min-games: must be a whole number of games >= 0, got '2.5'"),
        (["--max-interval", "0"], "--max-interval: must be a finite number of Elo points > 0, got '0'"),
        (["--max-interval", "inf"], "--max-interval: must be a finite number of Elo points > 0, got 'inf'"),
    ],
)
def test_bad_values_are_one_line_errors(flags, message, newcomer_db, tmp_path, capsys):
    assert cli_main(["leaderboard", "show", "--db", str(newcomer_db), *flags]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"spiral-arena leaderboard: error: {message}\n" and captured.out == ""
    # run checks them before it plays or creates anything
    db = tmp_path / "new.sqlite"
    assert (
        cli_main(["leaderboard", "run", "--agents", "random,expert", "--games-per-pair", "2", "--db", str(db), *flags])
        == 2
    )
    assert capsys.readouterr().err == f"spiral-arena leaderboard: error: {message}\n" and not db.exists()


def test_compute_refuses_an_unknown_weighting():
    with pytest.raises(ValueError, match="weighting must be one of games, equal, got 'bogus'"):
        compute(lopsided_games(), weighting="bogus")


def test_run_prints_standings_with_the_rules(tmp_path, capsys):
    db = tmp_path / "lb.sqlite"
    flags = ["--weighting", "equal", "--min-games", "4", "--max-interval", "5000"]
    args = ["leaderboard", "run", "--agents", "random,expert", "--games", "TicTacToe-v0,KuhnPoker-v0"]
    assert cli_main([*args, "--games-per-pair", "4", "--db", str(db), "--no-progress", *flags]) == 0
    text = capsys.readouterr().out
    assert "scale: random = 1000 (the anchor; intervals are for differences from it); weighting: equal" in text
    assert "* provisional" not in text  # 8 games overall and 4 per game, each >= 4; intervals below 5000


# -- do the intervals mean what they say? ----------------------------------------------------


def coverage(confidence, tournaments=200, seeds_per_pair=20, resamples=200):
    """Share of anchored intervals, over simulated tournaments, that hold the true difference from agent 0."""
    rng = np.random.default_rng(2024)
    held = []
    for k in range(tournaments):
        games = duplicate_games(TRUE_ELO, seeds_per_pair, rng, draw_rate=0.2)
        ratings = rate(len(TRUE_ELO), *games, resamples=resamples, seed=k, confidence=confidence, anchor=0)
        truth = ELO_CENTRE + TRUE_ELO[1:]
        held.append((ratings.low[1:] <= truth) & (truth <= ratings.high[1:]))
    return float(np.mean(held))


def test_intervals_cover_the_true_differences_at_the_stated_rate():
    """Five agents 75 Elo apart (0 to 300), a duplicate round robin of 20 seeds per pair (160 games each) with
    20% draws, fitted with agent 0 as the anchor: 200 tournaments x 4 intervals of a difference from it.

    If the 95% intervals are right, coverage is 0.95 less a little: a percentile bootstrap from 20 seed
    blocks per pair runs slightly narrow (0.93 measured over 1,000 tournaments of this design, 0.94 for two
    agents with 300 seeds). The four intervals of one tournament are correlated, so count 200 independent
    trials at worst: a standard error of sqrt(0.95 * 0.05 / 200) = 0.015. The band 0.88..0.995 lies over 3
    such errors from 0.93 and from 0.95, and excludes wrong widths: intervals 30% too narrow cover about
    0.83, 50% too wide about 0.997. The same intervals stated at 50% must cover about half, far less."""
    assert 0.88 <= coverage(0.95) <= 0.995
    assert 0.35 <= coverage(0.5) <= 0.65
