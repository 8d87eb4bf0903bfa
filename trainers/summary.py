"""What an evaluation's numbers say, as lines and tables: the match metrics' keys (``match_key``) and their one
reader (``match_table``), the numbers the tiny recipe's targets read (``headline``, ``TARGETS``), the line
each evaluation prints and the closing table of a run."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from spiral_arena.registry import GameSpec

OUTCOMES = ("win", "draw", "loss", "invalid")


def match_key(game: str, opponent: str, outcome: str) -> str:
    """The metric of one evaluated match outcome: ``eval/GAME/OPPONENT/OUTCOME`` (the game with its options)."""
    return f"eval/{game}/{opponent}/{outcome}"


# The tiny recipe's targets, as the README states them: (metric, at most or at least, threshold, name). The
# negotiation ones are halfway from random to the expert (docs/results/learning.md; 1,000 games per seat):
# against random, the expert wins 82.5% and random 9.8%; against the expert, random wins or draws 17.5%.
TARGETS = (
    ("kuhn_exploitability", "max", 0.20, "Kuhn single-hand exploitability <= 0.20"),
    ("tictactoe_vs_random", "min", 0.85, "TicTacToe win-or-draw vs random >= 0.85"),
    ("negotiation_wins_vs_random", "min", 0.46, "SimpleNegotiation wins vs random >= 0.46"),
    ("negotiation_vs_expert", "min", 0.59, "SimpleNegotiation win-or-draw vs expert >= 0.59"),
    ("invalid", "max", 0.01, "invalid answers <= 1% in every game"),
)


def match_table(scores: dict[str, float]) -> dict[str, dict[str, dict[str, float]]]:
    """``match_key`` numbers as {game: {opponent: {outcome: rate}}}, in order of appearance; games keep
    their options (``KuhnPoker-v0:rounds=1``). The one reader of those keys (plots, summaries, benchmarks)."""
    table: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for key, value in scores.items():
        parts = key.removeprefix("eval/").rsplit("/", 2)
        if key.startswith("eval/") and len(parts) == 3 and parts[2] in OUTCOMES:
            game, opponent, outcome = parts
            table[game][opponent][outcome] = value
    return table


def headline(scores: dict[str, float], trained: list[str]) -> dict[str, float]:
    """The numbers the targets read: exploitability, TicTacToe win-or-draw vs random, SimpleNegotiation wins
    vs random (a draw is a deal not made, not a result) and win-or-draw vs the expert, and the invalid rate of
    the worst trained game (each game's over its matches against every opponent)."""
    table = match_table(scores)
    out = {}
    if "eval/kuhn_exploitability" in scores:
        out["kuhn_exploitability"] = scores["eval/kuhn_exploitability"]
    for game, rows in table.items():
        env_id = GameSpec.parse(game).env_id
        if env_id == "TicTacToe-v0" and "random" in rows:
            out["tictactoe_vs_random"] = rows["random"].get("win", 0.0) + rows["random"].get("draw", 0.0)
        if env_id == "SimpleNegotiation-v0" and "random" in rows:
            out["negotiation_wins_vs_random"] = rows["random"].get("win", 0.0)
        if env_id == "SimpleNegotiation-v0" and "expert" in rows:
            out["negotiation_vs_expert"] = rows["expert"].get("win", 0.0) + rows["expert"].get("draw", 0.0)
    rates = [invalid_rate(table[g]) for g in trained if g in table]
    if known := [rate for rate in rates if rate is not None]:
        out["invalid"] = max(known)
    return out


def invalid_rate(rows: dict[str, dict[str, float]]) -> float | None:
    """A game's share of games ended by the policy's invalid answer, over its matches against every opponent
    (equal games each): the invalid target's measure, and what the eval line and final table show."""
    rates = [r["invalid"] for r in rows.values() if "invalid" in r]
    return sum(rates) / len(rates) if rates else None


def eval_line(step: int, scores: dict[str, float], trained: list[str]) -> str:
    """One quiet line per evaluation: exploitability, then win/draw/loss of each trained game per
    opponent (the out-of-domain games are in metrics.jsonl and the final summary)."""
    parts = []
    if "eval/kuhn_exploitability" in scores:
        rounds = int(scores.get("eval/kuhn_trained_rounds", 1))
        of_run = "" if rounds == 1 else f" (single-hand read-out; this run plays {rounds}-round Kuhn)"
        parts.append(f"Kuhn exploitability {scores['eval/kuhn_exploitability']:.3f}{of_run}")
    if "eval/leduc_exploitability" in scores:
        parts.append(f"Leduc exploitability {scores['eval/leduc_exploitability']:.3f}")
    for game, rows in match_table(scores).items():
        if game not in trained and "solo" not in rows:  # held-out secrets count, other games wait for the end
            continue
        shown = ", ".join(f"{o} {_wdl(r)}" for o, r in rows.items())
        invalid = invalid_rate(rows)
        parts.append(f"{game.split('-v')[0]} W/D/L {shown}" + (f" (invalid {invalid:.0%})" if invalid else ""))
    return f"step {step:>4} eval: " + " | ".join(parts)


def _wdl(rates: dict[str, float]) -> str:
    """Win, draw and loss rates as ``0.62/0.30/0.08`` (a draw in SimpleNegotiation is a deal not made)."""
    return "/".join(f"{rates.get(outcome, 0.0):.2f}" for outcome in ("win", "draw", "loss"))


def final_summary(scores: dict[str, Any], step: int, seconds: float, config: Any, trained: list[str]) -> str:
    """The closing table: win, draw and loss per game and opponent (``trained``: the training games'
    labels; others are out-of-domain or held out), exploitability, invalid rate, time, and, for the tiny recipe,
    which of the README's targets are met."""
    table = match_table(scores)
    opponents = list(dict.fromkeys(o for rows in table.values() for o in rows))
    width = max([len(g) for g in table] + [len("game")]) + len(" (held-out secrets)")
    early = f", stopped by the time limit before step {config.steps}" if step < config.steps else ""
    lines = [
        f"\nFinal evaluation at step {scores.get('step', step)} ({seconds / 60:.1f} min of training{early}; "
        f"temperature {config.eval_temperature:g}, {config.eval_games} games per seat and opponent):"
    ]
    if table:
        lines.append(f"  {'game':<{width}}" + "".join(f"  {'W/D/L vs ' + o:>22}" for o in opponents) + "  invalid")
        for game, rows in table.items():
            held_out = "(held-out secrets)" if "solo" in rows else "(out-of-domain)"
            name = game if game in trained else f"{game} {held_out}"
            cells = "".join(f"  {_wdl(rows[o]) if o in rows else '-':>22}" for o in opponents)
            invalid = invalid_rate(rows) or 0.0
            lines.append(f"  {name:<{width}}{cells}  {invalid:>6.1%}")
    numbers = headline(scores, trained)
    if "kuhn_exploitability" in numbers:
        sampled = scores.get("eval/kuhn_exploitability_at_eval_t")
        at_t = "" if sampled is None else f"; {sampled:.3f} at the evaluation temperature {config.eval_temperature:g}"
        rounds = int(scores.get("eval/kuhn_trained_rounds", 1))
        of_run = "" if rounds == 1 else f", read on single hands although this run plays {rounds}-round Kuhn"
        played = scores.get("eval/kuhn_exploitability_played")
        as_played = (
            ""
            if played is None
            else f"; as played, from {config.eval_kuhn_samples} sampled answers a state, {played:.3f} "
            f"(standard error {scores['eval/kuhn_exploitability_played_se']:.3f})"
        )
        lines.append(
            f"  Kuhn single-hand exploitability {numbers['kuhn_exploitability']:.3f} at temperature 1{at_t}"
            f"{as_played} (Nash 0; any card-blind policy 1/3; uniform random 11/24{of_run})"
        )
    checked = []
    for key, kind, limit, name in TARGETS if config.recipe == "tiny" else ():  # another recipe has its own targets
        if key in numbers:
            value = numbers[key]
            met = value <= limit if kind == "max" else value >= limit
            shown = f"{value:.1%}" if key == "invalid" else f"{value:.3f}"
            checked.append(f"{name}: {shown} {'met' if met else 'NOT met'}")
    if checked:
        lines.append("  README targets (tiny recipe): " + "; ".join(checked))
    if not table and not numbers:
        lines.append("  (no evaluation numbers: eval_opponents is empty and Kuhn is not trained)")
    return "\n".join(lines)
