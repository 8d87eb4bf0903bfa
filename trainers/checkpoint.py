"""Checkpoints that restore everything a run needs to continue exactly where it stopped.

A checkpoint directory is also a plain transformers model directory (``hf:PATH`` plays it).
It is written under a temporary name and renamed into place, so a crash never leaves half
a checkpoint behind. A checkpoint damaged afterwards (a disk that filled up while copying, a file
deleted by hand) is found before anything loads it (``problem``): ``latest`` says in one line which
file is wrong and how, and resumes from the previous complete checkpoint when there is one.
"""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spiral_arena.models import Sampling
from spiral_arena.models.checkpoints import SETTINGS_FILE, files_problem, write_record
from spiral_arena.registry import GameSpec

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
    write_run_record(
        tmp,
        "spiral-arena checkpoint",
        config,
        [GameSpec.parse(game) for game in config.get("games", "").split(",") if game],
        step=step,
        base_model=extra.get("base_model", ""),  # what a LoRA adapter checkpoint applies to
        # a run cut by its time limit: whoever plays or ranks this checkpoint is told (``Trained.reading``)
        **({"stopped_early": extra["stopped_early"]} if extra.get("stopped_early") else {}),
    )
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final


def write_run_record(directory: Path, kind: str, config: dict, games: list[GameSpec], **fields) -> None:
    """The record (``write_record``) of a model a run saved, from the run's ``config`` (as config.json holds it):
    how it reads ``games``, and how the run evaluated it (hf:/vllm:PATH play with that sampling unless told
    otherwise, so a saved model plays as well as the run's own evaluation said)."""
    obs_format = config.get("obs_format", "")
    get = config.get
    sampling = Sampling(get("eval_temperature", 1.0), get("top_p", 1.0), get("max_new_tokens", 256))
    write_record(
        directory, kind, ((spec, obs_format) for spec in games), config.get("prompt_template", "spiral"), obs_format,
        config.get("thinking", True), **fields, sampling=sampling.as_dict(),
    )  # fmt: skip


def problem(path: Path) -> str | None:
    """Why the checkpoint directory ``path`` cannot be resumed from, naming the file ("<file> is
    missing", "<file> is truncated (N of M bytes)", "<file> is not valid JSON ..."), or None when it is
    complete."""
    for name in (SETTINGS_FILE, STATE_FILE):
        if not (path / name).is_file():
            return f"{path / name} is missing"
    if not zipfile.is_zipfile(path / STATE_FILE):  # torch.save writes a zip archive; a cut one lacks its end
        return f"{path / STATE_FILE} is truncated or not a torch checkpoint"
    if not any(path.glob("*.safetensors")):
        return f"{path} holds no model weights (*.safetensors)"
    return files_problem(path)  # its JSON files (config, tokenizer, settings) and each weights file's header


def scan(directory: Path) -> tuple[Path | None, list[str]]:
    """The newest complete checkpoint under ``directory`` (None if none), and what is wrong with each
    newer one (``problem``), newest first."""
    steps = [p for p in directory.glob("step_*") if p.is_dir() and p.name.removeprefix("step_").isdigit()]
    broken = []
    for path in sorted(steps, key=lambda p: int(p.name.removeprefix("step_")), reverse=True):
        why = problem(path)
        if why is None:
            return path, broken
        broken.append(why)
    return None, broken


def latest(directory: Path) -> Path | None:
    """The checkpoint to resume from: the newest complete one. Each newer, damaged one is one line on
    stderr (on the main rank) naming the file and what is wrong, and saying which checkpoint is used."""
    found, broken = scan(directory)
    if found is not None and os.environ.get("RANK", "0") == "0":
        for why in broken:
            print(
                f"spiral-arena train: warning: {why}; resuming from {found.name}, the previous complete checkpoint",
                file=sys.stderr,
            )
    return found


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
