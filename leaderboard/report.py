"""Standings out: a terminal table (rich), CSV, JSON, a PNG plot and one self-contained HTML page.

The HTML page has no external assets: CSS and the sorting script are inline and the plot is embedded
as a base64 PNG, so the file can be mailed or archived as it is. Single-player scopes have their own
columns (success rate with its interval, turns) in every output, and no head to head.

Every output says what the ratings can be trusted for: each rated table names its scale (the anchor
agent, or the mean, at 1000), a provisional rating carries ``PROVISIONAL_MARK`` (a hollow marker in the
plot, ``provisional`` in CSV and JSON) with a legend giving the rule, and the anchor's interval reads
"anchor" rather than a zero-width interval.

API agents' usage (tokens per game, latency per move) and, with prices, cost per game and rating per cent
get columns only where some agent has such data: in the tables that hold it, and in CSV and JSON (as
``USAGE_COLUMNS`` and ``COST_COLUMNS``) when any table does; so tables of scripted agents look as before.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

from leaderboard.reasoning import ReasoningColumn, ReasoningScore
from leaderboard.standings import (
    CONFIDENCE,
    OVERALL,
    RATING_PER_CENT,
    AgentStanding,
    Scope,
    SoloScope,
    SoloStanding,
    Standings,
    score_matrix,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

CSV_COLUMNS = (
    "scope", "rank", "agent", "rating", "ci_low", "ci_high", "games", "wins", "draws", "losses", "score",
    "mean_payoff", "payoff_unit", "invalid_rate", "errors", "exploitability",
    "successes", "success_rate", "success_ci_low", "success_ci_high", "mean_turns",
    "reasoning", "reasoning_ci_low", "reasoning_ci_high", "provisional", "anchor",
)  # fmt: skip
USAGE_COLUMNS = (
    "api_games", "api_moves", "token_games", "prompt_tokens_per_game", "completion_tokens_per_game",
    "tokens_per_game", "latency_per_move_s",
)  # fmt: skip
COST_COLUMNS = ("price", "cost_per_game_usd", "rating_per_cent")
USAGE_LEGEND = (
    "Tokens/game: the provider's prompt+completion tokens per finished game (then prompt+completion), "
    "over the games whose replies all stated them; Latency/move: mean wall time of a move's successful request"
)
SUCCESS_HEADER = f"Success [{CONFIDENCE:.0%} CI]"
SUCCESS_INTERVAL = f"{CONFIDENCE:.0%} Wilson score interval"
PIPED_WIDTH = 200
ZERO = 1e-12  # smaller magnitudes are float noise around an exact 0 (the Nash expert's exploitability)
NAME_WIDTH, NAME_LINES = 30, 3  # an agent name in the PNG: characters per line, lines at most
PROVISIONAL_MARK = "*"
ANCHOR_TEXT = "anchor"  # the anchor's interval cell: its rating is fixed, not estimated
WEIGHTING_TEXT = {  # what each ``--weighting`` means, in the overall table's scale line
    "games": "every game counts once",
    "equal": "every game id weighs the same, however many games it has",
}


def clean(value: float) -> float:
    """``value``, or 0.0 when it is float noise around zero, so that an exact result reads as one."""
    return 0.0 if abs(value) < ZERO else value


def _num(value: float | None, spec: str) -> str:
    """``value`` formatted by ``spec``; one that rounds to zero prints as zero, never as -0 or 2.78e-17."""
    if value is None:
        return ""
    text = format(value, spec)
    return format(0.0, spec) if float(text) == 0 else text


def _pct(value: float | None) -> str:
    return "" if value is None else _num(100 * value, ".1f") + "%"


def _rating_text(row: AgentStanding) -> str:
    return _num(row.rating, ".0f") + (PROVISIONAL_MARK if row.provisional else "")


def _interval(row: AgentStanding) -> str:
    if row.anchor:
        return ANCHOR_TEXT
    return "" if row.low is None else f"{_num(row.low, '.0f')}-{_num(row.high, '.0f')}"


def scale_note(scope: Scope) -> str:
    """The fixed point of the scope's ratings, and for overall how its game ids were weighted."""
    if scope.anchor is None:
        note = f"scale: {scope.scale} (no plain random agent to anchor on)"
    else:
        note = f"scale: {scope.scale} (the anchor; intervals are for differences from it)"
    if scope.weighting is not None:
        note += f"; weighting: {scope.weighting} ({WEIGHTING_TEXT[scope.weighting]})"
    return note


