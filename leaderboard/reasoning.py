"""A reasoning column for ``hf:`` entrants, read from ``spiral-arena eval`` run directories.

An eval run is a directory holding ``manifest.json`` (model path, weight sha256s, protocol hash, times)
and ``results.json`` (per-benchmark metrics and macro averages). Only those two JSON files are read (a
run marked incomplete, or results whose items and samples per item are not the manifest's, are refused), and
weights are hashed with the very function the manifest used (``spiral_arena.evals.data.file_sha256``, standard library
only), so the leaderboard never needs the grader's dependencies.

A run belongs to an ``hf:`` entrant when both name the same directory (paths resolved) or, failing that,
when the entrant's directory holds the same ``*.safetensors`` files with the sha256s the manifest
recorded (a checkpoint copied or moved after its evaluation, or a relative path recorded from another
working directory). Options such as ``#temperature`` do not matter: the run scored the weights.

The value shown is the run's ``overall`` average from results.json: the mean over all eight benchmarks
when the run has them all, else over those it has, with its 95% interval when one was computed.

One protocol per column: averages from different protocols (other items, prompts, samples or grading)
are not comparable, so the column takes the protocol of the most recent matched run (by the manifest's
``regraded_at``, else ``finished_at``) and leaves out every run with another protocol, each named in a
note line. An entrant with several runs of that protocol shows the most recent, also noted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from spiral_arena.models.named import cached_dir, is_named
from spiral_arena.outputs import file_sha256

MANIFEST_FILE = "manifest.json"
RESULTS_FILE = "results.json"
ALL_BENCHMARKS = 8  # the overall average's full set (evals.data.BENCHMARKS), not imported on purpose
HASH_PREFIX = 8


@dataclass(frozen=True)
class EvalRun:
    """What the column needs from one eval run directory."""

    directory: Path
    model_spec: str
    model_path: Path | None  # None for API models: no weights to match
    weight_files: dict[str, str]  # file name -> sha256
    protocol_hash: str
    preset: str
    time: datetime
    value: float
    low: float | None
    high: float | None
    benchmarks: tuple[str, ...]
    complete: bool


@dataclass(frozen=True)
class ReasoningScore:
    value: float
    low: float | None
    high: float | None
    run: Path


@dataclass
class ReasoningColumn:
    """The column for a set of entrants: label -> score (absent = blank), and what the scores mean."""

    scores: dict[str, ReasoningScore]
    preset: str | None = None
    protocol_hash: str | None = None
    benchmarks: tuple[str, ...] = ()
    complete: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def legend(self) -> str:
        """One line saying what the column holds (header text stays short)."""
        if self.protocol_hash is None:
            return "Reasoning: no eval run matched an hf: entrant."
        which = (
            f"all {ALL_BENCHMARKS} benchmarks"
            if self.complete
            else f"{len(self.benchmarks)} of {ALL_BENCHMARKS} benchmarks ({', '.join(self.benchmarks)})"
        )
        return (
            f"Reasoning: accuracy % averaged over {which}, with its 95% interval; "
            f"preset {self.preset}, protocol {self.protocol_hash[:HASH_PREFIX]}."
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "preset": self.preset,
            "protocol_hash": self.protocol_hash,
            "benchmarks": list(self.benchmarks),
            "complete": self.complete,
            "legend": self.legend,
            "runs": {label: str(score.run) for label, score in self.scores.items()},
            "notes": list(self.notes),
        }


def _time(manifest: dict[str, Any]) -> datetime:
    timing = manifest.get("timing") or {}
    return datetime.fromisoformat(timing.get("regraded_at") or timing["finished_at"])


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # missing, not UTF-8, truncated
        raise ValueError(f"{path} cannot be read ({type(error).__name__}): a truncated or edited file?") from None


def _mismatch(manifest: dict[str, Any], results: dict[str, Any]) -> str | None:
    """How results.json disagrees with the manifest it claims to score (items and samples per item of each
    benchmark, protocol hash), or None: results of another or a partial run are never shown as this one's."""
    protocol = manifest["protocol"]
    if results.get("protocol_hash") != manifest["protocol_hash"]:
        return "its protocol hash is not the manifest's"
    for name, info in protocol["benchmarks"].items():
        entry = results["benchmarks"].get(name) or {}
        listed = (len(info["item_ids"]), protocol["samples_per_item"][name])
        if (entry.get("items"), entry.get("samples_per_item")) != listed:
            return f"{name} is scored there on other items or samples than the manifest's {listed[0]} x {listed[1]}"
    return None


def read_run(directory: Path) -> EvalRun:
    """One run directory, or ValueError naming the file that is missing or malformed, or saying that the run
    is incomplete (stopped by failed requests) or that its results do not match its manifest."""
    manifest = _read_json(directory / MANIFEST_FILE)
    if isinstance(manifest, dict) and "incomplete" in manifest:
        missing = manifest["incomplete"].get("missing_samples")
        raise ValueError(
            f"{directory} is an incomplete eval run ({missing} samples missing): complete it with the command "
            "that made it and --resume"
        )
    results = _read_json(directory / RESULTS_FILE)
    try:
        if (problem := _mismatch(manifest, results)) is not None:
            raise ValueError(f"{directory / RESULTS_FILE} does not match {MANIFEST_FILE}: {problem}")
        model, overall = manifest["model"], results["averages"]["overall"]
        ci = overall.get("ci95")
        path = model.get("path")
        return EvalRun(
            directory=directory,
            model_spec=model["spec"],
            model_path=None if path is None else Path(path),
            weight_files=dict(model.get("weight_files") or {}),
            protocol_hash=manifest["protocol_hash"],
            preset=manifest["protocol"]["preset"]["name"],
            time=_time(manifest),
            value=float(overall["value"]),
            low=None if ci is None else float(ci[0]),
            high=None if ci is None else float(ci[1]),
            benchmarks=tuple(overall["benchmarks"]),
            complete=bool(overall.get("complete")),
        )
    except (KeyError, TypeError, IndexError, AttributeError) as error:
        raise ValueError(f"{directory} is not a readable eval run ({type(error).__name__}: {error})") from None


