"""Twenty Questions on the CPU, in a closed world: warm start, StarPO and ΔBelief-RL from the same warm start.

The world is the tiny recipe's (``trainers.recipes.CLOSED_WORLD``: 32 table nouns, 7 questions). First the
scripted questioners' success at each question budget (what a budget asks of a strategy). Then per seed:
``spiral-arena train --algo starpo`` on the tiny recipe (its warm start imitates the weak questioner: random
unasked table questions, naming a noun that fits every answer with probability 0.3 and on the last question;
and at every turn the noun a naming question would pick, a fitting one, apart from that choice), and
``--algo delta-belief`` from that run's saved warm start with the same RL budget. The warm start's numbers
are the StarPO run's step-0 evaluation. Every secret of the world is played 8 times at each evaluation:
Mean@8 and Pass@8 with 95% bootstrap intervals over the secrets, questions per game and per success.

Before any RL, the read-out shows what the warm start knows, on games of the weak questioner it never saw
(other seeds): the share of its naming probability that falls on nouns fitting the answers so far, against
the share of the world that fits (chance), and its ΔBelief belief in the true secret, normalised over the
world, as answers come in. On the same turns, ΔBelief's reward: the share of questions that raise the
belief, and the correlation of the rise with the splitting expert's information gain of the question.

    python benchmarks/twenty_questions.py [--seeds 0,1,2] [--out runs/twenty_questions] [--steps N]
        [--set KEY=VALUE ...] [--report]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from spiral_arena.agents import make_agent
from spiral_arena.agents.experts.twenty_questions import candidates, information_gain, naming_question
from spiral_arena.analysis.read_policy import answer_text
from spiral_arena.play import play_game
from spiral_arena.registry import GameSpec
from trainers.belief import log_beliefs
from trainers.config import TrainConfig
from trainers.flags import read_settings
from trainers.loop import train
from trainers.recipes import CLOSED_WORLD
from trainers.validation import ConfigError

T_95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57}  # Student t, two-sided 95%, by degrees of freedom
QUESTIONERS = {  # the scripted questioners, weakest first
    "random (the env's example questions)": "random",
    "weak, names w.p. 0.1": "expert#guess_prob=0.1",
    "weak, names w.p. 0.3 (the warm start's)": "expert#guess_prob=0.3",
    "splitting expert": "expert",
}
READ_OUT_SEED = 1_000_000  # the read-out's games: far from the training and evaluation seeds
METHODS = ("warm start", "StarPO", "ΔBelief")


# ---- the scripted questioners ---------------------------------------------------------------------


def scripted_rates(budgets: list[int], games: int) -> dict[str, dict[int, float]]:
    """Each scripted questioner's success rate in the recipe's world at each question budget."""
    spec = GameSpec.parse(CLOSED_WORLD)
    rates: dict[str, dict[int, float]] = {}
    for name, agent_spec in QUESTIONERS.items():
        for budget in budgets:
            env = spec.with_options(max_questions=budget).make()
            agent = make_agent(agent_spec)
            wins = sum(play_game(env, [agent], seed=s).outcome.get("winner") is not None for s in range(games))
            rates.setdefault(name, {})[budget] = wins / games
    return rates


# ---- what a model knows of the world ----------------------------------------------------------------


@dataclass
class Position:
    observation: str  # what the questioner read, as the run prompts it
    secret: str
    fitting: list[str]  # the world's nouns that fit every answer so far
    answers: int  # questions answered so far
    gain_bits: float | None  # the splitting expert's information gain of the question asked next


def read_out_positions(obs_format: str, games: int) -> list[Position]:
    """Every position of ``games`` games of the weak questioner (seeds the runs never play)."""
    spec = GameSpec.parse(CLOSED_WORLD)
    env = spec.make(**({"obs_format": obs_format} if obs_format else {}))
    agent = make_agent(QUESTIONERS["weak, names w.p. 0.3 (the warm start's)"])
    positions = []
    for seed in range(READ_OUT_SEED, READ_OUT_SEED + games):
        env.reset(seed=seed)
        agent.reset(seed=seed)
        for _ in env.agent_iter():
            observation, _, terminated, truncated, info = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            view = info["view"]
            question = agent.act(observation, info)
            positions.append(
                Position(
                    observation,
                    env.state_.secret,
                    candidates(view),
                    sum(q["answer"] in ("yes", "no") for q in view["questions"]),
                    information_gain(view, question),
                )
            )
            env.step(question)
    return positions


def knowledge(model_dir: Path, config: dict, positions: list[Position]) -> dict[str, float]:
    """What the model at ``model_dir`` knows at ``positions``: naming mass on fitting nouns vs the fitting
    share of the world, and its belief (the ΔBelief probe, normalised over the world) in the true secret
    vs 1/|fitting|; and on consecutive turns of a game, ΔBelief's rise against the question's bits."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spiral_arena.models.hf import HFEngine
    from spiral_arena.models.policy import Policy
    from spiral_arena.models.prompting import stop_token_ids
    from spiral_arena.models.scoring import answer_scorer

    world = GameSpec.parse(CLOSED_WORLD).make().game.world
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    stops = stop_token_ids(tokenizer, model.generation_config)
    policy = Policy(HFEngine(model, stops, tokenizer.pad_token_id), tokenizer, config["prompt_template"], stops)
    naming = [answer_text(naming_question(noun)) for noun in world]
    scores = answer_scorer(model, policy, config["eval_temperature"]).many([(p.observation, naming) for p in positions])
    beliefs = log_beliefs(
        model,
        policy,
        [p.observation for p in positions for _ in world],
        [n for _ in positions for n in world],
        probe=config["belief_probe"],
    )
    fit_mass, fit_share, belief, ideal, true_belief = [], [], [], [], []
    by_answers: dict[int, list[tuple[float, float]]] = {}
    for i, p in enumerate(positions):
        named = np.exp(np.array(scores[i]) - max(scores[i]))
        named /= named.sum()
        fits = np.isin(world, p.fitting)
        fit_mass.append(float(named[fits].sum()))
        fit_share.append(float(fits.mean()))
        logb = np.array(beliefs[i * len(world) : (i + 1) * len(world)])
        normalised = np.exp(logb - logb.max())
        normalised /= normalised.sum()
        b = float(normalised[world.index(p.secret)])
        belief.append(b)
        ideal.append(1 / max(1, len(p.fitting)))
        true_belief.append(float(logb[world.index(p.secret)]))
        by_answers.setdefault(p.answers, []).append((b, ideal[-1]))
    rises, bits = [], []
    for i in range(len(positions) - 1):  # consecutive positions of one game: the same secret, one more turn
        now, after = positions[i], positions[i + 1]
        if now.secret == after.secret and after.answers == now.answers + 1 and now.gain_bits is not None:
            rises.append(true_belief[i + 1] - true_belief[i])
            bits.append(now.gain_bits)
    out = {
        "fit_mass": float(np.mean(fit_mass)),
        "fit_chance": float(np.mean(fit_share)),
        "belief": float(np.mean(belief)),
        "belief_ideal": float(np.mean(ideal)),
        "belief_uniform": 1 / len(world),
        "positive_gain_share": float(np.mean(np.array(rises) > 0)),
        "gain_bits_corr": float(np.corrcoef(rises, bits)[0, 1]) if len(rises) > 2 and np.std(bits) > 0 else math.nan,
    }
    out |= {f"belief_after_{n}": float(np.mean([b for b, _ in v])) for n, v in sorted(by_answers.items())}
    out |= {f"ideal_after_{n}": float(np.mean([b for _, b in v])) for n, v in sorted(by_answers.items())}
    return out


