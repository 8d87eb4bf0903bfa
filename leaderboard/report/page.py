"""The standings as one self-contained HTML page: a sortable table per scope, the head-to-head matrix of
each rated scope, and the plot embedded as a base64 PNG.

The page loads nothing: its style (``page.css``, ``heat.css``) and sorting script (``page.js``), package data beside
this module, are written into it inline, so the file can be mailed or archived as it is.
"""

from __future__ import annotations

import base64
import html
import re
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path

from leaderboard.reasoning import ReasoningColumn
from leaderboard.report.columns import (
    SUCCESS_INTERVAL,
    agent_keys,
    clean,
    cost_legend,
    error_summary,
    has_provisional,
    note_legend,
    num,
    provisional_legend,
    scale_note,
    scope_title,
    table_columns,
)
from leaderboard.report.plot import png_bytes
from leaderboard.standings import Scope, SoloScope, Standings

# the page's style (heat.css: the head-to-head colours, which spiral-arena web's page serves too) and script,
# package data of leaderboard.report
ASSETS = ("page.css", "heat.css", "page.js")
HEAT_BINS = 10  # a head-to-head score is coloured in steps of 1 / HEAT_BINS: classes heat-0 to heat-10


def asset(name: str) -> str:
    """The text of one of ``ASSETS``, read from the installed package."""
    return files(__package__).joinpath(name).read_text(encoding="utf-8")


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def table_id(scope_name: str) -> str:
    """The HTML id of a scope's standings table."""
    return f"standings-{_slug(scope_name)}"


def _standings_table(scope: Scope | SoloScope, reasoning: ReasoningColumn | None) -> str:
    columns = table_columns(scope, reasoning)
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


def heat_class(score: float) -> str:
    """The class colouring a head-to-head cell by the row's score, from red (0) to green (1) in ``HEAT_BINS``
    steps (``heat.css`` defines them, for this page and the web page): a class, not a style attribute, so the
    cells stay within a Content-Security-Policy that allows no inline style."""
    return f"heat-{round(HEAT_BINS * score)}"


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
            payoff = f"<br><small>{num(cell.mean_payoff, '+.3f')}</small>" if scope.payoff_unit else ""
            cells.append(
                f'<td class="{heat_class(cell.score)}" title="{cell.games} games">'
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


def html_sections(standings: Standings) -> str:
    """Every scope's section (its standings table, scale, marks and head to head), then the errors: the
    page's body under its plot, which ``spiral-arena web`` shows live too."""
    keys = agent_keys(standings)
    parts = []
    for scope in standings.scopes:  # a field too large for the window scrolls inside its box, not the page
        matrix = (
            ""
            if isinstance(scope, SoloScope)
            else f'<h3>Head to head</h3><div class="wide">{_matrix_table(scope, keys)}</div>'
        )
        scale = "" if isinstance(scope, SoloScope) else f'<p class="note scale">{html.escape(scale_note(scope))}</p>'
        marked = "".join(f'<p class="note marked">{html.escape(line)}</p>' for line in note_legend(scope))
        head = f'<section id="scope-{_slug(scope.name)}" data-scope="{html.escape(scope.name)}">'
        parts.append(
            f"{head}<h2>{html.escape(scope_title(scope))}</h2>"
            f'<div class="wide">{_standings_table(scope, standings.reasoning)}</div>{scale}{marked}{matrix}</section>'
        )
    errors = ""
    if standings.errors:
        items = "".join(
            f"<li>{html.escape(agent)}: {count} game(s), e.g. <code>{html.escape(example)}</code></li>"
            for agent, (count, example) in error_summary(standings).items()
        )
        errors = f"<h2>Errors (not rated)</h2><ul>{items}</ul>"
    return "".join(parts) + errors


def html_page(standings: Standings, title: str = "spiral-arena leaderboard") -> str:
    picture = base64.b64encode(png_bytes(standings)).decode("ascii")
    reasoning = ""
    if standings.reasoning is not None:
        lines = (standings.reasoning.legend, *standings.reasoning.notes)
        reasoning = "".join(f'<p class="note reasoning">{html.escape(line)}</p>' for line in lines)
    legend = ""
    if has_provisional(standings):
        legend = f'<p class="note provisional">{html.escape(provisional_legend(standings))}</p>'
    legend += "".join(f'<p class="note costs">{html.escape(line)}</p>' for line in cost_legend(standings))
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    *styles, script = map(asset, ASSETS)
    style = "".join(styles)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>\n{style}</style></head>
<body><h1>{html.escape(title)}</h1>
<p class="note">Generated {stamp}. {_method_note(standings)} Click a column header to sort.</p>
{legend}{reasoning}<img alt="Ratings, success rates and head-to-head scores" src="data:image/png;base64,{picture}">
{html_sections(standings)}
<script>\n{script}</script></body></html>
"""


def write_html(standings: Standings, path: Path) -> None:
    Path(path).write_text(html_page(standings), encoding="utf-8")
