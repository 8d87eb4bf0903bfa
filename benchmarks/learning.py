"""Does the default tiny recipe learn? It and its --no-rae ablation, side by side.

Runs ``spiral-arena train`` (the embedded CPU recipe) once as is and once without RAE, then
prints, per evaluation step: Kuhn single-hand exploitability, win (and win-or-draw) rates
against the random agent, and the invalid-answer rate. Targets for the default recipe, on the
final policy: exploitability <= 0.25, TicTacToe win-or-draw vs random >= 80%, invalid <= 2%.

    python benchmarks/learning.py [--out runs/learning] [--only default|no_rae] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from trainers.config import TrainConfig
from trainers.loop import train

VARIANTS = {"default": {}, "no_rae": {"rae": False}}
KUHN, TTT = "KuhnPoker-v0:rounds=1", "TicTacToe-v0"


def eval_rows(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if "eval/kuhn_exploitability" in r]


def summary(r: dict) -> dict[str, float]:
    def rate(game: str, outcome: str) -> float:
        return r.get(f"eval/{game}/random/{outcome}", float("nan"))

    invalid = [
        v for k, v in r.items() if k.startswith("eval/") and k.endswith("/random/invalid") and (KUHN in k or TTT in k)
    ]
    return {
        "step": r["step"],
        "time_s": r["time_s"],
        "exploitability": r["eval/kuhn_exploitability"],
        "ttt_win": rate(TTT, "win"),
        "ttt_win_or_draw": rate(TTT, "win") + rate(TTT, "draw"),
        "kuhn_win": rate(KUHN, "win"),
        "invalid": sum(invalid) / max(1, len(invalid)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/learning")
    parser.add_argument("--only", choices=list(VARIANTS), default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    console = Console()
    finals = {}
    for name, overrides in VARIANTS.items():
        if args.only and name != args.only:
            continue
        run = train(TrainConfig.build({"output_dir": f"{args.out}/{name}", "seed": args.seed, **overrides}))
        table = Table(title=f"tiny recipe, {name} (seed {args.seed})")
        for col in ("step", "time s", "Kuhn exploitability", "TTT win", "TTT win or draw", "Kuhn win", "invalid"):
            table.add_column(col, justify="right")
        rows = [summary(r) for r in eval_rows(run)]
        for s in rows:
            table.add_row(
                str(s["step"]),
                f"{s['time_s']:.0f}",
                f"{s['exploitability']:.3f}",
                f"{s['ttt_win']:.2f}",
                f"{s['ttt_win_or_draw']:.2f}",
                f"{s['kuhn_win']:.2f}",
                f"{s['invalid']:.3f}",
            )
        console.print(table)
        finals[name] = rows[-1]
    table = Table(title="final policies vs targets")
    for col in ("variant", "Kuhn exploitability (<= 0.25)", "TTT win or draw (>= 0.80)", "invalid (<= 0.02)"):
        table.add_column(col, justify="right")
    for name, s in finals.items():
        table.add_row(name, f"{s['exploitability']:.3f}", f"{s['ttt_win_or_draw']:.2f}", f"{s['invalid']:.3f}")
    console.print(table)


if __name__ == "__main__":
    main()
