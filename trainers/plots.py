"""PNG plots of a run, drawn from its metrics.jsonl at the end of training (or any time after).

Evaluation games (fixed opponents, ``eval_temperature``) and training rollouts (self-play, ``temperature``)
go to separate, titled figures, so a self-play draw rate is never read as a result against an expert.
Rates sit on a fixed 0-100% axis and near-constant series get a y range of at least a tenth of their
size, so that noise does not look like a trend. ``figures`` builds the matplotlib Figures without
pyplot (the PNGs are rendered by Agg) so that tests can inspect them; ``plot_run`` writes them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from spiral_arena.analysis.tictactoe import uniform_tactics
from trainers.summary import match_key, match_table

Row = dict[str, Any]

EXPLOITABILITY_REFERENCES = (
    (0.0, "Nash 0"),
    (1 / 3, "any card-blind policy 1/3"),
    (11 / 24, "uniform random 11/24"),
)
RATE_LIMITS = (-0.03, 1.03)  # 0-100% plus a sliver, so that lines at exactly 0% or 100% stay visible
MARKERS = "os^Dv<>p"  # one per opponent (or game), largest first, so that equal series stay visible
MARKER_BELOW = 40  # points per series under which every point gets a marker (evaluations are sparse)
PANEL = (5.0, 3.3)  # inches per grid panel
DPI = 110


def read_run(run_dir: str | Path) -> tuple[list[Row], dict[str, Any]]:
    """The metric rows merged by step in step order (one step can span several lines: the SFT losses
    and the step-0 evaluation), and config.json ({} when absent)."""
    run_dir = Path(run_dir)
    by_step: dict[int, Row] = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            by_step.setdefault(int(row["step"]), {}).update(row)
    config_file = run_dir / "config.json"
    config = json.loads(config_file.read_text()) if config_file.exists() else {}
    return [by_step[s] for s in sorted(by_step)], config


def plot_run(run_dir: str | Path) -> list[Path]:
    """Write every figure the metrics allow into ``run_dir``; returns the paths ([] for empty metrics)."""
    run_dir = Path(run_dir)
    written = []
    for name, fig in figures(*read_run(run_dir)).items():
        fig.savefig(run_dir / name, dpi=DPI)
        written.append(run_dir / name)
    return written


# --- reading series ----------------------------------------------------------------------------------------


def _series(rows: list[Row], value: Callable[[Row], float | None]) -> tuple[list[int], list[float]]:
    """(steps, values) of the rows where ``value`` gives a number."""
    points = [(r["step"], v) for r in rows if (v := value(r)) is not None]
    return [p[0] for p in points], [p[1] for p in points]


def _key(key: str) -> Callable[[Row], float | None]:
    return lambda r: r.get(key)


def _win_or_draw(game: str, opponent: str) -> Callable[[Row], float | None]:
    win, draw = match_key(game, opponent, "win"), match_key(game, opponent, "draw")
    return lambda r: None if win not in r else r[win] + r.get(draw, 0.0)


def _mean_invalid(game: str, opponents: list[str]) -> Callable[[Row], float | None]:
    def value(row: Row) -> float | None:
        found = [row[k] for o in opponents if (k := match_key(game, o, "invalid")) in row]
        return sum(found) / len(found) if found else None

    return value


def _eval_games(rows: list[Row]) -> dict[str, list[str]]:
    """Evaluated game (with its options) -> its opponents, in order of first appearance (``match_table``)."""
    games: dict[str, list[str]] = {}
    for row in rows:
        for game, by_opponent in match_table(row).items():
            opponents = games.setdefault(game, [])
            opponents += [o for o in by_opponent if o not in opponents]
    return games


def _train_games(rows: list[Row]) -> list[str]:
    """Games of the training rollouts (train/{GAME}/games), in order of first appearance."""
    keys = dict.fromkeys(k for r in rows for k in r)
    return [k[len("train/") : -len("/games")] for k in keys if k.startswith("train/") and k.endswith("/games")]


def _temperature(config: dict[str, Any], key: str, lead: str = ", temperature ") -> str:
    """``lead`` and the config's temperature ``key``, or "" when the run has no config.json."""
    return f"{lead}{config[key]:g}" if isinstance(config.get(key), int | float) else ""