def provisional_legend(standings: Standings) -> str:
    """The rule behind ``PROVISIONAL_MARK``, with the thresholds this standings used."""
    return (
        f"{PROVISIONAL_MARK} provisional: fewer than {standings.min_games} games in that table, or a "
        f"{CONFIDENCE:.0%} interval wider than {_num(standings.max_interval, 'g')} Elo points"
    )


def _has_provisional(standings: Standings) -> bool:
    return any(isinstance(r, AgentStanding) and r.provisional for scope in standings.scopes for r in scope.agents)


def _success_text(row: SoloStanding) -> str:
    if row.low is None:
        return ""
    return f"{_pct(row.success_rate)} [{_num(100 * row.low, '.1f')}-{_num(100 * row.high, '.1f')}]"


def _reasoning_text(score: ReasoningScore | None) -> str:
    if score is None:
        return ""
    interval = "" if score.low is None else f" ({_num(100 * score.low, '.1f')}-{_num(100 * score.high, '.1f')})"
    return f"{_pct(score.value)}{interval}"


def _letters(index: int) -> str:
    """A, B, ..., Z, AA, AB, ...: spreadsheet column names."""
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(ord("A") + rest) + name
    return name


def agent_keys(standings: Standings) -> dict[str, str]:
    """A short key per agent (A, B, ... in the first scope's rank order), the same in the plot and on the
    page, so that matrix columns need no names: agent labels can be checkpoint paths of 50 characters."""
    labels = dict.fromkeys(r.label for scope in standings.scopes for r in scope.agents)
    return {label: _letters(i) for i, label in enumerate(labels)}


def wrap_name(label: str, width: int = NAME_WIDTH, lines: int = NAME_LINES) -> str:
    """``label`` on lines of at most ``width`` characters, broken after / : # , = where it can; past
    ``lines`` lines the middle goes (runs/<id>/checkpoints/step_N keeps its run id and step)."""
    out: list[str] = []
    line = ""
    for piece in re.findall(r"[^/:#,=]*[/:#,=]?", label):
        if line and len(line) + len(piece) > width:
            out.append(line)
            line = ""
        while len(piece) > width:
            out.append(piece[:width])
            piece = piece[width:]
        line += piece
    out.append(line)
    out = [part for part in out if part]
    if len(out) > lines:
        out = out[: lines - 1] + ["\u2026" + "".join(out[lines - 1 :])[-(width - 1) :]]
    return "\n".join(out)


def _has_exploitability(scope: Scope) -> bool:
    return any(r.exploitability is not None for r in scope.agents)


def _title(scope: Scope | SoloScope) -> str:
    games = f"{scope.games} games" + (f", {scope.errors} errors left out" if scope.errors else "")
    alone = ", one player" if isinstance(scope, SoloScope) else ""
    return f"{'Overall' if scope.name == OVERALL else scope.name} ({games}{alone}; ranked by {scope.ranked_by})"


Row = AgentStanding | SoloStanding


class Column(NamedTuple):
    """One standings column: ``kind`` "num" or "text" says how it sorts; both functions take (rank, row)."""

    header: str
    kind: str
    sort_value: Callable[[int, Row], Any]
    text: Callable[[int, Row], str]


def _reasoning_column(reasoning: ReasoningColumn) -> Column:
    """Blank for an agent without an eval run."""
    scores = reasoning.scores
    return Column(
        "Reasoning",
        "num",
        lambda k, r: getattr(scores.get(r.label), "value", None),
        lambda k, r: _reasoning_text(scores.get(r.label)),
    )


