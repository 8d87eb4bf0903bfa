"""The standings as tables in the terminal (rich), with the lines that say what their numbers mean."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from leaderboard.report.columns import (
    cost_legend,
    error_summary,
    has_provisional,
    note_legend,
    provisional_legend,
    scale_note,
    scope_title,
    table_columns,
)
from leaderboard.standings import Scope, Standings

PIPED_WIDTH = 200


def print_tables(standings: Standings, console: Console | None = None) -> None:
    """The standings of every scope; piped output gets wide lines rather than folded cells."""
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=PIPED_WIDTH)
    for scope in standings.scopes:
        columns = table_columns(scope, standings.reasoning)
        table = Table(title=scope_title(scope), title_justify="left", box=box.SIMPLE_HEAD)
        for column in columns:
            table.add_column(column.header, justify="left" if column.kind == "text" else "right")
        for k, row in enumerate(scope.agents, 1):
            table.add_row(*(column.text(k, row) for column in columns))
        console.print(table)
        if isinstance(scope, Scope):  # a line of its own: a caption would wrap at the table's width
            console.print(scale_note(scope), markup=False, highlight=False)
        for line in note_legend(scope):
            console.print(line, markup=False, highlight=False)
    if has_provisional(standings):
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
