"""Can the tiny model learn to read a TicTacToe board at all, and does the text layout decide it?

For each board layout (``TicTacToe-v0:board=grid``, ``board=cells`` and ``board=lines``) and seed: a fresh tiny model
(``trainers.tiny``, its tokenizer trained on random play of that layout) is taught the answer directly,
by supervised training on the perfect player's best cells at every non-terminal position (4,520
positions, one record per best cell, last-message observations), with the warm start's own loop
(``trainers.sft.sft``). Then the tactics read-out of the trainer (``eval/ttt_takes_win``,
``eval/ttt_blocks``: exact answer probabilities at the evaluation temperature 0.6 on every position where
a win can be taken or a single threat blocked) says whether it learned. Uniform play over the legal cells
scores 0.433 and 0.313. This isolates what the model can learn from what the RL signal teaches it.

    python benchmarks/ttt_layouts.py                    # all three layouts, seeds 0, 1, 2, 1,500 steps
    python benchmarks/ttt_layouts.py --seeds 1 --steps 200
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from learning import interval
from rich.console import Console
from rich.table import Table

from spiral_arena.agents.experts.tictactoe import move_scores
from spiral_arena.analysis.read_policy import answer_text
from spiral_arena.analysis.tictactoe import replayed
from spiral_arena.models.policy import Policy
from trainers.readouts import tictactoe_metrics
from trainers.sft import sft
from trainers.tiny import create_tiny

LAYOUTS = ("grid", "cells", "lines")


def expert_records(game: str) -> list[dict]:
    """One record per best cell of the perfect player at every non-terminal position, as the model reads it."""
    records = []
    for env in replayed(game, "last"):
        state = env.state_
        scores = move_scores(tuple(state.board), state.current_player)
        prompt = env.observe(env.agent_selection)
        best = max(scores.values())
        records += [{"prompt": prompt, "response": answer_text(f"[{c}]")} for c, s in scores.items() if s == best]
    return records


def one_run(layout: str, seed: int, steps: int, batch: int, lr: float, root: Path) -> dict[str, float]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    game = f"TicTacToe-v0:board={layout}"
    path = create_tiny(root / f"{layout}_{seed}", [game], seed=seed)
    model = AutoModelForCausalLM.from_pretrained(path)
    policy = Policy(None, AutoTokenizer.from_pretrained(path), "bare")
    start = time.monotonic()
    losses = sft(model, policy, expert_records(game), steps, batch, lr, seed)
    model.eval()
    with torch.no_grad():
        read = tictactoe_metrics(model, policy, "last", 0.6, game)
    return {
        "takes_win": read["eval/ttt_takes_win"],
        "blocks": read["eval/ttt_blocks"],
        "invalid": read["eval/ttt_invalid_mass"],
        "loss": sum(losses[-50:]) / len(losses[-50:]),  # the last 50 steps' mean
        "seconds": time.monotonic() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per layout (default: 3)")
    parser.add_argument("--steps", type=int, default=1500, help="supervised steps per run (default: 1500)")
    parser.add_argument("--batch", type=int, default=64, help="records per step (default: 64)")
    parser.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate (default: 1e-3)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help=f"comma-separated, of {LAYOUTS}")
    args = parser.parse_args()
    layouts = [name.strip() for name in args.layouts.split(",") if name.strip()]
    unknown = [name for name in layouts if name not in LAYOUTS]
    if unknown or not layouts:
        parser.error(f"--layouts: {', '.join(unknown) or 'none given'}; valid: {', '.join(LAYOUTS)}")
    console = Console()
    results: dict[str, list[dict[str, float]]] = {name: [] for name in layouts}
    per_run = Table(title="Per run (uniform play: takes_win 0.433, blocks 0.313)")
    for column in ("layout", "seed", "takes_win", "blocks", "invalid mass", "final loss", "seconds"):
        per_run.add_column(column, justify="left" if column == "layout" else "right")
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            for name in layouts:
                r = one_run(name, seed, args.steps, args.batch, args.lr, Path(tmp))
                results[name].append(r)
                console.print(f"{name} seed {seed}: takes_win {r['takes_win']:.3f}, blocks {r['blocks']:.3f}")
                per_run.add_row(
                    name, str(seed), f"{r['takes_win']:.3f}", f"{r['blocks']:.3f}", f"{r['invalid']:.1%}",
                    f"{r['loss']:.3f}", f"{r['seconds']:.0f}",
                )  # fmt: skip
    console.print(per_run)
    summary = Table(title=f"Mean ± 95% t-interval over {args.seeds} seed(s), {args.steps} steps of {args.batch}")
    for column in ("layout", "takes_win", "blocks", "final loss"):
        summary.add_column(column, justify="left" if column == "layout" else "right")
    for name, runs in results.items():
        cells = []
        for key in ("takes_win", "blocks", "loss"):
            mean, half = interval([r[key] for r in runs])
            cells.append(f"{mean:.3f} ± {half:.3f}")
        summary.add_row(name, *cells)
    console.print(summary)


if __name__ == "__main__":
    main()
