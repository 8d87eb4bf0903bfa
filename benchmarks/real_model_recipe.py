"""SmolLM2's self-play recipe (``spiral-arena train --recipe smollm2-135m``) against issue 59's targets, per seed.

Each seed's run is trained in a fresh process (skipped where ``OUT/seedK`` already holds a finished run), then
the zero-shot model, each run's warm start and its last checkpoint are read on the plain game ids, each agent as
``spiral-arena play`` gives it (a checkpoint reads each game in the texts it was trained on), at ``--temperature``
(the trainer's evaluation temperature, 0.6, by default):

- Kuhn Poker, a single hand for chips: the exploitability of the policy as played, ``--samples`` answers sampled
  at each of the 12 information states and parsed as the env parses moves (``kuhn_policy_from_samples``), with
  its bootstrap standard error;
- TicTacToe-v0: ``--games`` games against ``random``, seats alternating: the win-or-draw share, a 95% Wilson
  interval;
- SimpleNegotiation-v0: ``--games`` games against ``random``, seats alternating: the agent's wins, beside
  ``random``'s own wins against ``random`` on the same seeds;
- invalid answers: the share of the agent's answers the game refused, in each game.

The zero-shot model answers in up to 32 tokens (it rarely ends its reply by itself, so its row is the slowest: over
9 minutes of Kuhn sampling alone at 64 tokens on 2 cores); ``--no-zero-shot`` leaves it out. The targets:
exploitability at most 0.20, TicTacToe win-or-draw at least 0.80, negotiation wins above random's,
invalid answers at most 1% in every game. Model agents are ``vllm:`` (run it with the vLLM venv's python), or
``hf:`` with ``--engine hf``.

    .venv-vllm/bin/python benchmarks/real_model_recipe.py --seeds 3 --out runs/smollm2   # trains (~1 h a seed), reads
    .venv-vllm/bin/python benchmarks/real_model_recipe.py --seeds 1 --out runs/smollm2 --games 40 --samples 50
    .venv-vllm/bin/python benchmarks/real_model_recipe.py --first-seed 1 --seeds 2 --no-zero-shot   # seeds 1 and 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from leaderboard.standings import wilson_interval
from spiral_arena.agents import Agent, make_agent
from spiral_arena.analysis.read_policy import kuhn_policy_from_samples
from spiral_arena.play import GameRecord, play_games

KUHN = "KuhnPoker-v0:rounds=1;reward=chips"
TICTACTOE, NEGOTIATION = "TicTacToe-v0", "SimpleNegotiation-v0"
RECIPE = "smollm2-135m"


def finished(run: Path) -> bool:
    """Whether ``run`` ended here: a checkpoint, and its wall seconds written after the process returned."""
    return (run / "checkpoints").is_dir() and any((run / "checkpoints").iterdir()) and (run / "wall.json").exists()


def train(run: Path, seed: int, settings: Sequence[str]) -> None:
    """The recipe's run of ``seed`` in a fresh process, with ``settings`` (``KEY=VALUE``, config keys) over it; its
    wall seconds in wall.json."""
    pairs = [setting.partition("=") for setting in settings]
    flags = [part for key, _, value in pairs for part in ("--" + key.replace("_", "-"), value)]
    command = [sys.executable, "-m", "trainers", "--recipe", RECIPE, "--seed", str(seed), "--output-dir", str(run),
               "--overwrite", *flags]  # fmt: skip
    began = time.monotonic()
    subprocess.run(command, check=True)
    (run / "wall.json").write_text(json.dumps({"seconds": time.monotonic() - began}))


def seats(records: list[tuple[int, GameRecord]]) -> list[tuple[GameRecord, int]]:
    """Each game's record with the first agent's seat (``rotate_seats``: seat ``i % 2`` in game ``i``)."""
    return [(record, index % 2) for index, record in records]


def match(agent: Agent, env_id: str, games: int, concurrency: int) -> dict[str, int]:
    """``games`` of ``env_id`` against random, seats alternating: wins, draws, the agent's answers and refusals."""
    played = seats(list(play_games(env_id, [agent, make_agent("random")], list(range(games)), concurrency,
                                   rotate_seats=True)))  # fmt: skip
    wins = draws = answers = refused = 0
    for record, seat in played:
        me = record.players[seat]
        wins += record.winner == me
        draws += record.winner is None
        answers += sum(player == me for player, _ in record.moves)
        refused += me in record.invalid
    return {"games": len(played), "wins": wins, "draws": draws, "answers": answers, "refused": refused}


def random_wins(env_id: str, games: int) -> int:
    """``random``'s wins against ``random`` on the same seeds and seats as ``match``."""
    played = seats(list(play_games(env_id, [make_agent("random"), make_agent("random")], list(range(games)), 64,
                                   rotate_seats=True)))  # fmt: skip
    return sum(record.winner == record.players[seat] for record, seat in played)