def _colours(names: Iterable[str]) -> dict[str, Any]:
    """One tab10 colour per name, the same in every panel of a figure."""
    from matplotlib import colormaps

    palette = colormaps["tab10"].colors
    return {name: palette[i % len(palette)] for i, name in enumerate(dict.fromkeys(names))}


# --- axes helpers --------------------------------------------------------------------------------------------


def _plot(ax: Axes, steps: list[int], values: list[float], label: str, index: int = 0, **style: Any) -> None:
    """One labelled series; sparse ones get markers, the ``index``-th shape and a size that shrinks with
    ``index`` so that a series drawn over an equal one leaves it visible."""
    if steps:
        sparse = len(steps) < MARKER_BELOW
        style = {
            "marker": MARKERS[index % len(MARKERS)] if sparse else None,
            "markersize": max(3.0, 6.5 - 1.5 * index),
            "linewidth": 1.5,
            **style,
        }
        ax.plot(steps, values, label=label, **style)


def _rate_axis(ax: Axes) -> None:
    ax.set_ylim(*RATE_LIMITS)
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))


def _steady_ylim(ax: Axes, values: list[float], min_span: float = 0.1) -> None:
    """A y range at least ``min_span`` of the mean magnitude wide, centred on the data, and not below 0
    for non-negative data: a response length moving between 11.63 and 11.74 tokens should look flat."""
    if not values:
        return
    low, high = min(values), max(values)
    need = max(min_span * abs(sum(values) / len(values)), 1e-9)
    if high - low < need:
        middle = (low + high) / 2
        low, high = middle - need / 2, middle + need / 2
    pad = 0.08 * (high - low)
    low, high = low - pad, high + pad
    if min(values) >= 0 > low:
        low, high = 0.0, high - low
    ax.set_ylim(low, high)


def _decorate(ax: Axes, title: str, ylabel: str = "", legend: str | None = "small") -> None:
    """Title, y label, grid, and a legend in font size ``legend`` (None: the caller places one)."""
    ax.set_title(title, fontsize="medium")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if legend and ax.lines:
        ax.legend(fontsize=legend, loc="best", framealpha=0.85)


def _grid(count: int, columns: int, title: str) -> tuple[Figure, list[Axes]]:
    """A figure of ``count`` panels sharing the step axis; the spare cells of the last row are hidden."""
    columns = max(1, min(columns, count))
    rows = math.ceil(count / columns)
    fig = Figure(figsize=(max(8.0, PANEL[0] * columns), PANEL[1] * rows + 1.0), layout="constrained")
    axes = list(fig.subplots(rows, columns, sharex=True, squeeze=False).flat)
    for spare in axes[count:]:
        spare.set_visible(False)
    for ax in axes[:count]:
        ax.tick_params(labelbottom=True)
        ax.set_xlabel("policy step", fontsize="small")
    fig.suptitle(title, fontsize="large")
    return fig, axes[:count]


def _single(title: str) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(9, 4.8), layout="constrained")
    ax = fig.subplots()
    fig.suptitle(title, fontsize="large")
    ax.set_xlabel("policy step")
    return fig, ax


