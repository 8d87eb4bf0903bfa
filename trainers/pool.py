"""Population self-play: frozen snapshots of the policy that hold the other seat of some games.

Pure self-play can chase its own tail (each update exploits the current self, forgetting what beat an
older one). With ``--opponent-pool K --pool-prob P``, each new game's other seat is, with probability
P, a snapshot drawn uniformly from the last K the run took (the warm start first, then one every
``pool_every`` steps). Snapshots are kept on CPU as plain tensors, at most K of them, and never
trained; one spare copy of the model on the training device generates for whichever snapshot a
batch needs. The learner trains only on its own seat in those games.
"""

from __future__ import annotations

import copy
from collections import deque

import numpy as np
import torch

from spiral_arena.models import Sampling
from spiral_arena.models.hf import HFEngine
from spiral_arena.models.weights import cpu_copy


class Snapshot:
    """One frozen policy, as an opponent: ``act_batch`` like any agent's, sampling from its weights."""

    def __init__(self, pool: OpponentPool, step: int, weights: dict[str, torch.Tensor]) -> None:
        self.pool, self.snapshot_step, self.weights = pool, step, weights

    def act_batch(self, observations: list[str], infos: list[dict]) -> list[str]:
        return self.pool.generate(self, observations)


class OpponentPool:
    def __init__(self, model, policy, size: int, prob: float, sampling: Sampling, seed: int) -> None:
        if size < 1 or not 0.0 <= prob <= 1.0:
            raise ValueError(f"an opponent pool needs size >= 1 and prob in [0, 1], got {size} and {prob}")
        self.policy, self.prob, self.sampling = policy, prob, sampling
        self.snapshots: deque[Snapshot] = deque(maxlen=size)
        self.spare = copy.deepcopy(model).eval().requires_grad_(False)  # the one copy that generates
        self.engine = HFEngine(self.spare, policy.stop_ids, policy.tokenizer.pad_token_id)
        self.loaded: Snapshot | None = None
        self.rng = np.random.default_rng([seed, 2_000_000])  # the snapshots' own sampling seeds

    def add(self, model, step: int) -> None:
        """Freeze ``model``'s current weights (full tensors, on CPU); the oldest leaves past K."""
        self.snapshots.append(Snapshot(self, step, cpu_copy(model)))

    def draw(self, rng: np.random.Generator) -> Snapshot | None:
        """A snapshot for a new game's other seat with probability ``prob``, else None (self-play)."""
        if not self.snapshots or rng.random() >= self.prob:
            return None
        return self.snapshots[int(rng.integers(len(self.snapshots)))]

    def generate(self, snapshot: Snapshot, observations: list[str]) -> list[str]:
        if self.loaded is not snapshot:
            self.spare.load_state_dict(snapshot.weights)
            self.loaded = snapshot
        return self.policy.answer_batch(observations, self.sampling, int(self.rng.integers(2**31)), self.engine)[2]