def _has_usage(scope: Scope | SoloScope) -> bool:
    return any(r.usage is not None for r in scope.agents)


def _has_cost(scope: Scope | SoloScope) -> bool:
    return any(r.usage is not None and r.usage.cost_per_game is not None for r in scope.agents)


def _usage_of(row: Row, name: str) -> Any:
    return None if row.usage is None else getattr(row.usage, name)


def _tokens_text(row: Row) -> str:
    usage = row.usage
    if usage is None or not usage.token_games:
        return ""
    prompt, completion = usage.prompt_tokens_per_game, usage.completion_tokens_per_game
    return f"{_num(prompt + completion, '.0f')} ({_num(prompt, '.0f')}+{_num(completion, '.0f')})"


def _dollars(value: float | None) -> str:
    return "" if value is None else "$" + _num(value, ".3g" if value < 1 else ".2f")


def _latency_text(row: Row) -> str:
    latency = _usage_of(row, "latency_per_move_s")
    return "" if latency is None else _num(latency, ".2f") + "s"


def _cost_of(rank: int, row: Row) -> float | None:
    return _usage_of(row, "cost_per_game")


def _usage_columns(scope: Scope | SoloScope) -> list[Column]:
    """Tokens per game and latency per move where an agent has usage; cost per game, and for rated tables
    rating per cent, where one was priced."""
    cols = []
    if _has_usage(scope):
        cols += [
            Column("Tokens/game", "num", lambda k, r: _usage_of(r, "tokens_per_game"), lambda k, r: _tokens_text(r)),
            Column(
                "Latency/move", "num", lambda k, r: _usage_of(r, "latency_per_move_s"), lambda k, r: _latency_text(r)
            ),
        ]
    if _has_cost(scope):
        cols.append(Column("$/game", "num", _cost_of, lambda k, r: _dollars(_cost_of(k, r))))
        if isinstance(scope, Scope):
            cols.append(
                Column("Elo/cent", "num", lambda k, r: r.rating_per_cent, lambda k, r: _num(r.rating_per_cent, ".1f"))
            )
    return cols


def cost_legend(standings: Standings) -> list[str]:
    """The lines explaining the usage and cost columns, when some table has them."""
    scopes = standings.scopes
    lines = [USAGE_LEGEND] if any(_has_usage(scope) for scope in scopes) else []
    if any(_has_cost(scope) for scope in scopes):
        prices = ", ".join(str(price) for price in standings.prices.values())
        lines.append(
            f"$/game: US dollars per finished game at --price {prices} (per million input/output tokens, matched "
            f"by label, else model id); Elo/cent: {RATING_PER_CENT}"
        )
    return lines


def _solo_columns(reasoning: ReasoningColumn | None) -> list[Column]:
    """A single-player scope's columns: the success rate and its interval share a cell, sorted by the rate."""
    cols = [
        Column("#", "num", lambda k, r: k, lambda k, r: str(k)),
        Column("Agent", "text", lambda k, r: r.label, lambda k, r: r.label),
        Column("Games", "num", lambda k, r: r.games, lambda k, r: str(r.games)),
        Column("Successes", "num", lambda k, r: r.successes, lambda k, r: str(r.successes)),
        Column(SUCCESS_HEADER, "num", lambda k, r: r.success_rate, lambda k, r: _success_text(r)),
        Column("Turns", "num", lambda k, r: r.mean_turns, lambda k, r: _num(r.mean_turns, ".1f")),
        Column("Invalid", "num", lambda k, r: r.invalid_rate, lambda k, r: _pct(r.invalid_rate)),
        Column("Errors", "num", lambda k, r: r.errors, lambda k, r: str(r.errors)),
    ]
    return cols if reasoning is None else [*cols, _reasoning_column(reasoning)]


