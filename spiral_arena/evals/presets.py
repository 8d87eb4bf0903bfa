"""Evaluation protocols as data: one TOML file per preset, rendered into prompts here.

A preset fixes everything that moves a base model's score by points: the prompt text and its
markup (``raw``: the text is the whole prompt, e.g. hand-written ChatML; ``chat``: the text is one
user turn, wrapped by the model's own chat template or sent to an API as a user message), the
few-shot examples, the sampling settings, how answers are read, and the headline metric (SPIRAL
reported the first sample's accuracy for maths but the mean of 10 samples for GPQA). Maths
("math") and multiple-choice ("choice") questions have a section each. Placeholders: ``{question}``,
``{instruction}``, ``{shots}``, and for choice ``{options}`` (one "A) text" line per option) and
``{letters}`` ("A, B, C, D"); a shot is rendered with ``shot_template`` and its ``{solution}``.

``[sampling.samples_by_benchmark]`` sets another number of samples for some benchmarks (SPIRAL drew
10 per GPQA item and 1 per MMLU-Pro item). Every field can be overridden with ``--set KEY=VALUE``
(``temperature``, ``samples_by_benchmark.mmlu_pro=4``, ``math.template=@file.txt``, ``choice.shots=0``
keeps no shots, ``math.stop=["\\nQuestion:"]``); the manifest records the resolved preset, the
overrides and the hash of each template.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from spiral_arena.evals.answers import LETTERS
from spiral_arena.evals.data import BENCHMARKS
from spiral_arena.evals.grading import CHOICE_EXTRACTIONS, MATH_EXTRACTIONS
from spiral_arena.evals.metrics import METRICS

FORMATS = ("raw", "chat")
KINDS = ("math", "choice")
SAMPLING_KEYS = ("temperature", "top_p", "max_new_tokens", "samples")
_PLACEHOLDER = re.compile(r"\{(instruction|question|options|letters|shots|solution)\}")


class PresetError(ValueError):
    """A preset file or override that does not make sense (one line: what and what is valid)."""


@dataclass(frozen=True)
class Shot:
    question: str
    solution: str
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class PromptFormat:
    """How one kind of question becomes a prompt, and how its answer is read."""

    format: str
    template: str
    instruction: str
    extraction: str
    metric: str  # the headline score per item: "first-sample" or "mean" over its samples
    stop: tuple[str, ...] = ()
    shot_template: str = ""
    shots: tuple[Shot, ...] = ()


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    temperature: float
    top_p: float
    max_new_tokens: int
    samples: int
    math: PromptFormat
    choice: PromptFormat
    samples_by_benchmark: dict[str, int] = dataclasses.field(default_factory=dict)  # where one differs

    def prompt_format(self, kind: str) -> PromptFormat:
        return self.math if kind == "math" else self.choice

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def template_hashes(self) -> dict[str, str]:
        return {kind: text_sha256(self.prompt_format(kind).template) for kind in KINDS}


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def preset_names() -> list[str]:
    folder = resources.files("spiral_arena.evals") / "presets"
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def load_preset(name_or_path: str) -> Preset:
    """A packaged preset by name (``spiral-offline``), or a TOML file of the same shape by path."""
    path = Path(name_or_path)
    if name_or_path.endswith(".toml") and path.is_file():
        text = path.read_text(encoding="utf-8")
    elif name_or_path in preset_names():
        text = (resources.files("spiral_arena.evals") / "presets" / f"{name_or_path}.toml").read_text(encoding="utf-8")
    else:
        raise PresetError(f"unknown preset {name_or_path!r}; valid: {', '.join(preset_names())}, or a .toml file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PresetError(f"preset {name_or_path}: not valid TOML ({error})") from None
    return validate(_from_dict(data, name_or_path))


def _from_dict(data: dict[str, Any], where: str) -> Preset:
    try:
        sampling = data["sampling"]
        formats = {}
        for kind in KINDS:
            section = dict(data[kind])
            shots = tuple(
                Shot(s["question"], s["solution"], tuple(s.get("options", ()))) for s in section.pop("shots", ())
            )
            section["stop"] = tuple(section.get("stop", ()))
            formats[kind] = PromptFormat(**section, shots=shots)
        return Preset(
            name=data["name"],
            description=data.get("description", ""),
            temperature=float(sampling["temperature"]),
            top_p=float(sampling["top_p"]),
            max_new_tokens=int(sampling["max_new_tokens"]),
            samples=int(sampling["samples"]),
            math=formats["math"],
            choice=formats["choice"],
            samples_by_benchmark={k: int(v) for k, v in sampling.get("samples_by_benchmark", {}).items()},
        )
    except (KeyError, TypeError) as error:
        raise PresetError(f"preset {where}: missing or unexpected field {error}") from None


def preset_from_record(data: dict[str, Any]) -> Preset:
    """A preset rebuilt from its manifest record (``Preset.to_dict``), e.g. to grade a run again."""
    sampling = {k: data[k] for k in (*SAMPLING_KEYS, "samples_by_benchmark")}
    return validate(_from_dict({**data, "sampling": sampling}, "the manifest"))


def validate(preset: Preset) -> Preset:
    if preset.temperature < 0 or not 0 < preset.top_p <= 1:
        raise PresetError(f"need temperature >= 0 and 0 < top_p <= 1, got {preset.temperature} and {preset.top_p}")
    if preset.max_new_tokens < 1 or preset.samples < 1:
        raise PresetError(f"need max_new_tokens >= 1 and samples >= 1, got {preset.max_new_tokens}, {preset.samples}")
    for name, count in preset.samples_by_benchmark.items():
        if name not in BENCHMARKS or count < 1:
            raise PresetError(
                f"samples_by_benchmark.{name} = {count}: need a benchmark ({', '.join(BENCHMARKS)}) and a count >= 1"
            )
    for kind, extractions in (("math", MATH_EXTRACTIONS), ("choice", CHOICE_EXTRACTIONS)):
        fmt = preset.prompt_format(kind)
        if fmt.format not in FORMATS:
            raise PresetError(f"{kind}.format {fmt.format!r} is not one of {', '.join(FORMATS)}")
        if fmt.extraction not in extractions:
            raise PresetError(f"{kind}.extraction {fmt.extraction!r} is not one of {', '.join(extractions)}")
        if fmt.metric not in METRICS:
            raise PresetError(f"{kind}.metric {fmt.metric!r} is not one of {', '.join(METRICS)}")
        needed = ("{question}", "{options}") if kind == "choice" else ("{question}",)
        for placeholder in needed:
            if placeholder not in fmt.template:
                raise PresetError(f"{kind}.template has no {placeholder} placeholder")
        if fmt.shots and "{shots}" not in fmt.template:
            raise PresetError(f"{kind} has shots but its template has no {{shots}} placeholder")
    return preset


# -- overrides --------------------------------------------------------------------------------------


def _override_keys() -> list[str]:
    fields = [f.name for f in dataclasses.fields(PromptFormat)]
    per_benchmark = [f"samples_by_benchmark.{name}" for name in BENCHMARKS]
    return [*SAMPLING_KEYS, *per_benchmark] + [f"{kind}.{name}" for kind in KINDS for name in fields]


def _text_value(value: str) -> str:
    """``@path`` reads a file (templates are long); anything else is the text itself."""
    if value.startswith("@"):
        path = Path(value[1:])
        if not path.is_file():
            raise PresetError(f"override file {path} does not exist")
        return path.read_text(encoding="utf-8")
    return value


def apply_overrides(preset: Preset, overrides: dict[str, str]) -> Preset:
    """``preset`` with ``{"temperature": "0", "math.shots": "2", ...}`` applied, checked again."""
    top: dict[str, Any] = {}
    per_benchmark = dict(preset.samples_by_benchmark)
    sections: dict[str, dict[str, Any]] = {kind: {} for kind in KINDS}
    for key, value in overrides.items():
        if key not in _override_keys():
            raise PresetError(f"unknown preset key {key!r}; valid: {', '.join(_override_keys())}")
        try:
            if key in ("temperature", "top_p"):
                top[key] = float(value)
            elif key in ("max_new_tokens", "samples"):
                top[key] = int(value)
            elif key.startswith("samples_by_benchmark."):
                per_benchmark[key.split(".", 1)[1]] = int(value)
            else:
                kind, name = key.split(".")
                current = preset.prompt_format(kind)
                if name == "shots":
                    keep = int(value)
                    if not 0 <= keep <= len(current.shots):
                        raise PresetError(f"{key} must be 0 to {len(current.shots)} (the preset's shots), got {keep}")
                    sections[kind][name] = current.shots[:keep]
                elif name == "stop":
                    stop = json.loads(value)
                    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
                        raise PresetError(f'{key} must be a JSON list of non-empty strings, e.g. ["\\nQuestion:"]')
                    sections[kind][name] = tuple(stop)
                else:
                    sections[kind][name] = _text_value(value)
        except (ValueError, json.JSONDecodeError) as error:
            if isinstance(error, PresetError):
                raise
            raise PresetError(f"bad value for {key}: {error}") from None
    formats = {kind: dataclasses.replace(preset.prompt_format(kind), **sections[kind]) for kind in KINDS}
    changed = dataclasses.replace(
        preset, **top, math=formats["math"], choice=formats["choice"], samples_by_benchmark=per_benchmark
    )
    return validate(changed)


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise PresetError(f"--set takes KEY=VALUE, got {pair!r}; keys: {', '.join(_override_keys())}")
        out[key.strip()] = value
    return out


# -- rendering --------------------------------------------------------------------------------------


def _fill(template: str, values: dict[str, str]) -> str:
    """Replace known placeholders in one pass, so braces inside the inserted text are left alone."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def options_block(options: tuple[str, ...] | list[str]) -> str:
    return "\n".join(f"{LETTERS[i]}) {text}" for i, text in enumerate(options))


def letters_text(count: int) -> str:
    return ", ".join(LETTERS[:count])


def render(fmt: PromptFormat, question: str, options: tuple[str, ...] = ()) -> str:
    """The prompt text (raw) or user turn (chat) for one question."""
    shots = "".join(
        _fill(
            fmt.shot_template,
            {
                "question": shot.question,
                "solution": shot.solution,
                "options": options_block(shot.options),
                "letters": letters_text(len(shot.options)),
            },
        )
        for shot in fmt.shots
    )
    values = {"instruction": fmt.instruction, "question": question, "shots": shots}
    if options:
        values |= {"options": options_block(options), "letters": letters_text(len(options))}
    return _fill(fmt.template, values)


def apply_stop(text: str, stop: tuple[str, ...]) -> str:
    """``text`` cut before the first stop string (engines stop on tokens only, so strings are cut here)."""
    cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=len(text))
    return text[:cut]