# ---- the runs ----------------------------------------------------------------------------------------


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def mean_key(k: int) -> str:
    return f"eval/{CLOSED_WORLD}/mean_at_{k}"


def scores(row: dict, minutes: float, k: int) -> dict[str, float]:
    def get(name: str) -> float:
        return row.get(f"eval/{CLOSED_WORLD}/{name}", math.nan)

    return {
        "mean8": get(f"mean_at_{k}"),
        "mean8_low": get(f"mean_at_{k}_low"),
        "mean8_high": get(f"mean_at_{k}_high"),
        "pass8": get(f"pass_at_{k}"),
        "pass8_low": get(f"pass_at_{k}_low"),
        "pass8_high": get(f"pass_at_{k}_high"),
        "questions": get("questions_mean"),
        "to_success": get("questions_to_success"),
        "invalid": get("invalid_rate"),
        "repeated": get("repeated_rate"),
        "minutes": minutes,
    }


# the success of each RL step's training games (4 x 8 in the recipe): the games the update learns from
TRAIN_SUCCESS = f"train/{CLOSED_WORLD}/success"


def curve(run: Path, key: str) -> list[tuple[int, float]]:
    """(step, value) of ``key`` in every metrics row of ``run`` that has it."""
    return [(r["step"], r[key]) for r in rows(run) if key in r]


