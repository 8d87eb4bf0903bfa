"""What a trained model directory says about itself: ``spiral_arena.json``, written last into every
trainer checkpoint and SFT output. It records how the model was prompted (prompt template, observation
format, thinking) and how its run sampled it, so whoever plays it prompts and samples it the same way,
and for a LoRA checkpoint the base model the adapter applies to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SETTINGS_FILE = "spiral_arena.json"
ADAPTER_FILE = "adapter_config.json"  # peft's: the directory holds a LoRA adapter, not full weights
DEFAULT_SAMPLING = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 256}  # for plain model directories


def read_settings(path: str | Path) -> dict[str, Any]:
    """The directory's settings, or {} for a plain model directory."""
    settings = Path(path) / SETTINGS_FILE
    return json.loads(settings.read_text()) if settings.is_file() else {}


def adapter_base(path: str | Path) -> str | None:
    """The base model a LoRA checkpoint applies to (None when the directory holds full weights): the one
    its settings name, else the one peft recorded."""
    adapter = Path(path) / ADAPTER_FILE
    if not adapter.is_file():
        return None
    return read_settings(path).get("base_model") or json.loads(adapter.read_text())["base_model_name_or_path"]
