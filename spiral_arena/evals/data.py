"""The eight benchmarks, one item schema, and loaders from local files or the Hugging Face hub.

Every source row becomes an ``Item``: an id, the question, and either the accepted gold answers
(maths: any of them may match) or the option texts and the correct letter (multiple choice).
Local files come first (``--data-dir``: ``NAME.jsonl``, ``NAME.parquet`` or ``NAME.csv``, in the
hub dataset's own schema, with an optional ``NAME.jsonl.provenance.json`` beside it naming the hub
revision it was fetched from, which the manifest records); the hub is tried only when the optional
``datasets`` package is installed and ``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE`` are unset. GPQA is gated and its terms
forbid publishing items, so it is never downloaded: it is read from a path the user supplies, and
no message here ever quotes a row (errors name the file, the row number and the field only).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spiral_arena.evals.answers import LETTERS, boxed_contents
from spiral_arena.outputs import file_sha256

FILE_SUFFIXES = (".jsonl", ".parquet", ".csv")
PROVENANCE_SUFFIX = ".provenance.json"  # e.g. math500.jsonl.provenance.json: {"hub_id": ..., "revision": ...}


class DataError(ValueError):
    """A benchmark that cannot be loaded: missing file, bad row, unknown name (one line, no item text)."""


@dataclass(frozen=True)
class Item:
    """One question. Maths items carry ``answers``; multiple-choice items ``options`` and ``gold``."""

    id: str
    question: str
    answers: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    gold: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def canonical(self) -> dict[str, Any]:
        """The fields that define the item, for content hashes (metadata excluded)."""
        return {
            "id": self.id,
            "question": self.question,
            "answers": list(self.answers),
            "options": list(self.options),
            "gold": self.gold,
        }


RowParser = Callable[[Mapping[str, Any], int, str | None], Item]


@dataclass(frozen=True)
class Benchmark:
    """Where a benchmark lives and how its rows read. ``kind`` is "math" or "choice"; ``group`` is
    the average it enters ("math" or "general"); ``shuffle_options`` draws a fresh seeded option
    order per (item, sample), as SPIRAL's GPQA runs do (the source lists the correct answer first)."""

    name: str
    kind: str
    group: str
    hub_id: str
    hub_configs: tuple[str | None, ...]
    split: str
    licence: str
    parse_row: RowParser
    gated: bool = False
    shuffle_options: bool = False
    revision: str = "main"
    min_samples: int = 1  # default samples per item when --samples is not given (small sets need more)


