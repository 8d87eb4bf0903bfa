#!/usr/bin/env python3
"""Reference metrics: does a change to the trainer change what it computes? (issue 57's bar for a refactor)

``make`` trains each run of RUNS in a fresh process (``python -m spiral_arena.cli train``, as a user's
``spiral-arena train``, with only the output directory added) and stores its metrics.jsonl without the
wall-clock fields (VOLATILE), one JSON object a line with sorted keys, as ``DIR/NAME.jsonl``; ``DIR/README.md``
says what made them (command, date, commit, torch version, thread count). ``check`` trains the same runs again in
a temporary directory and compares them with the stored files line by line, as text: every float must match bit
for bit. It prints a table (run, lines, seconds, and "same" or the first line and field that differ, with both
values) and exits 1 on any difference.

    python scripts/reference_metrics.py make                      # every run (the default one ~10 min on 2 cores)
    python scripts/reference_metrics.py make --only lora marshal  # some runs; the README keeps the others' rows
    python scripts/reference_metrics.py check                     # after the change: exit 0 if nothing moved
    python scripts/reference_metrics.py check --only async --runs runs/check   # keep the run directories

The bar holds on one machine at one thread count: torch's CPU kernels split a sum over the threads they have,
so another thread count (or another CPU, torch or BLAS) rounds differently. Every run gets THREADS intra-op
threads (OMP_NUM_THREADS and MKL_NUM_THREADS, set in its environment; ``--threads`` changes it), and ``check``
uses the count each reference was made with. docs/training.md ("Checking that a refactor changes no behaviour")
says when to run it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
REFERENCE_DIR = REPO / "tests" / "data" / "reference_metrics"

# torch's intra-op threads in every run (this project's machines have 2 cores: a bare `spiral-arena train` uses 2)
THREADS = 2

# tests/conftest.py TINY_RUN, copied (not imported): the tiny model in seconds, 4 steps of 24 turns
TINY_RUN: dict[str, Any] = {
    "steps": 4,
    "sft_steps": 4,
    "sft_batch": 16,
    "samples_per_step": 24,
    "games_in_flight": 8,
    "eval_every": 2,
    "eval_games": 2,
    "eval_env_ids": "KuhnPoker-v0:rounds=1",
    "eval_opponents": "random,expert",
    "time_limit_s": 0,
    "save_every": 2,
    "micro_batch": 8,
    "eval_tactics": False,
}
# tests/test_trainer_groups.py SMALL, copied: the closed-world Twenty Questions recipe cut to 2 steps
GROUP_RUN: dict[str, Any] = {
    "steps": 2, "sft_steps": 2, "sft_batch": 8, "group_size": 4, "groups_per_step": 2, "obs_format": "last",
    "max_new_tokens": 8, "eval_every": 2, "eval_games": 4, "games_in_flight": 8, "time_limit_s": 0,
    "save_every": 2, "micro_batch": 16, "eval_samples_per_secret": 1,
}  # fmt: skip

# Each run: the config fields given to `spiral-arena train` as flags (--name=value, --name / --no-name for a bool).
# The short runs come first, so that a run that cannot start says so before the long one.
RUNS: dict[str, dict[str, Any]] = {
    # tests/test_async.py, the async_run fixture: SMALL (TINY_RUN, eval against random only, no plots), K = 1
    "async": {**TINY_RUN, "eval_opponents": "random", "plots": False, "async_steps": 1},
    # tests/test_trainer_e2e.py::test_lora_and_tensorboard
    "lora": {
        **TINY_RUN, "steps": 1, "plots": False, "lora_rank": 4, "lora_alpha": 8, "tensorboard": True, "kl_coef": 0.0,
    },
    # tests/test_trainer_e2e.py::test_marshal_advantages_replay_from_the_transcripts
    "marshal": {
        **TINY_RUN, "advantage": "marshal", "steps": 2, "eval_every": 1, "plots": False,
        "sft_steps": 100, "samples_per_step": 48, "games_in_flight": 16,
    },
    # tests/test_trainer_groups.py::test_end_to_end_run_of_each_algorithm[delta-belief]
    "delta_belief": {**GROUP_RUN, "eval_long_questions": 50, "algo": "delta-belief", "eval_at_start": False},
    # a user's bare `spiral-arena train`: the embedded tiny recipe, 200 steps (about 10 minutes on 2 cores)
    "default": {},
}  # fmt: skip

# What a metrics line holds that two runs of the same computation do not share: wall-clock seconds and a rate
# over them (trainers/loop.py's per-step timings, the async actor's and learner's waits, and
# trainers/metrics.py's tokens per second). They are the only machine-dependent fields the trainer writes: it logs
# no dates, paths, ETA (the progress bar's alone) or memory. Every other field is compared exactly.
VOLATILE = (
    "time_s",  # seconds since training started (steps; step 0 when the warm start is evaluated)
    "rollout_s",  # seconds playing the step's games (async: the actor's)
    "advantage_s",  # seconds computing advantages
    "update_s",  # seconds in the learner
    "sync_s",  # seconds loading the new weights into the engine
    "generated_tokens_per_s",  # generated tokens over rollout_s
    "async/learner_idle_s",  # seconds the learner waited for the actor's games
    "async/actor_idle_s",  # seconds the actor waited for its weights
)
# a field named like these that VOLATILE leaves in is reported when references are made (a timing added later)
LOOKS_TIMED = re.compile(r"(_s|_per_s|seconds|_sec|time|timestamp|date|eta|memory|_mb|_gb|_gib|_bytes|path)$")


def flags(settings: dict[str, Any]) -> list[str]:
    """Config fields as `spiral-arena train` flags (as tests/conftest.py ``cli_flags`` spells them)."""
    out = []
    for key, value in settings.items():
        name = key.replace("_", "-")
        out.append(f"--{name}" if value is True else f"--no-{name}" if value is False else f"--{name}={value}")
    return out


def command(name: str, run_dir: Path) -> list[str]:
    """The command that trains run ``name`` into ``run_dir``."""
    return [sys.executable, "-m", "spiral_arena.cli", "train", *flags(RUNS[name]), f"--output-dir={run_dir}"]


def environment(threads: int) -> dict[str, str]:
    """This environment with torch's thread count fixed."""
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def stripped(line: str) -> str:
    """One metrics.jsonl line without the VOLATILE fields, keys sorted: a reference line."""
    row = json.loads(line)
    return json.dumps({k: v for k, v in row.items() if k not in VOLATILE}, sort_keys=True)