def _columns(scope: Scope | SoloScope, reasoning: ReasoningColumn | None = None) -> list[Column]:
    """The standings columns of ``scope``: payoff only per game, exploitability where an agent has one,
    reasoning when eval runs were given; a single-player scope has its own (``_solo_columns``)."""
    if isinstance(scope, SoloScope):
        cols = _solo_columns(None) + _usage_columns(scope)
        return cols if reasoning is None else [*cols, _reasoning_column(reasoning)]
    cols = [
        Column("#", "num", lambda k, r: k, lambda k, r: str(k)),
        Column("Agent", "text", lambda k, r: r.label, lambda k, r: r.label),
        Column("Rating", "num", lambda k, r: r.rating, lambda k, r: _rating_text(r)),
        Column("95% CI", "num", lambda k, r: r.low, lambda k, r: _interval(r)),
        Column("Games", "num", lambda k, r: r.games, lambda k, r: str(r.games)),
        Column("W-D-L", "num", lambda k, r: r.wins, lambda k, r: f"{r.wins}-{r.draws}-{r.losses}"),
        Column("Score", "num", lambda k, r: r.score, lambda k, r: _pct(r.score)),
    ]
    if scope.payoff_unit is not None:
        header = "Chips/game" if scope.payoff_unit == "chips" else "Reward/game"
        cols.append(Column(header, "num", lambda k, r: r.mean_payoff, lambda k, r: _num(r.mean_payoff, "+.3f")))
    cols += [
        Column("Invalid", "num", lambda k, r: r.invalid_rate, lambda k, r: _pct(r.invalid_rate)),
        Column("Errors", "num", lambda k, r: r.errors, lambda k, r: str(r.errors)),
    ]
    if _has_exploitability(scope):
        cols.append(
            Column("Exploit.", "num", lambda k, r: r.exploitability, lambda k, r: _num(r.exploitability, ".4f"))
        )
    cols += _usage_columns(scope)
    if reasoning is not None:
        cols.append(_reasoning_column(reasoning))
    return cols


def print_tables(standings: Standings, console: Console | None = None) -> None:
    """The standings of every scope; piped output gets wide lines rather than folded cells."""
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=PIPED_WIDTH)
    for scope in standings.scopes:
        columns = _columns(scope, standings.reasoning)
        table = Table(title=_title(scope), title_justify="left", box=box.SIMPLE_HEAD)
        for column in columns:
            table.add_column(column.header, justify="left" if column.kind == "text" else "right")
        for k, row in enumerate(scope.agents, 1):
            table.add_row(*(column.text(k, row) for column in columns))
        console.print(table)
        if isinstance(scope, Scope):  # a line of its own: a caption would wrap at the table's width
            console.print(scale_note(scope), markup=False, highlight=False)
    if _has_provisional(standings):
        console.print(provisional_legend(standings), markup=False, highlight=False)
    for line in cost_legend(standings):
        console.print(line, markup=False, highlight=False)
    if standings.reasoning is not None:
        for line in (standings.reasoning.legend, *standings.reasoning.notes):
            console.print(line, markup=False, highlight=False)
    if standings.errors:
        console.print(f"[bold red]{len(standings.errors)} game(s) ended by an agent error (not rated):[/]")
        for culprit, (count, example) in error_summary(standings).items():
            console.print(f"  {culprit}: {count} game(s), e.g. {example}", markup=False, highlight=False)


def error_summary(standings: Standings) -> dict[str, tuple[int, str]]:
    """Agent that failed -> (number of games it broke off, the first error message)."""
    summary: dict[str, tuple[int, str]] = {}
    for g in standings.errors:
        culprit = (g.player0, g.player1)[g.error_seat]
        count, example = summary.get(culprit, (0, g.error))
        summary[culprit] = (count + 1, example)
    return summary


def csv_columns(standings: Standings) -> tuple[str, ...]:
    """``CSV_COLUMNS``, then ``USAGE_COLUMNS`` when some agent has usage and ``COST_COLUMNS`` when one was priced."""
    columns = CSV_COLUMNS
    if any(_has_usage(scope) for scope in standings.scopes):
        columns += USAGE_COLUMNS
    if any(_has_cost(scope) for scope in standings.scopes):
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


