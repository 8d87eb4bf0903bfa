"""One evaluation run: data, prompts, generation, grading, and the three files it leaves behind.

``run_eval`` writes into the output directory:

- ``samples.jsonl``: one line per (item, sample) with the prompt, the response (cut at the preset's
  stop strings), the answer read from it, the verdict and its status, the gold answer, response tokens
  and whether generation ended on its own. GPQA is gated: its lines hold the item id and the sha256 of
  the prompt instead of the prompt, and the response only as a sha256 unless ``keep_gated_responses``
  (a response may quote the question).
- ``results.json``: per benchmark first-sample accuracy, mean@n, pass@k with 95% intervals, no-answer,
  time-out and truncation rates, mean response tokens; the maths, general and overall macro averages.
- ``manifest.json``: see ``spiral_arena.evals.manifest``.

``regrade`` re-reads the stored responses and grades them again (another extraction mode, a newer
grader) without generating anything.

A run directory is checked against its manifest by every reader (``read_run``): ``samples.jsonl`` must
hold each (benchmark, item, sample) the manifest lists once and nothing else; a truncated or edited
file is one error naming the file and the counts, never a score in which missing samples count as
wrong. An API request that fails for good does not discard the run: the finished samples are written
with a manifest marked ``incomplete`` (no ``results.json``), and ``--resume`` asks for the missing ones.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from spiral_arena.evals.answers import LETTERS
from spiral_arena.evals.data import (
    BENCHMARKS,
    GENERAL_BENCHMARKS,
    MATH_BENCHMARKS,
    DataError,
    Item,
    LoadedBenchmark,
    load_benchmark,
)
from spiral_arena.evals.generate import Advance, Generation, Request, make_backend, model_kind
from spiral_arena.evals.grading import (
    MathGrader,
    MathTask,
    Verdict,
    choice_grader_info,
    grade_choice,
    math_grader_info,
    require_math_verify,
    shared_grader,
)
from spiral_arena.evals.manifest import differing_fields, model_identity, package_identity, protocol_hash, write_json
from spiral_arena.evals.metrics import RESAMPLES, benchmark_metrics, item_scores, macro_average
from spiral_arena.evals.presets import (
    KINDS,
    Preset,
    apply_overrides,
    apply_stop,
    load_preset,
    preset_from_record,
    render,
    text_sha256,
)
from spiral_arena.models import Sampling

SAMPLES_FILE = "samples.jsonl"
RESULTS_FILE = "results.json"
MANIFEST_FILE = "manifest.json"


@dataclass
class EvalOptions:
    """Everything ``spiral-arena eval`` takes; ``overrides`` are preset keys (``--set`` and the sampling flags)."""

    model: str
    benchmarks: list[str]
    output_dir: Path
    preset: str = "spiral-offline"
    overrides: dict[str, str] = field(default_factory=dict)
    limit: int | None = None
    seed: int = 0
    data_dir: Path | None = None
    gpqa_path: Path | None = None
    device: str | None = None
    batch_size: int = 32
    concurrency: int = 8
    request_timeout: float = 600.0
    max_model_len: int | None = None
    grader_workers: int = 2
    grader_timeout_s: float = 5.0
    keep_gated_responses: bool = False
    resamples: int = RESAMPLES
    overwrite: bool = False
    resume: bool = False
    progress: bool = True


class IncompleteRun(RuntimeError):
    """Some requests failed for good: the finished samples are written, and ``--resume`` asks for the rest."""


@dataclass(frozen=True)
class Planned:
    """One generation request and what grading it needs."""

    benchmark: str
    item: Item
    sample: int
    request: Request
    gold: str | None = None  # the correct letter as shown (after any shuffle)
    option_order: tuple[int, ...] | None = None


def option_order(item_id: str, sample: int, seed: int, count: int) -> tuple[int, ...]:
    """A seeded permutation of an item's options for one sample (stable across runs and machines)."""
    order = list(range(count))
    random.Random(f"{seed}:{item_id}:{sample}").shuffle(order)
    return tuple(order)


def default_samples(preset: Preset, name: str) -> int:
    return preset.samples_by_benchmark.get(name, preset.samples)


