"""The agent spec grammar, used everywhere (CLI, leaderboard, trainer opponents, serve): ``random``,
``expert``, ``human``, ``hf:PATH`` (transformers), ``vllm:PATH`` (vLLM), ``PROVIDER:MODEL`` for the API
providers (``openai``, ``gemini``, ``mistral``, ``openrouter``), ``PROVIDER:MODEL@URL`` to send a provider's
requests to any OpenAI-compatible server, and constructor options after ``#`` (``expert#alpha=0.2``,
read as game options are: ``registry.option_value``). Specs never carry keys: options that look like
secrets are refused, and an API spec may name the variable its own key is read from
(``openai:MODEL@URL#key_env=MY_API_KEY``). Checked here without loading or calling anything."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from spiral_arena.agents.base import Agent
from spiral_arena.llm import KEY_ENV_OPTION, PROVIDERS, key_variable_problem, safe_url
from spiral_arena.models.checkpoints import ADAPTER_FILE, files_problem, last_checkpoint
from spiral_arena.models.named import NAMED_MODELS, is_named
from spiral_arena.registry import looks_like_secret, option_value

SIMPLE_KINDS = ("random", "expert", "human")
MODEL_KINDS = ("hf", "vllm")  # local models: hf:PATH through transformers, vllm:PATH through vLLM
SPEC_FORMS = (
    *SIMPLE_KINDS,
    "hf:PATH",
    "vllm:PATH",
    *(f"{name}:MODEL" for name in PROVIDERS),
    "PROVIDER:MODEL@URL (any OpenAI-compatible server, e.g. openai:MODEL@http://127.0.0.1:8000/v1)",
)
_URL_START = re.compile(r"@(?=[A-Za-z][A-Za-z0-9+.-]*://)")  # the '@' that opens a base URL
_USERINFO = re.compile(r"//[^/@\s]*@")


@dataclass(frozen=True)
class AgentSpec:
    """A parsed spec: ``kind`` (random, expert, human, hf or a provider), the model id or path,
    and the base URL override of API specs."""

    kind: str
    target: str | None = None
    base_url: str | None = None

    def __str__(self) -> str:
        text = self.kind if self.target is None else f"{self.kind}:{self.target}"
        return text if self.base_url is None else f"{text}@{self.base_url}"


def masked(spec: str) -> str:
    """A spec as it may appear in an error message: URL credentials hidden."""
    return _USERINFO.sub("//***@", spec)


def unknown(spec: str) -> ValueError:
    return ValueError(f"unknown agent spec {masked(spec)!r}; valid forms: {', '.join(SPEC_FORMS)}")


def parse_spec(spec: str) -> AgentSpec:
    """Split a spec into its parts, or raise ValueError saying what is wrong and what is valid.

    Model ids may contain ':' and '/' (``openrouter:google/gemini-2.5-flash-lite``,
    ``openrouter:meta-llama/llama-3.3-8b-instruct:free``) and even '@' when no URL follows it.
    """
    text = spec.strip()
    if text in SIMPLE_KINDS:
        return AgentSpec(text)
    kind, sep, rest = text.partition(":")
    if not sep or kind not in (*PROVIDERS, *MODEL_KINDS):
        raise unknown(spec)
    if not rest:
        what = "path" if kind in MODEL_KINDS else "model id"
        raise ValueError(f"agent spec {masked(spec)!r} needs a {what} after '{kind}:'")
    if kind in MODEL_KINDS:  # a path or hub id; '@' belongs to it
        return AgentSpec(kind, rest)
    match = _URL_START.search(rest)
    if match is None:
        _, at, tail = rest.rpartition("@")
        if at and ("/" in tail or ":" in tail):
            raise ValueError(
                f"the base URL in agent spec {masked(spec)!r} needs http:// or https://, "
                f"e.g. {kind}:MODEL@http://127.0.0.1:8000/v1"
            )
        return AgentSpec(kind, rest)
    model, url = rest[: match.start()], rest[match.end() :]
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"the base URL in agent spec {masked(spec)!r} must be an http:// or https:// URL with a host")
    if not model:
        raise ValueError(f"agent spec {masked(spec)!r} needs a model id before '@'")
    return AgentSpec(kind, model, url)


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # org/name, as the Hugging Face hub writes it


def model_path_problem(path: str, hub: bool = True) -> str | None:
    """What is wrong with a model location, found before anything loads (None when it looks right):
    a model's name (``smollm2-135m``: fetched on first use, ``models.named``), a transformers model or
    training checkpoint directory (config.json, or adapter_config.json for a LoRA checkpoint) whose files
    read whole (``files_problem``), or, with ``hub``, a hub id such as Qwen/Qwen3-4B-Base (downloaded on
    first use)."""
    if is_named(path):
        return None
    local = Path(path).expanduser()
    if local.is_dir():
        if (last := last_checkpoint(local)) is not None:  # a training run's: its config.json is not a model's
            return f"{path} is a training run; its checkpoints play, the last one as hf:{last}"
        if (local / "config.json").is_file() or (local / ADAPTER_FILE).is_file():
            return files_problem(local)  # damaged files, named, rather than a traceback from the loader
        return f"{path} holds no config.json: not a transformers model or checkpoint directory"
    if local.exists():
        return f"{path} is a file; give a model directory"
    if hub and HUB_ID.fullmatch(path):
        return None
    wanted = f"a model name ({', '.join(NAMED_MODELS)}), a model or checkpoint directory"
    wanted += ", or a hub id such as Qwen/Qwen3-4B-Base" if hub else ""
    return f"model path {path} does not exist; give {wanted}"


def spec_problem(spec: str, human: bool = True) -> str | None:
    """What is wrong with an agent spec (options included), checked without loading or calling anything."""
    try:
        spec = split_options(spec)[0]
        parsed = parse_spec(spec)
    except ValueError as error:
        return str(error)
    if parsed.kind == "human" and not human:
        return "human cannot play here: these games run many at once, unattended"
    if parsed.kind in MODEL_KINDS:
        problem = model_path_problem(parsed.target, hub=False)
        return None if problem is None else f"{masked(spec)!r}: {problem}"
    return None


def redacted(spec: str) -> str:
    """The spec in a form safe to store or show: a base URL loses credentials and query."""
    parsed = parse_spec(spec)
    if parsed.base_url is None:
        return str(parsed)
    return str(AgentSpec(parsed.kind, parsed.target, safe_url(parsed.base_url)))


def describe(agent: str | Agent) -> str:
    """A label for an agent or spec that is safe to store (no keys, no URL credentials)."""
    if isinstance(agent, str):
        return redacted(agent)
    spec = getattr(agent, "spec", None)
    if isinstance(spec, str):
        return redacted(spec)
    name = type(agent).__name__
    return name.removesuffix("Agent").lower() or name


_OPTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def split_options(text: str) -> tuple[str, dict[str, Any]]:
    """``SPEC#KEY=VALUE#...`` -> (SPEC, options): constructor options written in the spec itself, as
    ``hf:PATH#temperature=0`` (greedy). The same grammar as the leaderboard's entrants; options that
    look like secrets are refused, since specs are logged and stored. ``key_env`` names a variable,
    not a secret: it stays text, and a value that is no variable name is refused without an echo."""
    spec, *option_texts = text.split("#")
    options: dict[str, Any] = {}
    for option in option_texts:
        key, sep, value = option.partition("=")
        if key == KEY_ENV_OPTION and sep and (problem := key_variable_problem(value)) is not None:
            raise ValueError(f"agent spec {masked(spec)!r}: {problem}")
        if not sep or not _OPTION_NAME.match(key) or not value:
            raise ValueError(
                f"bad option {option!r} in agent spec {masked(spec)!r}; "
                "write SPEC#NAME=VALUE, e.g. expert#alpha=0.2 or hf:PATH#temperature=0"
            )
        if key != KEY_ENV_OPTION and looks_like_secret(key):
            raise ValueError(
                f"option {key!r} looks like a secret and would be logged or stored; API keys are read from "
                f"environment variables (e.g. OPENAI_API_KEY, or the one a spec names with #{KEY_ENV_OPTION}=VAR)"
            )
        if key in options:
            raise ValueError(f"option {key!r} is given twice in agent spec {masked(spec)!r}; give each option once")
        options[key] = value if key == KEY_ENV_OPTION else option_value(value)
    return spec.strip(), options