@dataclass(frozen=True)
class LoadedBenchmark:
    """A benchmark's items and where they came from (recorded in the manifest)."""

    benchmark: Benchmark
    items: tuple[Item, ...]
    source: dict[str, Any]

    @property
    def items_sha256(self) -> str:
        """Content hash of the normalised items: equal for the same data from a file or the hub."""
        text = json.dumps([item.canonical() for item in self.items], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def head(self, limit: int | None) -> LoadedBenchmark:
        """The first ``limit`` items in source order (all of them for None)."""
        if limit is None:
            return self
        if limit < 1:
            raise DataError(f"--limit must be at least 1, got {limit}")
        return LoadedBenchmark(self.benchmark, self.items[:limit], self.source)


# -- row readers ----------------------------------------------------------------------------------


def _field(row: Mapping[str, Any], number: int, *names: str) -> Any:
    """The first of ``names`` present and non-empty in ``row``; an error names the fields, not values."""
    for name in names:
        value = row.get(name)
        if value is not None and value != "" and value != []:
            return value
    raise DataError(f"row {number} has none of the fields {', '.join(names)}")


def _answer_text(value: Any) -> str:
    """A gold answer as text; integral floats (AMC stores 27.0) lose their '.0'."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _answers(value: Any) -> tuple[str, ...]:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    return tuple(_answer_text(v) for v in values)


def _row_id(row: Mapping[str, Any], number: int, prefix: str, *names: str) -> str:
    for name in names:
        if row.get(name) not in (None, ""):
            return str(row[name])
    return f"{prefix}-{number}"


def _last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text`` (brace-matched), or None."""
    boxes = boxed_contents(text)
    return boxes[-1] if boxes else None


def _math_row(
    question_fields: tuple[str, ...], answer_fields: tuple[str, ...], id_fields: tuple[str, ...]
) -> RowParser:
    def parse(row: Mapping[str, Any], number: int, config: str | None) -> Item:
        prefix = config or "item"
        metadata = {k: row[k] for k in ("subject", "level", "year", "url", "type") if row.get(k) not in (None, "")}
        return Item(
            id=_row_id(row, number, prefix, *id_fields),
            question=str(_field(row, number, *question_fields)),
            answers=_answers(_field(row, number, *answer_fields)),
            metadata=metadata,
        )

    return parse


def _minerva_row(row: Mapping[str, Any], number: int, config: str | None) -> Item:
    """Minerva's gold is its ``answer`` field, else the last box of its ``solution`` (the harness's rule)."""
    answer = row.get("answer")
    if answer in (None, "", []):
        boxed = _last_boxed(str(row.get("solution") or ""))
        if boxed is None:
            raise DataError(f"row {number} has no answer field and no boxed answer in its solution")
        answer = boxed
    return Item(
        id=_row_id(row, number, "minerva", "id", "idx"),
        question=str(_field(row, number, "question", "problem")),
        answers=_answers(answer),
    )


def _olympiad_row(row: Mapping[str, Any], number: int, config: str | None) -> Item:
    """``final_answer`` is a list; any entry may match (SPIRAL's online grader; its offline one used the first)."""
    metadata = {
        k: row[k] for k in ("is_multiple_answer", "unit", "answer_type", "subfield") if row.get(k) not in (None, "")
    }
    return Item(
        id=_row_id(row, number, "olympiadbench", "id"),
        question=str(_field(row, number, "question", "problem")),
        answers=_answers(_field(row, number, "final_answer", "answer")),
        metadata=metadata,
    )


def _mmlu_pro_row(row: Mapping[str, Any], number: int, config: str | None) -> Item:
    options = tuple(str(o) for o in _field(row, number, "options"))
    if not 2 <= len(options) <= len(LETTERS):
        raise DataError(f"row {number} has {len(options)} options; MMLU-Pro items have 2 to {len(LETTERS)}")
    if row.get("answer") not in (None, ""):
        gold = str(row["answer"]).strip().upper()
    else:
        gold = LETTERS[int(_field(row, number, "answer_index"))]
    if gold not in LETTERS[: len(options)]:
        raise DataError(f"row {number}: its answer letter is not one of its {len(options)} options")
    metadata = {k: row[k] for k in ("category", "src") if row.get(k) not in (None, "")}
    return Item(
        id=_row_id(row, number, "mmlu_pro", "question_id", "id"),
        question=str(_field(row, number, "question")),
        options=options,
        gold=gold,
        metadata=metadata,
    )


GPQA_WRONG = ("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def _gpqa_row(row: Mapping[str, Any], number: int, config: str | None) -> Item:
    """The correct answer is listed first here; prompts shuffle the options per (item, sample)."""
    options = (str(_field(row, number, "Correct Answer")).strip(),)
    options += tuple(str(_field(row, number, name)).strip() for name in GPQA_WRONG)
    metadata = {k: row[k] for k in ("Subdomain", "High-level domain") if row.get(k) not in (None, "")}
    return Item(
        id=_row_id(row, number, "gpqa", "Record ID"),
        question=str(_field(row, number, "Question")).strip(),
        options=options,
        gold="A",
        metadata=metadata,
    )


BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark(
            "math500", "math", "math", "HuggingFaceH4/MATH-500", (None,), "test",
            "MIT (Hendrycks MATH via PRM800K)",
            _math_row(("problem", "question"), ("answer",), ("unique_id", "id")),
        ),
        Benchmark(
            "aime24", "math", "math", "HuggingFaceH4/aime_2024", (None,), "train",
            "no licence on the card; problems (c) MAA",
            _math_row(("problem", "question"), ("answer",), ("id",)), min_samples=16,
        ),
        Benchmark(
            "aime25", "math", "math", "opencompass/AIME2025", ("AIME2025-I", "AIME2025-II"), "test",
            "MIT on the card; problems (c) MAA",
            _math_row(("question", "problem"), ("answer",), ("id",)), min_samples=16,
        ),
        Benchmark(
            "amc23", "math", "math", "math-ai/amc23", (None,), "test", "no licence on the card; problems (c) MAA",
            _math_row(("question", "problem"), ("answer",), ("id",)), min_samples=16,
        ),
        Benchmark(
            "minerva", "math", "math", "math-ai/minervamath", (None,), "test",
            "no licence on the card; MIT OCW source is CC BY-NC-SA", _minerva_row,
        ),
        Benchmark(
            "olympiadbench", "math", "math", "Hothan/OlympiadBench", ("OE_TO_maths_en_COMP",), "train", "Apache-2.0",
            _olympiad_row,
        ),
        Benchmark(
            "gpqa_diamond", "choice", "general", "Idavidrein/gpqa", ("gpqa_diamond",), "train",
            "CC-BY-4.0, gated: its terms forbid revealing items in plain text online", _gpqa_row,
            gated=True, shuffle_options=True,
        ),
        Benchmark(
            "mmlu_pro", "choice", "general", "TIGER-Lab/MMLU-Pro", (None,), "test", "MIT", _mmlu_pro_row,
        ),
    )
}  # fmt: skip
MATH_BENCHMARKS = tuple(name for name, b in BENCHMARKS.items() if b.group == "math")
GENERAL_BENCHMARKS = tuple(name for name, b in BENCHMARKS.items() if b.group == "general")