def _shared_legend(fig: Figure, axes: list[Axes]) -> None:
    """One legend under the panels for the labels they share, so that it covers none of them."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for line in ax.lines:
            handles.setdefault(line.get_label(), line)
    if handles:
        fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncol=min(len(handles), 6))


# --- panels: each draws the series of one axes, alone or in the summary ------------------------------------


def _draw_game(ax: Axes, rows: list[Row], game: str, opponents: list[str], colours: dict, second: str) -> None:
    """Win or draw (solid) against each opponent, with its ``second`` outcome: "loss" (dashed) or
    "invalid" (dotted). In the negotiation a draw is a deal not made, so its wins (dash-dot) are drawn too:
    wins against ``random`` are its target (``trainers.summary.TARGETS``)."""
    deals = game.split(":")[0] == "SimpleNegotiation-v0"
    for i, opponent in enumerate(opponents):
        style = {"color": colours[opponent], "linewidth": max(1.0, 2.4 - 0.8 * i)}  # thinner over thicker
        _plot(ax, *_series(rows, _win_or_draw(game, opponent)), f"vs {opponent}: win or draw", i, **style)
        if deals:
            wins = _series(rows, _key(match_key(game, opponent, "win")))
            _plot(ax, *wins, f"vs {opponent}: win", i, linestyle="-.", marker=None, **style)
        steps, values = _series(rows, _key(match_key(game, opponent, second)))
        dashes = "--" if second == "loss" else ":"
        _plot(ax, steps, values, f"vs {opponent}: {second}", i, linestyle=dashes, marker=None, **style)
    _rate_axis(ax)


def _draw_training_game(ax: Axes, rows: list[Row], game: str) -> None:
    for outcome, label, style in (
        ("invalid", "invalid", {"color": "tab:red"}),
        ("draw", "draw", {"color": "tab:blue"}),
        ("p0_win", "first player wins", {"color": "tab:gray", "linestyle": ":"}),
    ):
        _plot(ax, *_series(rows, _key(f"train/{game}/{outcome}")), label, **style)
    _rate_axis(ax)


def _draw_training_invalid(ax: Axes, rows: list[Row], games: list[str], colours: dict) -> None:
    for game in games:
        _plot(ax, *_series(rows, _key(f"train/{game}/invalid")), game, color=colours[game])
    _rate_axis(ax)


def _rounds(rows: list[Row]) -> str:
    """A title's note when the run plays multi-round Kuhn: the read-out is still of single hands."""
    rounds = max((int(r.get("eval/kuhn_trained_rounds", 1)) for r in rows), default=1)
    return "" if rounds == 1 else f"\n(read on single hands; the run plays {rounds}-round Kuhn)"


TACTICS = (("takes_win", "takes an available win", "tab:green"), ("blocks", "blocks a single threat", "tab:blue"))


def _draw_tactics(ax: Axes, rows: list[Row], legend: str = "small") -> None:
    """The probability of each TicTacToe tactic, above its chance level (uniform play over the legal
    cells, dashed in the same colour): how far the policy reads the board."""
    chance = uniform_tactics()
    for index, (key, label, colour) in enumerate(TACTICS):
        _plot(ax, *_series(rows, _key(f"eval/ttt_{key}")), label, index, color=colour, linewidth=2)
        ax.axhline(chance[key], color=colour, linewidth=0.9, linestyle=(0, (6, 3)), alpha=0.6,
                   label=f"uniform play ({chance[key]:.2f})")  # fmt: skip
    _rate_axis(ax)
    ax.legend(fontsize=legend, loc="lower right", framealpha=0.85)


def _draw_exploitability(ax: Axes, rows: list[Row], legend: str = "small") -> None:
    """Exploitability against its landmarks (reference lines, named on the line itself as well as in
    the legend), the probability mass the policy puts on invalid answers (dotted), and, when logged, the
    exploitability as played, from sampled answers (dashed, in a band of 2 standard errors)."""
    steps, values = _series(rows, _key("eval/kuhn_exploitability"))
    _plot(ax, steps, values, "exploitability", color="tab:purple", linewidth=2)
    steps, invalid = _series(rows, _key("eval/kuhn_invalid_mass"))
    _plot(ax, steps, invalid, "invalid answer mass (probability)", 1, color="tab:gray", linestyle=":")
    played_steps, played = _series(rows, _key("eval/kuhn_exploitability_played"))
    if played_steps:  # sampled answers, parsed as the env does: the policy as it plays, a band of +-2 standard errors
        _plot(ax, played_steps, played, "as played (sampled answers, ±2 s.e.)", 2, color="tab:orange", linestyle="--")
        spread = [2 * r.get("eval/kuhn_exploitability_played_se", 0.0) for r in rows
                  if r.get("eval/kuhn_exploitability_played") is not None]  # fmt: skip  # the rows _series kept
        low = [v - e for v, e in zip(played, spread, strict=True)]
        high = [v + e for v, e in zip(played, spread, strict=True)]
        ax.fill_between(played_steps, low, high, color="tab:orange", alpha=0.2, linewidth=0)
    for value, label in EXPLOITABILITY_REFERENCES:
        ax.axhline(value, color="black", linewidth=0.9, linestyle=(0, (6, 3)), alpha=0.5, label=label)
        ax.annotate(
            label, (1.0, value), xycoords=("axes fraction", "data"), xytext=(-4, 3), textcoords="offset points",
            ha="right", va="bottom", fontsize="x-small", color="0.3",
        )  # fmt: skip
    ax.set_ylim(-0.02, max(0.5, *values, *invalid, *played) * 1.08)
    data = ax.lines[: len(ax.lines) - len(EXPLOITABILITY_REFERENCES)]
    ax.legend(handles=data, fontsize=legend, loc="upper left", framealpha=0.85)


