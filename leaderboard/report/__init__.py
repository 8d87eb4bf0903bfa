"""Standings out: a terminal table (rich), CSV, JSON, a PNG plot and one self-contained HTML page.

One module per format (``terminal``, ``tabular`` for CSV and JSON, ``plot`` for the PNG, ``page`` for HTML,
whose CSS and script are the package data ``page.css`` and ``page.js``), on ``columns``, which says what
every format shows. ``spiral-arena leaderboard show --KIND PATH`` calls ``write_KIND``.

The HTML page has no external assets: CSS and the sorting script are inline and the plot is embedded
as a base64 PNG, so the file can be mailed or archived as it is. Single-player scopes have their own
columns (success rate with its interval, turns) in every output, and no head to head.

Every output says what the ratings can be trusted for: each rated table names its scale (the anchor
agent, or the mean, at 1000), a provisional rating carries ``PROVISIONAL_MARK`` (a hollow marker in the
plot, ``provisional`` in CSV and JSON) with a legend giving the rule, and the anchor's interval reads
"anchor" rather than a zero-width interval.

An agent whose games of one game id come with a note (``store.load_notes``: a checkpoint playing rules or a
game it was not trained on) has ``NOTE_MARK`` after its name in that game's table, a line under the table
giving the note, and the note in CSV and JSON (``note``); the plot marks its name.

API agents' usage (tokens per game, latency per move) and, with prices, cost per game and rating per cent
get columns only where some agent has such data: in the tables that hold it, and in CSV and JSON (as
``USAGE_COLUMNS`` and ``COST_COLUMNS``) when any table does; so tables of scripted agents look as before.
"""

from __future__ import annotations

from leaderboard.report.columns import (
    ANCHOR_TEXT,
    NOTE_MARK,
    PROVISIONAL_MARK,
    SUCCESS_HEADER,
    WEIGHTING_TEXT,
    agent_keys,
)
from leaderboard.report.page import html_page, html_sections, table_id, write_html
from leaderboard.report.plot import NAME_LINES, NAME_WIDTH, png_bytes, png_figure, wrap_name, write_png
from leaderboard.report.tabular import COST_COLUMNS, CSV_COLUMNS, USAGE_COLUMNS, to_json, write_csv, write_json
from leaderboard.report.terminal import print_tables

__all__ = [
    "ANCHOR_TEXT",
    "COST_COLUMNS",
    "CSV_COLUMNS",
    "NAME_LINES",
    "NAME_WIDTH",
    "NOTE_MARK",
    "PROVISIONAL_MARK",
    "SUCCESS_HEADER",
    "USAGE_COLUMNS",
    "WEIGHTING_TEXT",
    "agent_keys",
    "html_page",
    "html_sections",
    "png_bytes",
    "png_figure",
    "print_tables",
    "table_id",
    "to_json",
    "wrap_name",
    "write_csv",
    "write_html",
    "write_json",
    "write_png",
]
