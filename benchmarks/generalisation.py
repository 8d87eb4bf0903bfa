"""SPIRAL's game-generalisation table in miniature: single-game specialists against the three-game mix.

SPIRAL (arXiv 2506.24119) trains Qwen3-4B by self-play on TicTacToe, Kuhn Poker and Simple Negotiation, each
alone and all three together, and plays every policy on the three training games and on an out-of-domain
game paired with each (Snake with TicTacToe, Pig Dice with Kuhn, Truth and Deception with Negotiation):
the mix is the better player across the board. This is that table for the tiny recipe: four configurations
(``kuhn``, ``tictactoe``, ``negotiation``, ``mix``), each the default recipe's games, options, weights and KL
anchors restricted to its games, at the same number of RL turns (the recipe's steps and turns per step), on
``--seeds`` seeds each; every policy plays all six games against ``random`` and ``expert``, and the table
gives its score there (wins plus half the draws, per game), mean and 95% interval over seeds, beside the
warm start's.

What the out-of-domain games are to these runs: never trained by RL, but in the warm start. The tiny model
knows no English; it can only answer a game whose text and answer format it has seen. So every configuration
shares one warm start, seeded alike: its tokenizer is trained on the text of all six games and its SFT
imitates position-dependent random play (``random#per_state=true#kinds=true``) on all six, equally often
(``sft_games``). It learns their formats and no strategy; what RL on the training games adds to the
out-of-domain games is the question. Each run evaluates at its start (the warm start's row: the same for
every configuration of a seed) and at its end; Pig Dice needs ``max_game_actions`` above 50 (a game of two
random players lasts ~80 actions), so every run uses 300.

    python benchmarks/generalisation.py --seeds 3                      # 12 runs, then the table
    python benchmarks/generalisation.py --seeds 3 --report             # the table of finished runs
    python benchmarks/generalisation.py --seeds 1 --set steps=4 --set sft_steps=4 --set eval_games=2

A GPU user runs the same harness at 4B: ``--set model=/models/Qwen3-4B-Base --set recipe=spiral``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from learning import interval, train_fresh
from rich.console import Console
from rich.table import Table

from spiral_arena.registry import GameSpec
from trainers.flags import read_settings
from trainers.recipes import RECIPES
from trainers.summary import match_key
from trainers.validation import ConfigError

TRAINING = ("KuhnPoker-v0", "TicTacToe-v0", "SimpleNegotiation-v0")
# SPIRAL's pairs (games.md): each training game's out-of-domain partner
PAIRED = {"KuhnPoker-v0": "PigDice-v0", "TicTacToe-v0": "Snake-v0", "SimpleNegotiation-v0": "TruthAndDeception-v0"}
CONFIGS = {"kuhn": ("KuhnPoker-v0",), "tictactoe": ("TicTacToe-v0",), "negotiation": ("SimpleNegotiation-v0",),
           "mix": TRAINING}  # fmt: skip
OPPONENTS = ("random", "expert")
SHARED = {
    "sft_agent": "random#per_state=true#kinds=true",
    "eval_opponents": ",".join(OPPONENTS),
    "eval_out_of_domain": False,
    "eval_tactics": False,
    "max_game_actions": 300,
    "eval_games": 100,
}


def recipe_games() -> dict[str, tuple[str, str, str]]:
    """Each training game's spelling, weight and KL weight in the default (tiny) recipe, by env id."""
    tiny = RECIPES["tiny"]
    labels, weights, kls = (tiny[key].split(",") for key in ("games", "game_weights", "game_kl_coefs"))
    return {GameSpec.parse(label).env_id: (label, w, kl) for label, w, kl in zip(labels, weights, kls, strict=True)}


def evaluated() -> list[str]:
    """The six games every policy plays: the recipe's three (its spellings), then their partners."""
    games = recipe_games()
    return [games[env_id][0] for env_id in TRAINING] + [PAIRED[env_id] for env_id in TRAINING]