def _plot_intervals(
    ax: Axes,
    scopes: Sequence[Scope | SoloScope],
    labels: list[str],
    point: Callable[[Row], tuple[float, float, float] | None],
    first: int,
) -> None:
    """A marker with its interval, ``point(row)`` = (value, low, high), for every agent of every scope; the
    scopes of one row side by side, coloured from ``C{first}`` on so that each scope has its own colour.
    A provisional rating's marker is hollow."""
    count = len(scopes)
    for s, scope in enumerate(scopes):
        by_label = {r.label: r for r in scope.agents}
        ys, xs, lows, highs, hollow = [], [], [], [], []
        for y, label in enumerate(labels):
            found = point(by_label[label]) if label in by_label else None
            if found is not None:
                value, low, high = found
                ys.append(y + (s - (count - 1) / 2) * 0.8 / count)
                xs.append(value)
                lows.append(value - low)
                highs.append(high - value)
                hollow.append(isinstance(by_label[label], AgentStanding) and by_label[label].provisional)
        colour = f"C{first + s}"
        ax.errorbar(xs, ys, xerr=[lows, highs], fmt="o", capsize=3, label=scope.name, color=colour)
        provisional = [(x, y) for x, y, h in zip(xs, ys, hollow, strict=True) if h]
        if provisional:
            ax.scatter(*zip(*provisional, strict=True), facecolor="white", edgecolor=colour, zorder=3)


def png_figure(standings: Standings) -> Figure:
    """Ratings with their intervals for every rated scope, the success rates of the single-player games,
    and the head-to-head score matrix of the first rated scope, overall when there are several two-player
    games (right). The panels share their rows, so the agent names, wrapped and ending in their key, are
    written once; the matrix columns are the keys."""
    import matplotlib
    from matplotlib.figure import Figure

    rated = [scope for scope in standings.scopes if isinstance(scope, Scope)]
    solo = [scope for scope in standings.scopes if isinstance(scope, SoloScope)]
    keys = agent_keys(standings)
    labels = list(keys)  # the first scope's rank order, then agents only later scopes have
    names = [f"{wrap_name(label)}  [{keys[label]}]" for label in labels]
    n = len(labels)
    name_lines = max(name.count("\n") + 1 for name in names)
    row_height = max(0.42, 0.16 * name_lines + 0.18, 3.2 / n)  # inches; a small field gets a readable matrix
    name_chars = max(len(line) for name in names for line in name.split("\n"))
    widths = {
        "ratings": 3.4 if rated else 0.0,
        "success": 3.0 if solo else 0.0,
        "matrix": max(2.6, n * min(row_height, 0.7)) + 1.1 if rated else 0.0,
    }
    panels = [panel for panel, width in widths.items() if width]
    ratios = [widths[panel] for panel in panels]
    ratios[0] += 0.3 + 0.072 * name_chars  # the names, left of the first panel
    fig = Figure(figsize=(sum(ratios), 1.7 + n * row_height), layout="constrained")
    panel_axes = fig.subplots(1, len(panels), sharey=True, width_ratios=ratios, squeeze=False)[0]
    axes = dict(zip(panels, panel_axes, strict=True))
    if rated:
        main, heat_ax, ratings_ax = rated[0], axes["matrix"], axes["ratings"]
        order, main_scores = score_matrix(main)
        at = [labels.index(label) for label in order]
        scores = np.full((n, n), np.nan)  # agents that never played the main scope stay blank
        scores[np.ix_(at, at)] = main_scores
        colours = matplotlib.colormaps["RdYlGn"].with_extremes(bad="lightgrey")
        image = heat_ax.imshow(100 * np.ma.masked_invalid(scores), cmap=colours, vmin=0, vmax=100, aspect="auto")
        for i in range(n):
            for j in range(n):
                if not math.isnan(scores[i, j]):
                    heat_ax.text(j, i, _num(100 * scores[i, j], ".0f"), ha="center", va="center", fontsize=8)
        heat_ax.set_xticks(range(n), [keys[label] for label in labels])
        heat_ax.set_title(f"{main.name}: head to head", fontsize="medium")
        heat_ax.set_xlabel("against (key)")
        fig.colorbar(image, ax=heat_ax, label="row's score against column (%)", shrink=0.9)
        _plot_intervals(ratings_ax, rated, labels, lambda r: None if r.rating is None else (r.rating, r.low, r.high), 0)
        ratings_ax.set_title("Rating", fontsize="medium")
        ratings_ax.set_xlabel("Bradley-Terry rating (Elo scale)\n95% bootstrap interval; hollow: provisional")
        ratings_ax.grid(axis="x", alpha=0.3)
    if solo:
        success_ax = axes["success"]
        _plot_intervals(
            success_ax,
            solo,
            labels,
            lambda r: None if r.low is None else (100 * r.success_rate, 100 * r.low, 100 * r.high),
            len(rated),
        )
        success_ax.set_xlim(-5, 105)
        success_ax.set_title("Success rate", fontsize="medium")
        success_ax.set_xlabel(f"success in single-player games (%)\n{SUCCESS_INTERVAL}")
        success_ax.grid(axis="x", alpha=0.3)
    axes[panels[0]].set_yticks(range(n), names, fontsize=8)
    axes[panels[0]].set_ylim(n - 0.5, -0.5)  # the first agent on top, as in the matrix
    for panel in panels[1:]:
        axes[panel].tick_params(left=False)
    fig.legend(loc="outside lower center", ncol=min(len(standings.scopes), 4), fontsize="small")
    return fig