def run_seed(seed: int, out: Path, overrides: dict, read_out_games: int) -> dict:
    """Both runs of one seed and what they measured. ``overrides``: the recipe's values to change (a short
    run in the tests)."""
    # no time limit: a busy machine must not cut the RL budget short (wall times are reported instead)
    common = {"seed": seed, "time_limit_s": 0, "overwrite": True, **overrides}  # a rerun replaces its runs
    k = TrainConfig.build({"algo": "starpo", **common}).eval_samples_per_secret
    starpo_dir = out / f"seed{seed}" / "starpo"
    began = time.monotonic()
    train(TrainConfig.build({"algo": "starpo", "output_dir": str(starpo_dir), **common}), progress=False)
    starpo_wall = time.monotonic() - began
    belief_dir = out / f"seed{seed}" / "delta_belief"
    warm = {"model": str(starpo_dir / "warm_start"), "recipe": "tiny", "eval_at_start": False}
    began = time.monotonic()
    settings = {"algo": "delta-belief", "output_dir": str(belief_dir), **common, **warm, "sft_steps": 0}
    train(TrainConfig.build(settings), progress=False)
    belief_wall = time.monotonic() - began
    start, *_, starpo_end = [r for r in rows(starpo_dir) if mean_key(k) in r]
    belief_rows = rows(belief_dir)
    starpo_rl = starpo_end["time_s"] - start["time_s"]  # the clock starts after the warm start's SFT
    config = json.loads((starpo_dir / "config.json").read_text())
    positions = read_out_positions(config["obs_format"], read_out_games)
    last = {
        name: max((out / f"seed{seed}" / name / "checkpoints").glob("step_*")) for name in ("starpo", "delta_belief")
    }
    return {
        "methods": {  # minutes of wall time: the warm start (SFT, its data, its evaluation), each RL run whole
            "warm start": scores(start, (starpo_wall - starpo_rl) / 60, k),
            "StarPO": scores(starpo_end, starpo_rl / 60, k),
            "ΔBelief": scores([r for r in belief_rows if mean_key(k) in r][-1], belief_wall / 60, k),
        },
        "curves": {
            "StarPO": curve(starpo_dir, mean_key(k)),
            "ΔBelief": [(0, start[mean_key(k)])] + curve(belief_dir, mean_key(k)),
        },
        "train_curves": {"StarPO": curve(starpo_dir, TRAIN_SUCCESS), "ΔBelief": curve(belief_dir, TRAIN_SUCCESS)},
        "samples_per_secret": k,
        "knowledge": {
            "warm start": knowledge(starpo_dir / "warm_start", config, positions),
            "StarPO": knowledge(last["starpo"], config, positions),
            "ΔBelief": knowledge(last["delta_belief"], config, positions),
        },
        "training_positive_share": statistics.mean(
            r["belief/positive_share"] for r in belief_rows if "belief/positive_share" in r
        ),
    }


# ---- the report -------------------------------------------------------------------------------------


def spread(values: list[float]) -> str:
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return "-"
    if len(values) < 2:
        return f"{100 * values[0]:.1f} (one seed: a hint)"
    return f"{100 * statistics.mean(values):.1f} ± {100 * statistics.stdev(values):.1f}"