def reference_lines(lines: list[str]) -> list[str]:
    """A run's metrics.jsonl lines as reference lines."""
    return [stripped(line) for line in lines if line.strip()]


def first_difference(expected: list[str], got: list[str]) -> str | None:
    """None when the two lists of reference lines are the same text; else where they first differ: the line
    (1-based, with its step), the first field (in sorted order) and both values as JSON writes them (so floats
    are shown in full and NaN equals NaN), or which file has lines the other lacks."""
    for number, (a, b) in enumerate(zip(expected, got, strict=False), start=1):
        if a == b:
            continue
        old, new = json.loads(a), json.loads(b)
        where = f"line {number} (step {old.get('step', '?')})"
        for key in sorted(old.keys() | new.keys()):
            was = json.dumps(old[key]) if key in old else "<absent>"
            now = json.dumps(new[key]) if key in new else "<absent>"
            if was != now:
                return f"{where}: {key}: {was} (reference) vs {now} (now)"
        return f"{where}: the same fields and values, written differently"  # (not reached: keys are sorted)
    if len(expected) != len(got):
        shorter = "now" if len(got) < len(expected) else "the reference"
        counts = f"{len(expected)} lines in the reference, {len(got)} now"
        return f"line {min(len(expected), len(got)) + 1}: {shorter} ends there ({counts})"
    return None


def suspicious(lines: list[str]) -> list[str]:
    """Fields left in that are named like a timing or a machine's property (LOOKS_TIMED)."""
    keys = {k for line in lines for k in json.loads(line)}
    return sorted(k for k in keys if LOOKS_TIMED.search(k.lower()))


