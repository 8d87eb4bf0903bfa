"""Data parallelism with torchrun: each rank plays its share of the rollout shards, gradients
are summed across ranks once per optimiser step, and every rank sees every game's return so
the RAE baselines stay identical everywhere.

A single process with ``rollout_shards=N`` plays the same N shards one after another, so a
run on N ranks and a run on one process give the same model (tested with gloo on CPU).
Gradients are all-reduced by hand rather than through DDP because ranks may hold different
numbers of micro-batches in a step, which DDP's per-backward hooks cannot handle.

Placement: every rank drives the GPU of its ``LOCAL_RANK`` (``select_device``), and collective
tensors live on the backend's device (CUDA for NCCL, CPU for gloo), since NCCL cannot reduce
CPU tensors and ``all_gather_object`` under NCCL stages its bytes on the current CUDA device.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist


def select_device(requested: str) -> torch.device:
    """The device this process trains on: ``auto`` is CUDA when present, else CPU; a bare ``cuda``
    under torchrun means this rank's own GPU (``cuda:LOCAL_RANK``), made the current device."""
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(requested)
    except RuntimeError as error:
        raise ValueError(f"device must be auto, cpu, cuda or cuda:N; got {requested!r}") from error
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {requested!r} asked for, but torch sees no CUDA GPU")
        if device.index is None:
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        if device.index >= torch.cuda.device_count():
            raise ValueError(f"device {device} does not exist: torch sees {torch.cuda.device_count()} GPU(s)")
        torch.cuda.set_device(device)
    return device


def cpu_has_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool | None:
    """Whether this CPU computes bf16 natively (``avx512_bf16`` or ``amx_bf16`` among its flags); None where the
    flags cannot be read. Elsewhere torch emulates bf16: autocast made a SmolLM2 forward and backward 18x slower than
    fp32 on a 2-core AVX2 EPYC, and the update 1.8x faster on one with AVX-512 BF16 (docs/results/real-model.md)."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return None
    if "flags" not in text:
        return None
    return any(name in text for name in ("avx512_bf16", "amx_bf16"))


def native_bf16(requested: str) -> bool:
    """Whether the device a run asks for (``auto``, ``cpu``, ``cuda``, ``cuda:N``) computes bf16 natively: a GPU
    that supports it, or a CPU with the flags of ``cpu_has_bf16`` (fp32 where they cannot be read)."""
    if requested.startswith("cuda") or (requested == "auto" and torch.cuda.is_available()):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(cpu_has_bf16())


def collective_device(backend: str, device: torch.device) -> torch.device:
    """Where tensors handed to a collective must live for ``backend``."""
    return device if backend == "nccl" else torch.device("cpu")


class Distributed:
    def __init__(self, device: torch.device) -> None:
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.backend = "nccl" if device.type == "cuda" else "gloo"
        self.device = collective_device(self.backend, device)
        if self.world > 1 and not dist.is_initialized():
            dist.init_process_group(backend=self.backend, device_id=device if device.type == "cuda" else None)

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
        return self._reduce(values, dist.ReduceOp.SUM)

    def max(self, values: list[float]) -> list[float]:
        return self._reduce(values, dist.ReduceOp.MAX)

    def _reduce(self, values: list[float], op) -> list[float]:
        if self.world == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=op)
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


def shard(model, device: torch.device, bf16: bool) -> None:
    """FSDP2: every decoder layer, then the rest, fully sharded over the ranks (parameters,
    gradients and optimizer state). On GPU with ``bf16`` the layers compute in bf16 and reduce
    gradients in fp32 over fp32 sharded master weights."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if bf16 and device.type == "cuda":
        precision = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    else:
        precision = MixedPrecisionPolicy()
    layers = getattr(model.get_decoder(), "layers", None)
    if layers is None:
        raise ValueError(f"--fsdp needs a decoder with a .layers list; {type(model).__name__} has none")
    for layer in layers:
        fully_shard(layer, mp_policy=precision)
    fully_shard(model, mp_policy=precision)


def is_sharded(model) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def gather_states(model, optimizer) -> tuple[dict | None, dict]:
    """(full weights or None when the model holds them itself, full optimizer state) for a
    checkpoint; under FSDP a collective that leaves the full states on rank 0 (CPU)."""
    if not is_sharded(model):
        return None, optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options), get_optimizer_state_dict(model, optimizer, options=options)


def optimizer_loader(model, optimizer):
    """How a saved (full) optimizer state goes back in: directly, or scattered to the shards."""
    if not is_sharded(model):
        return optimizer.load_state_dict
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    def load(state: dict) -> None:
        set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))

    return load
