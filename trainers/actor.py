"""The actor of an asynchronous run (``async_steps`` K >= 1): a thread with its own engine and its own copy of
the weights that plays the games of the next steps while the learner trains on this one's.

The schedule is fixed, whatever the two threads' speeds: the games of step s are sampled from the weights of
update ``max(base, s - 1 - K)`` (``base``: the step the run started or resumed at), so K = 1 plays step t+1's
games from the weights before update t while update t runs. The actor waits for those weights, the learner for
the games; no sample is more than K updates older than the weights it trains, and a run is the same run on
any machine. The learner publishes every update's weights (a CPU copy); the actor loads a version once, just
before the first step that needs it.

Everything the actor draws on (the rollout shards' random streams, the opponent pool) is its own; each batch
carries those streams' states after it, so a checkpoint taken at step t holds the K batches already played
for t+1 .. t+K and the streams after them (``sources.Asynchronous.streams``), and a resumed run plays on exactly.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from spiral_arena.models.hf import HFEngine
from spiral_arena.models.policy import Policy
from spiral_arena.models.weights import cpu_copy
from spiral_arena.rollout import GameResult
from trainers.config import TrainConfig


@dataclass
class Batch:
    """One step's games, as the actor hands them over."""

    step: int
    version: int  # the update whose weights sampled them (0: the warm start, or the step a run resumed at)
    games: dict[int, list[GameResult]]  # by rollout shard
    states: dict[str, Any]  # the actor's random streams after this batch (``Actor.states``)
    rollout_s: float  # the actor's seconds generating it
    idle_s: float  # the actor's seconds waiting for its weights first

    def saved(self) -> dict[str, Any]:
        """What a checkpoint keeps of a batch played ahead of it (plain containers)."""
        games = {s: [g.saved() for g in gs] for s, gs in self.games.items()}
        return {"step": self.step, "version": self.version, "games": games, "states": self.states}

    @classmethod
    def restored(cls, saved: dict[str, Any]) -> Batch:
        games = {s: [GameResult.restored(g) for g in gs] for s, gs in saved["games"].items()}
        return cls(saved["step"], saved["version"], games, saved["states"], 0.0, 0.0)


