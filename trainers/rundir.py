"""What a training run writes into its directory, so that a directory holding a run is never trained into
by accident: continuing it takes ``resume``, replacing it ``overwrite`` (which removes these first, so no
stale checkpoint of the old run is left for a later ``resume`` to pick up)."""

from __future__ import annotations

import shutil
from pathlib import Path

# config and logs, checkpoints and the warm start, the embedded model, logger folders, and trainers.plots' PNGs
RUN_ENTRIES = (
    "config.json", "metrics.jsonl", "transcripts.jsonl", "checkpoints", "warm_start", "tiny_init", "tensorboard",
    "wandb", "win_rates.png", "training_games.png", "exploitability.png", "tactics.png", "invalid_rate.png",
    "response_length.png", "loss.png", "logprob_gap.png", "reasoning.png", "summary.png",
)  # fmt: skip
# any one of these says a run was started here (the others may be left by a run that failed early)
MARKS = ("config.json", "metrics.jsonl", "checkpoints")


def run_files(directory: str | Path) -> list[Path]:
    """The entries of a run in ``directory`` (empty when it holds none)."""
    directory = Path(directory)
    if not any((directory / mark).exists() for mark in MARKS):
        return []
    return [directory / name for name in RUN_ENTRIES if (directory / name).exists()]


def clear(directory: str | Path) -> list[Path]:
    """Remove the run in ``directory`` (its entries only: other files there stay) and say what went."""
    removed = run_files(directory)
    for path in removed:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    return removed
