"""scripts/reference_metrics.py, issue 57's check that a refactor changes no behaviour: its runs are the tests'
own configurations, spelled as flags that build the same config; it strips exactly the wall-clock fields off real
metrics lines; and it finds the first line and field where two runs differ, down to one ulp. The script's runs
themselves (minutes) are not run here."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import test_async  # noqa: E402
import test_trainer_groups  # noqa: E402
from conftest import TINY_RUN, VOLATILE  # noqa: E402

from trainers.config import TrainConfig  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def load_script():
    spec = importlib.util.spec_from_file_location("reference_metrics", REPO / "scripts" / "reference_metrics.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["reference_metrics"] = module
    spec.loader.exec_module(module)
    return module


script = load_script()


# two asynchronous steps (so every timing the trainer writes is there), the last one evaluated: seconds
QUICK = {**TINY_RUN, "steps": 2, "eval_at_start": False, "eval_kuhn_samples": 0, "plots": False, "async_steps": 1}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Iterator[tuple[Path, Path]]:
    """``make`` of QUICK (run "quick", one thread): the references' directory and the runs' directory."""
    out, runs = tmp_path_factory.mktemp("reference"), tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(script.RUNS, "quick", QUICK)
        assert script.main(["make", "--only", "quick", "--out", str(out), "--runs", str(runs), "--threads", "1"]) == 0
        yield out, runs


@pytest.fixture(scope="module")
def metrics_lines(made) -> list[str]:
    """A real metrics.jsonl, of QUICK."""
    return (made[1] / "quick" / "metrics.jsonl").read_text().splitlines()


def test_the_runs_are_the_tests_configurations():
    assert script.TINY_RUN == TINY_RUN
    assert script.GROUP_RUN == test_trainer_groups.SMALL
    assert script.RUNS["async"] == {**test_async.SMALL, "async_steps": 1}
    assert script.RUNS["default"] == {}  # a bare `spiral-arena train`: only the output directory is given
    argv = script.command("default", Path("RUN"))
    assert argv[1:] == ["-m", "spiral_arena.cli", "train", "--output-dir=RUN"]


@pytest.mark.parametrize("name", list(script.RUNS))
def test_each_runs_flags_build_the_config_the_test_builds(name, tmp_path):
    """Flags are text: parsed by `spiral-arena train`'s own parser, they give the config the tests build from typed
    values."""
    from spiral_arena.cli import build_parser
    from trainers.flags import from_arguments

    out = str(tmp_path / "run")
    args = build_parser().parse_args(script.command(name, Path(out))[3:])
    assert from_arguments(args) == TrainConfig.build({**script.RUNS[name], "output_dir": out})


def test_strips_exactly_the_wall_clock_fields(metrics_lines):
    assert set(script.VOLATILE) == set(VOLATILE)  # the tests' own list of what a replay does not reproduce
    rows = [json.loads(line) for line in metrics_lines]
    assert set(script.VOLATILE) <= {k for row in rows for k in row}  # each is really written (async: all of them)
    kept = script.reference_lines(metrics_lines)
    assert [r["step"] for r in rows] == [0, 1, 2]
    for row, line in zip(rows, kept, strict=True):
        back = json.loads(line)
        assert list(back) == sorted(back)
        assert back == {k: v for k, v in row.items() if k not in script.VOLATILE}
    assert any(k.startswith("eval/") for k in json.loads(kept[-1]))
    assert script.suspicious(kept) == []  # nothing left that is named like a timing


def test_first_difference_names_the_line_field_and_both_values(metrics_lines):
    kept = script.reference_lines(metrics_lines)
    assert script.first_difference(kept, list(kept)) is None
    last = json.loads(kept[-1])
    key = "grad_norm"
    moved = {**last, key: math.nextafter(last[key], math.inf)}  # one ulp
    got = kept[:-1] + [json.dumps(moved, sort_keys=True)]
    said = script.first_difference(kept, got)
    assert said == f"line 3 (step 2): {key}: {json.dumps(last[key])} (reference) vs {json.dumps(moved[key])} (now)"
    added = kept[:1] + [json.dumps({**json.loads(kept[1]), "extra": 1}, sort_keys=True)] + kept[2:]
    assert script.first_difference(kept, added) == "line 2 (step 1): extra: <absent> (reference) vs 1 (now)"
    assert script.first_difference(kept, kept[:2]) == "line 3: now ends there (3 lines in the reference, 2 now)"
    longer = script.first_difference(kept[:2], kept)
    assert longer == "line 3: the reference ends there (2 lines in the reference, 3 now)"
    nan = [json.dumps({"step": 1, "kl": math.nan})]
    assert script.first_difference(nan, list(nan)) is None  # NaN is the same NaN


def test_the_readme_rows_read_back(tmp_path):
    rows = {
        "lora": {"lines": "2", "commit": "abc123", "changes": "none", "made": "2026-01-01 00:00", "torch": "2.13.0+cpu",
                 "threads": "2", "seconds": "60", "command": script.shown_command("lora", 2)},
    }  # fmt: skip
    script.write_readme(tmp_path, rows, script.machine_line())
    assert script.read_rows(tmp_path) == rows


def test_make_then_check_a_run_in_fresh_processes(made, metrics_lines, capsys):
    """The whole round: references made in one process, checked in another (a replay, bit for bit, at the thread
    count the README recorded), and a reference one ulp off is reported, with exit status 1."""
    out, runs = made
    row = script.read_rows(out)["quick"]
    assert (row["threads"], row["lines"]) == ("1", "3") and row["commit"] == script.git("rev-parse", "HEAD")
    assert json.loads((runs / "quick" / "config.json").read_text())["async_steps"] == 1
    lines = (out / "quick.jsonl").read_text().splitlines()
    assert lines == script.reference_lines(metrics_lines)
    capsys.readouterr()
    assert script.main(["check", "--only", "quick", "--out", str(out), "--runs", str(runs)]) == 0
    table = capsys.readouterr().out.splitlines()[-2:]
    assert table[0].split() == ["run", "lines", "(ref/now)", "seconds", "result"]
    assert table[1].split()[:2] == ["quick", "3/3"] and table[1].endswith("same")
    last = json.loads(lines[-1])
    lines[-1] = json.dumps({**last, "loss": math.nextafter(last["loss"], -math.inf)}, sort_keys=True)
    (out / "quick.jsonl").write_text("".join(line + "\n" for line in lines))
    assert script.main(["check", "--only", "quick", "--out", str(out)]) == 1
    result = capsys.readouterr().out.splitlines()[-1]
    assert result.split()[:2] == ["quick", "3/3"] and "line 3 (step 2): loss: " in result
    assert result.endswith(f"{json.loads(lines[-1])['loss']} (reference) vs {json.dumps(last['loss'])} (now)")
