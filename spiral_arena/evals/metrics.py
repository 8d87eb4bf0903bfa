"""Scores from a correctness matrix (items x samples), with bootstrap intervals over items.

Per benchmark: first-sample accuracy (SPIRAL's reported number: one sample at temperature 0.6),
mean@n (every sample), and the unbiased pass@k of Chen et al. (2021), each with a 95% percentile
interval from resampling items. Averages are macro means over benchmarks (each benchmark counts
once, whatever its size), with intervals from resampling every benchmark's items independently.
Paired comparisons resample the same items for both runs, so item difficulty cancels.

Resampling is seeded from ``seed`` and the benchmark's name, so a number does not depend on which
other benchmarks were in the run.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

METRICS = ("first-sample", "mean")  # the headline score per item: sample 0, or the mean over samples
RESAMPLES = 1000


def rng_for(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def pass_at_k(n: int, correct: int, k: int) -> float:
    """P(at least one of k samples drawn without replacement from n is correct), unbiased."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    if n - correct < k:
        return 1.0
    return 1.0 - math.prod((n - correct - i) / (n - i) for i in range(k))


def pass_ks(n: int) -> list[int]:
    """The k reported for n samples: powers of two up to n, and n itself."""
    ks = [k for k in (2**i for i in range(n.bit_length())) if k <= n]
    return ks + ([n] if n not in ks else [])


def item_scores(correct: np.ndarray, metric: str) -> np.ndarray:
    """One score per item: sample 0's correctness ("first-sample") or the mean over samples ("mean")."""
    if metric == "first-sample":
        return correct[:, 0].astype(float)
    if metric == "mean":
        return correct.mean(axis=1)
    raise ValueError(f"unknown metric {metric!r}; valid: {', '.join(METRICS)}")


def _interval(replicates: np.ndarray) -> list[float]:
    low, high = np.percentile(replicates, [2.5, 97.5])
    return [float(low), float(high)]


def _resample(scores: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Means of ``resamples`` bootstrap resamples of ``scores`` (items with replacement)."""
    index = rng.integers(0, len(scores), size=(resamples, len(scores)))
    return scores[index].mean(axis=1)


def estimate(scores: np.ndarray, rng: np.random.Generator, resamples: int = RESAMPLES) -> dict[str, Any]:
    """The mean of per-item ``scores`` and its 95% bootstrap interval."""
    return {"value": float(scores.mean()), "ci95": _interval(_resample(scores, rng, resamples))}


def benchmark_metrics(correct: np.ndarray, name: str, seed: int = 0, resamples: int = RESAMPLES) -> dict[str, Any]:
    """First-sample accuracy, mean@n and pass@k of one benchmark's [items, n] correctness matrix."""
    correct = np.asarray(correct, dtype=bool)
    items, n = correct.shape
    rng = rng_for(seed, name)
    hits = correct.sum(axis=1)
    out = {
        "items": items,
        "samples_per_item": n,
        "first_sample_accuracy": estimate(item_scores(correct, "first-sample"), rng, resamples),
        "mean_at_n": estimate(item_scores(correct, "mean"), rng, resamples),
        "pass_at_k": {},
    }
    for k in pass_ks(n):
        per_item = np.array([pass_at_k(n, int(c), k) for c in hits])
        out["pass_at_k"][str(k)] = estimate(per_item, rng, resamples)
    return out


def macro_average(scores: Mapping[str, np.ndarray], seed: int = 0, resamples: int = RESAMPLES) -> dict[str, Any] | None:
    """The mean of per-benchmark means, and an interval resampling each benchmark's items on its own."""
    if not scores:
        return None
    names = sorted(scores)
    value = float(np.mean([scores[name].mean() for name in names]))
    replicates = np.mean([_resample(scores[name], rng_for(seed, f"avg/{name}"), resamples) for name in names], axis=0)
    return {"value": value, "ci95": _interval(replicates), "benchmarks": names}


def paired_difference(
    before: np.ndarray, after: np.ndarray, name: str, seed: int = 0, resamples: int = RESAMPLES
) -> dict[str, Any]:
    """``after - before`` on the same items: the mean delta, its paired 95% interval, and a two-sided
    bootstrap p-value (the share of centred resampled deltas at least as far from 0 as the observed one)."""
    return paired_macro({name: before}, {name: after}, seed, resamples)


def paired_macro(
    before: Mapping[str, np.ndarray], after: Mapping[str, np.ndarray], seed: int = 0, resamples: int = RESAMPLES
) -> dict[str, Any]:
    """Paired delta of the macro average over the benchmarks in both mappings (items aligned by position)."""
    names = sorted(set(before) & set(after))
    if not names:
        raise ValueError("no benchmark in common to compare")
    for name in names:
        if before[name].shape != after[name].shape:
            raise ValueError(f"{name}: the two runs' scores are not on the same items")
    deltas = {name: after[name] - before[name] for name in names}
    observed = float(np.mean([deltas[name].mean() for name in names]))
    replicates = np.mean([_resample(deltas[name], rng_for(seed, f"paired/{name}"), resamples) for name in names], 0)
    centred = replicates - replicates.mean()
    p_value = float((1 + np.sum(np.abs(centred) >= abs(observed) - 1e-12)) / (resamples + 1))
    return {
        "before": float(np.mean([before[name].mean() for name in names])),
        "after": float(np.mean([after[name].mean() for name in names])),
        "delta": observed,
        "ci95": _interval(replicates),
        "p_value": min(1.0, p_value),
        "benchmarks": names,
    }