def plot(results: dict[int, dict], path: Path, window: int = 10) -> None:
    """Mean@k over RL steps, both methods on one axis: each seed thin, the mean over seeds thick; beside it the
    success of the training games at every step (mean over seeds of a ``window``-step running mean)."""
    k = next(iter(results.values()))["samples_per_secret"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, steps_ax) = plt.subplots(1, 2, figsize=(12, 4))
    for method, color in (("StarPO", "tab:blue"), ("ΔBelief", "tab:orange")):
        per_seed = [dict(r["train_curves"][method]) for r in results.values()]
        steps = sorted(set.intersection(*(set(c) for c in per_seed)))
        running = [
            statistics.mean(statistics.mean(c[t] for t in steps[max(0, i - window + 1) : i + 1]) for c in per_seed)
            for i in range(len(steps))
        ]
        steps_ax.plot(steps, [100 * v for v in running], color=color, linewidth=2, label=method)
    steps_ax.set_xlabel("RL step")
    steps_ax.set_ylabel(f"training games won, %\n(running mean of {window} steps, mean of seeds)")
    steps_ax.set_title("Every step's training games", fontsize=10)
    steps_ax.legend()
    steps_ax.grid(alpha=0.3)
    for method, color in (("StarPO", "tab:blue"), ("ΔBelief", "tab:orange")):
        per_seed = [dict(r["curves"][method]) for r in results.values()]
        for c in per_seed:
            ax.plot(list(c), [100 * v for v in c.values()], color=color, alpha=0.3, linewidth=1)
        steps = sorted(set.intersection(*(set(c) for c in per_seed)))
        ax.plot(steps, [100 * statistics.mean(c[s] for c in per_seed) for s in steps], color=color, linewidth=2.5,
                label=f"{method} (mean of {len(per_seed)} seeds)")  # fmt: skip
    ax.set_xlabel("RL step")
    ax.set_ylabel(f"Mean@{k} success, %")
    options = CLOSED_WORLD.split(":")[1].replace(";", "; ")  # on a line of its own: one line is wider than the plot
    ax.set_title(f"Twenty Questions, closed world: evaluation\n{options}", fontsize=10)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(results: dict[int, dict], console: Console) -> None:
    results = dict(sorted(results.items()))  # seeds run side by side arrive in any order
    k = next(iter(results.values()))["samples_per_secret"]
    table = Table(title=f"{CLOSED_WORLD}: every secret x {k} games (95% intervals over secrets)")
    for column in (
        "seed",
        "method",
        f"Mean@{k} %",
        f"Pass@{k} %",
        "questions",
        "to success",
        "invalid %",
        "repeated %",
        "minutes",
    ):
        table.add_column(column, justify="right")
    for seed, r in results.items():
        for method, s in r["methods"].items():
            table.add_row(
                str(seed), method,
                f"{100 * s['mean8']:.1f} [{100 * s['mean8_low']:.1f}, {100 * s['mean8_high']:.1f}]",
                f"{100 * s['pass8']:.1f} [{100 * s['pass8_low']:.1f}, {100 * s['pass8_high']:.1f}]",
                f"{s['questions']:.2f}", f"{s['to_success']:.2f}", f"{100 * s['invalid']:.1f}",
                f"{100 * s['repeated']:.1f}", f"{s['minutes']:.1f}",
            )  # fmt: skip
    console.print(table)
    summary = Table(title=f"Across seeds {', '.join(map(str, results))} (mean ± sd, %)")
    for column in ("method", f"Mean@{k}", f"Pass@{k}"):
        summary.add_column(column, justify="right")
    for method in METHODS:
        per_seed = [r["methods"][method] for r in results.values()]
        summary.add_row(method, *(spread([s[k] for s in per_seed]) for k in ("mean8", "pass8")))
    console.print(summary)
    for name, (a, b) in {
        "StarPO - warm start": ("StarPO", "warm start"),
        "ΔBelief - warm start": ("ΔBelief", "warm start"),
        "ΔBelief - StarPO": ("ΔBelief", "StarPO"),
    }.items():
        diffs = [r["methods"][a]["mean8"] - r["methods"][b]["mean8"] for r in results.values()]
        if len(diffs) < 2:
            console.print(f"{name}: {100 * diffs[0]:+.1f} points Mean@{k} (one seed: a hint)")
            continue
        mean, half = statistics.mean(diffs), T_95[len(diffs) - 1] * statistics.stdev(diffs) / len(diffs) ** 0.5
        low, high = 100 * (mean - half), 100 * (mean + half)
        console.print(f"{name}: {100 * mean:+.1f} points Mean@{k}, 95% interval over seeds [{low:+.1f}, {high:+.1f}]")

    know = Table(title="What each model knows, on the weak questioner's unseen games (mean ± sd over seeds, %)")
    for column in ("model", "naming mass on fitting nouns", "chance (fitting share)", "belief in the secret",
                   "ideal (1/fitting)", "uniform", "turns raising belief", "corr(rise, bits)"):  # fmt: skip
        know.add_column(column, justify="right")
    for method in METHODS:
        k = [r["knowledge"][method] for r in results.values()]
        corr = [x["gain_bits_corr"] for x in k]
        keys = ("fit_mass", "fit_chance", "belief", "belief_ideal", "belief_uniform", "positive_gain_share")
        know.add_row(
            method, *(spread([x[key] for x in k]) for key in keys),
            f"{statistics.mean(corr):+.2f}" + (f" ± {statistics.stdev(corr):.2f}" if len(corr) > 1 else ""),
        )  # fmt: skip
    console.print(know)
    rising = Table(title="Warm start: belief in the secret (normalised over the world) by answers so far, vs ideal (%)")
    answers = sorted(
        {
            int(k.rsplit("_", 1)[1])
            for r in results.values()
            for k in r["knowledge"]["warm start"]
            if k.startswith("belief_after_")
        }
    )
    rising.add_column("", justify="right")
    for n in answers:
        rising.add_column(str(n), justify="right")
    for key, label in (("belief_after", "warm start"), ("ideal_after", "ideal")):
        rising.add_row(
            label,
            *(
                spread([r["knowledge"]["warm start"].get(f"{key}_{n}", math.nan) for r in results.values()])
                for n in answers
            ),
        )
    console.print(rising)
    share = [r["training_positive_share"] for r in results.values()]
    console.print(f"ΔBelief training: share of turns with a positive belief gain {spread(share)} % (mean over steps)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", default="runs/twenty_questions")
    parser.add_argument("--steps", type=int, default=None, help="RL steps (default: the tiny recipe's)")
    parser.add_argument("--sft-steps", type=int, default=None, help="warm-start steps (default: the tiny recipe's)")
    parser.add_argument("--samples-per-secret", type=int, default=None, help="k of Mean@k (default: the recipe's 8)")
    parser.add_argument("--budgets", default="5,6,7,8,10", help="question budgets of the scripted questioners' table")
    parser.add_argument("--scripted-games", type=int, default=400)
    parser.add_argument("--read-out-games", type=int, default=40, help="weak questioner games of the read-out")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override, all runs")
    parser.add_argument("--report", action="store_true", help="only print the tables of OUT/results.json")
    args = parser.parse_args()
    try:
        settings = read_settings(args.set)
    except ConfigError as error:
        parser.error(str(error))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    console = Console()
    if not args.report:
        rates = scripted_rates([int(b) for b in args.budgets.split(",")], args.scripted_games)
        (out / "scripted.json").write_text(json.dumps(rates, indent=2))
    rates = {
        name: {int(b): v for b, v in r.items()} for name, r in json.loads((out / "scripted.json").read_text()).items()
    }
    budgets = sorted(next(iter(rates.values())))
    world = CLOSED_WORLD.split(":")[1]
    table = Table(title=f"Scripted questioners in {world}: success by question budget ({args.scripted_games} games)")
    table.add_column("questioner")
    for budget in budgets:
        table.add_column(str(budget), justify="right")
    for name, by_budget in rates.items():
        table.add_row(name, *(f"{100 * by_budget[b]:.0f}%" for b in budgets))
    console.print(table)

    results_file = out / "results.json"
    results = {int(s): r for s, r in json.loads(results_file.read_text()).items()} if results_file.exists() else {}
    if not args.report:
        for seed in (int(s) for s in args.seeds.split(",")):
            names = {
                "steps": args.steps,
                "sft_steps": args.sft_steps,
                "eval_samples_per_secret": args.samples_per_secret,
            }
            overrides = {name: value for name, value in names.items() if value is not None} | settings
            if args.steps is not None:
                overrides["eval_every"] = max(1, args.steps // 4)
            result = run_seed(seed, out, overrides, args.read_out_games)
            # read again: another process may have written its seeds to OUT since (seeds run side by side)
            if results_file.exists():
                results |= {int(s): r for s, r in json.loads(results_file.read_text()).items()}
            results[seed] = result
            results_file.write_text(json.dumps(results, indent=2))
    if results:
        report(results, console)
        plot(results, out / "learning_curve.png")
        console.print(f"learning curve: {out / 'learning_curve.png'}")


if __name__ == "__main__":
    main()
