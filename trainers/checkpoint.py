"""Checkpoints that restore everything a run needs to continue exactly where it stopped.

A checkpoint directory is also a plain transformers model directory (``hf:PATH`` plays it).
It is written under a temporary name and renamed into place, so a crash never leaves half
a checkpoint behind.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spiral_arena.models.checkpoints import SETTINGS_FILE

STATE_FILE = "trainer_state.pt"


def save(
    directory: Path,
    step: int,
    model,
    tokenizer,
    optimizer_state: dict,
    scheduler,
    rae,
    shard_rng_states: dict[int, dict],
    learner_rng: np.random.Generator,
    extra: dict,
    model_state: dict | None = None,
) -> Path:
    """``model_state``: the full weights when the model itself holds only a shard (FSDP)."""
    final = directory / f"step_{step:06d}"
    tmp = directory / f".tmp_step_{step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, state_dict=model_state)
    tokenizer.save_pretrained(tmp)
    torch.save(
        {
            "step": step,
            "optimizer": optimizer_state,
            "scheduler": scheduler.state_dict(),
            "rae": rae.state_dict(),
            "shard_rngs": shard_rng_states,
            "learner_rng": learner_rng.bit_generator.state,
            "torch_rng": torch.get_rng_state(),
            "extra": extra,
        },
        tmp / STATE_FILE,
    )
    config = extra.get("config", {})
    settings = {
        "step": step,
        "kind": "spiral-arena checkpoint",
        "prompt_template": config.get("prompt_template", "spiral"),
        "obs_format": config.get("obs_format", ""),
        "thinking": config.get("thinking", True),
        "base_model": extra.get("base_model", ""),  # what a LoRA adapter checkpoint applies to
        # how the run evaluated it: hf:/vllm:PATH play with these unless told otherwise, so a checkpoint
        # plays as well as the run's own evaluation said
        "sampling": {
            "temperature": config.get("eval_temperature", 1.0),
            "top_p": config.get("top_p", 1.0),
            "max_new_tokens": config.get("max_new_tokens", 256),
        },
    }
    (tmp / SETTINGS_FILE).write_text(json.dumps(settings))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final


def latest(directory: Path) -> Path | None:
    found = sorted(p for p in directory.glob("step_*") if (p / STATE_FILE).exists())
    return found[-1] if found else None


def load_state(
    path: Path,
    load_optimizer: Callable[[dict], None],
    scheduler,
    rae,
    shard_rngs: dict[int, np.random.Generator],
    learner_rng: np.random.Generator,
) -> dict[str, Any]:
    """Restore everything but the weights; ``load_optimizer`` receives the saved optimizer state."""
    state = torch.load(path / STATE_FILE, weights_only=True)  # plain tensors and containers: no pickled code runs
    load_optimizer(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    rae.load_state_dict(state["rae"])
    if set(shard_rngs) - set(state["shard_rngs"]):
        raise ValueError(f"{path} was written with other rollout shards; resume with the same --rollout-shards")
    for s, rng in shard_rngs.items():
        rng.bit_generator.state = state["shard_rngs"][s]
    learner_rng.bit_generator.state = state["learner_rng"]
    torch.set_rng_state(state["torch_rng"])
    return state
