"""Data parallelism with torchrun: each rank plays its share of the rollout shards, gradients
are summed across ranks once per optimiser step, and every rank sees every game's return so
the RAE baselines stay identical everywhere.

A single process with ``rollout_shards=N`` plays the same N shards one after another, so a
run on N ranks and a run on one process give the same model (tested with gloo on CPU).
Gradients are all-reduced by hand rather than through DDP because ranks may hold different
numbers of micro-batches in a step, which DDP's per-backward hooks cannot handle.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist


class Distributed:
    def __init__(self, device: torch.device) -> None:
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        if self.world > 1 and not dist.is_initialized():
            dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")

    @property
    def main(self) -> bool:
        return self.rank == 0

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank."""
        if self.world == 1:
            return [obj]
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def sum(self, values: list[float]) -> list[float]:
        if self.world == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t)
        return t.tolist()

    def sum_gradients(self, model) -> None:
        if self.world == 1:
            return
        for p in model.parameters():
            if p.requires_grad:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                dist.all_reduce(p.grad)

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def close(self) -> None:
        if self.world > 1 and dist.is_initialized():
            dist.barrier()  # nobody tears the group down while another rank still uses it
            dist.destroy_process_group()
