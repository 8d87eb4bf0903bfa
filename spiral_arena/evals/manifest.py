"""What a run records about itself, and the protocol hash that says whether two runs are comparable.

``manifest.json`` has a ``protocol`` part (preset with its template texts and hashes, shots,
sampling, samples per item, item ids and content hash of each benchmark, grader versions and
modes) and its sha256, the ``protocol_hash``. Two runs with the same hash asked the same questions
the same way and graded the same way; the model, engine, seed and data file locations are recorded
beside it but left out of the hash, since comparing models, engines or seeds is the point. Wall
times live in ``timing``, the only part that differs between identical runs.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from spiral_arena.agents import redacted
from spiral_arena.evals.generate import model_kind
from spiral_arena.models.checkpoints import read_settings
from spiral_arena.models.named import local_dir
from spiral_arena.outputs import file_sha256


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def protocol_hash(protocol: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(protocol).encode()).hexdigest()


def weights_identity(path: Path) -> dict[str, Any]:
    """sha256 of each ``*.safetensors`` file in a model directory and one hash over them all."""
    files = {p.name: file_sha256(p) for p in sorted(path.glob("*.safetensors"))}
    combined = hashlib.sha256(canonical_json(files).encode()).hexdigest() if files else None
    return {"weights_sha256": combined, "weight_files": files}


def model_identity(spec: str) -> dict[str, Any]:
    """The model as the manifest records it: local weights by hash (and training step), APIs by id."""
    kind = model_kind(spec)
    if kind == "api":
        return {"spec": redacted(spec), "kind": "api"}
    path = local_dir(spec.split(":", 1)[1])  # a model's name: the directory it resolves to
    settings = read_settings(path)
    identity = {"spec": spec, "kind": kind, "path": path, **weights_identity(Path(path))}
    if settings:
        identity["training_step"] = settings.get("step")
        if settings.get("base_model"):
            identity["base_model"] = settings["base_model"]
    return identity


def code_revision() -> str | None:
    """The git commit of this checkout, when it is one."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def package_identity() -> dict[str, Any]:
    try:
        version = metadata.version("spiral-arena")
    except metadata.PackageNotFoundError:
        version = None
    return {"spiral-arena": version, "code_revision": code_revision(), "python": platform.python_version()}


def differing_fields(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two protocol dicts (for one readable refusal line)."""
    out = []
    for key in sorted(set(a) | set(b)):
        left, right = a.get(key), b.get(key)
        if isinstance(left, dict) and isinstance(right, dict):
            out += differing_fields(left, right, f"{prefix}{key}.")
        elif left != right:
            out.append(f"{prefix}{key}")
    return out


def write_json(path: Path, value: Any) -> None:
    """Write atomically (temporary file, then rename), so a crash never leaves half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
