"""The leaderboard's reasoning column: real ``spiral-arena eval`` runs of the tiny model matched to ``hf:``
entrants of a real round robin, in every report format, and the one-line errors for a bad --reasoning."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("math_verify", reason="eval runs need the eval extra")

from leaderboard import report, store  # noqa: E402
from leaderboard.reasoning import load_column  # noqa: E402
from leaderboard.standings import compute  # noqa: E402
from spiral_arena.cli import main  # noqa: E402

DATA = Path(__file__).parent / "data" / "evals"


def eval_run(model: Path, out: Path, limit: int) -> Path:
    args = ["eval", "--model", f"hf:{model}", "--benchmarks", "math500,mmlu_pro", "--data-dir", str(DATA)]
    args += ["--limit", str(limit), "--max-new-tokens", "8", "--bootstrap", "200", "--output-dir", str(out)]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([*args, "--no-progress"]) == 0
    return out


def overall(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())["averages"]["overall"]


@pytest.fixture(scope="module")
def arena(tmp_path_factory):
    """``tiny`` evaluated twice (an older run with another protocol), ``copy`` = the same weights at another
    path (matched by sha256), ``other`` = a model no entrant plays, and 12 real Kuhn games between
    random, expert, tiny and copy played with ``leaderboard run --reasoning``."""
    from trainers.tiny import create_tiny

    root = tmp_path_factory.mktemp("reasoning")
    tiny = create_tiny(root / "tiny", ["KuhnPoker-v0"])
    other = create_tiny(root / "other", ["KuhnPoker-v0"], seed=1)
    copy = Path(shutil.copytree(tiny, root / "copy"))
    runs = root / "runs"
    old = eval_run(tiny, runs / "tiny-old", limit=1)
    new = eval_run(tiny, runs / "tiny-new", limit=2)
    stray = eval_run(other, runs / "other", limit=2)
    # runs finish within a second of each other in a fast test; make the order the manifests state explicit
    manifest = json.loads((old / "manifest.json").read_text())
    manifest["timing"]["finished_at"] = "2020-01-01T00:00:00+00:00"
    (old / "manifest.json").write_text(json.dumps(manifest))

    db = root / "lb.sqlite"
    copy_label = f"hf:{copy}#max_new_tokens=4"
    agents = f"random,expert,tiny=hf:{tiny}#max_new_tokens=4,{copy_label}"
    args = ["leaderboard", "run", "--agents", agents, "--games", "KuhnPoker-v0", "--games-per-pair", "2"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*args, "--db", str(db), "--reasoning", str(runs), "--no-progress"]) == 0
    return {"db": db, "runs": runs, "old": old, "new": new, "stray": stray, "copy": copy_label, "out": out.getvalue()}


def test_runs_are_matched_by_path_and_by_weights(arena):
    conn = store.connect(arena["db"], create=False)
    specs = {label: record.spec for label, record in store.load_agents(conn).items()}
    conn.close()
    column = load_column(arena["runs"], specs)
    assert set(column.scores) == {"tiny", arena["copy"]}  # random and expert have no run
    for label in column.scores:
        score = column.scores[label]
        assert score.run == arena["new"]  # the newest protocol, not the older run of the same model
        assert score.value == overall(arena["new"])["value"]
        assert [score.low, score.high] == overall(arena["new"])["ci95"]
    assert column.benchmarks == ("math500", "mmlu_pro") and not column.complete
    protocol = json.loads((arena["new"] / "manifest.json").read_text())["protocol_hash"]
    assert column.protocol_hash == protocol
    assert f"protocol {protocol[:8]}" in column.legend and "spiral-offline" in column.legend
    assert "2 of 8 benchmarks (math500, mmlu_pro)" in column.legend
    notes = "\n".join(column.notes)
    assert f"left out {arena['old']} (tiny, {arena['copy']}): protocol" in notes
    assert f"1 eval run(s) matched no hf: entrant: {arena['stray']}" in notes


def test_run_prints_the_column(arena):
    header = next(line for line in arena["out"].splitlines() if "Agent" in line)
    assert header.split()[-1] == "Reasoning"
    rows = {line.split()[1]: line for line in arena["out"].splitlines() if re.match(r"\s*\d+\s", line)}
    value = f"{100 * overall(arena['new'])['value']:.1f}%"
    assert rows["tiny"].rstrip().endswith(f"{value} (0.0-0.0)")
    assert len(rows["random"].rstrip()) < len(header.rstrip()) == len(rows["tiny"].rstrip())  # blank cell
    assert "Reasoning: accuracy % averaged over 2 of 8 benchmarks" in arena["out"]


def test_show_writes_the_column_in_every_format(arena, tmp_path, capsys):
    paths = {kind: tmp_path / f"lb.{kind}" for kind in ("csv", "json", "html")}
    args = ["leaderboard", "show", "--db", str(arena["db"]), "--reasoning", str(arena["runs"])]
    for kind, path in paths.items():
        args += [f"--{kind}", str(path)]
    assert main(args) == 0
    assert "left out" in capsys.readouterr().out
    expected = overall(arena["new"])

    rows = {r["agent"]: r for r in csv.DictReader(open(paths["csv"], encoding="utf-8"))}
    assert float(rows["tiny"]["reasoning"]) == expected["value"]
    assert float(rows[arena["copy"]]["reasoning_ci_high"]) == expected["ci95"][1]
    assert rows["random"]["reasoning"] == rows["expert"]["reasoning_ci_low"] == ""

    data = json.loads(paths["json"].read_text())
    records = {r["agent"]: r for r in data["scopes"][0]["standings"]}
    assert records["tiny"]["reasoning"] == expected["value"]
    assert records["random"]["reasoning"] is None and records["expert"]["reasoning_ci_low"] is None
    assert data["reasoning"]["runs"] == {"tiny": str(arena["new"]), arena["copy"]: str(arena["new"])}
    assert data["reasoning"]["benchmarks"] == ["math500", "mmlu_pro"]

    page = paths["html"].read_text()
    assert '<th data-type="num">Reasoning</th>' in page
    cells = re.findall(r'<td data-sort="([^"]*)">([^<]*)</td></tr>', page)  # the last cell of each row
    assert (str(expected["value"]), f"{100 * expected['value']:.1f}% (0.0-0.0)") in cells
    assert ("", "") in cells  # random and expert: blank, sorted last
    assert "Reasoning: accuracy % averaged over 2 of 8 benchmarks" in page


def test_the_value_is_the_overall_average_of_results_json(arena, tmp_path):
    """A single run directory works too, and what it shows comes from results.json as written there."""
    run = Path(shutil.copytree(arena["new"], tmp_path / "edited"))
    results = json.loads((run / "results.json").read_text())
    results["averages"]["overall"] |= {"value": 0.375, "ci95": [0.25, 0.5]}
    (run / "results.json").write_text(json.dumps(results))
    conn = store.connect(arena["db"], create=False)
    standings = compute(store.load_games(conn), store.load_agents(conn))
    specs = {label: record.spec for label, record in store.load_agents(conn).items()}
    conn.close()
    standings.reasoning = load_column(run, specs)
    console = Console(record=True, width=200)
    report.print_tables(standings, console)
    tiny = next(line for line in console.export_text().splitlines() if " tiny " in line)
    assert tiny.rstrip().endswith("37.5% (25.0-50.0)")


def test_a_missing_or_empty_directory_is_one_line_and_exit_2(arena, tmp_path, capsys):
    show = ["leaderboard", "show", "--db", str(arena["db"]), "--reasoning"]
    assert main([*show, str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such directory" in err and "Traceback" not in err
    (tmp_path / "empty" / "not-a-run").mkdir(parents=True)
    assert main([*show, str(tmp_path / "empty")]) == 2
    assert "no eval run there" in capsys.readouterr().err
    # run checks the directory before it plays anything
    db = tmp_path / "never.sqlite"
    run = ["leaderboard", "run", "--agents", "random,expert", "--games", "KuhnPoker-v0", "--games-per-pair", "2"]
    assert main([*run, "--db", str(db), "--reasoning", str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err and not db.exists()


def test_an_incomplete_or_mismatched_run_is_refused_naming_why(arena, tmp_path):
    """Issue 27: a reader of a run directory checks it against its manifest: a run stopped by failed
    requests, or results.json of other items or samples, never shows as the run's score."""
    specs = {"tiny": f"hf:{json.loads((arena['new'] / 'manifest.json').read_text())['model']['path']}"}
    stopped = Path(shutil.copytree(arena["new"], tmp_path / "stopped"))
    manifest = json.loads((stopped / "manifest.json").read_text())
    (stopped / "manifest.json").write_text(json.dumps({**manifest, "incomplete": {"missing_samples": 3}}))
    with pytest.raises(ValueError, match=r"stopped is an incomplete eval run \(3 samples missing\).*--resume"):
        load_column(stopped, specs)
    other = Path(shutil.copytree(arena["new"], tmp_path / "other"))
    results = json.loads((other / "results.json").read_text())
    results["benchmarks"]["math500"]["items"] = 1
    (other / "results.json").write_text(json.dumps(results))
    with pytest.raises(ValueError, match=r"results.json does not match manifest.json: math500 is scored there on"):
        load_column(other, specs)
    (other / "results.json").write_text(json.dumps(results)[:50])
    with pytest.raises(ValueError, match=r"other/results.json cannot be read \(JSONDecodeError\)"):
        load_column(other, specs)
