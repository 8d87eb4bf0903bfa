"""The standings as data: one CSV row per agent and scope, and JSON with the head-to-head records too.

Both write every column, empty where it does not apply (a single-player row has no rating, a rated one no
success rate); the usage and cost columns (``USAGE_COLUMNS``, ``COST_COLUMNS``) are added only when some
agent has usage or a price, so that files of scripted agents look as before.
"""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from leaderboard.reasoning import ReasoningColumn
from leaderboard.report.columns import (
    SUCCESS_INTERVAL,
    Row,
    clean,
    cost_legend,
    has_cost,
    has_usage,
    provisional_legend,
)
from leaderboard.standings import RATING_PER_CENT, AgentStanding, Scope, SoloScope, SoloStanding, Standings

CSV_COLUMNS = (
    "scope", "rank", "agent", "rating", "ci_low", "ci_high", "games", "wins", "draws", "losses", "score",
    "mean_payoff", "payoff_unit", "invalid_rate", "errors", "exploitability",
    "successes", "success_rate", "success_ci_low", "success_ci_high", "mean_turns",
    "reasoning", "reasoning_ci_low", "reasoning_ci_high", "note", "provisional", "anchor",
)  # fmt: skip
USAGE_COLUMNS = (
    "api_games", "api_moves", "token_games", "prompt_tokens_per_game", "completion_tokens_per_game",
    "tokens_per_game", "latency_per_move_s",
)  # fmt: skip
COST_COLUMNS = ("price", "cost_per_game_usd", "rating_per_cent")


def csv_columns(standings: Standings) -> tuple[str, ...]:
    """``CSV_COLUMNS``, then ``USAGE_COLUMNS`` when some agent has usage and ``COST_COLUMNS`` when one was priced."""
    columns = CSV_COLUMNS
    if any(has_usage(scope) for scope in standings.scopes):
        columns += USAGE_COLUMNS
    if any(has_cost(scope) for scope in standings.scopes):
        columns += COST_COLUMNS
    return columns


def _record(
    scope: Scope | SoloScope,
    rank: int,
    row: Row,
    reasoning: ReasoningColumn | None,
    columns: tuple[str, ...] = CSV_COLUMNS,
) -> dict[str, Any]:
    """One standings row for CSV and JSON, with every one of ``columns`` (those of the other kind of scope
    empty), float noise around zero written as 0."""
    score = None if reasoning is None else reasoning.scores.get(row.label)
    record: dict[str, Any] = dict.fromkeys(columns)
    record.update(
        scope=scope.name,
        rank=rank,
        agent=row.label,
        games=row.games,
        invalid_rate=row.invalid_rate,
        errors=row.errors,
        note=row.note,
        reasoning=None if score is None else score.value,
        reasoning_ci_low=None if score is None else score.low,
        reasoning_ci_high=None if score is None else score.high,
    )
    if isinstance(row, SoloStanding):
        record.update(
            successes=row.successes,
            success_rate=row.success_rate,
            success_ci_low=row.low,
            success_ci_high=row.high,
            mean_turns=row.mean_turns,
        )
    else:
        record.update(
            rating=row.rating,
            ci_low=row.low,
            ci_high=row.high,
            wins=row.wins,
            draws=row.draws,
            losses=row.losses,
            score=row.score,
            mean_payoff=row.mean_payoff,
            payoff_unit=scope.payoff_unit,
            exploitability=row.exploitability,
            provisional=row.provisional,
            anchor=row.anchor,
        )
    usage = row.usage
    if usage is not None and "api_games" in record:
        record.update(
            api_games=usage.games,
            api_moves=usage.moves,
            token_games=usage.token_games,
            prompt_tokens_per_game=usage.prompt_tokens_per_game,
            completion_tokens_per_game=usage.completion_tokens_per_game,
            tokens_per_game=usage.tokens_per_game,
            latency_per_move_s=usage.latency_per_move_s,
        )
    if usage is not None and usage.price is not None and "price" in record:
        record.update(
            price=usage.price.model,
            cost_per_game_usd=usage.cost_per_game,
            rating_per_cent=row.rating_per_cent if isinstance(row, AgentStanding) else None,
        )
    return {k: clean(v) if isinstance(v, float) else v for k, v in record.items()}


def write_csv(standings: Standings, path: Path) -> None:
    columns = csv_columns(standings)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for scope in standings.scopes:
            for rank, row in enumerate(scope.agents, 1):
                record = _record(scope, rank, row, standings.reasoning, columns)
                writer.writerow({k: "" if v is None else v for k, v in record.items()})


def _scope_json(
    scope: Scope | SoloScope, reasoning: ReasoningColumn | None, columns: tuple[str, ...] = CSV_COLUMNS
) -> dict[str, Any]:
    """A rated scope with its head-to-head records; a single-player one with the name of its interval."""
    payload: dict[str, Any] = {
        "name": scope.name,
        "players": 1 if isinstance(scope, SoloScope) else 2,
        "ranked_by": scope.ranked_by,
        "games": scope.games,
        "errors": scope.errors,
        "standings": [_record(scope, rank, row, reasoning, columns) for rank, row in enumerate(scope.agents, 1)],
    }
    if isinstance(scope, SoloScope):
        payload["success_interval"] = SUCCESS_INTERVAL
        return payload
    payload.update(scale=scope.scale, anchor=scope.anchor, weighting=scope.weighting, payoff_unit=scope.payoff_unit)
    payload["head_to_head"] = {
        row: {
            col: {"wins": cell.wins, "draws": cell.draws, "losses": cell.losses, "mean_payoff": cell.mean_payoff}
            for col, cell in cols.items()
        }
        for row, cols in scope.head_to_head.items()
    }
    return payload


def _costs_json(standings: Standings) -> dict[str, Any]:
    """How the usage and cost fields read, and the prices given (only written when there is usage)."""
    return {
        "legend": cost_legend(standings),
        "prices_usd_per_million_tokens": {
            model: {"input": price.input_usd, "output": price.output_usd} for model, price in standings.prices.items()
        },
        "price_matched_by": "the agent's label, else its model id",
        "rating_per_cent": RATING_PER_CENT,
    }


def to_json(standings: Standings) -> dict[str, Any]:
    columns = csv_columns(standings)
    payload = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "bootstrap_resamples": standings.resamples,
        "bootstrap_seed": standings.seed,
        "provisional_rule": {
            "min_games": standings.min_games,
            "max_interval": standings.max_interval,
            "legend": provisional_legend(standings),
        },
        "scopes": [_scope_json(scope, standings.reasoning, columns) for scope in standings.scopes],
        "errors": [
            {"env_id": g.env_id, "player0": g.player0, "player1": g.player1, "seed": g.seed, "error": g.error}
            for g in standings.errors
        ],
        "reasoning": None if standings.reasoning is None else standings.reasoning.to_json(),
    }
    if "api_games" in columns:
        payload["costs"] = _costs_json(standings)
    return payload


def write_json(standings: Standings, path: Path) -> None:
    Path(path).write_text(json.dumps(to_json(standings), indent=2), encoding="utf-8")
