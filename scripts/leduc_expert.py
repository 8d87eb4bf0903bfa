"""Compute the Leduc Hold'em expert's policy: CFR+ on the rank-only information states, written to
``spiral_arena/data/leduc_expert.json`` (probabilities to 6 decimals), with the exploitability of what
was written. ``LeducExpert`` plays that file.

    python scripts/leduc_expert.py --iterations 2000
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from spiral_arena.analysis.leduc import leduc_exploitability, solve_cfr

OUT = Path(__file__).resolve().parents[1] / "spiral_arena" / "data" / "leduc_expert.json"


def rounded(dist: dict[str, float]) -> dict[str, float]:
    """``dist`` to 6 decimals, the largest entry taking up the rounding so it still sums to 1."""
    out = {action: round(p, 6) for action, p in dist.items()}
    top = max(out, key=out.__getitem__)
    out[top] = round(1.0 - sum(p for a, p in out.items() if a != top), 6)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    start = time.perf_counter()
    policy = {key: rounded(dist) for key, dist in solve_cfr(args.iterations).items()}
    seconds = time.perf_counter() - start
    args.out.write_text(json.dumps({"iterations": args.iterations, "policy": policy}, indent=0, sort_keys=True) + "\n")
    print(f"CFR+ {args.iterations} iterations in {seconds:.0f} s -> {args.out}")
    print(f"exploitability of the written policy: {leduc_exploitability(policy):.6f} chips per hand")


if __name__ == "__main__":
    main()