def get_benchmark(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise DataError(f"unknown benchmark {name!r}; valid: {', '.join(BENCHMARKS)}") from None


def parse_benchmark_list(text: str) -> list[str]:
    """``"math500,aime24"`` (or ``all``) as a list of known names, in the order given, without repeats."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(BENCHMARKS)
    if not names:
        raise DataError(f"no benchmarks given; valid: all or a comma-separated list of {', '.join(BENCHMARKS)}")
    for name in names:
        get_benchmark(name)
    return list(dict.fromkeys(names))


# -- files ------------------------------------------------------------------------------------------


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL, CSV or parquet file, as dicts."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = []
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        raise DataError(f"{path}: line {number} is not valid JSON") from None
        return rows
    if suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle))
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise DataError(
                f"{path}: reading parquet needs pyarrow (pip install 'spiral-arena[eval]'); or convert it to JSONL"
            ) from None
        return pq.read_table(path).to_pylist()
    raise DataError(f"{path}: unsupported file type {suffix!r}; use {', '.join(FILE_SUFFIXES)}")


def parse_rows(
    benchmark: Benchmark, rows: Sequence[Mapping[str, Any]], where: str, config: str | None = None
) -> tuple[Item, ...]:
    items = []
    for number, row in enumerate(rows, 1):
        try:
            items.append(benchmark.parse_row(row, number, config))
        except DataError as error:
            raise DataError(f"{where}: {error}") from None
        except (TypeError, ValueError, IndexError) as error:  # its message could quote the row: not shown
            raise DataError(
                f"{where}: row {number} does not have the {benchmark.name} schema ({type(error).__name__})"
            ) from None
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise DataError(f"{where}: item id {item.id!r} appears twice; ids must be unique")
        seen.add(item.id)
    if not items:
        raise DataError(f"{where} holds no items")
    return tuple(items)


def local_file(name: str, data_dir: Path | None) -> Path | None:
    """``data_dir/NAME.jsonl`` (or .parquet, .csv), None when there is none; a DataError for a path of that
    name that is not a file (a directory named math500.jsonl)."""
    if data_dir is None:
        return None
    for suffix in FILE_SUFFIXES:
        path = data_dir / f"{name}{suffix}"
        if path.is_file():
            return path
        if path.exists():
            what = "a directory" if path.is_dir() else "not a regular file"
            raise DataError(f"{path} is {what}, not a data file; put the {name} rows in a file of that name")
    return None


def load_file(benchmark: Benchmark, path: Path) -> LoadedBenchmark:
    items = parse_rows(benchmark, read_rows(path), str(path))
    source = {"source": "file", "path": str(path), "sha256": file_sha256(path), "licence": benchmark.licence}
    provenance = path.with_name(f"{path.name}{PROVENANCE_SUFFIX}")
    if provenance.is_file():  # where the file came from (hub id, revision), kept beside it by whoever fetched it
        try:
            source["provenance"] = json.loads(provenance.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            raise DataError(f"{provenance} is not valid JSON") from None
    return LoadedBenchmark(benchmark, items, source)


def hub_available() -> bool:
    """The optional hub path: ``datasets`` installed and no offline switch set."""
    if any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")):
        return False
    try:
        import datasets  # noqa: F401
    except ImportError:
        return False
    return True


def load_hub(benchmark: Benchmark) -> LoadedBenchmark:
    import datasets

    items: list[Item] = []
    fingerprints = []
    for config in benchmark.hub_configs:
        where = f"{benchmark.hub_id}" + (f" ({config})" if config else "")
        try:
            table = datasets.load_dataset(benchmark.hub_id, config, split=benchmark.split, revision=benchmark.revision)
        except Exception as error:  # network, auth, missing config: one line, then the local way
            raise DataError(
                f"could not load {where} from the hub ({type(error).__name__}); {_local_hint(benchmark)}"
            ) from None
        fingerprints.append(getattr(table, "_fingerprint", None))
        items += parse_rows(benchmark, list(table), where, config if len(benchmark.hub_configs) > 1 else None)
    source = {
        "source": "hub",
        "hub_id": benchmark.hub_id,
        "configs": [c for c in benchmark.hub_configs if c],
        "split": benchmark.split,
        "revision": benchmark.revision,
        "fingerprints": fingerprints,
        "licence": benchmark.licence,
    }
    return LoadedBenchmark(benchmark, tuple(items), source)


def _local_hint(benchmark: Benchmark) -> str:
    names = " or ".join(f"{benchmark.name}{s}" for s in FILE_SUFFIXES)
    return f"put {names} (the hub dataset's own columns) in --data-dir DIR"


def load_benchmark(name: str, data_dir: Path | None = None, gpqa_path: Path | None = None) -> LoadedBenchmark:
    """A benchmark's items: the local file first, then the hub (never for gated GPQA)."""
    benchmark = get_benchmark(name)
    if benchmark.gated and gpqa_path is not None:
        if not gpqa_path.is_file():
            raise DataError(f"--gpqa-path {gpqa_path} is not a file")
        return load_file(benchmark, gpqa_path)
    path = local_file(name, data_dir)
    if path is not None:
        return load_file(benchmark, path)
    looked = f" (looked in {data_dir})" if data_dir is not None else " (no --data-dir given)"
    configs = [c for c in benchmark.hub_configs if c]
    hub = benchmark.hub_id + (f" config {', '.join(configs)}" if configs else "")
    if benchmark.gated:
        raise DataError(
            f"{name} is gated and never downloaded here: accept its terms at huggingface.co/datasets/"
            f"{benchmark.hub_id}, save the {benchmark.hub_configs[0]} CSV yourself, and pass --gpqa-path FILE "
            f"or put it in --data-dir as {name}.csv{looked}"
        )
    if hub_available():
        return load_hub(benchmark)
    raise DataError(
        f"no local data for {name}{looked}: {_local_hint(benchmark)}, or install the 'datasets' package and go "
        f"online to load {hub} (split {benchmark.split}) from the Hugging Face hub"
    )
