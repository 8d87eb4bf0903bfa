"""Does the default tiny recipe learn, on every seed? It, its --no-rae ablation and the levers, side by side.

Runs ``spiral-arena train`` (the embedded CPU recipe) for each variant and seed, one run at a time
in a fresh process (so runs do not share threads or caches), then prints per evaluation step the
mean and min/max over seeds of: Kuhn single-hand exploitability, TicTacToe win-or-draw against the
random agent, SimpleNegotiation wins against random and win-or-draw against the expert, and the invalid-answer
rate of the worst trained game (each over its matches against every evaluation opponent: the numbers the run's
own final table checks, ``trainers.summary.headline``); and a final table (final policy, not a peak) with 95%
intervals over seeds and how many seeds meet each target. Targets for the default recipe, on each seed's final
policy (``trainers.summary.TARGETS``): exploitability <= 0.20, TicTacToe win-or-draw vs random >= 0.85,
Negotiation wins vs random >= 0.46 and win-or-draw vs expert >= 0.59, invalid <= 1% in every game.

    python benchmarks/learning.py --seeds 3                       # default and no_rae, seeds 0, 1, 2
    python benchmarks/learning.py --seeds 3 --variants default,state_baseline,ppo2
    python benchmarks/learning.py --seeds 3 --report              # tables from finished runs only
    python benchmarks/learning.py --seeds 1 --seed-from 2         # seed 2 only (e.g. in a second process)
    python benchmarks/learning.py --seeds 2 --set steps=4 --set sft_steps=4   # any config key

A run whose directory already holds its final evaluation is read, not repeated, so an interrupted
benchmark continues where it stopped.

``--select`` measures choosing the final checkpoint by evaluation instead of taking the last: each
finished run's checkpoint with the best in-training score (TicTacToe win-or-draw minus exploitability,
over the evaluations that have a checkpoint) is picked, then it and the last checkpoint are both played
again on fresh seeds (``--select-games`` TicTacToe games per seat against random, through ``hf:`` with
the sampling the run recorded, as a user would), so the pick's advantage is not the luck that picked it.
Exploitability is computed exactly from the policy, so it needs no held-out replay.

    python benchmarks/learning.py --seeds 3 --variants default,no_rae --report --select

``--tactics`` reads, for each finished run's warm start and last checkpoint, how often the policy
completes a line at TicTacToe where it can and blocks the opponent's single threat
(``spiral_arena.analysis.tictactoe``: exact answer probabilities at the run's evaluation temperature on
every position where it applies), beside uniform play over the legal cells: whether the policy reads
the board at all, which win-or-draw against random cannot separate from luck.

    python benchmarks/learning.py --seeds 3 --variants default --report --tactics

``--control`` is SPIRAL's control experiment in miniature: the same recipe trained against a fixed opponent
(``vs_random``, ``vs_expert``) beside self-play (``default``), and for each the final exploitability and
win rates against random and against the expert in both games, with a plot of exploitability and the
Kuhn win rates over steps:

    python benchmarks/learning.py --seeds 3 --variants default,vs_random,vs_expert --control
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from spiral_arena.analysis.read_policy import ScoreFn
from spiral_arena.registry import GameSpec
from spiral_arena.rollout import parse_mixture
from trainers.flags import read_settings
from trainers.summary import TARGETS as RECIPE_TARGETS
from trainers.summary import headline, match_table
from trainers.validation import ConfigError

# Each variant: config overrides on top of the default recipe (the levers issue 13 asks to measure).
VARIANTS: dict[str, dict[str, object]] = {
    "default": {},
    "no_rae": {"rae": False},
    "state_baseline": {"state_baseline": 4},
    "pool": {"opponent_pool": 4, "pool_prob": 0.5, "pool_every": 10},
    "ppo2": {"loss": "ppo", "epochs": 2},
    "uniform_warm_start": {"sft_agent": "random"},
    "no_kl": {"kl_coef": 0.0},
    "entropy": {"entropy_coef": 0.02},
    # SPIRAL's control: the same recipe against a fixed opponent instead of itself (--control reports them)
    "vs_random": {"opponent": "random"},
    "vs_expert": {"opponent": "expert"},
    # RAE per actor as SPIRAL's upstream keeps it (issue 42): 8 rollout shards of 16 turns, one EMA per (shard,
    # game, role), each updated by its own shard's games only; and the same 8 shards with one EMA per step, the
    # control that changes only the baseline's scope
    "rae_shard": {"rollout_shards": 8, "rae_scope": "shard"},
    "shards_step": {"rollout_shards": 8, "rae_scope": "step"},
    # MARSHAL as released (issue 58): per-turn rewards through the released normalisation (trainers.marshal)
    "marshal": {"advantage": "marshal"},
}
CONTROL = ("default", "vs_random", "vs_expert")
KUHN, TTT = "KuhnPoker-v0", "TicTacToe-v0"  # env ids: a run's games carry options (TicTacToe-v0:board=lines)
# The trainer's own targets (trainers.summary.TARGETS), under this table's metric names.
_METRICS = {
    "kuhn_exploitability": "exploitability",
    "tictactoe_vs_random": "ttt_win_or_draw",
    "negotiation_wins_vs_random": "neg_wins",
    "negotiation_vs_expert": "neg_vs_expert",
    "invalid": "invalid",
}
TARGETS = {_METRICS[key]: (kind, limit) for key, kind, limit, _ in RECIPE_TARGETS}
T_95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def eval_rows(run: Path, key: str = "eval/kuhn_exploitability") -> list[dict]:
    """The metrics rows of ``run`` that carry an evaluation (``key``: a metric every evaluation of the run
    logs), in step order."""
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if key in r]


def finished(run: Path, key: str = "eval/kuhn_exploitability") -> bool:
    """The run wrote its final evaluation (its config's last step, or a time-limit stop)."""
    config = run / "config.json"
    rows = eval_rows(run, key)
    if not config.exists() or not rows:
        return False
    return rows[-1]["step"] == json.loads(config.read_text())["steps"] or "stopped_by_time_limit" in rows[-1]


def summary(r: dict, trained: list[str]) -> dict[str, float]:
    """The headline numbers of one evaluation row of a run that trained ``trained`` (game labels): the
    targets' three as the run's own final table reads them (``trainers.summary.headline``), and the
    control experiment's win rates."""
    table = match_table(r)
    played = {GameSpec.parse(game).env_id: game for game in table}  # the run's own spelling of each game

    def against(env_id: str, opponent: str, outcome: str) -> float:
        return table.get(played.get(env_id, ""), {}).get(opponent, {}).get(outcome, float("nan"))

    numbers = headline(r, trained)
    return {
        "step": r["step"],
        "time_s": r["time_s"],
        **{_METRICS[key]: numbers.get(key, float("nan")) for key in _METRICS},
        # the control experiment's columns: wins against each fixed opponent
        "kuhn_win_vs_random": against(KUHN, "random", "win"),
        "kuhn_win_vs_expert": against(KUHN, "expert", "win"),
        "ttt_win_or_draw_vs_expert": against(TTT, "expert", "win") + against(TTT, "expert", "draw"),
    }


def summaries(run: Path) -> list[dict[str, float]]:
    """``summary`` of each evaluation of a run, read with the games its config trained."""
    games = json.loads((run / "config.json").read_text())["games"]
    trained = [spec.label for spec in parse_mixture(games, "")[0]]
    return [summary(r, trained) for r in eval_rows(run)]


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% t-interval over seeds (nan with one seed)."""
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, float("nan")
    t = T_95.get(len(values) - 1, 1.96)
    return mean, t * float(np.std(values, ddof=1)) / math.sqrt(len(values))


def meets(metric: str, value: float) -> bool:
    kind, limit = TARGETS[metric]
    return value <= limit if kind == "max" else value >= limit


def run_one(out: Path, variant: str, seed: int, settings: dict[str, str]) -> Path:
    """Train one (variant, seed) in a fresh process unless its run already finished."""
    run = out / variant / f"seed{seed}"
    if not finished(run):
        train_fresh(run, {"seed": seed, **VARIANTS[variant], **settings})
    return run


def start_fresh(run: Path, config: dict[str, object], threads: int | None = None) -> subprocess.Popen:
    """Start training ``config`` (recipe overrides; strings are parsed as flags are) into ``run`` in a fresh
    process, so runs share no threads or caches; ``threads``: torch's intra-op threads there (its default: one
    a core). An unfinished run left there (a stopped benchmark) is replaced."""
    code = (
        "import json, sys\nfrom trainers.config import TrainConfig\nfrom trainers.loop import train\n"
        "train(TrainConfig.build(json.loads(sys.argv[1])))"
    )
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)} if threads else None
    argv = [sys.executable, "-c", code, json.dumps({"output_dir": str(run), "overwrite": True, **config})]
    return subprocess.Popen(argv, env=env)


def train_fresh(run: Path, config: dict[str, object], threads: int | None = None) -> None:
    """``start_fresh``, waited for (an interrupted benchmark stops its run too); a failed run raises."""
    finish(start_fresh(run, config, threads))


def finish(process: subprocess.Popen) -> None:
    """Wait for a run ``start_fresh`` started, killing it if the wait is interrupted; a failed run raises."""
    try:
        code = process.wait()
    except BaseException:
        process.kill()
        process.wait()
        raise
    if code:
        raise subprocess.CalledProcessError(code, process.args)


def step_table(variant: str, runs: dict[int, list[dict]]) -> Table:
    """Per evaluation step: mean [min, max] over the seeds that reached it."""
    table = Table(title=escape(f"{variant}: mean [min, max] over seeds {', '.join(map(str, runs))}"))
    columns = ("Kuhn exploitability", "TTT win or draw vs random", "Negotiation wins vs random",
               "Negotiation W+D vs expert", "invalid (worst game)")  # fmt: skip
    for col in ("step", "seeds", *columns):
        table.add_column(col, justify="right")
    steps = sorted({s["step"] for rows in runs.values() for s in rows})
    for step in steps:
        at = [s for rows in runs.values() for s in rows if s["step"] == step]
        cells = []
        for metric, fmt in (("exploitability", ".3f"), ("ttt_win_or_draw", ".2f"), ("neg_wins", ".2f"),
                            ("neg_vs_expert", ".2f"), ("invalid", ".3f")):  # fmt: skip
            values = [s[metric] for s in at]
            cells.append(escape(f"{np.mean(values):{fmt}} [{np.min(values):{fmt}}, {np.max(values):{fmt}}]"))
        table.add_row(str(step), str(len(at)), *cells)
    return table


def final_table(finals: dict[str, list[dict]]) -> Table:
    """Each variant's final policies: mean +- 95% interval over seeds, each seed's value, seeds meeting the target."""
    table = Table(title="final policies (each seed's last evaluation): mean +- 95% t-interval over seeds; per seed")
    table.add_column("variant")
    table.add_column("seeds", justify="right")
    for metric, (kind, limit) in TARGETS.items():
        table.add_column(f"{metric} ({'<=' if kind == 'max' else '>='} {limit:g})", justify="right")
    table.add_column("minutes", justify="right")
    for variant, rows in finals.items():
        cells = []
        for metric in TARGETS:
            values = [r[metric] for r in rows]
            mean, half = interval(values)
            met = sum(meets(metric, v) for v in values)
            each = ", ".join(f"{v:.3f}" for v in values)
            cells.append(f"{mean:.3f} +- {half:.3f} ({each}; {met}/{len(values)} met)")
        minutes = ", ".join(f"{r['time_s'] / 60:.1f}" for r in rows)
        table.add_row(variant, str(len(rows)), *cells, minutes)
    return table


SELECT_SEED = 900_000  # fresh game seeds for the held-out replay: the runs evaluate from their own seed on


def score(row: dict) -> float:
    """The in-training number a checkpoint is picked by: higher is better on both targets at once."""
    return row["ttt_win_or_draw"] - row["exploitability"]


def ttt_game(config: dict) -> str:
    """The TicTacToe a run trained, with its options (its board layout): the text to replay and read it on."""
    return next((s.canonical for s in parse_mixture(config["games"], "")[0] if s.env_id == TTT), TTT)


def ttt_vs_random(checkpoint: Path, games_per_seat: int, game: str) -> float:
    """Win-or-draw share of ``hf:checkpoint`` (its recorded sampling) against random at ``game`` (the
    run's TicTacToe, its options included), ``games_per_seat`` games in each seat on fresh seeds, played
    in flight as ``spiral-arena play`` does."""
    from spiral_arena.agents import make_agent
    from spiral_arena.play import play_games

    model, opponent = make_agent(f"hf:{checkpoint}"), make_agent("random")
    seeds = list(range(SELECT_SEED, SELECT_SEED + games_per_seat))
    good = 0
    for seat, agents in enumerate(([model, opponent], [opponent, model])):
        for _, record in play_games(game, agents, seeds, concurrency=64):
            good += record.returns[seat] >= record.returns[1 - seat]
    return good / (2 * games_per_seat)


def selection_row(run: Path, games_per_seat: int) -> dict[str, float] | None:
    """The picked and the last checkpoint of one run: step, exploitability, held-out TicTacToe."""
    saved = {int(p.name.removeprefix("step_")): p for p in (run / "checkpoints").glob("step_*")}
    rows = summaries(run)
    candidates = [r for r in rows if r["step"] in saved]
    if not candidates or rows[-1]["step"] not in saved:
        return None
    last, picked = rows[-1], max(candidates, key=score)
    game = ttt_game(json.loads((run / "config.json").read_text()))
    last_ttt = ttt_vs_random(saved[last["step"]], games_per_seat, game)
    picked_ttt = last_ttt if picked is last else ttt_vs_random(saved[picked["step"]], games_per_seat, game)
    return {
        "picked_step": picked["step"],
        "last_exploitability": last["exploitability"],
        "picked_exploitability": picked["exploitability"],
        "last_ttt": last_ttt,
        "picked_ttt": picked_ttt,
    }


CONTROL_COLUMNS = {
    "exploitability": "Kuhn exploitability",
    "kuhn_win_vs_random": "Kuhn win vs random",
    "kuhn_win_vs_expert": "Kuhn win vs expert",
    "ttt_win_or_draw": "TTT W+D vs random",
    "ttt_win_or_draw_vs_expert": "TTT W+D vs expert",
}


def control_table(finals: dict[str, list[dict]]) -> Table:
    """SPIRAL's control experiment: self-play against training on a fixed opponent, final policies."""
    table = Table(title="self-play vs a fixed training opponent, final policies: mean +- 95% t-interval over seeds")
    table.add_column("variant (training opponent)")
    table.add_column("seeds", justify="right")
    for label in CONTROL_COLUMNS.values():
        table.add_column(label, justify="right")
    for variant, rows in finals.items():
        cells = []
        for key in CONTROL_COLUMNS:
            mean, half = interval([r[key] for r in rows])
            cells.append(f"{mean:.3f} +- {half:.3f}")
        table.add_row(variant, str(len(rows)), *cells)
    return table


def control_plot(runs: dict[str, dict[int, list[dict]]], path: Path) -> Path:
    """Exploitability and the Kuhn win rate against each fixed opponent over steps, one line per variant
    (mean over seeds, the band min to max)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("exploitability", "Kuhn exploitability (lower is better)"),
              ("kuhn_win_vs_random", "Kuhn: policy wins vs random"),
              ("kuhn_win_vs_expert", "Kuhn: policy wins vs expert"))  # fmt: skip
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), constrained_layout=True)
    for ax, (key, title) in zip(axes, panels, strict=True):
        for variant, by_seed in runs.items():
            steps = sorted({s["step"] for rows in by_seed.values() for s in rows})
            at = [[s[key] for rows in by_seed.values() for s in rows if s["step"] == step] for step in steps]
            ax.plot(steps, [np.mean(v) for v in at], marker="o", label=f"{variant} ({len(by_seed)} seeds)")
            ax.fill_between(steps, [min(v) for v in at], [max(v) for v in at], alpha=0.15)
        ax.set_title(title)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def selection_table(selected: dict[str, list[dict]], games_per_seat: int) -> Table:
    """Per variant: the last checkpoint against the one picked by evaluation, over seeds."""
    table = Table(
        title=escape(
            f"final checkpoint picked by evaluation vs the last one: mean +- 95% t-interval over seeds "
            f"(TicTacToe replayed: {2 * games_per_seat} fresh games against random)"
        )
    )
    for col in ("variant", "seeds", "picked steps", "exploitability last", "picked", "TTT W+D last", "picked"):
        table.add_column(col, justify="right")
    for variant, rows in selected.items():
        cells = []
        for key in ("last_exploitability", "picked_exploitability", "last_ttt", "picked_ttt"):
            values = [r[key] for r in rows]
            mean, half = interval(values)
            cells.append(f"{mean:.3f} +- {half:.3f} ({', '.join(f'{v:.3f}' for v in values)})")
        steps = ", ".join(str(r["picked_step"]) for r in rows)
        table.add_row(variant, str(len(rows)), steps, *cells)
    return table


def scorer_of(model_dir: Path, config: dict) -> ScoreFn:
    """The answer scorer of one saved model, prompted as its run prompted, at its evaluation temperature."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spiral_arena.models.hf import HFEngine
    from spiral_arena.models.policy import Policy
    from spiral_arena.models.prompting import stop_token_ids
    from spiral_arena.models.scoring import answer_scorer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    stops = stop_token_ids(tokenizer, model.generation_config)
    engine = HFEngine(model, stops, tokenizer.pad_token_id)
    policy = Policy(engine, tokenizer, config["prompt_template"], stops, thinking=config["thinking"])
    return answer_scorer(model, policy, config["eval_temperature"])


def read_tactics(model_dir: Path, config: dict, stride: int = 1) -> dict[str, float]:
    """The TicTacToe tactics of one saved model (``scorer_of``) on every ``stride``-th position of the
    TicTacToe text its run trained on (its options)."""
    from spiral_arena.analysis.tictactoe import tactics_from_scores

    return tactics_from_scores(scorer_of(model_dir, config), config["obs_format"], stride, game=ttt_game(config))


def tactics_rows(run: Path, stride: int = 1) -> dict[str, dict[str, float]]:
    """The tactics of ``run``'s warm start and of its last checkpoint."""
    config = json.loads((run / "config.json").read_text())
    last = max((run / "checkpoints").glob("step_*"))
    return {"warm start": read_tactics(run / "warm_start", config, stride), "final": read_tactics(last, config, stride)}


def tactics_table(read: dict[str, list[dict[str, dict[str, float]]]], stride: int = 1) -> Table:
    """Per variant and policy: mean [min, max] over seeds of the tactics read-out, under uniform play's."""
    from spiral_arena.analysis.tictactoe import tactics_from_scores

    uniform = tactics_from_scores(lambda observation, answers: [-math.log(len(answers))] * len(answers), stride=stride)
    counts = f"{uniform['win_positions']:.0f} positions with a win, {uniform['block_positions']:.0f} with one threat"
    title = f"TicTacToe tactics at the evaluation temperature ({counts}): mean [min, max] over seeds"
    table = Table(title=escape(title))
    for col in ("variant", "policy", "seeds", "P(takes a win)", "P(blocks)", "invalid mass"):
        table.add_column(col, justify="right")
    table.add_row("-", "uniform over legal cells", "-", f"{uniform['takes_win']:.3f}", f"{uniform['blocks']:.3f}", "-")
    for variant, runs in read.items():
        for policy in ("warm start", "final"):
            cells = []
            for key in ("takes_win", "blocks", "invalid_mass"):
                values = [r[policy][key] for r in runs]
                cells.append(f"{np.mean(values):.3f} [{np.min(values):.3f}, {np.max(values):.3f}]")
            table.add_row(variant, policy, str(len(runs)), *cells)
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/learning")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--seed-from", type=int, default=0, help="start at this seed (split seeds over processes)")
    parser.add_argument("--variants", default="default,no_rae", help=f"comma-separated, from {', '.join(VARIANTS)}")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override, all runs")
    parser.add_argument("--report", action="store_true", help="only print the tables of runs already finished")
    parser.add_argument("--select", action="store_true", help="also measure picking the checkpoint by evaluation")
    parser.add_argument("--select-games", type=int, default=200, help="held-out TicTacToe games per seat (200)")
    parser.add_argument("--tactics", action="store_true", help="also read TicTacToe tactics off each run's policies")
    parser.add_argument("--tactics-stride", type=int, default=1, help="read every N-th position only (1: all)")
    parser.add_argument(
        "--control", action="store_true", help=f"also report {', '.join(CONTROL)} side by side, with OUT/control.png"
    )
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; valid: {', '.join(VARIANTS)}")
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    if args.select_games < 1:
        parser.error("--select-games must be at least 1")
    if args.tactics_stride < 1:
        parser.error("--tactics-stride must be at least 1")
    try:
        settings = read_settings(args.set)
    except ConfigError as error:
        parser.error(str(error))
    out, console = Path(args.out), Console()
    finals: dict[str, list[dict]] = {}
    every: dict[str, dict[int, list[dict]]] = {}
    selected: dict[str, list[dict]] = {}
    tactics: dict[str, list[dict]] = {}
    for variant in variants:
        runs: dict[int, list[dict]] = {}
        for seed in range(args.seed_from, args.seed_from + args.seeds):
            run = out / variant / f"seed{seed}"
            if not args.report:
                run_one(out, variant, seed, settings)
            if finished(run):
                runs[seed] = summaries(run)
                if args.select and (row := selection_row(run, args.select_games)) is not None:
                    selected.setdefault(variant, []).append(row)
                if args.tactics:
                    tactics.setdefault(variant, []).append(tactics_rows(run, args.tactics_stride))
        if runs:
            console.print(step_table(variant, runs))
            finals[variant] = [rows[-1] for rows in runs.values()]
            every[variant] = runs
    if finals:
        console.print(final_table(finals))
    else:
        console.print("no finished runs under", out)
    if args.control and (shown := {v: finals[v] for v in CONTROL if v in finals}):
        console.print(control_table(shown))
        console.print("plot:", control_plot({v: every[v] for v in shown}, out / "control.png"))
    if selected:
        console.print(selection_table(selected, args.select_games))
    if tactics:
        console.print(tactics_table(tactics, args.tactics_stride))


if __name__ == "__main__":
    main()
