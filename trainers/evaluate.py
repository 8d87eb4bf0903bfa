"""Evaluation with fixed seeds, every ``eval_every`` steps: matches against the evaluation opponents through the
shared in-flight runner, the policy's exact read-outs (``trainers.readouts``), Kuhn as it plays, and the
reasoning subset (``spiral_arena.evals.training``). What the numbers say is ``trainers.summary``'s."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from spiral_arena import list_envs
from spiral_arena.agents import make_agent
from spiral_arena.analysis import (
    kuhn_policy_from_samples,
)
from spiral_arena.evals.metrics import benchmark_metrics
from spiral_arena.models import Sampling
from spiral_arena.models.policy import Policy
from spiral_arena.play import Notes, play_games
from spiral_arena.registry import GameSpec
from spiral_arena.rollout import GameResult, collect
from trainers.config import TrainConfig
from trainers.readouts import kuhn_metrics, leduc_metrics, tictactoe_metrics
from trainers.summary import OUTCOMES, match_key

OUT_OF_DOMAIN = ("Snake-v0", "PigDice-v0", "LiarsDice-v0", "TruthAndDeception-v0")
# what a training process says once of a checkpoint opponent (--opponent, --eval-opponents hf:PATH) that plays
# rules it did not train on: one line on stderr, the first time, not at every evaluation
NOTES = Notes()


def eval_games(training_games: list[GameSpec], extra: str, out_of_domain: bool = True) -> list[GameSpec]:
    """``extra`` (the config's eval_env_ids) when given; else the training games, plus the
    out-of-domain games unless ``out_of_domain`` is off."""
    if extra:
        return [GameSpec.parse(g) for g in extra.split(",") if g.strip()]
    if not out_of_domain:
        return list(training_games)
    registered = set(list_envs())
    return training_games + [GameSpec.parse(g) for g in OUT_OF_DOMAIN if g in registered]


class TrainedSeat:
    """The policy under training as a seat of the shared runner (``spiral_arena.inflight``): every game
    holds a copy, and a wave's decisions of all copies go to the engine in one call, sampled with a seed
    drawn from the evaluation's own generator (so one evaluation seed gives the same games run to run)."""

    def __init__(self, policy: Policy, rng: np.random.Generator, sampling: Sampling):
        self.policy, self.rng, self.sampling = policy, rng, sampling

    @property
    def batch_key(self) -> Policy:
        return self.policy

    @staticmethod
    def act_together(agents: Sequence[TrainedSeat], observations: list[str]) -> list[str]:
        me = agents[0]
        return me.policy.answer_batch(observations, me.sampling, int(me.rng.integers(2**31)))[2]

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return self.act_together([self], [observation])[0]


def play_against(
    policy: Policy,
    games: list[GameSpec],
    opponents: list[str],
    n_games: int,
    seed: int,
    secret_samples: int = 0,
    long_questions: int = 0,
    **generation: Any,
) -> dict[str, float]:
    """Win/draw/loss and invalid rate of the policy vs each opponent over ``n_games`` games in each seat
    (seats alternating, so 2 x ``n_games`` in all), all in flight through the runner the leaderboard and
    ``spiral-arena play`` use (``play_games``): the policy's decisions of a wave in one engine call, an
    API opponent's requests concurrently. A game cut
    at ``max_game_actions`` counts as a draw. A single-player game has no opponent: it is played once,
    as "solo" (``solo_success``); Twenty Questions with ``secret_samples`` k > 0 plays every secret of its word list k
    times (``secret_success``), and again with ``long_questions`` questions allowed when that is > 0.
    ``generation``: ``collect``'s settings (``sampling``, ``max_game_actions``, ``obs_format``)."""
    metrics: dict[str, float] = {}
    for spec in games:
        solo = spec.players == 1
        if solo and secret_samples > 0 and "secret" not in spec.options and spec.env_id == "TwentyQuestions-v0":
            metrics.update(secret_success(policy, spec, secret_samples, seed, **generation))
            if long_questions > 0:
                longer = spec.with_options(max_questions=long_questions)
                budget = {**generation, "max_game_actions": max(long_questions, generation["max_game_actions"])}
                metrics.update(secret_success(policy, longer, secret_samples, seed, **budget))
            continue
        if solo:  # through the rollout collector, which hands a wave's questions to an LLM judge at once
            metrics.update(solo_success(policy, spec, n_games, seed, **generation))
            continue
        obs_format = generation.get("obs_format", "")
        env_options = {**spec.options, **({"obs_format": obs_format} if obs_format else {})}
        for name in opponents:
            rng = np.random.default_rng(seed)
            seeds = [int(s) for s in rng.integers(2**31, size=2 * n_games)]  # n_games in each seat
            learner = TrainedSeat(policy, rng, generation["sampling"])
            seated = [learner, make_agent(name)]
            counts: dict[str, int] = defaultdict(int)
            for i, record in play_games(
                spec.env_id,
                seated,
                seeds,
                concurrency=len(seeds),
                env_options=env_options,
                rotate_seats=True,
                max_moves=generation["max_game_actions"],
                notes=NOTES,
            ):
                my_name = record.players[i % 2]  # rotate_seats: the learner sits in seat i mod 2
                winner = record.outcome.get("winner")
                counts["win" if winner == my_name else "draw" if winner is None else "loss"] += 1
                counts["invalid"] += my_name in record.invalid
            for outcome in OUTCOMES:
                metrics[match_key(spec.label, name, outcome)] = counts[outcome] / len(seeds)
    return metrics


def solo_success(policy: Policy, spec: GameSpec, n_games: int, seed: int, **generation: Any) -> dict[str, float]:
    """``n_games`` of a single-player game on random seeds: a win is the game's own verdict (no draws)."""
    results = collect(
        policy,
        [spec],
        np.ones(1),
        min_samples=0,
        games_in_flight=n_games,
        rng=np.random.default_rng(seed),
        games=n_games,
        invalid_penalty=-1.0,
        invalid_opponent_reward=1.0,
        **generation,
    )
    won = sum(r.won for r in results) / len(results)
    key = f"eval/{spec.label}/solo"
    invalid = sum(r.record.invalid_seat == 0 for r in results) / len(results)
    return {f"{key}/win": won, f"{key}/draw": 0.0, f"{key}/loss": 1.0 - won, f"{key}/invalid": invalid}


def covering_seeds(spec: GameSpec, start: int) -> list[int]:
    """One reset seed per secret of a game that draws its secret from a word list (Twenty Questions),
    in word-list order: the first seed from ``start`` on whose reset draws that word."""
    env = spec.make()
    words = list(getattr(env.game, "words", ()))
    found: dict[str, int] = {}
    for seed in range(start, start + 200 * max(1, len(words))):
        env.reset(seed=seed)
        found.setdefault(env.state_.secret, seed)
        if len(found) == len(words):
            break
    missing = [w for w in words if w not in found]
    if missing:
        raise ValueError(f"{spec.label}: no reset seed draws {missing[:3]}: cannot evaluate every secret")
    return [found[w] for w in words]


def secret_success(policy: Policy, spec: GameSpec, samples: int, seed: int, **generation: Any) -> dict[str, float]:
    """Every secret of ``spec`` played ``samples`` times: Mean@k (the mean success rate) and Pass@k
    (at least one success in k, unbiased with n = k), each with a 95% bootstrap interval over the
    secrets, the mean number of questions, and over the games won (when any was) ``questions_to_success``.
    ``eval/GAME/solo/win`` is Mean@k, so the summary lines read it as a win rate. Also the shares of invalid
    and of repeated questions."""
    seeds = covering_seeds(spec, seed)
    results = collect(
        policy,
        [spec],
        np.ones(1),
        min_samples=0,
        games_in_flight=min(len(seeds) * samples, 512),
        rng=np.random.default_rng(seed),
        games=len(seeds) * samples,
        group_size=samples,
        group_seeds=seeds,
        invalid_penalty=-1.0,
        invalid_opponent_reward=1.0,
        **generation,
    )
    by_seed: dict[int, list[bool]] = defaultdict(list)
    for r in results:
        by_seed[r.record.seed].append(r.won)
    correct = np.array([by_seed[s] for s in seeds], dtype=bool)
    scores = benchmark_metrics(correct, spec.label, seed=seed)
    mean, best = scores["mean_at_n"], scores["pass_at_k"][str(samples)]
    key = f"eval/{spec.label}"
    won = [len(r.turns) for r in results if r.won]
    return {
        f"{key}/solo/win": mean["value"],
        f"{key}/solo/loss": 1.0 - mean["value"],
        f"{key}/solo/invalid": sum(r.record.invalid_seat == 0 for r in results) / len(results),
        f"{key}/mean_at_{samples}": mean["value"],
        f"{key}/mean_at_{samples}_low": mean["ci95"][0],
        f"{key}/mean_at_{samples}_high": mean["ci95"][1],
        f"{key}/pass_at_{samples}": best["value"],
        f"{key}/pass_at_{samples}_low": best["ci95"][0],
        f"{key}/pass_at_{samples}_high": best["ci95"][1],
        f"{key}/questions_mean": float(np.mean([len(r.turns) for r in results])),
        f"{key}/invalid_rate": verdict_share(results, "invalid"),
        f"{key}/repeated_rate": verdict_share(results, "repeated"),
    } | ({f"{key}/questions_to_success": float(np.mean(won))} if won else {})


def verdict_share(results: list[GameResult], verdict: str) -> float:
    """The share of all questions asked that got ``verdict`` (e.g. Twenty Questions' invalid or
    repeated questions); 0 when no turn was played."""
    verdicts = [v for r in results for v in r.verdicts]
    return sum(v == verdict for v in verdicts) / max(1, len(verdicts))


def played_kuhn_metrics(policy: Policy, config: TrainConfig, game: str) -> dict[str, float]:
    """Kuhn exploitability of the policy as it plays: ``eval_kuhn_samples`` answers sampled at each
    information state the way the evaluation samples (its own seeded generator), parsed as the env does."""
    learner = TrainedSeat(policy, np.random.default_rng(54321), config.eval_sampling)
    played = kuhn_policy_from_samples(
        lambda observations: TrainedSeat.act_together([learner], observations),
        config.obs_format,
        game,
        config.eval_kuhn_samples,
    )
    return {
        "eval/kuhn_exploitability_played": played.exploitability,
        "eval/kuhn_exploitability_played_se": played.standard_error,
        "eval/kuhn_played_invalid": played.invalid,
    }


def evaluate(model, policy: Policy, config: TrainConfig, specs, play: bool = True) -> dict[str, float]:
    """Fixed-seed matches on the training games, plus the out-of-domain ones unless
    ``eval_out_of_domain`` is off (or on ``eval_env_ids``; skipped when not ``play``), and Kuhn
    exploitability when Kuhn is trained (Leduc's when Leduc is), and TicTacToe tactics when TicTacToe is
    and ``eval_tactics`` is on."""
    # the out-of-domain games are two-player games; a single-player run evaluates on its own games
    games = specs
    if config.algo == "rae" or config.eval_env_ids:
        games = eval_games(specs, config.eval_env_ids, config.eval_out_of_domain)
    opponents = [o for o in config.eval_opponents.split(",") if o]
    model.eval()
    metrics = {}
    if play:
        metrics = play_against(
            policy,
            games,
            opponents,
            config.eval_games,
            seed=12345,
            secret_samples=config.eval_samples_per_secret,
            long_questions=config.eval_long_questions,
            sampling=config.eval_sampling,
            max_game_actions=config.max_game_actions,
            obs_format=config.obs_format,
        )
    kuhn = [s for s in specs if s.env_id == "KuhnPoker-v0"]
    if kuhn:  # read on single hands of the Kuhn it trains; the rounds trained are logged beside it
        metrics.update(kuhn_metrics(model, policy, config.obs_format, config.eval_temperature, kuhn[0].canonical))
        if config.eval_kuhn_samples:
            metrics.update(played_kuhn_metrics(policy, config, kuhn[0].canonical))
        metrics["eval/kuhn_trained_rounds"] = max(s.complete().options["rounds"] for s in kuhn)
    leduc = next((s for s in specs if s.env_id == "LeducHoldem-v0"), None)
    if leduc is not None:
        metrics.update(leduc_metrics(model, policy, config.obs_format, config.eval_temperature, leduc.canonical))
    tictactoe = next((s for s in specs if s.env_id == "TicTacToe-v0"), None)
    if config.eval_tactics and tictactoe is not None:
        read = tictactoe_metrics(model, policy, config.obs_format, config.eval_temperature, tictactoe.canonical)
        metrics.update(read)
    model.train()
    return metrics


def reasoning(policy: Policy, tokenizer, config: TrainConfig) -> dict[str, float]:
    """The fixed, seeded reasoning subset of ``config.eval_reasoning``, answered by the policy's engine."""
    from spiral_arena.evals.training import reasoning_eval

    return reasoning_eval(
        policy.engine,
        tokenizer,
        config.eval_reasoning,
        seed=config.seed,
        data_dir=config.eval_reasoning_data or None,
        overrides={"max_new_tokens": str(config.eval_reasoning_max_new_tokens)},
    )