def png_bytes(standings: Standings) -> bytes:
    buffer = io.BytesIO()
    png_figure(standings).savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return buffer.getvalue()


def write_png(standings: Standings, path: Path) -> None:
    Path(path).write_bytes(png_bytes(standings))


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def table_id(scope_name: str) -> str:
    """The HTML id of a scope's standings table."""
    return f"standings-{_slug(scope_name)}"


def _standings_table(scope: Scope | SoloScope, reasoning: ReasoningColumn | None) -> str:
    columns = _columns(scope, reasoning)
    head = "".join(f'<th data-type="{c.kind}">{html.escape(c.header)}</th>' for c in columns)
    rows = []
    for k, row in enumerate(scope.agents, 1):
        cells = []
        for column in columns:
            value = column.sort_value(k, row)
            key = html.escape("" if value is None else str(clean(value) if isinstance(value, float) else value))
            cells.append(f'<td data-sort="{key}">{html.escape(column.text(k, row))}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f'<table class="sortable" id="{table_id(scope.name)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _matrix_table(scope: Scope, keys: dict[str, str]) -> str:
    """Rows name the agent after its key; columns show only the key (the name is in their tooltip), so
    the matrix stays narrow however long the labels are."""
    labels = [r.label for r in scope.agents]
    head = "".join(f'<th title="{html.escape(label)}">{keys[label]}</th>' for label in labels)
    unit = f", mean {scope.payoff_unit}" if scope.payoff_unit else ""
    rows = []
    for row in labels:
        cells = []
        for col in labels:
            cell = scope.head_to_head[row].get(col)
            if cell is None or not cell.games:
                cells.append("<td></td>")
                continue
            payoff = f"<br><small>{_num(cell.mean_payoff, '+.3f')}</small>" if scope.payoff_unit else ""
            hue = 120 * cell.score
            cells.append(
                f'<td style="background:hsl({hue:.0f},60%,85%)" title="{cell.games} games">'
                f"{cell.wins}-{cell.draws}-{cell.losses}{payoff}</td>"
            )
        rows.append(
            f'<tr><th class="agent"><span class="key">{keys[row]}</span> {html.escape(row)}</th>{"".join(cells)}</tr>'
        )
    return (
        f'<p class="note">Row against column (columns by key): wins-draws-losses{unit}.</p>'
        f'<table class="matrix" id="matrix-{_slug(scope.name)}"><thead><tr><th></th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1, h2, p, li, code { overflow-wrap: anywhere; }
.wide { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; white-space: nowrap; }
table.sortable td:nth-child(2), table.sortable th:nth-child(2), .matrix th { text-align: left; }
table.sortable td:nth-child(2), .matrix th.agent {
  white-space: normal; overflow-wrap: anywhere; min-width: 10em; max-width: 36em;
}
.matrix thead th { text-align: center; }
.key { color: #555; margin-right: 0.3em; }
.matrix td { text-align: center; }
table.sortable th { cursor: pointer; background: #f0f0f0; user-select: none; }
th[aria-sort="ascending"]::after { content: " \\25B2"; }
th[aria-sort="descending"]::after { content: " \\25BC"; }
.note { color: #666; font-size: 0.9em; }
img { max-width: 100%; }
"""

_JS = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  var headers = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(headers, function (th, col) {
    th.addEventListener("click", function () {
      var up = th.getAttribute("aria-sort") !== "ascending";
      var numeric = th.dataset.type === "num";
      Array.prototype.forEach.call(headers, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col].dataset.sort, y = b.cells[col].dataset.sort;
        if (x === "" || y === "") { return (x === "") - (y === ""); }  // blanks last either way
        var c = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
        return up ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def _method_note(standings: Standings) -> str:
    """How the page's numbers were made, for the kinds of scope it has."""
    notes = []
    if any(isinstance(scope, Scope) for scope in standings.scopes):
        notes.append(
            "Bradley-Terry ratings (a draw is half a win) on the Elo scale with 95% intervals from "
            f"{standings.resamples} bootstrap resamples of duplicate seed pairs. Chip games are ranked by mean chips "
            "per game."
        )
    if any(isinstance(scope, SoloScope) for scope in standings.scopes):
        notes.append(
            f"Single-player games are ranked by success rate with its {SUCCESS_INTERVAL}; every agent plays the "
            "same seeds, and these games are not rated."
        )
    return " ".join(notes)


def html_page(standings: Standings, title: str = "spiral-arena leaderboard") -> str:
    picture = base64.b64encode(png_bytes(standings)).decode("ascii")
    keys = agent_keys(standings)
    sections = []
    for scope in standings.scopes:  # a field too large for the window scrolls inside its box, not the page
        matrix = (
            ""
            if isinstance(scope, SoloScope)
            else f'<h3>Head to head</h3><div class="wide">{_matrix_table(scope, keys)}</div>'
        )
        scale = "" if isinstance(scope, SoloScope) else f'<p class="note scale">{html.escape(scale_note(scope))}</p>'
        sections.append(
            f'<section id="scope-{_slug(scope.name)}"><h2>{html.escape(_title(scope))}</h2>'
            f'<div class="wide">{_standings_table(scope, standings.reasoning)}</div>{scale}{matrix}</section>'
        )
    errors = ""
    if standings.errors:
        items = "".join(
            f"<li>{html.escape(agent)}: {count} game(s), e.g. <code>{html.escape(example)}</code></li>"
            for agent, (count, example) in error_summary(standings).items()
        )
        errors = f"<h2>Errors (not rated)</h2><ul>{items}</ul>"
    reasoning = ""
    if standings.reasoning is not None:
        lines = (standings.reasoning.legend, *standings.reasoning.notes)
        reasoning = "".join(f'<p class="note reasoning">{html.escape(line)}</p>' for line in lines)
    legend = ""
    if _has_provisional(standings):
        legend = f'<p class="note provisional">{html.escape(provisional_legend(standings))}</p>'
    legend += "".join(f'<p class="note costs">{html.escape(line)}</p>' for line in cost_legend(standings))
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{_CSS}</style></head>
<body><h1>{html.escape(title)}</h1>
<p class="note">Generated {stamp}. {_method_note(standings)} Click a column header to sort.</p>
{legend}{reasoning}<img alt="Ratings, success rates and head-to-head scores" src="data:image/png;base64,{picture}">
{"".join(sections)}{errors}
<script>{_JS}</script></body></html>
"""


def write_html(standings: Standings, path: Path) -> None:
    Path(path).write_text(html_page(standings), encoding="utf-8")
