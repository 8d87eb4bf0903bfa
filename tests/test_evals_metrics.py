"""Metrics (pass@k, bootstrap intervals, paired deltas) and ``eval compare`` on synthetic runs."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from spiral_arena.cli import main
from spiral_arena.evals.compare import compare_runs
from spiral_arena.evals.data import DataError
from spiral_arena.evals.metrics import (
    benchmark_metrics,
    item_scores,
    macro_average,
    paired_difference,
    pass_at_k,
    pass_ks,
)


def brute_pass_at_k(n: int, correct: int, k: int) -> float:
    outcomes = [True] * correct + [False] * (n - correct)
    draws = list(itertools.combinations(outcomes, k))
    return sum(any(d) for d in draws) / len(draws)


@pytest.mark.parametrize(("n", "k"), [(4, 1), (4, 2), (4, 4), (6, 3), (8, 5)])
def test_pass_at_k_is_the_unbiased_estimator(n, k):
    for correct in range(n + 1):
        assert pass_at_k(n, correct, k) == pytest.approx(brute_pass_at_k(n, correct, k))
    assert pass_at_k(4, 1, 1) == 0.25 and pass_at_k(4, 1, 2) == 0.5
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_reported_ks():
    assert pass_ks(1) == [1] and pass_ks(4) == [1, 2, 4] and pass_ks(6) == [1, 2, 4, 6] and pass_ks(16)[-1] == 16


def test_benchmark_metrics_separate_first_sample_from_mean():
    correct = np.array([[1, 0, 0, 0], [0, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0]], dtype=bool)
    out = benchmark_metrics(correct, "toy", seed=3)
    assert out["first_sample_accuracy"]["value"] == 0.5
    assert out["mean_at_n"]["value"] == pytest.approx(8 / 16)
    assert out["pass_at_k"]["4"]["value"] == 0.75 and out["pass_at_k"]["1"]["value"] == pytest.approx(0.5)
    for entry in (out["first_sample_accuracy"], out["mean_at_n"], *out["pass_at_k"].values()):
        low, high = entry["ci95"]
        assert 0 <= low <= entry["value"] <= high <= 1
    assert benchmark_metrics(correct, "toy", seed=3) == out  # seeded
    assert list(item_scores(correct, "mean")) == [0.25, 0.75, 1.0, 0.0]


def test_macro_average_weighs_benchmarks_equally():
    scores = {"a": np.ones(10), "b": np.zeros(500)}
    entry = macro_average(scores, seed=0)
    assert entry["value"] == 0.5 and entry["benchmarks"] == ["a", "b"] and entry["ci95"] == [0.5, 0.5]


def test_paired_difference_finds_a_real_gain_and_covers_zero_without_one():
    rng = np.random.default_rng(0)
    before = rng.random(300) < 0.4
    after = before | (rng.random(300) < 0.3)  # strictly better on some items
    gain = paired_difference(before.astype(float), after.astype(float), "x", seed=0)
    assert gain["delta"] > 0.1 and gain["ci95"][0] > 0 and gain["p_value"] < 0.01
    same = paired_difference(before.astype(float), before.astype(float), "x", seed=0)
    assert same["delta"] == 0 and same["ci95"] == [0.0, 0.0] and same["p_value"] == 1.0
    noise = paired_difference((rng.random(300) < 0.5).astype(float), (rng.random(300) < 0.5).astype(float), "x")
    assert noise["ci95"][0] < 0 < noise["ci95"][1] and noise["p_value"] > 0.05


# ---- compare on synthetic runs ----------------------------------------------------------------------


def write_run(directory: Path, matrices: dict[str, np.ndarray], temperature: float = 0.6) -> Path:
    """A run directory as ``run_eval`` leaves it, from verdict matrices [items, n] (only what compare reads)."""
    directory.mkdir(parents=True)
    protocol = {
        "preset": {
            "name": "spiral-offline",
            "temperature": temperature,
            "math": {"metric": "first-sample"},
            "choice": {"metric": "first-sample"},
        },
        "samples_per_item": {name: int(m.shape[1]) for name, m in matrices.items()},
        "benchmarks": {name: {"item_ids": [f"{name}-{i}" for i in range(len(m))]} for name, m in matrices.items()},
    }
    from spiral_arena.evals.manifest import protocol_hash

    manifest = {"protocol": protocol, "protocol_hash": protocol_hash(protocol), "seed": 0}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    with (directory / "samples.jsonl").open("w") as handle:
        for name, matrix in matrices.items():
            for i, row in enumerate(matrix):
                for sample, correct in enumerate(row):
                    record = {"benchmark": name, "item_id": f"{name}-{i}", "sample": sample, "correct": bool(correct)}
                    handle.write(json.dumps(record) + "\n")
    return directory


@pytest.fixture
def runs(tmp_path):
    rng = np.random.default_rng(1)
    base = {
        "math500": rng.random((200, 2)) < 0.5,
        "aime24": rng.random((30, 2)) < 0.2,
        "mmlu_pro": rng.random((150, 2)) < 0.6,
    }
    better = {name: m.copy() for name, m in base.items()}
    better["math500"][:, 0] |= rng.random(200) < 0.4  # a real gain on math500 only
    churned = {}  # as many items won as lost on every benchmark: per-item changes, no net difference
    for name, m in base.items():
        churned[name] = m.copy()
        right, wrong = np.flatnonzero(m[:, 0]), np.flatnonzero(~m[:, 0])
        flips = min(len(right), len(wrong)) // 2
        churned[name][right[:flips], 0] = False
        churned[name][wrong[:flips], 0] = True
    return write_run(tmp_path / "a", base), write_run(tmp_path / "b", better), write_run(tmp_path / "c", churned)


def test_compare_finds_the_known_difference_and_none_where_there_is_none(runs):
    a, b, c = runs
    gain = compare_runs(a, b, seed=0)
    assert gain["protocol_match"] and set(gain["benchmarks"]) == {"math500", "aime24", "mmlu_pro"}
    math = gain["benchmarks"]["math500"]
    assert math["delta"] > 0.1 and math["ci95"][0] > 0 and math["p_value"] < 0.01 and math["items"] == 200
    for name in ("aime24", "mmlu_pro"):  # untouched: exactly no change
        assert gain["benchmarks"][name]["delta"] == 0 and gain["benchmarks"][name]["p_value"] == 1.0
    assert set(gain["averages"]) == {"math average", "overall"}  # one general benchmark: no general average
    assert gain["averages"]["overall"]["delta"] == pytest.approx(math["delta"] / 3)
    churn = compare_runs(a, c, seed=0)
    for row in [*churn["benchmarks"].values(), *churn["averages"].values()]:
        assert row["delta"] == pytest.approx(0) and row["ci95"][0] < 0 < row["ci95"][1] and row["p_value"] > 0.9


def test_compare_refuses_different_protocols_unless_allowed(tmp_path, runs, capsys):
    a, _, _ = runs
    hot = write_run(tmp_path / "hot", {"math500": np.ones((200, 2), dtype=bool)}, temperature=1.0)
    with pytest.raises(DataError, match=r"different protocols .*differing: .*preset\.temperature.*allow-protocol"):
        compare_runs(a, hot)
    assert compare_runs(a, hot, allow_protocol_mismatch=True)["benchmarks"]["math500"]["delta"] > 0.4
    assert main(["eval", "compare", str(a), str(hot)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("spiral-arena eval: error: the runs used different protocols") and "\n" not in error


def test_compare_cli_prints_a_table_and_writes_a_png_and_json(runs, tmp_path, capsys):
    a, b, _ = runs
    png, out = tmp_path / "delta.png", tmp_path / "delta.json"
    assert main(["eval", "compare", str(a), str(b), "--png", str(png), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    written = json.loads(out.read_text())
    assert written["benchmarks"]["math500"]["delta"] > 0.1
    # every row of the printed table says what the JSON says: items, A, B, delta and interval in points, p
    table = {}
    for line in printed.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == 7 and cells[0] not in ("benchmark", ""):
            table[cells[0]] = cells[1:]
    rows = {**written["benchmarks"], **written["averages"]}
    assert set(table) == set(rows) == {"math500", "aime24", "mmlu_pro", "math average", "overall"}
    for name, row in rows.items():
        items, before, after, delta, interval, p = table[name]
        assert items == str(row.get("items", ""))
        low, high = (float(x) for x in interval.strip("[]").split(","))
        shown = [float(before), float(after), float(delta), low, high, float(p)]
        exact = [100 * row["before"], 100 * row["after"], 100 * row["delta"], *(100 * x for x in row["ci95"])]
        assert shown == pytest.approx([*exact, row["p_value"]], abs=0.05 + 1e-9), name  # rounded to 0.1 points, p 0.001
    assert float(table["math500"][3]) > 10  # B gained on math500, and the table says so with its sign


# ---- a run directory is checked against its manifest (issue 27) -----------------------------------------


def cut_samples(run: Path, keep: float) -> int:
    """Keep the first ``keep`` share of a run's sample lines (0: an empty file); returns the lines kept."""
    lines = (run / "samples.jsonl").read_text().splitlines(keepends=True)
    kept = lines[: int(len(lines) * keep)]
    (run / "samples.jsonl").write_text("".join(kept))
    return len(kept)


