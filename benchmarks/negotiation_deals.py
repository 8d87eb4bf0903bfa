"""What a checkpoint does at SimpleNegotiation: the moves it makes, the offers it answers, the deals it closes.

The win rate alone cannot say why a policy wins or draws (a draw is a deal not made). This plays a policy
(any agent spec: a checkpoint, ``random``, ``expert``) against ``random`` and ``expert`` in both seats and
reads every game back move by move: the share of its messages that offer, accept, deny or only chat; how
its offers are priced (it gives more items than it asks, as many, or fewer: the winner is whoever ends with
more items); how often it accepts an offer made to it, by the same pricing; and the deals that were made,
who gained items, and the mean gain in each player's own valuation.

    python benchmarks/negotiation_deals.py hf:runs/x/checkpoints/step_000200 --games 200
    python benchmarks/negotiation_deals.py random --games 200          # the reference rows
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict

from rich.console import Console
from rich.table import Table

from spiral_arena.agents import make_agent
from spiral_arena.core.actions import InvalidMove
from spiral_arena.games.simple_negotiation import SimpleNegotiation
from spiral_arena.play import play_games
from spiral_arena.registry import GameSpec

OPPONENTS = ("random", "expert")
PRICES = ("gives more", "even", "asks more")  # an offer's items given against items asked, by its proposer
VERDICTS = ("it gains items", "even", "it loses items")  # an offer or a deal, for the policy read


def price(give: tuple[int, int], ask: tuple[int, int]) -> str:
    """How an offer is priced in items, seen from its proposer."""
    return PRICES[0] if sum(give) > sum(ask) else PRICES[1] if sum(give) == sum(ask) else PRICES[2]


def verdict(items: int) -> str:
    """What a number of items gained means for the policy read (the winner ends with more items)."""
    return VERDICTS[0] if items > 0 else VERDICTS[1] if items == 0 else VERDICTS[2]


def read_game(game: GameSpec, seed: int, moves: list[tuple[str, str]], seat: int, tally: dict) -> None:
    """Replay one game's moves (the game has no chance) and count what seat ``seat`` did and what came of it."""
    env = game.make()
    env.reset(seed=seed)
    rules: SimpleNegotiation = env.game
    for name, text in moves:
        state, player = env.state_, env.possible_agents.index(name)
        pending = state.pending
        try:
            move = rules.parse(state, text)
        except InvalidMove:  # it ends the game (the record has it)
            tally["moves"]["invalid"] += 1 if player == seat else 0
            return
        env.step(text)
        if player == seat:
            offer = move.offer
            tally["moves"][f"offer that {price(offer.give, offer.ask)}" if offer else move.response or "chat only"] += 1
            if pending is not None and pending.proposer != seat:  # an offer made to it: what it would gain
                offered = verdict(sum(pending.give) - sum(pending.ask))
                tally["answers"][offered][move.response or ("counter-offer" if move.offer else "ignored")] += 1
        if state.last_outcome == "traded":
            gained = sum(pending.ask) - sum(pending.give)  # items the proposer got minus those it gave
            role = "it proposed" if pending.proposer == seat else "it accepted"
            tally["deals"][f"{role}, {verdict(gained if pending.proposer == seat else -gained)}"] += 1
    tally["gain"].append(env.state_.gain(seat))


def table(title: str, rows: dict[str, Counter]) -> Table:
    out = Table(title=title)
    columns = sorted({k for row in rows.values() for k in row})
    out.add_column("")
    for column in columns:
        out.add_column(column, justify="right")
    for name, row in rows.items():
        total = sum(row.values()) or 1
        out.add_row(name, *(f"{row[c] / total:.2f}" for c in columns))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agent", help="the agent spec to read, e.g. hf:runs/x/checkpoints/step_000200")
    parser.add_argument("--game", default="SimpleNegotiation-v0", help="the negotiation id, with options")
    parser.add_argument("--games", type=int, default=200, help="games per seat and opponent (default 200)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    game = GameSpec.parse(args.game)
    if game.env_id != "SimpleNegotiation-v0":
        parser.error(f"--game must be a SimpleNegotiation-v0 id, got {args.game}")
    agent = make_agent(args.agent)
    seeds = list(range(args.seed, args.seed + args.games))
    tallies = {}
    for name in OPPONENTS:
        tally = {"moves": Counter(), "answers": defaultdict(Counter), "deals": Counter(), "gain": [],
                 "results": Counter()}  # fmt: skip
        for seat in (0, 1):
            agents = [agent, make_agent(name)] if seat == 0 else [make_agent(name), agent]
            for _, record in play_games(args.game, agents, seeds, concurrency=min(64, len(seeds))):
                mine = record.players[seat]
                tally["results"]["win" if record.winner == mine else "draw" if record.winner is None else "loss"] += 1
                read_game(game, record.seed, record.moves, seat, tally)
        tallies[name] = tally
    console = Console(width=None if sys.stdout.isatty() else 160)  # a file or pipe gets the whole table
    console.print(f"{args.agent} at {args.game}, {args.games} games per seat against each opponent")
    console.print(table("results", {f"vs {n}": t["results"] for n, t in tallies.items()}))
    console.print(table("its messages", {f"vs {n}": t["moves"] for n, t in tallies.items()}))
    answers = {f"vs {n}: an offer where {v}": t["answers"][v] for n, t in tallies.items() for v in VERDICTS}
    console.print(table("its answer to an offer made to it, by what accepting would gain it", answers))
    deals = {f"vs {n}": t["deals"] for n, t in tallies.items()}
    console.print(table("the deals made, by kind (shares of all deals)", deals))
    for name, tally in tallies.items():
        gains, deals = tally["gain"], sum(tally["deals"].values())
        console.print(
            f"vs {name}: {deals / (2 * args.games):.2f} deals per game; mean gain in its own valuation "
            f"{sum(gains) / max(1, len(gains)):+.1f} per game (games that ended without an invalid move)"
        )


if __name__ == "__main__":
    main()