def read(spec: str, games: int, samples: int, concurrency: int) -> dict[str, object]:
    """One agent's row: its Kuhn exploitability as played and its matches against random (in this process)."""
    agent = make_agent(spec)
    kuhn = kuhn_policy_from_samples(lambda obs: agent.act_batch(obs, [{}] * len(obs)), "", KUHN, samples)
    row: dict[str, object] = {"agent": spec, "kuhn_exploitability": kuhn.exploitability,
                              "kuhn_se": kuhn.standard_error, "kuhn_invalid": kuhn.invalid}  # fmt: skip
    for name, env_id in (("tictactoe", TICTACTOE), ("negotiation", NEGOTIATION)):
        row[name] = match(agent, env_id, games, concurrency)
    return row


def read_fresh(spec: str, games: int, samples: int, concurrency: int) -> dict[str, object]:
    """``read`` in a fresh process, so each model's engine and its KV cache are given back before the next."""
    command = [sys.executable, __file__, "--read", spec, "--games", str(games), "--samples", str(samples),
               "--concurrency", str(concurrency)]  # fmt: skip
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def share(successes: int, games: int) -> str:
    low, high = wilson_interval(successes, games)
    return f"{successes / games:.2f} [{low:.2f}, {high:.2f}]" if games else "-"


def table(rows: list[dict], baseline: int, games: int) -> Table:
    out = Table(title=f"the plain ids against random, {games} games a game (seats alternating)")
    columns = (
        "agent",
        "Kuhn exploitability (<= 0.20)",
        "TicTacToe W+D (>= 0.80)",
        f"Negotiation wins (> random's {baseline / games:.2f})",
        "invalid: Kuhn / TTT / Neg (<= 1%)",
    )
    for column in columns:
        out.add_column(column, justify="left" if column == "agent" else "right")
    for row in rows:
        ttt, neg = row["tictactoe"], row["negotiation"]
        invalid = [row["kuhn_invalid"], *(m["refused"] / max(1, m["answers"]) for m in (ttt, neg))]
        out.add_row(
            row["agent"],
            f"{row['kuhn_exploitability']:.3f} +- {1.96 * row['kuhn_se']:.3f}",
            share(ttt["wins"] + ttt["draws"], ttt["games"]),
            share(neg["wins"], neg["games"]),
            " / ".join(f"{100 * v:.1f}%" for v in invalid),
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/smollm2"), help="one run a seed: OUT/seed0, ...")
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds: FIRST, FIRST+1, ...")
    parser.add_argument("--first-seed", type=int, default=0, metavar="FIRST", help="the first seed's number")
    parser.add_argument("--games", type=int, default=200, help="games against random in TicTacToe and the negotiation")
    parser.add_argument("--samples", type=int, default=200, help="answers sampled at each Kuhn information state")
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--engine", choices=("vllm", "hf"), default="vllm")
    parser.add_argument("--concurrency", type=int, default=32, help="games in flight")
    parser.add_argument("--no-zero-shot", action="store_true", help="leave out the untrained model's row")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config key for every run")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--read", metavar="SPEC", help=argparse.SUPPRESS)  # one agent's row, as JSON (read_fresh)
    args = parser.parse_args(argv)
    if args.read:
        print(json.dumps(read(args.read, args.games, args.samples, args.concurrency)))
        return
    if min(args.seeds, args.games, args.samples) < 1:
        parser.error("--seeds, --games and --samples must be at least 1")
    if args.first_seed < 0:
        parser.error(f"--first-seed must be 0 or more, got {args.first_seed}")
    if bad := [setting for setting in args.set if "=" not in setting]:
        parser.error(f"--set takes KEY=VALUE (a config key, as in spiral-arena train --help), got {bad[0]!r}")
    sampling = f"#temperature={args.temperature:g}"
    specs = [] if args.no_zero_shot else [f"{args.engine}:{RECIPE}#max_new_tokens=32{sampling}"]
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        run = args.out / f"seed{seed}"
        if not finished(run):
            train(run, seed, args.set)
        last = sorted((run / "checkpoints").iterdir())[-1]
        specs += [f"{args.engine}:{run / 'warm_start'}{sampling}", f"{args.engine}:{last}{sampling}"]
    console = Console()
    rows = []
    for spec in specs:
        began = time.monotonic()
        rows.append(read_fresh(spec, args.games, args.samples, args.concurrency))
        console.print(f"{spec}: read in {time.monotonic() - began:.0f} s")
    baseline = random_wins(NEGOTIATION, args.games)
    console.print(table(rows, baseline, args.games))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "random_negotiation_wins": baseline}, indent=2))


if __name__ == "__main__":
    main()