def find_runs(path: Path) -> tuple[list[EvalRun], list[str]]:
    """The eval runs at ``path`` (a run directory, or a folder of them one level down) and a note per
    run directory that could not be read; ValueError when there is nothing usable there."""
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"--reasoning {path}: no such directory; give an eval run directory or a folder of them")
    directories = (
        [path] if (path / MANIFEST_FILE).is_file() else sorted(p.parent for p in path.glob(f"*/{MANIFEST_FILE}"))
    )
    if not directories:
        raise ValueError(f"--reasoning {path}: no eval run there (no {MANIFEST_FILE} in it or one level below)")
    runs, notes = [], []
    for directory in directories:
        try:
            runs.append(read_run(directory))
        except ValueError as error:
            if len(directories) == 1:
                raise ValueError(f"--reasoning: {error}") from None
            notes.append(f"skipped: {error}")
    if not runs:
        raise ValueError(f"--reasoning {path}: none of its {len(directories)} eval runs could be read")
    return runs, notes


def hf_paths(specs: Mapping[str, str]) -> dict[str, Path]:
    """Label -> model directory of the ``hf:`` entrants among ``specs`` (label -> stored spec); a named model
    (``hf:smollm2-135m``) is the directory it resolves to here, when it is cached."""
    paths = {}
    for label, spec in specs.items():
        base = spec.split("#", 1)[0].strip()
        target = base[3:] if base.startswith("hf:") else ""
        where = cached_dir(target) if is_named(target) else Path(target).expanduser() if target else None
        if where is not None:
            paths[label] = where
    return paths


class _Weights:
    """Safetensors sha256s of entrant directories, hashed only when a run's file names could match."""

    def __init__(self) -> None:
        self._names: dict[Path, set[str]] = {}
        self._hashes: dict[Path, dict[str, str]] = {}

    def same(self, directory: Path, recorded: dict[str, str]) -> bool:
        if not recorded:
            return False
        if directory not in self._names:
            files = directory.glob("*.safetensors") if directory.is_dir() else []
            self._names[directory] = {p.name for p in files}
        if self._names[directory] != set(recorded):
            return False
        if directory not in self._hashes:
            self._hashes[directory] = {name: file_sha256(directory / name) for name in sorted(self._names[directory])}
        return self._hashes[directory] == recorded


def _resolved(path: Path) -> Path:
    return path.expanduser().resolve()


def build_column(runs: list[EvalRun], specs: Mapping[str, str], notes: list[str] | None = None) -> ReasoningColumn:
    """Attach runs to ``hf:`` entrants (label -> stored spec) under one protocol; see the module docstring."""
    notes = list(notes or [])
    paths = {label: _resolved(path) for label, path in hf_paths(specs).items()}
    weights = _Weights()
    matched: list[tuple[EvalRun, list[str]]] = []
    unmatched: list[EvalRun] = []
    for run in sorted(runs, key=lambda r: (r.time, str(r.directory)), reverse=True):
        own = None if run.model_path is None else _resolved(run.model_path)
        labels = [label for label, path in paths.items() if path == own or weights.same(path, run.weight_files)]
        if labels:
            matched.append((run, labels))
        else:
            unmatched.append(run)
    if unmatched:
        names = ", ".join(f"{r.directory} ({r.model_spec})" for r in unmatched)
        notes.append(f"{len(unmatched)} eval run(s) matched no hf: entrant: {names}")
    if not matched:
        return ReasoningColumn({}, notes=notes)

    newest = matched[0][0]
    scores: dict[str, ReasoningScore] = {}
    for run, labels in matched:
        who = ", ".join(labels)
        if run.protocol_hash != newest.protocol_hash:
            notes.append(
                f"left out {run.directory} ({who}): protocol {run.protocol_hash[:HASH_PREFIX]} differs from the "
                f"column's {newest.protocol_hash[:HASH_PREFIX]} (runs of different protocols are not comparable)"
            )
            continue
        for label in labels:
            if label in scores:
                notes.append(f"{label}: older run {run.directory} not shown (the most recent is {scores[label].run})")
            else:
                scores[label] = ReasoningScore(run.value, run.low, run.high, run.directory)
    return ReasoningColumn(
        scores,
        preset=newest.preset,
        protocol_hash=newest.protocol_hash,
        benchmarks=newest.benchmarks,
        complete=newest.complete,
        notes=notes,
    )


def load_column(path: Path, specs: Mapping[str, str]) -> ReasoningColumn:
    """``--reasoning PATH`` for entrants ``specs`` (label -> spec)."""
    runs, notes = find_runs(path)
    return build_column(runs, specs, notes)