def _draw_response_length(ax: Axes, rows: list[Row]) -> None:
    steps, values = _series(rows, _key("response_tokens_mean"))
    _plot(ax, steps, values, "tokens per response", color="tab:green")
    _steady_ylim(ax, values)


def _draw_loss(ax: Axes, rows: list[Row]) -> None:
    _plot(ax, *_series(rows, _key("loss")), "policy loss", color="tab:blue")
    _plot(ax, *_series(rows, _key("kl")), "KL to the warm start", color="tab:orange")


# --- figures -------------------------------------------------------------------------------------------------


def figures(rows: list[Row], config: dict[str, Any]) -> dict[str, Figure]:
    """File name -> Figure for every plot the rows have data for (none for no rows)."""
    if not rows:
        return {}
    evals, train_games = _eval_games(rows), _train_games(rows)
    has = {key for row in rows for key in row}
    training = f"self-play{_temperature(config, 'temperature')}"
    out: dict[str, Figure] = {}
    if evals:
        out["win_rates.png"] = _win_rates(rows, config, evals)
    if train_games:
        fig, axes = _grid(len(train_games), 3, f"Training rollouts ({training})")
        for ax, game in zip(axes, train_games, strict=False):
            _draw_training_game(ax, rows, game)
            _decorate(ax, game, legend=None)
        _shared_legend(fig, axes)
        out["training_games.png"] = fig
    if "eval/kuhn_exploitability" in has:
        fig, ax = _single(f"Kuhn poker single-hand exploitability: what a best response wins per hand{_rounds(rows)}")
        _draw_exploitability(ax, rows)
        _decorate(ax, "", "chips per hand", legend=None)
        out["exploitability.png"] = fig
    if "eval/ttt_takes_win" in has:
        fig, ax = _single("TicTacToe tactics at the evaluation temperature: does the policy read the board?")
        _draw_tactics(ax, rows)
        _decorate(ax, "", "probability", legend=None)
        out["tactics.png"] = fig
    if train_games or evals:
        out["invalid_rate.png"] = _invalid_rates(rows, config, train_games, evals)
    if "response_tokens_mean" in has:
        fig, ax = _single(f"Mean response length in training rollouts ({training})")
        _draw_response_length(ax, rows)
        _decorate(ax, "", "tokens")
        out["response_length.png"] = fig
    if has & {"loss", "kl"}:
        fig, ax = _single("Policy loss and KL to the warm start")
        _draw_loss(ax, rows)
        _decorate(ax, "")
        out["loss.png"] = fig
    if has & {"logprob_gap/mean", "logprob_gap/max"}:
        fig, ax = _single("On-policy check: |engine log-prob - learner log-prob| per token")
        for i, stat in enumerate(("mean", "max")):
            _plot(ax, *_series(rows, _key(f"logprob_gap/{stat}")), stat, i)
        ax.set_ylim(bottom=0)
        _decorate(ax, "", "nats")
        out["logprob_gap.png"] = fig
    accuracies = sorted(k for k in has if k.startswith("reasoning/") and k.endswith("/accuracy"))
    if accuracies:
        fig, ax = _single(f"Reasoning benchmarks, fixed subset{_temperature(config, 'eval_temperature')}")
        for i, key in enumerate(accuracies):
            _plot(ax, *_series(rows, _key(key)), key.removeprefix("reasoning/").removesuffix("/accuracy"), i)
        _rate_axis(ax)
        _decorate(ax, "", "accuracy")
        out["reasoning.png"] = fig
    out["summary.png"] = _summary(rows, config, evals, train_games, has)
    return out