def config_of(name: str) -> dict[str, object]:
    """The recipe restricted to configuration ``name``'s games, with the shared warm start and evaluation."""
    games = recipe_games()
    picked = [games[env_id] for env_id in CONFIGS[name]]
    every = evaluated()
    return {
        **SHARED,
        "games": ",".join(label for label, _, _ in picked),
        "game_weights": ",".join(w for _, w, _ in picked),
        "game_kl_coefs": ",".join(kl for _, _, kl in picked),
        "sft_games": ",".join(every),
        "eval_env_ids": ",".join(every),
        "eval_every": int(RECIPES["tiny"]["steps"]),
    }


def evaluations(run: Path) -> list[dict]:
    """The rows of ``run`` that carry an evaluation, in step order."""
    path = run / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return [r for r in rows if any(key.startswith("eval/") for key in r)]


def finished(run: Path) -> bool:
    rows, config = evaluations(run), run / "config.json"
    return bool(rows) and config.exists() and rows[-1]["step"] == json.loads(config.read_text())["steps"]


def scores(row: dict, games: list[str]) -> dict[tuple[str, str], float]:
    """(game, opponent) -> the policy's points per game (a win 1, a draw 1/2) in one evaluation row."""
    def at(game: str, opponent: str, outcome: str) -> float:
        return row.get(match_key(game, opponent, outcome), float("nan"))

    return {(g, o): at(g, o, "win") + at(g, o, "draw") / 2 for g in games for o in OPPONENTS}


def table(rows: dict[str, list[dict[tuple[str, str], float]]], games: list[str], opponent: str) -> Table:
    """Policies by row, games by column: score against ``opponent``, mean +- 95% t-interval over seeds."""
    title = f"score against {opponent} (win 1, draw 1/2): mean +- 95% t-interval over seeds"
    out = Table(title=title)
    out.add_column("policy")
    out.add_column("seeds", justify="right")
    for game in games:
        env_id = GameSpec.parse(game).env_id
        out.add_column(env_id.removesuffix("-v0") + ("" if env_id in TRAINING else " (OOD)"), justify="right")
    for name, runs in rows.items():
        cells = []
        for game in games:
            mean, half = interval([r[(game, opponent)] for r in runs])
            cells.append(f"{mean:.3f} +- {half:.3f}" if len(runs) > 1 else f"{mean:.3f}")
        out.add_row(name, str(len(runs)), *cells)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/generalisation")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--seed-from", type=int, default=0, help="start at this seed (split seeds over processes)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, from {', '.join(CONFIGS)}")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override, all runs")
    parser.add_argument("--report", action="store_true", help="only print the tables of runs already finished")
    args = parser.parse_args(argv)
    names = [c.strip() for c in args.configs.split(",") if c.strip()]
    if unknown := [c for c in names if c not in CONFIGS]:
        parser.error(f"unknown configuration(s) {', '.join(unknown)}; valid: {', '.join(CONFIGS)}")
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    try:
        settings = read_settings(args.set)
    except ConfigError as error:
        parser.error(str(error))
    out, games = Path(args.out), evaluated()
    warm: dict[int, dict] = {}
    finals: dict[str, list[dict]] = {}
    for name in names:
        for seed in range(args.seed_from, args.seed_from + args.seeds):
            run = out / name / f"seed{seed}"
            if not args.report and not finished(run):
                train_fresh(run, {**config_of(name), "seed": seed, **settings})
            if finished(run):
                first, last = evaluations(run)[0], evaluations(run)[-1]
                warm.setdefault(seed, scores(first, games))  # the same warm start for every configuration
                finals.setdefault(name, []).append(scores(last, games))
    console = Console(width=None if sys.stdout.isatty() else 180)  # a file or pipe gets the whole table
    if not finals:
        console.print("no finished runs under", out)
        return
    rows = {"warm start": list(warm.values()), **finals}
    for opponent in OPPONENTS:
        console.print(table(rows, games, opponent))


if __name__ == "__main__":
    main()
