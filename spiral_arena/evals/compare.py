"""``spiral-arena eval compare RUN_A RUN_B``: what changed from A to B, benchmark by benchmark.

Both runs' stored verdicts are turned into one score per item (the protocol's headline metric for
the question kind, first-sample accuracy or mean@n, or the one given with ``--metric``), and the
items both runs answered are resampled together (paired bootstrap), so a delta's interval reflects
sampling noise, not which items happened to be drawn.
Runs evaluated under different protocols (prompt, shots, sampling, samples per item, items or
grader) are refused unless the caller allows it, since their difference would mix model and protocol.
A run whose ``samples.jsonl`` does not hold every sample its manifest lists (a truncated file, a run
stopped by failed requests) is refused too, naming the file and the count, unless the caller asks for
the items both runs have complete (``common_items``): a missing sample must never count as wrong.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from spiral_arena.evals.data import BENCHMARKS, GENERAL_BENCHMARKS, MATH_BENCHMARKS, DataError
from spiral_arena.evals.manifest import differing_fields
from spiral_arena.evals.metrics import METRICS, RESAMPLES, item_scores, paired_difference, paired_macro
from spiral_arena.evals.presets import KINDS
from spiral_arena.evals.run import complete_items, correctness, read_manifest, read_run

AVERAGES = {"math average": MATH_BENCHMARKS, "general average": GENERAL_BENCHMARKS, "overall": tuple(BENCHMARKS)}


COMMON_ITEMS_HINT = "; pass --common-items to compare only the items both runs have complete"


def per_item_scores(
    directory: Path, metrics: Mapping[str, str] | None = None, common_items: bool = False
) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
    """A run's manifest, and {benchmark: {item id: score}} under ``metrics`` ({"math": ..., "choice": ...};
    default: the run's own headline metric per question kind). ``common_items``: a run with samples missing
    is read for its complete items only, instead of refused."""
    manifest, records = read_run(directory, missing_ok=common_items, hint=COMMON_ITEMS_HINT)
    protocol = manifest["protocol"]
    metrics = metrics or headline_metrics(manifest)
    scores = {}
    for name, items in complete_items(manifest, records).items():
        if not items:  # only with common_items: a benchmark without one complete item is left out
            continue
        rows = [r for r in records if r["benchmark"] == name and r["item_id"] in set(items)]
        matrix = correctness(rows, items, protocol["samples_per_item"][name])
        per_item = item_scores(matrix, metrics[BENCHMARKS[name].kind])
        scores[name] = dict(zip(items, per_item.tolist(), strict=True))
    return manifest, scores


def headline_metrics(manifest: dict[str, Any]) -> dict[str, str]:
    return {kind: manifest["protocol"]["preset"][kind]["metric"] for kind in KINDS}


def compare_runs(
    run_a: Path,
    run_b: Path,
    metric: str | None = None,
    allow_protocol_mismatch: bool = False,
    seed: int = 0,
    resamples: int = RESAMPLES,
    common_items: bool = False,
) -> dict[str, Any]:
    """Paired deltas (B - A) per benchmark and for the averages, with 95% intervals and p-values.
    Both runs are scored with ``metric`` for every benchmark, or else with A's headline metrics.
    ``common_items``: runs with samples missing are compared on the items both have complete."""
    if metric is not None and metric not in METRICS:
        raise DataError(f"unknown metric {metric!r}; valid: {', '.join(METRICS)}")
    metrics = dict.fromkeys(KINDS, metric) if metric else headline_metrics(read_manifest(run_a))
    manifest_a, scores_a = per_item_scores(run_a, metrics, common_items)
    manifest_b, scores_b = per_item_scores(run_b, metrics, common_items)
    hash_a, hash_b = manifest_a["protocol_hash"], manifest_b["protocol_hash"]
    if hash_a != hash_b and not allow_protocol_mismatch:
        fields = differing_fields(manifest_a["protocol"], manifest_b["protocol"])
        shown = ", ".join(fields[:6]) + (f" and {len(fields) - 6} more" if len(fields) > 6 else "")
        raise DataError(
            f"the runs used different protocols ({hash_a[:12]} vs {hash_b[:12]}; differing: {shown}); "
            "pass --allow-protocol-mismatch to compare them anyway"
        )
    common = [name for name in scores_a if name in scores_b]
    if not common:
        raise DataError(f"{run_a} and {run_b} have no benchmark in common")
    before, after, rows = {}, {}, {}
    for name in common:
        items = [i for i in scores_a[name] if i in scores_b[name]]
        if not items:
            raise DataError(f"{name}: the two runs share no item")
        before[name] = np.array([scores_a[name][i] for i in items])
        after[name] = np.array([scores_b[name][i] for i in items])
        rows[name] = {**paired_difference(before[name], after[name], name, seed, resamples), "items": len(items)}
    averages = {}
    for label, members in AVERAGES.items():  # an average of one benchmark, or "overall" of one group, repeats a row
        present = [m for m in members if m in before]
        groups = {BENCHMARKS[m].group for m in present}
        if len(present) >= 2 and (label != "overall" or len(groups) == 2):
            averages[label] = paired_macro(
                {m: before[m] for m in present}, {m: after[m] for m in present}, seed, resamples
            )
    return {
        "run_a": str(run_a),
        "run_b": str(run_b),
        "metric": ", ".join(f"{kind} {m}" for kind, m in metrics.items()),
        "protocol_hashes": [hash_a, hash_b],
        "protocol_match": hash_a == hash_b,
        "common_items": common_items,
        "benchmarks": rows,
        "averages": averages,
    }


def print_comparison(comparison: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"B - A ({comparison['metric']}), paired bootstrap over items")
    for column in ("benchmark", "items", "A", "B", "delta", "95% interval", "p"):
        table.add_column(column, justify="left" if column == "benchmark" else "right")
    entries = list(comparison["benchmarks"].items()) + list(comparison["averages"].items())
    for name, row in entries:
        low, high = row["ci95"]
        table.add_row(
            name,
            str(row.get("items", "")),
            f"{100 * row['before']:.1f}",
            f"{100 * row['after']:.1f}",
            f"{100 * row['delta']:+.1f}",
            f"[{100 * low:+.1f}, {100 * high:+.1f}]",
            f"{row['p_value']:.3f}",
        )
    console = Console(width=None if sys.stdout.isatty() else 160)  # logs and pipes get whole names
    console.print(table)
    if not comparison["protocol_match"]:
        console.print("[bold red]warning:[/] the runs used different protocols; deltas mix model and protocol")
    if comparison.get("common_items"):
        console.print("note: only the items both runs have complete are compared (--common-items)")


def plot_comparison(comparison: dict[str, Any], path: Path) -> None:
    """A bar per benchmark (and average): the delta in points with its 95% interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = list(comparison["benchmarks"].items()) + list(comparison["averages"].items())
    names = [name for name, _ in entries]
    deltas = np.array([100 * row["delta"] for _, row in entries])
    lows = np.array([100 * row["ci95"][0] for _, row in entries])
    highs = np.array([100 * row["ci95"][1] for _, row in entries])
    figure, axis = plt.subplots(figsize=(7, 0.45 * len(names) + 1.5))
    positions = np.arange(len(names))[::-1]
    colors = ["tab:green" if d > 0 else "tab:red" if d < 0 else "tab:gray" for d in deltas]
    axis.barh(positions, deltas, color=colors, alpha=0.8)
    axis.errorbar(deltas, positions, xerr=[deltas - lows, highs - deltas], fmt="none", ecolor="black", capsize=3)
    axis.axvline(0, color="black", linewidth=0.8)
    axis.set_yticks(positions, names)
    span = max(1.0, 1.1 * float(np.abs(np.r_[lows, highs]).max()))  # symmetric, at least +-1 point
    axis.set_xlim(-span, span)
    axis.set_xlabel(f"B - A, points ({comparison['metric']})\nbars: 95% paired bootstrap interval")
    axis.set_title(f"{Path(comparison['run_b']).name} vs {Path(comparison['run_a']).name}")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