def probe(threads: int) -> dict[str, Any]:
    """What a run's process gets: torch's version and thread counts, and whether it sees a GPU."""
    code = (
        "import json, torch; print(json.dumps({'torch': torch.__version__, 'threads': torch.get_num_threads(), "
        "'interop_threads': torch.get_num_interop_threads(), 'cuda': torch.cuda.is_available()}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment(threads), capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def train(name: str, runs: Path, threads: int) -> tuple[list[str], float]:
    """Train run ``name`` in a fresh process into ``runs/name`` (replacing what is there); its reference lines
    and its seconds. A failed run raises RuntimeError with the end of its log (``runs/name.log``)."""
    run_dir = runs / name
    if run_dir.exists():
        shutil.rmtree(run_dir)
    log = runs / f"{name}.log"
    start = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.call(command(name, run_dir), cwd=REPO, env=environment(threads), stdout=out, stderr=out)
    seconds = time.monotonic() - start
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise RuntimeError(f"run {name} exited with {code} after {seconds:.0f} s; the end of {log}:\n{tail}")
    return reference_lines((run_dir / "metrics.jsonl").read_text().splitlines()), seconds


# --- the README: one row per run, read back by `check` (its thread count) and by `make --only` (the other rows)

README_HEAD = """# Reference metrics

Made by `scripts/reference_metrics.py make` (issue 57): each run's metrics.jsonl without the wall-clock fields, one
line a step, keys sorted. `python scripts/reference_metrics.py check` trains the same runs again and compares them
line by line, every float exactly; that holds on the machine and at the thread count that made them.

Fields removed (`VOLATILE` in the script): {volatile}.

Machine: {machine}.

| run | lines | commit | uncommitted changes | made (UTC) | torch | threads | seconds | command |
|---|---|---|---|---|---|---|---|---|
"""
ROW = re.compile(r"^\| (\w+) \| (\d+) \| (\w+) \| ([^|]*) \| ([^|]+) \| ([^|]+) \| (\d+) \| (\d+) \| `(.*)` \|$")
FIELDS = ("lines", "commit", "changes", "made", "torch", "threads", "seconds", "command")


def read_rows(directory: Path) -> dict[str, dict[str, str]]:
    """The rows of ``directory``'s README.md, by run name (none when it has no README)."""
    readme = directory / "README.md"
    if not readme.exists():
        return {}
    rows = {}
    for line in readme.read_text().splitlines():
        if match := ROW.match(line):
            rows[match.group(1)] = dict(zip(FIELDS, match.groups()[1:], strict=True))
    return rows


def write_readme(directory: Path, rows: dict[str, dict[str, str]], machine: str) -> None:
    head = README_HEAD.format(volatile=", ".join(f"`{k}`" for k in VOLATILE), machine=machine)
    body = "".join(
        f"| {name} | {r['lines']} | {r['commit']} | {r['changes']} | {r['made']} | {r['torch']} | {r['threads']} "
        f"| {r['seconds']} | `{r['command']}` |\n"
        for name, r in sorted(rows.items(), key=lambda item: list(RUNS).index(item[0]) if item[0] in RUNS else 99)
    )
    (directory / "README.md").write_text(head + body)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def uncommitted(directory: Path) -> str:
    """The tracked files that differ from the commit (the references' own directory aside), or "none"."""
    inside = directory.resolve()
    changed = []
    for line in git("status", "--porcelain", "--untracked-files=no").splitlines():
        path = (REPO / line[3:].split(" -> ")[-1]).resolve()
        if not path.is_relative_to(inside):
            changed.append(line[3:])
    return ", ".join(changed) if changed else "none"


def machine_line() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}, Python {platform.python_version()}"


def shown_command(name: str, threads: int) -> str:
    """Run ``name``'s command as a reader would type it (the output directory a placeholder)."""
    argv = ["spiral-arena", "train", *flags(RUNS[name]), "--output-dir=RUN_DIR"]
    return f"OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} " + " ".join(argv)


