"""``spiral-arena eval [regrade|compare]``: arguments here, work in the modules they call.

Without a subcommand it runs an evaluation (``--model`` and ``--benchmarks``); ``regrade DIR`` grades
a run's stored responses again; ``compare RUN_A RUN_B`` prints paired deltas and can plot them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spiral_arena.evals.data import BENCHMARKS

PRESET_HELP = "spiral-offline, spiral-online, fewshot-4, chat, or a .toml file of the same shape"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Reasoning-transfer evaluation on maths and science benchmarks. Without a subcommand: run one "
        "(--model, --benchmarks). Data comes from --data-dir (NAME.jsonl/.parquet/.csv) or, with the "
        "'datasets' package and a network, from the Hugging Face hub; GPQA only from a file you supply."
    )
    parser.add_argument("--model", help="hf:PATH, vllm:PATH, or PROVIDER:MODEL[@URL] (openai, gemini, ...)")
    parser.add_argument(
        "--benchmarks", default="all", help=f"comma-separated, or all (default): {','.join(BENCHMARKS)}"
    )
    parser.add_argument("--preset", default="spiral-offline", help=f"protocol preset: {PRESET_HELP}")
    parser.add_argument(
        "--samples", type=int, help="samples per item for every benchmark (default: the preset's; 16+ on AIME/AMC)"
    )
    parser.add_argument("--temperature", type=float, help="override the preset's temperature")
    parser.add_argument("--top-p", type=float, help="override the preset's top-p")
    parser.add_argument("--max-new-tokens", type=int, help="override the preset's max new tokens")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any preset field, e.g. math.shots=0, choice.extraction=default, math.template=@file.txt",
    )
    parser.add_argument("--output-dir", type=Path, help="where the run is written (default: runs/eval/MODEL-PRESET)")
    parser.add_argument("--limit", type=int, help="only the first K items of each benchmark")
    parser.add_argument("--seed", type=int, default=0, help="sampling, option shuffles and bootstrap (default: 0)")
    parser.add_argument("--data-dir", type=Path, help="folder of benchmark files named NAME.jsonl/.parquet/.csv")
    parser.add_argument("--gpqa-path", type=Path, help="your own copy of GPQA-Diamond (csv/jsonl/parquet); gated")
    parser.add_argument(
        "--keep-gated-responses",
        action="store_true",
        help="store GPQA responses in samples.jsonl (they may quote items: keep the run private)",
    )
    parser.add_argument("--device", help="hf: torch device (default: cuda when available, else cpu)")
    parser.add_argument("--batch-size", type=int, default=32, help="hf: prompts per generation batch (default: 32)")
    parser.add_argument("--max-model-len", type=int, help="vllm: context length (default: the trainer's, 12800)")
    parser.add_argument("--concurrency", type=int, default=8, help="API: requests in flight (default: 8)")
    parser.add_argument("--request-timeout", type=float, default=600.0, help="API: seconds per request (default 600)")
    _grader_arguments(parser)
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for intervals (default 1000)")
    parser.add_argument("--overwrite", action="store_true", help="replace a run already in --output-dir")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="complete the run in --output-dir (one stopped by failed requests): ask only for its missing samples, "
        "with the same options",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")

    sub = parser.add_subparsers(dest="eval_command")
    regrade = sub.add_parser("regrade", help="grade a run's stored responses again (no generation)")
    regrade.add_argument("run_dir", type=Path)
    regrade.add_argument("--math-extraction", help="last-box-or-text, last-box or all-boxes")
    regrade.add_argument("--choice-extraction", help="default or spiral")
    _grader_arguments(regrade, timeout_default=None)
    regrade.add_argument("--no-progress", action="store_true", help="no progress bar")

    compare = sub.add_parser("compare", help="paired per-benchmark deltas between two runs (B - A)")
    compare.add_argument("run_a", type=Path)
    compare.add_argument("run_b", type=Path)
    compare.add_argument("--metric", help="first-sample or mean for every benchmark (default: the preset's)")
    compare.add_argument("--allow-protocol-mismatch", action="store_true", help="compare runs of different protocols")
    compare.add_argument(
        "--common-items",
        action="store_true",
        help="compare only the items both runs have complete (a run with samples missing is refused otherwise)",
    )
    compare.add_argument("--png", type=Path, help="write a plot of the deltas here")
    compare.add_argument("--json", type=Path, help="write the comparison as JSON here")
    compare.add_argument("--bootstrap", type=int, default=1000, help="paired bootstrap resamples (default 1000)")
    compare.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")


def _grader_arguments(parser: argparse.ArgumentParser, timeout_default: float | None = 5.0) -> None:
    parser.add_argument("--grader-workers", type=int, default=2, help="maths grading processes (default: 2)")
    parser.add_argument(
        "--grader-timeout",
        type=float,
        default=timeout_default,
        help="seconds per maths item before it counts as a time-out"
        + (f" (default: {timeout_default:g})" if timeout_default else " (default: the run's)"),
    )


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    from spiral_arena.evals.presets import parse_overrides

    overrides = parse_overrides(args.set)
    for key in ("samples", "temperature", "top_p", "max_new_tokens"):  # flags named like the preset keys
        if getattr(args, key) is not None:
            overrides[key] = str(getattr(args, key))
    return overrides


def _default_output(model: str, preset: str) -> Path:
    name = Path(model.split(":", 1)[-1].split("@", 1)[0].rstrip("/")).name or "model"
    return Path("runs") / "eval" / f"{name}-{Path(preset).stem}"


def cmd_run(args: argparse.Namespace) -> int:
    from spiral_arena.agents import model_path_problem
    from spiral_arena.evals.data import parse_benchmark_list
    from spiral_arena.evals.run import EvalOptions, IncompleteRun, run_eval
    from spiral_arena.outputs import write_problem

    if not args.model:
        raise ValueError("eval needs --model SPEC (hf:PATH, vllm:PATH or PROVIDER:MODEL[@URL]), or a subcommand")
    kind, _, path = args.model.partition(":")
    if kind in ("hf", "vllm") and (problem := model_path_problem(path)) is not None:
        raise ValueError(f"--model {kind}:PATH: {problem}")  # before any data is read or file written
    output_dir = args.output_dir or _default_output(args.model, args.preset)
    if (problem := write_problem(output_dir, directory=True)) is not None:
        raise ValueError(f"--output-dir {output_dir} {problem}")
    options = EvalOptions(
        model=args.model,
        benchmarks=parse_benchmark_list(args.benchmarks),
        output_dir=output_dir,
        preset=args.preset,
        overrides=_overrides(args),
        limit=args.limit,
        seed=args.seed,
        data_dir=args.data_dir,
        gpqa_path=args.gpqa_path,
        device=args.device,
        batch_size=args.batch_size,
        concurrency=args.concurrency,
        request_timeout=args.request_timeout,
        max_model_len=args.max_model_len,
        grader_workers=args.grader_workers,
        grader_timeout_s=args.grader_timeout,
        keep_gated_responses=args.keep_gated_responses,
        resamples=args.bootstrap,
        overwrite=args.overwrite,
        resume=args.resume,
        progress=not args.no_progress,
    )
    try:
        directory, results = run_eval(options)
    except IncompleteRun as error:
        print(f"spiral-arena eval: {error}", file=sys.stderr)
        return 1
    print_results(results)
    print(f"run written to {directory} (samples.jsonl, results.json, manifest.json)")
    return 0


def cmd_regrade(args: argparse.Namespace) -> int:
    from spiral_arena.evals.run import regrade

    results = regrade(
        args.run_dir,
        args.math_extraction,
        args.choice_extraction,
        args.grader_workers,
        args.grader_timeout,
        progress=not args.no_progress,
    )
    print_results(results)
    print(f"regraded {args.run_dir}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from spiral_arena.evals.compare import compare_runs, plot_comparison, print_comparison
    from spiral_arena.evals.manifest import write_json

    comparison = compare_runs(
        args.run_a, args.run_b, args.metric, args.allow_protocol_mismatch, args.seed, args.bootstrap, args.common_items
    )
    print_comparison(comparison)
    if args.png:
        plot_comparison(comparison, args.png)
        print(f"wrote {args.png}")
    if args.json:
        write_json(args.json, comparison)
        print(f"wrote {args.json}")
    return 0


def _percent(entry: dict | None) -> str:
    return "-" if entry is None else f"{100 * entry['value']:.1f}"


def _interval(entry: dict | None) -> str:
    if entry is None:
        return "-"
    low, high = entry["ci95"]
    return f"{100 * low:.1f}-{100 * high:.1f}"


def print_results(results: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    metrics = ", ".join(f"{kind} {metric}" for kind, metric in results["headline_metrics"].items())
    table = Table(title=f"accuracy %; headline ({metrics}) with its 95% bootstrap interval")
    columns = ("benchmark", "items", "n", "headline", "95% CI", "first", "mean@n", "pass@n", "no ans.", "cut")
    for column in columns:
        table.add_column(column, justify="left" if column == "benchmark" else "right")
    for name, entry in results["benchmarks"].items():
        n = entry["samples_per_item"]
        truncated = entry["truncation_rate"]
        table.add_row(
            name,
            str(entry["items"]),
            str(n),
            _percent(entry["score"]),
            _interval(entry["score"]),
            _percent(entry["first_sample_accuracy"]),
            _percent(entry["mean_at_n"]),
            _percent(entry["pass_at_k"][str(n)]),
            f"{100 * entry['no_answer_rate']:.0f}%",
            "-" if truncated is None else f"{100 * truncated:.0f}%",
        )
    for label, entry in results["averages"].items():
        if entry is not None:
            of = "" if entry["complete"] else f" ({len(entry['benchmarks'])}/{len(entry['of'])})"
            table.add_row(f"{label} avg{of}", "", "", _percent(entry), _interval(entry), *[""] * 5)
    console = Console(width=None if sys.stdout.isatty() else 160)  # logs and pipes get whole names
    console.print(table)
    for note in results.get("notes", []):
        console.print(f"note: {note}")


def main(args: argparse.Namespace) -> int:
    """Dispatch; a missing optional package is one line naming what to install."""
    commands = {None: cmd_run, "regrade": cmd_regrade, "compare": cmd_compare}
    try:
        return commands[args.eval_command](args)
    except ImportError as error:
        print(f"spiral-arena eval: error: {error}", file=sys.stderr)
        return 2
