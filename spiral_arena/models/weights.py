"""A learner's weights as an engine takes them: whole tensors (gathered from FSDP shards one at a
time) under the names of the base model's own checkpoint, with a LoRA adapter folded in."""

from __future__ import annotations

from collections.abc import Iterator

import torch

PEFT_PREFIX = "base_model.model."  # what peft puts before the wrapped model's own names


def full_tensors(model) -> Iterator[tuple[str, torch.Tensor]]:
    """The model's whole weights as (name, plain tensor), one at a time so at most one gathered
    copy exists at once; under FSDP each is all-gathered, so every rank must iterate in step."""
    from torch.distributed.tensor import DTensor

    for name, t in model.state_dict().items():
        yield name, (t.full_tensor() if isinstance(t, DTensor) else t).detach()


def cpu_copy(model) -> dict[str, torch.Tensor]:
    """The model's whole weights copied to CPU: a frozen version that later updates do not touch (an opponent
    pool's snapshot, the weights an async run's actor loads)."""
    return {name: t.to("cpu", copy=True) for name, t in full_tensors(model)}


def served_tensors(model) -> Iterator[tuple[str, torch.Tensor]]:
    """(checkpoint name, tensor) of what the model computes: its own weights, or for a peft LoRA model
    each adapted weight as W + delta (computed, not merged in place, so the learner is untouched and
    nothing drifts from merging and unmerging), under the base model's names, adapter tensors left out."""
    adapted = lora_modules(model)
    if not adapted:
        yield from full_tensors(model)
        return
    for name, tensor in full_tensors(model):
        if ".lora_" in name:
            continue
        if ".modules_to_save." in name or ".original_module." in name:
            raise NotImplementedError(f"LoRA with modules_to_save is not served here ({name})")
        module, _, leaf = name.rpartition(".base_layer.")
        if module in adapted and leaf == "weight":
            layer = adapted[module]
            with torch.no_grad():
                for adapter in (a for a in layer.active_adapters if a in layer.lora_A):
                    tensor = tensor + layer.get_delta_weight(adapter).to(tensor.dtype)
        yield name.removeprefix(PEFT_PREFIX).replace(".base_layer.", "."), tensor


def lora_modules(model) -> dict[str, torch.nn.Module]:
    """The model's peft LoRA layers by module name ({} for a plain model)."""
    if not hasattr(model, "peft_config"):  # not a peft model: no need to import peft
        return {}
    from peft.tuners.lora import LoraLayer

    return {name: m for name, m in model.named_modules() if isinstance(m, LoraLayer)}