# --- the two modes ------------------------------------------------------------------------------------------


def make(names: list[str], out: Path, runs: Path, threads: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    seen = probe(threads)
    if seen["threads"] != threads:
        print(f"torch runs {seen['threads']} threads, not the {threads} asked for", file=sys.stderr)
        return 2
    rows = read_rows(out)
    commit, changes = git("rev-parse", "HEAD"), uncommitted(out)
    for name in names:
        print(f"{name}: training ({shown_command(name, threads)})", flush=True)
        lines, seconds = train(name, runs, threads)
        (out / f"{name}.jsonl").write_text("".join(line + "\n" for line in lines))
        rows[name] = {
            "lines": str(len(lines)), "commit": commit, "changes": changes,
            "made": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"), "torch": seen["torch"],
            "threads": str(threads), "seconds": f"{seconds:.0f}", "command": shown_command(name, threads),
        }  # fmt: skip
        write_readme(out, rows, machine_line())
        print(f"{name}: {len(lines)} lines in {seconds:.0f} s -> {out / f'{name}.jsonl'}", flush=True)
        if odd := suspicious(lines):
            print(f"{name}: WARNING: kept fields named like timings: {', '.join(odd)} (VOLATILE?)", file=sys.stderr)
    return 0


def check(names: list[str], out: Path, runs: Path, threads: int | None) -> int:
    rows = read_rows(out)
    missing = [n for n in names if not (out / f"{n}.jsonl").exists()]
    if missing:
        print(f"no reference for {', '.join(missing)} in {out}: make them first (make --only ...)", file=sys.stderr)
        return 2
    results = []
    for name in names:
        if name not in rows:
            print(f"{name}: WARNING: no row in {out / 'README.md'}: assuming {THREADS} threads", file=sys.stderr)
        made_with = int(rows.get(name, {}).get("threads", THREADS))
        used = threads if threads is not None else made_with
        if used != made_with:
            print(f"{name}: WARNING: made with {made_with} threads, checked with {used}", file=sys.stderr)
        expected = (out / f"{name}.jsonl").read_text().splitlines()
        print(f"{name}: training ({shown_command(name, used)})", flush=True)
        try:
            got, seconds = train(name, runs, used)
        except RuntimeError as error:
            print(error, file=sys.stderr)
            results.append((name, f"{len(expected)}/-", "-", "the run failed"))
            continue
        verdict = first_difference(expected, got) or "same"
        results.append((name, f"{len(expected)}/{len(got)}", f"{seconds:.0f}", verdict))
    head = ("run", "lines (ref/now)", "seconds", "result")
    widths = [max(len(str(r[i])) for r in [head, *results]) for i in range(3)]
    for row in [head, *results]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row[:3], widths, strict=True)) + "  " + row[3])
    return 0 if all(r[3] == "same" for r in results) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("make", "check"), help="make the reference files, or check against them")
    parser.add_argument("--only", nargs="+", metavar="NAME", help=f"these runs only (default: all: {', '.join(RUNS)})")
    parser.add_argument("--out", type=Path, default=REFERENCE_DIR, help="the reference files' directory")
    parser.add_argument("--runs", type=Path, help="keep the run directories and logs here (default: a temporary one)")
    parser.add_argument(
        "--threads", type=int, help=f"torch threads (make: default {THREADS}; check: default each reference's own)"
    )
    args = parser.parse_args(argv)
    names = args.only or list(RUNS)
    if unknown := [n for n in names if n not in RUNS]:
        parser.error(f"unknown run(s) {', '.join(unknown)}; valid: {', '.join(RUNS)}")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be at least 1")
    scratch = None
    if args.runs is None:
        scratch = Path(tempfile.mkdtemp(prefix="reference_metrics-"))
    runs = args.runs or scratch
    runs.mkdir(parents=True, exist_ok=True)
    try:
        if args.mode == "make":
            return make(names, args.out, runs, args.threads or THREADS)
        return check(names, args.out, runs, args.threads)
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 1
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
