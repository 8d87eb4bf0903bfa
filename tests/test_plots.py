"""Training plots from a synthetic metrics.jsonl: every file written at a readable size, every series
labelled, evaluation and training rollouts apart, fixed rate axes and exploitability landmarks."""

from __future__ import annotations

import json
import math

import pytest
from matplotlib.image import imread

from trainers import rundir
from trainers.plots import EXPLOITABILITY_REFERENCES, figures, plot_run, read_run

GAMES = ("KuhnPoker-v0:rounds=1", "TicTacToe-v0")
OPPONENTS = ("random", "expert")
CONFIG = {"temperature": 1.0, "eval_temperature": 0.6, "eval_games": 50}
ALL_PNGS = {
    "win_rates.png", "training_games.png", "exploitability.png", "invalid_rate.png", "response_length.png",
    "loss.png", "logprob_gap.png", "reasoning.png", "summary.png", "tactics.png",
}  # fmt: skip


def eval_metrics(step: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for g, game in enumerate(GAMES):
        for o, opponent in enumerate(OPPONENTS):
            win = 0.0 if (game, opponent) == ("TicTacToe-v0", "expert") else 0.4 + 0.01 * step
            draw = 0.3 if game == "TicTacToe-v0" else 0.0
            out |= {f"eval/{game}/{opponent}/{k}": v for k, v in (("win", win), ("draw", draw))}
            out[f"eval/{game}/{opponent}/loss"] = 1 - win - draw
            out[f"eval/{game}/{opponent}/invalid"] = 0.05 * (g + o)
    out["eval/kuhn_exploitability"] = 11 / 24 - 0.004 * step
    out["eval/kuhn_invalid_mass"] = 0.01
    out |= {"eval/kuhn_exploitability_played": 11 / 24 - 0.0035 * step, "eval/kuhn_exploitability_played_se": 0.01}
    out["eval/kuhn_p_bet/J"] = 0.3
    out |= {"eval/ttt_takes_win": 0.44 + 0.003 * step, "eval/ttt_blocks": 0.32 + 0.002 * step}
    out["eval/ttt_invalid_mass"] = 0.03
    out["reasoning/math500/accuracy"] = 0.2
    return out


def train_metrics(step: int) -> dict[str, float]:
    out = {
        "step": step, "time_s": 2.0 * step, "loss": -0.02 + 0.001 * math.sin(step), "kl": 0.001 * step,
        "logprob_gap/mean": 3e-7, "logprob_gap/max": 3e-6, "response_tokens_mean": 11.63 + 0.11 * (step % 2),
        "clip_fraction": 0.0, "grad_norm": 0.1,
    }  # fmt: skip
    for game in GAMES:
        out |= {f"train/{game}/games": 100, f"train/{game}/invalid": 0.1, f"train/{game}/draw": 0.2}
        out[f"train/{game}/p0_win"] = 0.5
    return out


def write_run(path, rows, config=CONFIG):
    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if config is not None:
        (path / "config.json").write_text(json.dumps(config))
    return path


def full_rows(with_eval: bool = True) -> list[dict]:
    rows = [{"step": 0, "sft/loss_first": 6.6, "sft/loss_last": 0.19}]
    if with_eval:
        rows.append({"step": 0, "time_s": 1.0, **eval_metrics(0)})  # the evaluation before training
    for step in range(1, 31):
        row = train_metrics(step)
        if with_eval and step % 10 == 0:
            row |= eval_metrics(step)
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def figs(tmp_path_factory):
    return figures(*read_run(write_run(tmp_path_factory.mktemp("run"), full_rows())))


def visible_axes(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def test_plot_run_writes_every_png_at_a_readable_size(tmp_path):
    run = write_run(tmp_path / "run", full_rows())
    written = plot_run(run)
    assert {p.name for p in written} == ALL_PNGS
    # every PNG a run writes is one `train --overwrite` removes with the old run (trainers.rundir)
    assert {p.name for p in written} <= set(rundir.RUN_ENTRIES)
    for path in written:
        height, width = imread(path).shape[:2]
        assert width >= 800 and height >= 400, path.name


def test_step_zero_lines_are_merged_into_one_row(tmp_path):
    rows, config = read_run(write_run(tmp_path / "run", full_rows()))
    assert [r["step"] for r in rows] == list(range(31)) and config == CONFIG
    assert rows[0]["sft/loss_last"] == 0.19 and "eval/kuhn_exploitability" in rows[0]


def test_every_series_and_reference_line_is_labelled(figs):
    assert set(figs) == ALL_PNGS
    for name, fig in figs.items():
        lines = [line for ax in visible_axes(fig) for line in ax.lines]
        assert lines, name
        for line in lines:
            label = line.get_label()
            assert label and not label.startswith("_"), (name, label)


def test_win_rates_one_panel_per_game_on_a_fixed_rate_axis(figs):
    fig = figs["win_rates.png"]
    axes = visible_axes(fig)
    assert [ax.get_title() for ax in axes] == list(GAMES)
    assert "temperature 0.6" in fig.get_suptitle() and "50 games" in fig.get_suptitle()
    for ax in axes:
        low, high = ax.get_ylim()
        assert -0.05 <= low <= 0 and 1 <= high <= 1.05  # 0-100%, with a sliver for lines at the edges
        labels = {line.get_label() for line in ax.lines}
        assert labels == {f"vs {o}: {k}" for o in OPPONENTS for k in ("win or draw", "loss")}
        assert all(line.get_linestyle() == "--" for line in ax.lines if line.get_label().endswith("loss"))
    tictactoe = {line.get_label(): line for line in axes[1].lines}
    steps, values = tictactoe["vs expert: win or draw"].get_data()
    assert list(steps) == [0, 10, 20, 30]  # the step-0 evaluation is the first point
    assert list(values) == pytest.approx([0.3] * 4)  # draws count: win or draw, not wins alone


def test_training_rollouts_have_their_own_figure(figs):
    fig = figs["training_games.png"]
    assert "Training rollouts (self-play, temperature 1)" in fig.get_suptitle()
    assert [ax.get_title() for ax in visible_axes(fig)] == list(GAMES)
    train_labels = {line.get_label() for ax in visible_axes(fig) for line in ax.lines}
    assert not any("vs " in label for label in train_labels)
    invalid = figs["invalid_rate.png"]
    titles = [ax.get_title() for ax in visible_axes(invalid)]
    assert titles[0].startswith("training rollouts (self-play, temperature 1")
    assert titles[1].startswith("evaluation") and titles[1].endswith("temperature 0.6")
    for name in ("invalid_rate.png", "reasoning.png", "training_games.png"):
        for ax in visible_axes(figs[name]):
            assert ax.get_ylim()[0] <= 0 and ax.get_ylim()[1] >= 1, name


def test_exploitability_has_its_landmarks(figs):
    (ax,) = visible_axes(figs["exploitability.png"])
    levels = {line.get_label(): line.get_ydata()[0] for line in ax.lines if len(set(line.get_ydata())) == 1}
    for value, label in EXPLOITABILITY_REFERENCES:
        assert levels[label] == pytest.approx(value)
    assert {"Nash 0", "any card-blind policy 1/3", "uniform random 11/24"} <= set(levels)
    assert ax.get_ylim()[0] <= 0 and ax.get_ylim()[1] >= 0.5
    assert "invalid answer mass (probability)" in {line.get_label() for line in ax.lines}
    played = next(line for line in ax.lines if line.get_label().startswith("as played"))
    assert list(played.get_ydata()) == pytest.approx([11 / 24 - 0.0035 * s for s in played.get_xdata()])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "exploitability", "invalid answer mass (probability)", "as played (sampled answers, ±2 s.e.)",
    ]  # fmt: skip


def test_a_multi_round_run_says_its_exploitability_is_read_on_single_hands(tmp_path, figs):
    rows = full_rows()
    for row in rows:
        if "eval/kuhn_exploitability" in row:
            row["eval/kuhn_trained_rounds"] = 5
    five = figures(*read_run(write_run(tmp_path / "five", rows)))
    note = "read on single hands; the run plays 5-round Kuhn"
    assert note in five["exploitability.png"].get_suptitle()
    assert any(note in ax.get_title() for ax in five["summary.png"].axes)
    assert "rounds" not in figs["exploitability.png"].get_suptitle()  # single-hand runs say nothing more


def test_small_variations_are_not_blown_up(figs):
    (ax,) = visible_axes(figs["response_length.png"])
    values = ax.lines[0].get_ydata()
    low, high = ax.get_ylim()
    assert high - low >= 0.1 * values.mean()  # 11.63-11.74 tokens must look flat
    assert low <= values.min() and high >= values.max()


def test_summary_has_a_panel_per_game_and_the_run_at_a_glance(figs):
    titles = [ax.get_title() for ax in visible_axes(figs["summary.png"])]
    assert titles[: len(GAMES)] == list(GAMES)
    assert any("exploitability" in t for t in titles) and any("response length" in t for t in titles)
    assert any("invalid answers in training" in t for t in titles) and "loss and KL" in titles


def test_a_run_without_evaluations_still_has_a_summary(tmp_path):
    run = write_run(tmp_path / "run", full_rows(with_eval=False), config=None)
    names = {p.name for p in plot_run(run)}
    assert "summary.png" in names and "training_games.png" in names
    assert not names & {"win_rates.png", "exploitability.png", "reasoning.png"}
    assert imread(run / "summary.png").shape[1] >= 800


def test_empty_metrics_write_nothing(tmp_path):
    run = write_run(tmp_path / "run", [])
    assert plot_run(run) == [] and not list(run.glob("*.png"))
    sft_only = write_run(tmp_path / "sft", [{"step": 0, "sft/loss_first": 6.6, "sft/loss_last": 0.19}])
    assert [p.name for p in plot_run(sft_only)] == ["summary.png"]  # one panel saying there is nothing


def test_tactics_are_drawn_over_their_chance_levels(figs):
    """Each tactic's series at the evaluation steps, and a dashed line at uniform play's level in the
    same colour; the summary page has the panel too."""
    from spiral_arena.analysis.tictactoe import uniform_tactics

    (ax,) = visible_axes(figs["tactics.png"])
    lines = {line.get_label(): line for line in ax.lines}
    takes, blocks = lines["takes an available win"], lines["blocks a single threat"]
    assert list(takes.get_xdata()) == [0, 10, 20, 30]
    assert list(takes.get_ydata()) == pytest.approx([0.44, 0.47, 0.50, 0.53])
    assert list(blocks.get_ydata()) == pytest.approx([0.32, 0.34, 0.36, 0.38])
    chance = uniform_tactics()
    levels = {line.get_color(): line.get_ydata()[0] for line in ax.lines if line.get_linestyle() == "--"}
    assert levels == {takes.get_color(): chance["takes_win"], blocks.get_color(): chance["blocks"]}
    assert any(a.get_title() == "TicTacToe tactics (probability)" for a in visible_axes(figs["summary.png"]))


def test_the_negotiation_panel_draws_its_wins_apart_from_its_draws(tmp_path):
    """A negotiation draw is a deal not made: its wins against random (the target) are drawn beside win or draw."""
    game = "SimpleNegotiation-v0:brief=true"
    rows = []
    for step in (0, 10, 20):
        row = {"step": step, "time_s": 1.0 * step}
        for opponent, win in (("random", 0.2 + 0.01 * step), ("expert", 0.0)):
            row |= {f"eval/{game}/{opponent}/win": win, f"eval/{game}/{opponent}/draw": 0.6}
            row |= {f"eval/{game}/{opponent}/loss": 0.4 - win, f"eval/{game}/{opponent}/invalid": 0.0}
        rows.append(row)
    run_rows, config = read_run(write_run(tmp_path / "run", rows))
    (ax,) = visible_axes(figures(run_rows, config)["win_rates.png"])
    lines = {line.get_label(): line for line in ax.lines}
    assert list(lines["vs random: win"].get_data()[1]) == pytest.approx([0.2, 0.3, 0.4])
    assert list(lines["vs random: win or draw"].get_data()[1]) == pytest.approx([0.8, 0.9, 1.0])
    assert lines["vs random: win"].get_linestyle() == "-."
