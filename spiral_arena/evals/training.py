"""A reasoning check the trainer can run every ``eval_every`` steps on the learner's own engine.

``reasoning_eval(policy.engine, tokenizer, spec="math500:32", seed=0, data_dir=...)`` draws a fixed,
seeded subset of K items per benchmark (the same items at every call, so a change between steps
is the model's, not the draw's), renders them with a preset (default ``spiral-online``, SPIRAL's
in-training template), generates through the engine the trainer already holds (token ids in,
``Completion`` objects out: ``HFEngine`` or an awake ``VLLMEngine``), grades them like a full run,
and returns flat metrics for the trainer's log:

    reasoning/math500/accuracy, reasoning/math500/no_answer_rate, reasoning/math500/truncation_rate,
    reasoning/math500/response_tokens_mean, and reasoning/average/accuracy over the benchmarks.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from spiral_arena.evals.data import DataError, LoadedBenchmark, get_benchmark, load_benchmark
from spiral_arena.evals.generate import encode, run_engine
from spiral_arena.evals.grading import MathGrader, shared_grader
from spiral_arena.evals.presets import apply_overrides, apply_stop, load_preset
from spiral_arena.evals.run import default_samples, grade, plan
from spiral_arena.models import Sampling


def parse_eval_spec(spec: str) -> list[tuple[str, int | None]]:
    """``"math500:32,aime24"`` -> [("math500", 32), ("aime24", None)] (None: every item)."""
    out = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        name, _, count = part.partition(":")
        get_benchmark(name)
        if count and (not count.isdigit() or int(count) < 1):
            raise DataError(f"reasoning eval spec {part!r}: the item count after ':' must be a positive integer")
        out.append((name, int(count) if count else None))
    if not out:
        raise DataError("reasoning eval spec is empty; e.g. math500:32 or math500:32,amc23")
    return out


def seeded_subset(loaded: LoadedBenchmark, count: int | None, seed: int) -> LoadedBenchmark:
    """``count`` items drawn with ``seed`` (kept in source order); all of them when count is None or too big."""
    if count is None or count >= len(loaded.items):
        return loaded
    chosen = sorted(random.Random(f"{seed}:{loaded.benchmark.name}").sample(range(len(loaded.items)), count))
    return LoadedBenchmark(loaded.benchmark, tuple(loaded.items[i] for i in chosen), loaded.source)


def reasoning_eval(
    engine,
    tokenizer,
    spec: str = "math500:32",
    seed: int = 0,
    *,
    data_dir: str | Path | None = None,
    gpqa_path: str | Path | None = None,
    preset: str = "spiral-online",
    overrides: dict[str, str] | None = None,
    batch_size: int = 32,
    grader: MathGrader | None = None,
    grader_timeout_s: float = 5.0,
) -> dict[str, float]:
    """Metrics of the engine's model on a fixed seeded subset; see the module docstring for the keys.

    ``overrides`` are preset keys (``{"max_new_tokens": "1024"}``); each item gets the preset's samples
    for its benchmark (1 in ``spiral-online``), and accuracy is the mean over them. ``batch_size``
    prompts go to the engine per call (raise it for vLLM, which batches internally). Maths is graded
    by ``grader``, by default a pool started at the first call and kept for the life of the process.
    """
    protocol = apply_overrides(load_preset(preset), overrides or {})
    data = Path(data_dir) if data_dir is not None else None
    gpqa = Path(gpqa_path) if gpqa_path is not None else None
    subsets = [seeded_subset(load_benchmark(name, data, gpqa), count, seed) for name, count in parse_eval_spec(spec)]
    planned = [
        p for loaded in subsets for p in plan(loaded, protocol, default_samples(protocol, loaded.benchmark.name), seed)
    ]
    prompt_ids = encode(tokenizer, [p.request for p in planned])
    sampling = Sampling(protocol.temperature, protocol.top_p, protocol.max_new_tokens)
    generations = run_engine(engine, tokenizer, prompt_ids, sampling, seed, batch_size)
    responses = [
        apply_stop(g.text, protocol.prompt_format(get_benchmark(p.benchmark).kind).stop)
        for p, g in zip(planned, generations, strict=True)
    ]
    if grader is None and any(loaded.benchmark.kind == "math" for loaded in subsets):
        grader = shared_grader(timeout_s=grader_timeout_s)
    verdicts = grade(planned, responses, protocol, grader)
    metrics: dict[str, float] = {}
    accuracies = []
    for loaded in subsets:
        name = loaded.benchmark.name
        rows = [i for i, p in enumerate(planned) if p.benchmark == name]
        accuracy = float(np.mean([verdicts[i].correct for i in rows]))
        accuracies.append(accuracy)
        metrics[f"reasoning/{name}/accuracy"] = accuracy
        metrics[f"reasoning/{name}/no_answer_rate"] = float(np.mean([verdicts[i].status == "no-answer" for i in rows]))
        metrics[f"reasoning/{name}/truncation_rate"] = float(np.mean([not generations[i].finished for i in rows]))
        metrics[f"reasoning/{name}/response_tokens_mean"] = float(np.mean([generations[i].tokens for i in rows]))
    metrics["reasoning/average/accuracy"] = float(np.mean(accuracies))
    return metrics