def samples_per_item(preset: Preset, name: str, explicit: bool) -> int:
    """``--samples`` when given; else the preset's count for the benchmark, raised to the benchmark's
    minimum (16 on AIME/AMC, where one sample cannot separate a few points)."""
    return preset.samples if explicit else max(default_samples(preset, name), BENCHMARKS[name].min_samples)


def plan(loaded: LoadedBenchmark, preset: Preset, n: int, seed: int) -> list[Planned]:
    benchmark = loaded.benchmark
    fmt = preset.prompt_format(benchmark.kind)
    out = []
    for item in loaded.items:
        for sample in range(n):
            if benchmark.kind == "math":
                out.append(Planned(benchmark.name, item, sample, Request(render(fmt, item.question), fmt.format)))
                continue
            order = tuple(range(len(item.options)))
            if benchmark.shuffle_options:
                order = option_order(item.id, sample, seed, len(item.options))
            options = tuple(item.options[k] for k in order)
            gold = LETTERS[order.index(LETTERS.index(item.gold))]
            request = Request(render(fmt, item.question, options), fmt.format)
            shuffled = order if benchmark.shuffle_options else None
            out.append(Planned(benchmark.name, item, sample, request, gold, shuffled))
    return out


def grade(
    planned: Sequence[Planned],
    responses: Sequence[str],
    preset: Preset,
    grader: MathGrader | None,
    advance: Advance | None = None,
) -> list[Verdict]:
    """Verdicts in order: maths through the process pool, multiple choice here."""
    verdicts: list[Verdict | None] = [None] * len(planned)
    math_index = [i for i, p in enumerate(planned) if BENCHMARKS[p.benchmark].kind == "math"]
    for i, p in enumerate(planned):
        if BENCHMARKS[p.benchmark].kind == "choice":
            verdicts[i] = grade_choice(responses[i], p.gold or "", len(p.item.options), preset.choice.extraction)
            if advance:
                advance(1)
    if math_index:
        if grader is None:
            raise ValueError("maths items need a MathGrader")
        tasks = [MathTask(responses[i], planned[i].item.answers, preset.math.extraction) for i in math_index]
        for i, verdict in zip(math_index, grader.grade(tasks, advance), strict=True):
            verdicts[i] = verdict
    return [v for v in verdicts if v is not None]


def sample_record(
    p: Planned, response: str, generation: Generation, verdict: Verdict, keep_gated_responses: bool
) -> dict[str, Any]:
    gated = BENCHMARKS[p.benchmark].gated
    record: dict[str, Any] = {"benchmark": p.benchmark, "item_id": p.item.id, "sample": p.sample}
    if gated:
        record["prompt_sha256"] = text_sha256(p.request.prompt)
        record["response"] = response if keep_gated_responses else None
        record["response_sha256"] = text_sha256(response)
    else:
        record["prompt"] = p.request.prompt
        record["response"] = response
    record |= {
        "extracted": verdict.extracted,
        "correct": verdict.correct,
        "status": verdict.status,
        "gold": list(p.item.answers) if p.gold is None else p.gold,
        "tokens": generation.tokens,
        "finished": generation.finished,
    }
    if p.gold is not None:
        record["option_count"] = len(p.item.options)
    if p.option_order is not None:
        record["option_order"] = list(p.option_order)
    return record


# -- results ----------------------------------------------------------------------------------------


def correctness(records: Sequence[dict[str, Any]], item_ids: Sequence[str], n: int) -> np.ndarray:
    """The [items, n] verdict matrix of one benchmark, items in the manifest's order."""
    row = {item_id: i for i, item_id in enumerate(item_ids)}
    matrix = np.zeros((len(item_ids), n), dtype=bool)
    for r in records:
        matrix[row[r["item_id"]], r["sample"]] = r["correct"]
    return matrix


def average_entry(scores: dict[str, np.ndarray], members: Sequence[str], seed: int, resamples: int):
    present = {name: scores[name] for name in members if name in scores}
    entry = macro_average(present, seed, resamples)
    if entry is not None:
        entry["complete"] = len(present) == len(members)
        entry["of"] = list(members)
    return entry


