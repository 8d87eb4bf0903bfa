"""Loading a model directory or training checkpoint, the one way everything here does it: full weights, or
for a LoRA checkpoint (a peft adapter) its base model with the adapter on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spiral_arena.models.checkpoints import adapter_base
from spiral_arena.models.named import local_dir

ADAPTER_MODES = ("merged", "frozen", "trainable")


def load_model(
    path: str | Path, device: Any, dtype: Any, adapter: str = "merged", base: str | None = None
) -> tuple[Any, Any]:
    """(model on ``device`` in ``dtype``, tokenizer) of ``path``. A LoRA checkpoint is its base (``base``, else
    the one the checkpoint records) plus the adapter, ``adapter``: "merged" into the weights (to play it),
    kept "frozen" (a reference), or "trainable" (training goes on with it). Either may be a model's name
    (``smollm2-135m``: ``models.named``). OSError when it cannot be read."""
    if adapter not in ADAPTER_MODES:
        raise ValueError(f"adapter must be one of {', '.join(ADAPTER_MODES)}, got {adapter!r}")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = local_dir(str(path))
    tokenizer = AutoTokenizer.from_pretrained(path)
    recorded = adapter_base(path)
    if recorded is None:
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device), tokenizer
    from peft import PeftModel

    model = AutoModelForCausalLM.from_pretrained(local_dir(base or recorded), dtype=dtype).to(device)
    model = PeftModel.from_pretrained(model, path, is_trainable=adapter == "trainable")
    return (model.merge_and_unload() if adapter == "merged" else model), tokenizer