def _win_rates(rows: list[Row], config: dict[str, Any], evals: dict[str, list[str]]) -> Figure:
    count = f"{config['eval_games']} games per seat and opponent" if isinstance(config.get("eval_games"), int) else ""
    details = ", ".join(d for d in (count, _temperature(config, "eval_temperature", "temperature ")) if d)
    fig, axes = _grid(len(evals), 3, "Evaluation against fixed opponents" + (f" ({details})" if details else ""))
    colours = _colours(o for opponents in evals.values() for o in opponents)
    for ax, (game, opponents) in zip(axes, evals.items(), strict=False):
        _draw_game(ax, rows, game, opponents, colours, "loss")
        _decorate(ax, game, legend=None)
    _shared_legend(fig, axes)
    return fig


def _invalid_rates(
    rows: list[Row], config: dict[str, Any], train_games: list[str], evals: dict[str, list[str]]
) -> Figure:
    """Training and evaluation in separate panels: they differ in temperature and opponent."""
    fig, axes = _grid(bool(train_games) + bool(evals), 2, "Invalid answers (each one ends its game as a loss)")
    colours = _colours([*train_games, *evals])
    panels = iter(axes)
    if train_games:
        ax = next(panels)
        _draw_training_invalid(ax, rows, train_games, colours)
        _decorate(ax, f"training rollouts (self-play{_temperature(config, 'temperature')})", "games with one")
    if evals:
        ax = next(panels)
        for i, (game, opponents) in enumerate(evals.items()):
            _plot(ax, *_series(rows, _mean_invalid(game, opponents)), game, i, color=colours[game])
        _rate_axis(ax)
        title = f"evaluation, mean over {', '.join(dict.fromkeys(o for v in evals.values() for o in v))}"
        _decorate(ax, title + _temperature(config, "eval_temperature"), "games with one", legend=None)
        ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))  # equal series meet at 0/100%
    return fig


def _summary(
    rows: list[Row], config: dict[str, Any], evals: dict[str, list[str]], train_games: list[str], has: set[str]
) -> Figure:
    """The whole run on one page: win or draw and invalid answers per evaluated game, then exploitability,
    invalid answers in training, response length and loss."""
    panels: list[tuple[str, Callable[[Axes], None]]] = []
    colours = _colours(o for opponents in evals.values() for o in opponents)
    for game, opponents in evals.items():
        panels.append((game, lambda ax, g=game, o=opponents: _draw_game(ax, rows, g, o, colours, "invalid")))
    if "eval/kuhn_exploitability" in has:
        title = f"Kuhn single-hand exploitability (chips/hand){_rounds(rows)}"
        panels.append((title, lambda ax: _draw_exploitability(ax, rows, "x-small")))
    if "eval/ttt_takes_win" in has:
        panels.append(("TicTacToe tactics (probability)", lambda ax: _draw_tactics(ax, rows, "x-small")))
    training = f"self-play{_temperature(config, 'temperature', ', T=')}"
    if train_games:
        game_colours = _colours(train_games)
        panels.append(
            (
                f"invalid answers in training ({training})",
                lambda ax: _draw_training_invalid(ax, rows, train_games, game_colours),
            )
        )
    if "response_tokens_mean" in has:
        panels.append((f"response length in training ({training})", lambda ax: _draw_response_length(ax, rows)))
    if has & {"loss", "kl"}:
        panels.append(("loss and KL", lambda ax: _draw_loss(ax, rows)))
    title = "Run summary"
    if evals:
        title += f": evaluation against fixed opponents{_temperature(config, 'eval_temperature')}"
    fig, axes = _grid(max(1, len(panels)), 4 if len(panels) > 6 else 3, title)
    for ax, (name, draw) in zip(axes, panels, strict=False):
        draw(ax)
        _decorate(ax, name, legend=None if name in evals or ax.get_legend() else "x-small")
    if not panels:
        axes[0].text(0.5, 0.5, "no metrics to plot", ha="center", va="center", transform=axes[0].transAxes)
    _shared_legend(fig, axes[: len(evals)])
    return fig