def compute_results(records: Sequence[dict[str, Any]], protocol: dict[str, Any], seed: int, resamples: int) -> dict:
    """results.json from stored samples and the protocol (item order, samples per item, metrics)."""
    headline = {kind: protocol["preset"][kind]["metric"] for kind in KINDS}
    by_benchmark: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_benchmark.setdefault(r["benchmark"], []).append(r)
    benchmarks, scores = {}, {}
    for name, info in protocol["benchmarks"].items():
        rows = by_benchmark.get(name, [])
        matrix = correctness(rows, info["item_ids"], protocol["samples_per_item"][name])
        entry = benchmark_metrics(matrix, name, seed, resamples)
        metric = headline[BENCHMARKS[name].kind]
        scores[name] = item_scores(matrix, metric)
        entry["headline_metric"] = metric
        entry["score"] = entry["first_sample_accuracy" if metric == "first-sample" else "mean_at_n"]
        statuses = [r["status"] for r in rows]
        tokens = [r["tokens"] for r in rows if r["tokens"] is not None]
        finished = [r["finished"] for r in rows if r["finished"] is not None]
        entry |= {
            "group": BENCHMARKS[name].group,
            "no_answer_rate": statuses.count("no-answer") / max(1, len(rows)),
            "timeouts": statuses.count("timeout"),
            "grader_errors": statuses.count("error"),
            "truncation_rate": (finished.count(False) / len(finished)) if finished else None,
            "mean_response_tokens": float(np.mean(tokens)) if tokens else None,
        }
        benchmarks[name] = entry
    averages = {
        "math": average_entry(scores, MATH_BENCHMARKS, seed, resamples),
        "general": average_entry(scores, GENERAL_BENCHMARKS, seed, resamples),
        "overall": average_entry(scores, list(BENCHMARKS), seed, resamples),
    }
    return {"headline_metrics": headline, "benchmarks": benchmarks, "averages": averages}


def small_set_notes(preset: Preset, names: Sequence[str], n_by_name: dict[str, int], items: dict[str, int]):
    return [
        f"{name}: {n_by_name[name]} samples per item by default (not the preset's {default_samples(preset, name)}): "
        f"with {items[name]} items one sample cannot separate a few points; --samples N sets it explicitly"
        for name in names
        if n_by_name[name] > default_samples(preset, name)
    ]


# -- the run ----------------------------------------------------------------------------------------


def _progress(total: int, description: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=description, unit="sample", disable=not enabled, dynamic_ncols=True)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def prepare_output(directory: Path, overwrite: bool) -> None:
    if (directory / SAMPLES_FILE).exists() and not overwrite:
        raise DataError(
            f"{directory} already holds a run ({SAMPLES_FILE}); choose another --output-dir, --resume it or --overwrite"
        )
    directory.mkdir(parents=True, exist_ok=True)