class Actor:
    """``play()`` plays one step's games with the actor's policy (an engine over ``model``, the actor's own
    copy, or vLLM's engine, which holds its own); ``states()`` reads the random streams ``play`` draws on;
    ``on_load(model, version)`` runs when a version newer than ``base`` is first loaded (the opponent pool's
    snapshots)."""

    def __init__(
        self,
        play: Callable[[], dict[int, list[GameResult]]],
        states: Callable[[], dict[str, Any]],
        engine,
        model,
        async_steps: int,
        base: int,
        steps: int,
        on_load: Callable[[Any, int], None] | None = None,
    ) -> None:
        self.play, self.states, self.engine, self.model = play, states, engine, model
        self.k, self.base, self.steps, self.on_load = async_steps, base, steps, on_load
        self.weights: dict[int, dict[str, torch.Tensor]] = {}
        self.loaded: int | None = None  # the version the engine serves
        self.newest = base  # the newest version loaded so far (``on_load`` runs once for each newer one)
        self.published = threading.Condition()
        self.engine_lock = threading.Lock()  # the engine plays one thing at a time (vLLM's is shared)
        self.batches: queue.Queue[Batch | BaseException] = queue.Queue()
        self.held: dict[int, Batch] = {}  # taken from the queue ahead of their step (a checkpoint's pending)
        self.taken_states: dict[str, Any] = {}
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    @classmethod
    def for_run(
        cls,
        config: TrainConfig,
        model,
        engine,
        tokenizer,
        stops: list[int],
        play: Callable[[Policy], dict[int, list[GameResult]]],
        shard_rngs: dict[int, np.random.Generator],
        pool,
        start: int,
        pending: list[dict],
    ) -> Actor:
        """The actor of a run at step ``start``: a copy of ``model``'s weights, an engine over it (vLLM's engine
        holds weights of its own: the actor loads its versions into it), a tokenizer of its own (a fast
        tokenizer is not to be used from two threads at once), the shards' streams and the opponent pool
        (``pool``, or None), and the batches a resumed run's checkpoint kept (``pending``)."""
        own = copy.deepcopy(model).eval().requires_grad_(False)
        own_engine = HFEngine(own, stops, tokenizer.pad_token_id) if config.backend == "hf" else engine
        policy = Policy(own_engine, copy.deepcopy(tokenizer), config.prompt_template, stops, thinking=config.thinking)

        def states() -> dict[str, Any]:  # and how many snapshots the batch could draw from (the pool moves on)
            shards = {s: rng.bit_generator.state for s, rng in shard_rngs.items()}
            return {"shards": shards, **({"pool_rng": pool.rng.bit_generator.state, "snapshots": len(pool.snapshots)}
                                         if pool is not None else {})}  # fmt: skip

        def on_load(weights_of, version: int) -> None:  # a snapshot every pool_every versions, as it loads them
            if version % config.pool_every == 0:
                pool.add(weights_of, version)

        actor = cls(
            lambda: play(policy),
            states,
            own_engine,
            own,
            config.async_steps,
            base=start,
            steps=config.steps,
            on_load=on_load if pool is not None else None,
        )
        for saved in pending:
            actor.held[saved["step"]] = Batch.restored(saved)
        return actor

    def version(self, step: int) -> int:
        """The update whose weights play step ``step``'s games."""
        return max(self.base, step - 1 - self.k)

    # -- the learner's side ----------------------------------------------------------------------

    def start(self, model) -> None:
        """Play from the first step not played yet (a resumed run's pending batches are), starting from
        ``model``'s weights, the version ``base``."""
        self.taken_states = self.states()  # the streams after the last batch taken: none yet
        self.publish(self.base, model)
        first = self.base + 1 + len(self.held)
        self.thread = threading.Thread(target=self._run, args=(first,), name="spiral-arena-actor", daemon=True)
        self.thread.start()

    def publish(self, version: int, model) -> None:
        """``model``'s weights after update ``version`` (a CPU copy), for the steps that sample from them."""
        weights = cpu_copy(model)
        with self.published:
            self.weights[version] = weights
            self.published.notify_all()

    def take(self, step: int) -> tuple[Batch, float]:
        """Step ``step``'s games, and the seconds the learner waited for them."""
        t0 = time.monotonic()
        self._hold(step)
        batch = self.held.pop(step)
        self.taken_states = batch.states
        return batch, time.monotonic() - t0

    def pending(self, step: int) -> tuple[list[Batch], dict[str, Any]]:
        """The batches already due after update ``step`` (steps step+1 .. step+K, fewer near the end), waited
        for, and the actor's streams as they were after the last of them (after the last batch taken when
        none is due): what a checkpoint at ``step`` keeps."""
        for later in range(step + 1, min(step + self.k, self.steps) + 1):
            self._hold(later)
        due = [self.held[s] for s in sorted(self.held) if s > step]
        return due, due[-1].states if due else self.taken_states

    def _hold(self, step: int) -> None:
        """Wait until step ``step``'s batch is in ``held``, holding any that come before it."""
        while step not in self.held:
            batch = self._next()
            self.held[batch.step] = batch

    @contextmanager
    def exclusive(self):
        """The engine to oneself (the learner's evaluation, when it shares vLLM's engine with the actor); the
        actor reloads its own weights afterwards."""
        with self.engine_lock:
            try:
                yield
            finally:
                self.loaded = None

    def stop(self) -> None:
        """Stop after the batch in hand (a daemon thread: nothing is left running at exit)."""
        self.stopping.set()
        with self.published:
            self.published.notify_all()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=60)

    def _next(self) -> Batch:
        while True:
            try:
                item = self.batches.get(timeout=1.0)
            except queue.Empty:
                if self.thread is None or not self.thread.is_alive():
                    raise RuntimeError("the actor thread stopped without handing over its games") from None
                continue
            if isinstance(item, BaseException):
                raise RuntimeError(f"the actor failed: {type(item).__name__}: {item}") from item
            return item

    # -- the actor's side -------------------------------------------------------------------------

    def _run(self, first: int) -> None:
        try:
            for step in range(first, self.steps + 1):
                version = self.version(step)
                t0 = time.monotonic()
                with self.published:
                    while version not in self.weights and not self.stopping.is_set():
                        self.published.wait()
                    if self.stopping.is_set():
                        return
                    weights = self.weights[version]
                    for old in [v for v in self.weights if v < version]:  # no later step needs them
                        del self.weights[old]
                idle = time.monotonic() - t0
                with self.engine_lock:
                    if self.loaded != version:
                        self.model.load_state_dict(weights)
                        self.engine.load_weights(self.model)  # a no-op for the hf engine over self.model
                        if self.on_load is not None and version > self.newest:  # a reload after ``exclusive``: no
                            self.on_load(self.model, version)
                        self.loaded, self.newest = version, max(self.newest, version)
                    t1 = time.monotonic()
                    games = self.play()
                    rollout = time.monotonic() - t1
                self.batches.put(Batch(step, version, games, self.states(), rollout, idle))
        except BaseException as error:  # handed to the learner, which raises it
            self.batches.put(error)


@contextmanager
def evaluating_on_actor_engine(actor: Actor, engine, model):
    """The learner's evaluation, when the actor plays through the learner's own engine (vLLM's): the engine to
    itself, serving the learner's weights. Otherwise nothing to do (the hf engine evaluates over the learner's
    model; the actor has a copy)."""
    if actor.engine is not engine:
        yield
        return
    with actor.exclusive():
        engine.load_weights(model)
        yield
