"""What Twenty Questions takes from bethgelab/delta-belief-rl (MIT), fetched once and cached: the COCA+
secret-word lists and the questioner's prompts.

The package ships neither. ``load_word_list("coca_plus_train")`` downloads the file at a pinned commit,
checks its sha256, and keeps it in the cache directory (``$SPIRAL_ARENA_CACHE``, else
``~/.cache/spiral_arena``); later calls read the cache and never touch the network. ``read_words(path)``
reads any local list instead. ``questioner_prompts()`` does the same for the two prompt modules the SFT
questioner was trained with, and reads their string constants without running them.
"""

from __future__ import annotations

import ast
import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

UPSTREAM_COMMIT = "f173b54a559b50db35a45daec0463f571d092981"
BASE_URL = f"https://raw.githubusercontent.com/bethgelab/delta-belief-rl/{UPSTREAM_COMMIT}/"
MAX_LIST_BYTES = 1 << 20  # the real lists are about 10 kB; refuse anything absurd


@dataclass(frozen=True)
class RemoteList:
    path: str  # inside the upstream repository
    sha256: str
    words: int


_FOLDER = "delta_belief_rl/env/twenty_questions/config/coca_plus/"
REMOTE_LISTS = {
    "coca_plus_train": RemoteList(
        _FOLDER + "rl_training_coca_wo_gemini_test.txt",
        "011641fc3327fa7b9aabbfd9a050e27b565140c636c6482bb7c57026620bf7bf",
        1000,
    ),
    "coca_plus_test": RemoteList(
        _FOLDER + "unique_gemini_test.txt",
        "fc52f74d60a4ad2b2315b5a1c6a08ebbd13ab8baf363668c83407cb6f2f226f5",
        433,
    ),
}


# the questioner's prompts: the first turn's (coca_plus, as in the SFT data) and every later turn's (llm_agent)
REMOTE_PROMPT_FILES = {
    "coca_plus_prompts": (_FOLDER + "prompts.py", "17b325fc5adeabbfde0b028f0eff2b92006e1d84109eed3fefbda25b1ab36a96"),
    "llm_agent_prompts": (
        "delta_belief_rl/llm_agent/prompts.py",
        "feba6f70575d777e9225df9176f64271ba827b5c391abbaaaa42fb9c6952ea06",
    ),
}


@dataclass(frozen=True)
class QuestionerPrompts:
    """delta-belief-rl's questioner chat: the system prompt and first user turn, then each later user turn
    is the answer (``Yes``, ``No``, or the feedback for an invalid or repeated question), ". " and ``later``."""

    system: str
    first: str
    later: str
    invalid: str
    repeated: str


class WordListError(RuntimeError):
    """A word list that cannot be had: download failed, checksum wrong, or a local file unusable."""


def cache_dir() -> Path:
    """Where downloaded lists live: ``$SPIRAL_ARENA_CACHE`` or ``~/.cache/spiral_arena``."""
    root = os.environ.get("SPIRAL_ARENA_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "spiral_arena"


def cached_path(name: str, cache: Path | None = None) -> Path:
    """The file a named list is cached in (it may not exist yet)."""
    _remote(name)
    return (cache or cache_dir()) / "twenty_questions" / f"{name}.txt"


def load_word_list(
    name: str, *, base_url: str = BASE_URL, cache: Path | None = None, timeout: float = 30.0
) -> list[str]:
    """The words of a named list, downloading and caching it on first use."""
    return read_words(fetch_word_list(name, base_url=base_url, cache=cache, timeout=timeout))


def fetch_word_list(name: str, *, base_url: str = BASE_URL, cache: Path | None = None, timeout: float = 30.0) -> Path:
    """The path of a verified local copy of a named list; downloads it if the cache lacks a good one."""
    remote = _remote(name)
    local = "pass words_file=PATH to read any local list (one word per line)"
    return _fetch(
        f"the word list {name!r}", remote.path, remote.sha256, cached_path(name, cache), base_url, timeout, local
    )


def questioner_prompts(
    *, base_url: str = BASE_URL, cache: Path | None = None, timeout: float = 30.0
) -> QuestionerPrompts:
    """The prompts delta-belief-rl's SFT questioner was trained with, downloaded and cached on first use."""
    constants = {}
    for name, (remote_path, sha256) in REMOTE_PROMPT_FILES.items():
        path = (cache or cache_dir()) / "twenty_questions" / f"{name}.py"
        local = "the questioner prompt template needs them (prompt_template='questioner')"
        text = _fetch(f"the prompt file {name!r}", remote_path, sha256, path, base_url, timeout, local).read_text()
        constants[name] = {
            target.id: node.value.value
            for node in ast.parse(text).body
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
    first, later = constants["coca_plus_prompts"], constants["llm_agent_prompts"]
    try:
        return QuestionerPrompts(
            first["SYSTEM_PROMPT_ORIGINAL"], first["DIRECT_PROMPT"], later["DIRECT_PROMPT"],
            later["INVALID_ANSWER"], later["REPEATED_ANSWER"],
        )  # fmt: skip
    except KeyError as missing:
        raise WordListError(f"the upstream prompt files lack {missing}: not the pinned commit's") from None


def _fetch(what: str, remote_path: str, sha256: str, path: Path, base_url: str, timeout: float, local: str) -> Path:
    """``path``, a verified copy of upstream's ``remote_path``, downloaded if the cache lacks a good one."""
    problem = ""
    if path.exists():
        digest = _sha256(path.read_bytes())
        if digest == sha256:
            return path
        problem = f"the cached copy at {path} is damaged (sha256 {digest}); "
    url = base_url.rstrip("/") + "/" + remote_path
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data = response.read(MAX_LIST_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or error
        raise WordListError(
            f"{problem}could not download {what} from {url} ({reason}). To use it offline, save the file "
            f"(sha256 {sha256}) as {path}, or {local}."
        ) from None
    digest = _sha256(data)
    if digest != sha256:
        raise WordListError(
            f"{problem}the download of {what} from {url} has sha256 {digest}, expected {sha256} "
            f"(commit {UPSTREAM_COMMIT[:7]}); nothing was cached."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write beside the target and rename, so a crash or a concurrent reader never sees half a file.
    with tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, path)
    return path


def read_words(path: str | os.PathLike[str]) -> list[str]:
    """One word (or short phrase) per line; blank lines skipped, duplicates dropped, order kept."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise WordListError(f"cannot read the word list {file}: {error}") from None
    words = list(dict.fromkeys(line.strip() for line in text.splitlines() if line.strip()))
    if not words:
        raise WordListError(f"the word list {file} has no words (expected one word per line)")
    return words


def _remote(name: str) -> RemoteList:
    if name not in REMOTE_LISTS:
        raise ValueError(f"unknown word list {name!r}; valid: {', '.join(REMOTE_LISTS)}")
    return REMOTE_LISTS[name]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
