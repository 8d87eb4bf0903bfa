"""The tiny model trained by self-play on Leduc Hold'em: exact exploitability from the warm start to the end,
RAE against MARSHAL's advantages, over seeds.

Each run is the tiny recipe on ``LeducHoldem-v0`` alone (200 steps, chips as the reward), evaluated every 50
steps and before the first; the exploitability is read off the model at the 288 rank information states
(``trainers.readouts.leduc_metrics``). The final checkpoint's policy at the evaluation temperature, as an
``hf:`` agent plays it, is then scored exactly against uniform random play and against the CFR+ expert, in
chips a hand averaged over the two seats (``leduc_policy_value``), where win rates would mislead: a policy
that folds its weak hands loses most hands and wins chips.

    OMP_NUM_THREADS=1 python benchmarks/leduc_selfplay.py --seeds 3 --advantages rae,marshal --out DIR
    python benchmarks/leduc_selfplay.py --seeds 3 --out DIR --report   # the tables of finished runs only
"""

from __future__ import annotations

import argparse
from pathlib import Path

from learning import eval_rows, finished, interval, train_fresh
from rich.console import Console
from rich.table import Table

from spiral_arena.agents import make_agent
from spiral_arena.agents.experts.leduc import expert_policy
from spiral_arena.analysis import leduc_policy_value
from spiral_arena.analysis.leduc import rank_key, uniform_policy
from trainers.checkpoint import latest
from trainers.flags import read_settings
from trainers.validation import ConfigError

ADVANTAGES = ("rae", "marshal")
SETTINGS = {"games": "LeducHoldem-v0", "eval_every": 50, "eval_at_start": True, "time_limit_s": 0}
KEY = "eval/leduc_exploitability"  # logged by every evaluation of a run that trains Leduc
REFERENCES = {"uniform (random)": 2.3736, "CFR+ expert": 0.0002}


def evaluations(run: Path) -> list[dict]:
    return eval_rows(run, KEY)


def chips_a_hand(policy: dict, other: dict) -> float:
    """``policy``'s exact chips a hand against ``other``, the mean of its two seats."""
    return (leduc_policy_value(policy, other) - leduc_policy_value(other, policy)) / 2


def final_scores(run: Path) -> dict[str, float]:
    """The final checkpoint's policy as an ``hf:`` agent plays it, scored exactly."""
    policy = make_agent(f"hf:{latest(run / 'checkpoints')}").leduc_policy()
    uniform = {rank_key(k): d for k, d in uniform_policy().items()}
    return {"vs uniform": chips_a_hand(policy, uniform), "vs expert": chips_a_hand(policy, expert_policy())}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/leduc_selfplay")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--advantages", default="rae,marshal", help=f"comma-separated, from {', '.join(ADVANTAGES)}")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override, all runs")
    parser.add_argument("--report", action="store_true", help="only print the tables of runs already finished")
    args = parser.parse_args(argv)
    advantages = [a.strip() for a in args.advantages.split(",") if a.strip()]
    if unknown := [a for a in advantages if a not in ADVANTAGES]:
        parser.error(f"unknown advantage(s) {', '.join(unknown)}; valid: {', '.join(ADVANTAGES)}")
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    try:
        settings = read_settings(args.set)
    except ConfigError as error:
        parser.error(str(error))
    console = Console()
    curve = Table(title="Leduc exploitability at the evaluation temperature (chips a hand): mean +- 95% t-interval")
    final = Table(title="final policy, exact chips a hand (both seats): mean +- 95% t-interval over seeds")
    for table, first in ((curve, "advantage"), (final, "advantage")):
        table.add_column(first)
        table.add_column("seeds", justify="right")
    steps: list[int] = []
    for advantage in advantages:
        runs = []
        for seed in range(args.seeds):
            run = Path(args.out) / advantage / f"seed{seed}"
            if not args.report and not finished(run, KEY):
                train_fresh(run, {**SETTINGS, "advantage": advantage, "seed": seed, **settings})
            if finished(run, KEY):
                runs.append(run)
        if not runs:
            continue
        series = [{r["step"]: r["eval/leduc_exploitability_at_eval_t"] for r in evaluations(run)} for run in runs]
        if not steps:
            steps = sorted(series[0])
            for step in steps:
                curve.add_column(f"step {step}", justify="right")
            for name in ("vs uniform", "vs expert", "invalid mass (final)"):
                final.add_column(name, justify="right")
        curve.add_row(advantage, str(len(runs)), *(_cell([s[step] for s in series if step in s]) for step in steps))
        scores = [final_scores(run) for run in runs]
        invalid = [evaluations(run)[-1]["eval/leduc_invalid_mass"] for run in runs]
        final.add_row(
            advantage, str(len(runs)), *(_cell([s[k] for s in scores]) for k in ("vs uniform", "vs expert")),
            _cell(invalid),
        )  # fmt: skip
    console.print(curve)
    console.print(final)
    console.print("references: " + ", ".join(f"{name} {value}" for name, value in REFERENCES.items()))


def _cell(values: list[float]) -> str:
    mean, half = interval(values)
    return f"{mean:.3f}" if len(values) < 2 else f"{mean:.3f} +- {half:.3f}"


if __name__ == "__main__":
    main()
