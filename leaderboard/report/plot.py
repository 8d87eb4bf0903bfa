"""The standings as one PNG: ratings with their intervals, single-player success rates, and the head-to-head
score matrix, side by side on shared rows. matplotlib is imported only when a plot is drawn."""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from leaderboard.report.columns import NOTE_MARK, SUCCESS_INTERVAL, Row, agent_keys, num
from leaderboard.standings import AgentStanding, Scope, SoloScope, Standings, score_matrix

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

NAME_WIDTH, NAME_LINES = 30, 3  # an agent name in the PNG: characters per line, lines at most


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
    noted = {r.label for scope in standings.scopes for r in scope.agents if r.note}  # marked in some table
    names = [f"{wrap_name(label)}{NOTE_MARK if label in noted else ''}  [{keys[label]}]" for label in labels]
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
                    heat_ax.text(j, i, num(100 * scores[i, j], ".0f"), ha="center", va="center", fontsize=8)
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
    # what the mark on a name means: each note under the legend, as the tables give it under theirs
    said = dict.fromkeys(f"{NOTE_MARK} {r.note}" for scope in standings.scopes for r in scope.agents if r.note)
    legend_notes = "\n".join(textwrap.fill(line, 110, subsequent_indent="  ") for line in said) or None
    fig.legend(loc="outside lower center", ncol=min(len(standings.scopes), 4), fontsize="small",
               title=legend_notes, title_fontsize="x-small")  # fmt: skip
    return fig


def png_bytes(standings: Standings) -> bytes:
    buffer = io.BytesIO()
    png_figure(standings).savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return buffer.getvalue()


def write_png(standings: Standings, path: Path) -> None:
    Path(path).write_bytes(png_bytes(standings))