def write_samples(path: Path, records: Sequence[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    tmp.replace(path)


def _key(benchmark: str, item_id: str, sample: int) -> tuple[str, str, int]:
    return (benchmark, item_id, sample)


def _resumed(options: EvalOptions, protocol: dict[str, Any]) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The samples a run in ``options.output_dir`` already holds, by key, after checking that it is this run:
    the same protocol (prompts, items, samples, grader) and model."""
    if options.overwrite:
        raise DataError("--resume continues the run in --output-dir and --overwrite replaces it; give one of them")
    manifest, records = read_run(options.output_dir, missing_ok=True)
    if manifest["protocol_hash"] != protocol_hash(protocol):
        fields = differing_fields(manifest["protocol"], protocol)
        raise DataError(
            f"--resume: {options.output_dir / MANIFEST_FILE} was written for another protocol (differing: "
            f"{', '.join(fields[:6])}); give the options of that run"
        )
    model = model_identity(options.model)["spec"]
    if manifest["model"]["spec"] != model:
        raise DataError(f"--resume: the run in {options.output_dir} is of {manifest['model']['spec']}, not {model}")
    return {_key(r["benchmark"], r["item_id"], r["sample"]): r for r in records}


def run_eval(options: EvalOptions) -> tuple[Path, dict[str, Any]]:
    """Run the evaluation and write its files; returns the output directory and the results. With
    ``options.resume``, only the samples the run in ``output_dir`` lacks are generated. Requests that fail
    for good raise ``IncompleteRun`` once the finished samples are written."""
    started, clock = _now(), time.perf_counter()
    overrides = dict(options.overrides)
    preset = apply_overrides(load_preset(options.preset), overrides)
    explicit_samples = "samples" in overrides
    kind = model_kind(options.model)
    loaded = {
        name: load_benchmark(name, options.data_dir, options.gpqa_path).head(options.limit)
        for name in options.benchmarks
    }
    kinds_used = {b.benchmark.kind for b in loaded.values()}
    if kind == "api":
        raw = [k for k in sorted(kinds_used) if preset.prompt_format(k).format == "raw"]
        if raw:
            raise DataError(
                f"preset {preset.name} writes raw {'/'.join(raw)} prompts, but an API endpoint takes chat messages: "
                f"use --preset chat, or --set {raw[0]}.format=chat"
            )
    if "math" in kinds_used:
        require_math_verify()
    n_by_name = {name: samples_per_item(preset, name, explicit_samples) for name in loaded}
    protocol = build_protocol(preset, overrides, loaded, n_by_name, options)
    stored = _resumed(options, protocol) if options.resume else {}
    if not options.resume:
        prepare_output(options.output_dir, options.overwrite)

    everything = [p for name, b in loaded.items() for p in plan(b, preset, n_by_name[name], options.seed)]
    planned = [p for p in everything if _key(p.benchmark, p.item.id, p.sample) not in stored]
    sampling = Sampling(preset.temperature, preset.top_p, preset.max_new_tokens)
    with ExitStack() as stack:
        # the grading workers start first, so their imports overlap generation
        grader = shared_grader(options.grader_workers, options.grader_timeout_s) if "math" in kinds_used else None
        backend = make_backend(
            options.model,
            seed=options.seed,
            device=options.device,
            batch_size=options.batch_size,
            concurrency=options.concurrency,
            request_timeout=options.request_timeout,
            max_model_len=options.max_model_len,
        )
        stack.callback(backend.close)
        generation_clock = time.perf_counter()
        with _progress(len(planned), "generating", options.progress) as bar:
            requests = [p.request for p in planned]
            generations = backend.generate(requests, sampling, options.seed, bar.update) if requests else []
        generation_s = time.perf_counter() - generation_clock
        failures = [g.error for g in generations if g.error is not None]
        answered = [(p, g) for p, g in zip(planned, generations, strict=True) if g.error is None]
        responses = [apply_stop(g.text, preset.prompt_format(BENCHMARKS[p.benchmark].kind).stop) for p, g in answered]
        grading_clock = time.perf_counter()
        with _progress(len(answered), "grading", options.progress) as bar:
            verdicts = grade([p for p, _ in answered], responses, preset, grader, bar.update)
        grading_s = time.perf_counter() - grading_clock
        engine = backend.describe()

    for (p, g), r, v in zip(answered, responses, verdicts, strict=True):
        stored[_key(p.benchmark, p.item.id, p.sample)] = sample_record(p, r, g, v, options.keep_gated_responses)
    records = [r for p in everything if (r := stored.get(_key(p.benchmark, p.item.id, p.sample))) is not None]
    manifest = {
        "protocol": protocol,
        "protocol_hash": protocol_hash(protocol),
        "seed": options.seed,
        "resamples": options.resamples,
        "model": model_identity(options.model),
        "engine": engine,
        "data": {name: b.source for name, b in loaded.items()},
        "gated_responses_stored": options.keep_gated_responses,
        "package": package_identity(),
        "timing": {
            "started_at": started,
            "finished_at": _now(),
            "wall_time_s": time.perf_counter() - clock,
            "generation_s": generation_s,
            "grading_s": grading_s,
        },
    }
    write_samples(options.output_dir / SAMPLES_FILE, records)
    if failures:
        missing = len(everything) - len(records)
        manifest["incomplete"] = {"missing_samples": missing, "error": failures[0]}
        (options.output_dir / RESULTS_FILE).unlink(missing_ok=True)  # no scores for a run with samples missing
        write_json(options.output_dir / MANIFEST_FILE, manifest)
        raise IncompleteRun(
            f"{missing} of {len(everything)} samples have no response ({failures[0]}); the {len(records)} finished "
            f"samples are kept in {options.output_dir}: run the same command with --resume to ask for the rest"
        )
    results = compute_results(records, protocol, options.seed, options.resamples)
    results["notes"] = small_set_notes(preset, list(loaded), n_by_name, {k: len(v.items) for k, v in loaded.items()})
    results["protocol_hash"] = manifest["protocol_hash"]
    write_json(options.output_dir / RESULTS_FILE, results)
    write_json(options.output_dir / MANIFEST_FILE, manifest)
    return options.output_dir, results


def build_protocol(
    preset: Preset,
    overrides: dict[str, str],
    loaded: dict[str, LoadedBenchmark],
    n_by_name: dict[str, int],
    options: EvalOptions,
) -> dict[str, Any]:
    """The part of the manifest that decides comparability (hashed into ``protocol_hash``)."""
    return {
        "preset": preset.to_dict(),
        "overrides": dict(sorted(overrides.items())),
        "template_sha256": preset.template_hashes(),
        "samples_per_item": n_by_name,
        "limit": options.limit,
        "benchmarks": {
            name: {
                "items": len(b.items),
                "item_ids": [item.id for item in b.items],
                "items_sha256": b.items_sha256,
                "option_shuffle": "per (item, sample), seeded" if b.benchmark.shuffle_options else None,
            }
            for name, b in loaded.items()
        },
        "grader": {
            "math": math_grader_info(preset.math.extraction, options.grader_timeout_s),
            "choice": choice_grader_info(preset.choice.extraction),
        },
    }


# -- regrade --------------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    """A JSON file of a run, or a DataError naming it (a truncated or hand-edited file)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise DataError(f"{path} is not UTF-8 text; it is not a file an eval run wrote") from None
    except json.JSONDecodeError as error:
        raise DataError(f"{path} is not valid JSON (line {error.lineno}): truncated or edited?") from None


def read_manifest(directory: Path) -> dict[str, Any]:
    if not (directory / MANIFEST_FILE).is_file() or not (directory / SAMPLES_FILE).is_file():
        raise DataError(f"{directory} is not an eval run: it needs {MANIFEST_FILE} and {SAMPLES_FILE}")
    manifest = _read_json(directory / MANIFEST_FILE)
    protocol = manifest.get("protocol") if isinstance(manifest, dict) else None
    if not isinstance(protocol, dict) or not {"benchmarks", "samples_per_item"} <= protocol.keys():
        raise DataError(f"{directory / MANIFEST_FILE} is not an eval manifest: it lists no benchmarks and samples")
    return manifest


def read_samples(path: Path) -> list[dict[str, Any]]:
    """Every record of a ``samples.jsonl``, or a DataError naming the file and the line that is not JSON."""
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    raise DataError(f"{path}: line {number} is not valid JSON (a truncated or edited file?)") from None
                if not isinstance(record, dict):
                    raise DataError(f"{path}: line {number} is not a sample record")
                records.append(record)
    return records


def complete_items(manifest: dict[str, Any], records: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """For each benchmark, the manifest's items (in its order) whose every sample the records hold once."""
    protocol = manifest["protocol"]
    seen = Counter((r.get("benchmark"), r.get("item_id"), r.get("sample")) for r in records)
    return {
        name: [
            item
            for item in info["item_ids"]
            if all(seen[(name, item, s)] == 1 for s in range(protocol["samples_per_item"][name]))
        ]
        for name, info in protocol["benchmarks"].items()
    }


def sample_problem(manifest: dict[str, Any], records: Sequence[dict[str, Any]], missing_ok: bool = False) -> str | None:
    """How ``records`` differ from what the manifest lists (each of its items' samples once, nothing else),
    or None: "holds 3 samples where manifest.json lists 6 (3 missing: mmlu_pro 3)"."""
    protocol = manifest["protocol"]
    expected = {
        (name, item, s)
        for name, info in protocol["benchmarks"].items()
        for item in info["item_ids"]
        for s in range(protocol["samples_per_item"][name])
    }
    seen = Counter((r.get("benchmark"), r.get("item_id"), r.get("sample")) for r in records)
    extra = sum(count - (key in expected) for key, count in seen.items())
    missing = Counter(name for name, item, s in expected if (name, item, s) not in seen)
    if not extra and (missing_ok or not missing):
        return None
    parts = []
    if missing:
        parts.append(f"{missing.total()} missing: " + ", ".join(f"{name} {n}" for name, n in missing.items()))
    if extra:
        parts.append(f"{extra} extra or repeated")
    return f"holds {len(records)} samples where {MANIFEST_FILE} lists {len(expected)} ({'; '.join(parts)})"


def read_run(directory: Path, missing_ok: bool = False, hint: str = "") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run's manifest and samples, checked against each other (``sample_problem``); one DataError line
    naming the file otherwise, followed by ``hint``. ``missing_ok``: samples may be missing (a run to
    resume, or one read for the items it has complete), never extra or repeated."""
    manifest = read_manifest(directory)
    records = read_samples(directory / SAMPLES_FILE)
    problem = sample_problem(manifest, records, missing_ok)
    if problem is not None:
        if not hint and "incomplete" in manifest:
            hint = "; the run stopped before it was complete: run its command again with --resume"
        raise DataError(f"{directory / SAMPLES_FILE} {problem}{hint}")
    return manifest, records


def regrade(
    directory: Path,
    math_extraction: str | None = None,
    choice_extraction: str | None = None,
    grader_workers: int = 2,
    grader_timeout_s: float | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Grade a run's stored responses again and rewrite its samples, results and manifest. A run whose
    samples do not match its manifest is refused before anything is rewritten."""
    manifest, records = read_run(directory, hint="; complete it (spiral-arena eval ... --resume) before regrading")
    protocol = manifest["protocol"]
    overrides = {}
    if math_extraction:
        overrides["math.extraction"] = math_extraction
    if choice_extraction:
        overrides["choice.extraction"] = choice_extraction
    old = preset_from_record(protocol["preset"])
    preset = apply_overrides(old, overrides)
    timeout_s = grader_timeout_s or protocol["grader"]["math"]["timeout_s"]
    hidden = [r for r in records if r["response"] is None]
    if hidden and preset.choice.extraction != old.choice.extraction:
        raise DataError(
            f"{len(hidden)} gated samples were stored without their responses, so they cannot be graded with "
            f"another choice extraction; keep {old.choice.extraction!r} (or rerun with --keep-gated-responses)"
        )
    regradable = [r for r in records if r["response"] is not None]
    planned = [_planned_from_record(r) for r in regradable]
    has_math = any(BENCHMARKS[p.benchmark].kind == "math" for p in planned)
    grader = shared_grader(grader_workers, timeout_s) if has_math else None
    with _progress(len(planned), "grading", progress) as bar:
        verdicts = grade(planned, [r["response"] for r in regradable], preset, grader, bar.update)
    for record, verdict in zip(regradable, verdicts, strict=True):
        record |= {"extracted": verdict.extracted, "correct": verdict.correct, "status": verdict.status}
    protocol["preset"] = preset.to_dict()
    protocol["overrides"] = dict(sorted({**protocol["overrides"], **overrides}.items()))
    protocol["grader"] = {
        "math": math_grader_info(preset.math.extraction, timeout_s),
        "choice": choice_grader_info(preset.choice.extraction),
    }
    previous_hash = manifest["protocol_hash"]
    manifest["protocol_hash"] = protocol_hash(protocol)
    manifest["timing"]["regraded_at"] = _now()
    manifest["regraded_from_protocol_hash"] = previous_hash
    results = compute_results(records, protocol, manifest["seed"], manifest.get("resamples", RESAMPLES))
    old_results = _read_json(directory / RESULTS_FILE) if (directory / RESULTS_FILE).is_file() else {}
    results["notes"] = old_results.get("notes", [])
    if hidden:
        results["notes"].append(f"{len(hidden)} gated samples kept their verdicts (responses not stored)")
    results["protocol_hash"] = manifest["protocol_hash"]
    write_samples(directory / SAMPLES_FILE, records)
    write_json(directory / RESULTS_FILE, results)
    write_json(directory / MANIFEST_FILE, manifest)
    return results


def _planned_from_record(record: dict[str, Any]) -> Planned:
    """Enough of a Planned to grade a stored sample again."""
    name = record["benchmark"]
    if BENCHMARKS[name].kind == "math":
        item = Item(record["item_id"], "", answers=tuple(record["gold"]))
        return Planned(name, item, record["sample"], Request("", "raw"))
    item = Item(record["item_id"], "", options=("",) * record["option_count"], gold=record["gold"])
    return Planned(name, item, record["sample"], Request("", "raw"), gold=record["gold"])
