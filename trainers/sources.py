"""Step 1 of ``train``: where a step's games come from, behind one interface, so the loop never asks which.

``Played``: one step's games, by rollout shard. ``Synchronous`` plays them when asked, from the weights the
learner has just trained; ``Asynchronous`` (``async_steps`` K >= 1) takes them from the actor thread
(``trainers.actor``), which played them ahead from weights up to K updates older. Both answer the same five
questions: ``take`` a step's games, ``learning`` (the engine steps aside for the update), ``updated`` (the
new weights reach whoever samples), ``streams`` (what a checkpoint keeps of the random streams) and
``evaluating`` (the engine to the evaluation)."""

from __future__ import annotations

import math
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from spiral_arena.models.policy import Policy
from spiral_arena.rollout import GameResult, collect
from trainers.actor import Actor, evaluating_on_actor_engine
from trainers.learner import autocast
from trainers.start import Run


@dataclass
class Played:
    """One step's games: every rank's, by shard, and which of them this rank trains on."""

    by_shard: dict[int, list[GameResult]]
    rollout_s: float
    stats: dict[str, float] = field(default_factory=dict)  # an async run's staleness and idle times
    snapshots: int | None = None  # an async run's population play: how many snapshots the games could draw from

    @property
    def results(self) -> list[GameResult]:
        """All games, in shard order (so RAE sees the same sequence on every rank)."""
        return [game for s in sorted(self.by_shard) for game in self.by_shard[s]]


def play_shards(run: Run, policy: Policy) -> dict[int, list[GameResult]]:
    """One step's games on this rank's rollout shards, each shard drawing on its own stream."""
    config = run.config
    grouped = run.grouped
    with autocast(config, run.device):
        return {
            s: collect(
                policy,
                run.specs,
                run.weights,
                min_samples=math.ceil(config.samples_per_step / config.rollout_shards),
                games_in_flight=config.games_in_flight,
                rng=run.shard_rngs[s],
                sampling=config.sampling,
                invalid_penalty=config.invalid_penalty,
                invalid_opponent_reward=config.invalid_opponent_reward,
                opponent=run.opponent,
                envs=run.envs,
                games=config.groups_per_step // config.rollout_shards * config.group_size if grouped else None,
                group_size=config.group_size if grouped else 1,
                snapshots=run.pool,
                max_game_actions=config.max_game_actions,
                obs_format=config.obs_format,
            )
            for s in run.shards
        }


def label(run: Run, by_shard: dict[int, list[GameResult]]) -> list[GameResult]:
    """Mark each game with its shard and each turn with its game and group, the learner's units (self-play: a
    game is its own group; StarPO and delta-belief: the games on one secret); this rank's games, to train on."""
    for s, games in by_shard.items():
        for game in games:
            game.shard = s
    own = [game for s in run.shards for game in by_shard[s]]
    groups: dict[tuple, int] = {}
    for index, game in enumerate(own):
        group = groups.setdefault((game.shard, game.game, game.record.seed) if run.grouped else (index,), len(groups))
        for turn in game.turns:
            turn.game_id, turn.group_id = index, group
    return own


class Synchronous:
    """Each step's games played now, on every rank, from the weights the last update left."""

    def __init__(self, run: Run) -> None:
        self.run = run

    def take(self, step: int) -> Played:
        t0 = time.monotonic()
        # every rank gets every shard's games, in shard order, so RAE sees the same sequence everywhere
        gathered = self.run.ddp.gather(play_shards(self.run, self.run.policy))
        by_shard = {s: games for part in gathered for s, games in part.items()}
        return Played(by_shard, time.monotonic() - t0)

    def learning(self) -> None:
        self.run.engine.sleep()  # frees the accelerator for the update (vLLM); a no-op for the hf engine

    def updated(self, step: int) -> float:
        """The engine samples the next games from the updated weights; the seconds that took."""
        t0 = time.monotonic()
        self.run.engine.load_weights(self.run.model)
        seconds = time.monotonic() - t0
        if self.run.pool is not None and step % self.run.config.pool_every == 0:
            self.run.pool.add(self.run.model, step)
        return seconds

    def streams(self, step: int) -> tuple[list[dict], dict[str, Any]]:
        """The shards' random streams (every rank's) and the pool's, as a checkpoint at ``step`` keeps them."""
        run = self.run
        states = run.ddp.gather({s: run.shard_rngs[s].bit_generator.state for s in run.shards})
        return states, {"pool_rng": run.pool.rng.bit_generator.state} if run.pool is not None else {}

    def snapshots(self, played: Played) -> int:
        """Population play: the snapshots in the pool now (this step's included)."""
        assert self.run.pool is not None
        return len(self.run.pool.snapshots)

    def evaluating(self) -> AbstractContextManager:
        return nullcontext()  # the engine samples from the learner's own weights

    def stop(self) -> None:
        pass


class Asynchronous:
    """Each step's games from the actor thread, which plays the next K steps' while the learner trains."""

    def __init__(self, run: Run) -> None:
        self.run = run
        pending = run.saved_extra.get("pending", []) if run.previous is not None else []
        self.actor = Actor.for_run(
            run.config, run.model, run.engine, run.tokenizer, run.stops,
            lambda policy: play_shards(run, policy), run.shard_rngs, run.pool, run.start, pending,
        )  # fmt: skip
        self.actor.start(run.model)

    def take(self, step: int) -> Played:
        batch, waited = self.actor.take(step)
        stats = {  # staleness: updates between the weights that sampled and those being trained
            "async/staleness": step - 1 - batch.version,
            "async/learner_idle_s": waited,
            "async/actor_idle_s": batch.idle_s,
        }
        snapshots = batch.states["snapshots"] if self.run.pool is not None else None
        return Played(batch.games, batch.rollout_s, stats, snapshots)

    def learning(self) -> None:
        pass  # the actor keeps its engine: it plays on while the learner trains

    def updated(self, step: int) -> float:
        """The actor loads the new weights before the first step they play (and takes the pool's snapshots)."""
        t0 = time.monotonic()
        self.actor.publish(step, self.run.model)
        return time.monotonic() - t0

    def streams(self, step: int) -> tuple[list[dict], dict[str, Any]]:
        """The batches already played for the next steps, and the actor's streams after them."""
        pending, after = self.actor.pending(step)
        extra = {"pool_rng": after["pool_rng"]} if self.run.pool is not None else {}
        return [after["shards"]], {**extra, "pending": [b.saved() for b in pending]}

    def snapshots(self, played: Played) -> int:
        """Population play: the snapshots the actor's pool held when it played these games."""
        assert played.snapshots is not None
        return played.snapshots

    def evaluating(self) -> AbstractContextManager:
        """vLLM's engine is the actor's: the evaluation has it to itself, serving the learner's weights."""
        return evaluating_on_actor_engine(self.actor, self.run.engine, self.run.model)

    def stop(self) -> None:
        self.actor.stop()  # after the batch in hand


def rollout_source(run: Run) -> Synchronous | Asynchronous:
    return Asynchronous(run) if run.config.async_steps else Synchronous(run)
