"""Our trainer beside TRL's ``GRPOTrainer`` on a real model (SmolLM2-135M-Instruct by default): the same texts,
the same turns a step, the same update settings, each in a fresh process, one after the other.

- ``ours``: ``spiral-arena train`` on ``real_model_levers``' texts (the tiny recipe's games and one-line prompts, 64
  turns a step, 12-token answers, micro-batches of 16, REINFORCE, no warm start, evaluation off), fp32 (bf16
  autocast with ``--precision bf16``), the transformers engine for rollouts.
- ``trl``: TRL's ``GRPOTrainer`` from the same base model with those settings (``trl_peer.train_trl``: the games
  played by ``spiral_arena.integrations.trl.selfplay_rollout_func``, prompted by our ``Policy``, as many turns a step
  as ``ours`` played on average, in groups of 16 turns of one game), TRL's own generation (transformers).

The table: per mode, over the steps after the first (``--steps`` - 1 repeats), seconds a step, turns a step, turns
per second (the step's turns over its seconds: every turn TRL trains on, ours played), the rollout's and the
update's seconds (median [min, max]), and the process's peak memory. TRL trains every turn of its groups (advantage 0
included); ours leaves turns of advantage 0 out of the update (``filter_zero_adv``), so its trained turns are also
given.

    python benchmarks/real_model_trl.py                    # SmolLM2, 4 steps each, fp32
    python benchmarks/real_model_trl.py --steps 3 --precision bf16   # on a CPU with AVX-512 BF16
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from real_model_levers import LEVERS, TEXTS, peak_run, spread
from rich.console import Console
from rich.table import Table

from trainers.flags import add_arguments, from_arguments

HERE = Path(__file__).resolve().parent


def steps_of(run: Path) -> list[dict]:
    """The steps after the first: seconds (between the rows' ``time_s``), turns (played by ours, trained by TRL),
    trained turns, rollout and update seconds."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["step"] >= 1]
    return [
        {"step_s": row["time_s"] - before["time_s"], "turns": row["samples"],
         "trained": row.get("trained", row["samples"]), "rollout_s": row["rollout_s"], "update_s": row["update_s"]}
        for before, row in zip(rows, rows[1:], strict=False)
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m", help="a named model or a model directory")
    parser.add_argument("--steps", type=int, default=4, help="steps a mode (the first is left out)")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="bf16: only where the CPU has it")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    if args.steps < 2:
        parser.error(f"--steps must be at least 2 (the first is left out), got {args.steps}")
    flags = ["--model", args.model, "--steps", str(args.steps), "--seed", str(args.seed), *TEXTS,
             *LEVERS[args.precision]]  # fmt: skip
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        ours = Path(tmp) / "ours"
        command = [sys.executable, "-m", "trainers", "--output-dir", str(ours), *flags]
        wall, peak = peak_run("ours", command, ours.with_suffix(".log"))
        results["ours"] = {"steps": steps_of(ours), "wall_s": wall, "peak_gib": peak}
        Console().print(f"ours: done in {wall:.0f} s")
        flag_parser = argparse.ArgumentParser()
        add_arguments(flag_parser)
        overrides = from_arguments(flag_parser.parse_args(flags)).to_dict()
        trl = Path(tmp) / "trl"
        code = (
            f"import json, sys; sys.path.insert(0, {str(HERE)!r}); from pathlib import Path; "
            "from trl_peer import train_trl; train_trl(Path(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3]))"
        )
        wall, peak = peak_run("trl", [sys.executable, "-c", code, str(trl), json.dumps(overrides), str(ours)],
                              trl.with_suffix(".log"))  # fmt: skip
        results["trl"] = {"steps": steps_of(trl), "wall_s": wall, "peak_gib": peak}
        Console().print(f"trl: done in {wall:.0f} s")
    table = Table(title=f"{args.model}, {args.precision}: steps 2-{args.steps}, each mode a fresh process")
    for column in ("mode", "s / step", "turns / step", "turns / s", "trained turns / step", "rollout s", "update s",
                   "peak GiB", "run s"):  # fmt: skip
        table.add_column(column, justify="left" if column == "mode" else "right")
    for mode, result in results.items():
        steps = result["steps"]
        rates = [s["turns"] / s["step_s"] for s in steps]
        cells = [spread([s[k] for s in steps]) for k in ("step_s", "turns")]
        cells += [spread(rates), spread([s["trained"] for s in steps])]
        cells += [spread([s[k] for s in steps]) for k in ("rollout_s", "update_s")]
        table.add_row(mode, *cells, f"{result['peak_gib']:.1f}", f"{result['wall_s']:.0f}")
    Console().print(table)
    ratio = statistics.median(s["turns"] / s["step_s"] for s in results["ours"]["steps"]) / statistics.median(
        s["turns"] / s["step_s"] for s in results["trl"]["steps"]
    )
    Console().print(f"ours / trl, turns per second: {ratio:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
