"""What every format says about a standings row: the columns of a table, how numbers read, and the lines
that say what the numbers mean (scale, provisional rule, usage and cost, errors).

The terminal table and the HTML page show the same ``table_columns``; CSV and JSON write the raw values
beside them (``leaderboard.report.tabular``); the plot and the page share ``agent_keys``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

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
)

USAGE_LEGEND = (
    "Tokens/game: the provider's prompt+completion tokens per finished game (then prompt+completion), "
    "over the games whose replies all stated them; Latency/move: mean wall time of a move's successful request"
)
SUCCESS_HEADER = f"Success [{CONFIDENCE:.0%} CI]"
SUCCESS_INTERVAL = f"{CONFIDENCE:.0%} Wilson score interval"
ZERO = 1e-12  # smaller magnitudes are float noise around an exact 0 (the Nash expert's exploitability)
PROVISIONAL_MARK = "*"
NOTE_MARK = "\u2020"  # after the agent's name: its games of this table are marked (``AgentStanding.note``)
ANCHOR_TEXT = "anchor"  # the anchor's interval cell: its rating is fixed, not estimated
WEIGHTING_TEXT = {  # what each ``--weighting`` means, in the overall table's scale line
    "games": "every game counts once",
    "equal": "every game id weighs the same, however many games it has",
}


def clean(value: float) -> float:
    """``value``, or 0.0 when it is float noise around zero, so that an exact result reads as one."""
    return 0.0 if abs(value) < ZERO else value


def num(value: float | None, spec: str) -> str:
    """``value`` formatted by ``spec``; one that rounds to zero prints as zero, never as -0 or 2.78e-17."""
    if value is None:
        return ""
    text = format(value, spec)
    return format(0.0, spec) if float(text) == 0 else text


def _pct(value: float | None) -> str:
    return "" if value is None else num(100 * value, ".1f") + "%"


def _rating_text(row: AgentStanding) -> str:
    return num(row.rating, ".0f") + (PROVISIONAL_MARK if row.provisional else "")


def _interval(row: AgentStanding) -> str:
    if row.anchor:
        return ANCHOR_TEXT
    return "" if row.low is None else f"{num(row.low, '.0f')}-{num(row.high, '.0f')}"


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
        f"{CONFIDENCE:.0%} interval wider than {num(standings.max_interval, 'g')} Elo points"
    )


def agent_text(row: AgentStanding | SoloStanding) -> str:
    """The Agent cell: the label, with ``NOTE_MARK`` when the row has a note."""
    return row.label + (NOTE_MARK if row.note else "")


def note_legend(scope: Scope | SoloScope) -> list[str]:
    """One line per marked agent of ``scope`` (shown under its table): the mark and the note, which names
    the agent (``models.checkpoints.Trained``), e.g. why a checkpoint plays rules it was not trained on."""
    return [f"{NOTE_MARK} {row.note}" for row in scope.agents if row.note]


def has_provisional(standings: Standings) -> bool:
    return any(isinstance(r, AgentStanding) and r.provisional for scope in standings.scopes for r in scope.agents)


def _success_text(row: SoloStanding) -> str:
    if row.low is None:
        return ""
    return f"{_pct(row.success_rate)} [{num(100 * row.low, '.1f')}-{num(100 * row.high, '.1f')}]"


def _reasoning_text(score: ReasoningScore | None) -> str:
    if score is None:
        return ""
    interval = "" if score.low is None else f" ({num(100 * score.low, '.1f')}-{num(100 * score.high, '.1f')})"
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


def _has_exploitability(scope: Scope) -> bool:
    return any(r.exploitability is not None for r in scope.agents)


def scope_title(scope: Scope | SoloScope) -> str:
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


def has_usage(scope: Scope | SoloScope) -> bool:
    return any(r.usage is not None for r in scope.agents)


def has_cost(scope: Scope | SoloScope) -> bool:
    return any(r.usage is not None and r.usage.cost_per_game is not None for r in scope.agents)


def _usage_of(row: Row, name: str) -> Any:
    return None if row.usage is None else getattr(row.usage, name)


def _tokens_text(row: Row) -> str:
    usage = row.usage
    if usage is None or not usage.token_games:
        return ""
    prompt, completion = usage.prompt_tokens_per_game, usage.completion_tokens_per_game
    return f"{num(prompt + completion, '.0f')} ({num(prompt, '.0f')}+{num(completion, '.0f')})"


def _dollars(value: float | None) -> str:
    return "" if value is None else "$" + num(value, ".3g" if value < 1 else ".2f")


def _latency_text(row: Row) -> str:
    latency = _usage_of(row, "latency_per_move_s")
    return "" if latency is None else num(latency, ".2f") + "s"


def _cost_of(rank: int, row: Row) -> float | None:
    return _usage_of(row, "cost_per_game")


def _usage_columns(scope: Scope | SoloScope) -> list[Column]:
    """Tokens per game and latency per move where an agent has usage; cost per game, and for rated tables
    rating per cent, where one was priced."""
    cols = []
    if has_usage(scope):
        cols += [
            Column("Tokens/game", "num", lambda k, r: _usage_of(r, "tokens_per_game"), lambda k, r: _tokens_text(r)),
            Column(
                "Latency/move", "num", lambda k, r: _usage_of(r, "latency_per_move_s"), lambda k, r: _latency_text(r)
            ),
        ]
    if has_cost(scope):
        cols.append(Column("$/game", "num", _cost_of, lambda k, r: _dollars(_cost_of(k, r))))
        if isinstance(scope, Scope):
            cols.append(
                Column("Elo/cent", "num", lambda k, r: r.rating_per_cent, lambda k, r: num(r.rating_per_cent, ".1f"))
            )
    return cols


def cost_legend(standings: Standings) -> list[str]:
    """The lines explaining the usage and cost columns, when some table has them."""
    scopes = standings.scopes
    lines = [USAGE_LEGEND] if any(has_usage(scope) for scope in scopes) else []
    if any(has_cost(scope) for scope in scopes):
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
        Column("Agent", "text", lambda k, r: r.label, lambda k, r: agent_text(r)),
        Column("Games", "num", lambda k, r: r.games, lambda k, r: str(r.games)),
        Column("Successes", "num", lambda k, r: r.successes, lambda k, r: str(r.successes)),
        Column(SUCCESS_HEADER, "num", lambda k, r: r.success_rate, lambda k, r: _success_text(r)),
        Column("Turns", "num", lambda k, r: r.mean_turns, lambda k, r: num(r.mean_turns, ".1f")),
        Column("Invalid", "num", lambda k, r: r.invalid_rate, lambda k, r: _pct(r.invalid_rate)),
        Column("Errors", "num", lambda k, r: r.errors, lambda k, r: str(r.errors)),
    ]
    return cols if reasoning is None else [*cols, _reasoning_column(reasoning)]


def table_columns(scope: Scope | SoloScope, reasoning: ReasoningColumn | None = None) -> list[Column]:
    """The standings columns of ``scope``: payoff only per game, exploitability where an agent has one,
    reasoning when eval runs were given; a single-player scope has its own (``_solo_columns``)."""
    if isinstance(scope, SoloScope):
        cols = _solo_columns(None) + _usage_columns(scope)
        return cols if reasoning is None else [*cols, _reasoning_column(reasoning)]
    cols = [
        Column("#", "num", lambda k, r: k, lambda k, r: str(k)),
        Column("Agent", "text", lambda k, r: r.label, lambda k, r: agent_text(r)),
        Column("Rating", "num", lambda k, r: r.rating, lambda k, r: _rating_text(r)),
        Column("95% CI", "num", lambda k, r: r.low, lambda k, r: _interval(r)),
        Column("Games", "num", lambda k, r: r.games, lambda k, r: str(r.games)),
        Column("W-D-L", "num", lambda k, r: r.wins, lambda k, r: f"{r.wins}-{r.draws}-{r.losses}"),
        Column("Score", "num", lambda k, r: r.score, lambda k, r: _pct(r.score)),
    ]
    if scope.payoff_unit is not None:
        header = "Chips/game" if scope.payoff_unit == "chips" else "Reward/game"
        cols.append(Column(header, "num", lambda k, r: r.mean_payoff, lambda k, r: num(r.mean_payoff, "+.3f")))
    cols += [
        Column("Invalid", "num", lambda k, r: r.invalid_rate, lambda k, r: _pct(r.invalid_rate)),
        Column("Errors", "num", lambda k, r: r.errors, lambda k, r: str(r.errors)),
    ]
    if _has_exploitability(scope):
        cols.append(Column("Exploit.", "num", lambda k, r: r.exploitability, lambda k, r: num(r.exploitability, ".4f")))
    cols += _usage_columns(scope)
    if reasoning is not None:
        cols.append(_reasoning_column(reasoning))
    return cols


def error_summary(standings: Standings) -> dict[str, tuple[int, str]]:
    """Agent that failed -> (number of games it broke off, the first error message)."""
    summary: dict[str, tuple[int, str]] = {}
    for g in standings.errors:
        culprit = (g.player0, g.player1)[g.error_seat]
        count, example = summary.get(culprit, (0, g.error))
        summary[culprit] = (count + 1, example)
    return summary