@pytest.mark.parametrize("keep", [0.0, 0.5], ids=["emptied", "half"])
def test_compare_refuses_a_run_with_missing_samples_naming_the_file_and_the_count(runs, capsys, keep):
    """Before the fix the missing samples counted as wrong: -100 / -50 points with p = 0.001, exit 0."""
    a, b, _ = runs
    kept = cut_samples(b, keep)
    assert main(["eval", "compare", str(a), str(b)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"spiral-arena eval: error: {b / 'samples.jsonl'} holds {kept} samples where manifest.json "
                            f"lists 760 ({760 - kept} missing: ") and "\n" not in error, error  # fmt: skip
    assert error.endswith("; pass --common-items to compare only the items both runs have complete")
    if keep:  # the items both runs have complete, on request: the first half of them, nothing counted as wrong
        common = compare_runs(a, b, seed=0, common_items=True)
        assert common["common_items"] and common["benchmarks"]["math500"]["items"] == 190
        assert set(common["benchmarks"]) == {"math500"}  # aime24 and mmlu_pro lost every sample
        assert common["benchmarks"]["math500"]["delta"] > 0.1  # the real gain, no -50 points


def test_extra_or_repeated_samples_are_refused_even_for_the_common_items(runs):
    a, b, _ = runs
    lines = (b / "samples.jsonl").read_text().splitlines(keepends=True)
    (b / "samples.jsonl").write_text("".join(lines + lines[:3]))
    for common in (False, True):
        with pytest.raises(DataError, match=r"holds 763 samples where manifest.json lists 760 \(3 extra or repeated\)"):
            compare_runs(a, b, common_items=common)


def test_a_truncated_file_is_one_line_naming_it(runs, capsys):
    a, b, _ = runs
    text = (b / "samples.jsonl").read_text()
    (b / "samples.jsonl").write_text(text[: len(text) // 2])  # cut inside a line
    assert main(["eval", "compare", str(a), str(b)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"spiral-arena eval: error: {b / 'samples.jsonl'}: line ") and "is not valid JSON" in error
    manifest = (a / "manifest.json").read_text()
    (a / "manifest.json").write_text(manifest[:100])
    assert main(["eval", "compare", str(a), str(b)]) == 2
    error = capsys.readouterr().err.strip()
    assert error == f"spiral-arena eval: error: {a / 'manifest.json'} is not valid JSON (line 1): truncated or edited?"
