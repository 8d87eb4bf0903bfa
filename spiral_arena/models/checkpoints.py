"""What a trained model directory says about itself: ``spiral_arena.json``, written last into every
trainer checkpoint and SFT output. It records how the model was prompted (prompt template, observation
format, thinking), how its run sampled it, the games it was trained on (each id with every option, and the
observation format it read) and, for a LoRA checkpoint, the base model the adapter applies to. Whoever plays
it prompts and samples it the same way and shows it each game in the text it trained on (``Trained``).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spiral_arena.registry import TEXT_OPTIONS, GameSpec

SETTINGS_FILE = "spiral_arena.json"
ADAPTER_FILE = "adapter_config.json"  # peft's: the directory holds a LoRA adapter, not full weights
DEFAULT_SAMPLING = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 256}  # for plain model directories
TRAINED_KINDS = ("spiral-arena checkpoint", "spiral-arena sft")  # what trainers write: they record their games
# what an agent spec may set in place of the record (hf:PATH#board=grid): the format, prompt and every game's text
READ_OPTIONS = ("obs_format", "prompt_template", "thinking", *TEXT_OPTIONS)


# the JSON files a model directory may hold: each must parse (to an object) before anything loads
JSON_FILES = ("config.json", ADAPTER_FILE, SETTINGS_FILE, "generation_config.json", "tokenizer.json",
              "tokenizer_config.json", "special_tokens_map.json", "model.safetensors.index.json")  # fmt: skip


def files_problem(path: str | Path) -> str | None:
    """What is wrong with a model directory's files, read before anything loads them, naming the file:
    a JSON file that does not parse or is not an object, a ``config.json`` whose ``model_type`` this
    transformers does not know, a ``.safetensors`` file whose header does not match its size (a cut copy).
    None when the files look whole. transformers' own errors for these are tracebacks without the file."""
    path = Path(path)
    for name in JSON_FILES:
        file = path / name
        if not file.is_file():
            continue
        try:
            data = json.loads(file.read_text())
        except (ValueError, UnicodeDecodeError) as error:
            return f"{file} is not valid JSON ({error}): the file is damaged or cut short"
        if not isinstance(data, dict):
            return f"{file} holds a JSON {type(data).__name__}, not an object: it is not a {name} transformers reads"
        if name == "config.json" and "auto_map" not in data:  # (a model with its own code names its classes)
            if (problem := _model_type_problem(data.get("model_type"))) is not None:
                return f"{file}: {problem}"
    for file in sorted(path.glob("*.safetensors")):
        if (why := _safetensors_problem(file)) is not None:
            return f"{file} {why}"
    return None


def _model_type_problem(model_type: Any) -> str | None:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES  # only for a local model

    if not isinstance(model_type, str) or not model_type:
        return "has no model_type: not a transformers model config"
    if model_type not in CONFIG_MAPPING_NAMES:
        import transformers

        return f"model_type {model_type!r} is unknown to the installed transformers {transformers.__version__}"
    return None


def _safetensors_problem(path: Path) -> str | None:
    """What is wrong with a ``.safetensors`` file, read from its header alone (no tensor is loaded)."""
    size = path.stat().st_size
    try:
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length)) if 8 + length <= size else None
    except (struct.error, ValueError):
        return "has no readable safetensors header"
    if header is None:
        return f"is truncated ({size} bytes, less than its {length}-byte header)"
    ends = [entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"]
    expected = 8 + length + max(ends, default=0)
    if size < expected:
        return f"is truncated ({size} of {expected} bytes)"
    return None if size == expected else f"is {size - expected} bytes longer than its header says"


def read_settings(path: str | Path) -> dict[str, Any]:
    """The directory's settings, or {} for a plain model directory."""
    settings = Path(path) / SETTINGS_FILE
    return json.loads(settings.read_text()) if settings.is_file() else {}


def last_checkpoint(run: Path) -> Path | None:
    """The newest checkpoint of a training run: ``<run>/checkpoints/step_NNNNNN/`` holding ``spiral_arena.json``
    (written last by the trainer, so a half-written step never counts); None when it has none."""
    steps = []
    for step in (run / "checkpoints").glob("step_*"):
        number = step.name.removeprefix("step_")
        if number.isdigit() and (step / SETTINGS_FILE).is_file():
            steps.append((int(number), step))
    return max(steps)[1] if steps else None


def adapter_base(path: str | Path) -> str | None:
    """The base model a LoRA checkpoint applies to (None when the directory holds full weights): the one
    its settings name, else the one peft recorded."""
    adapter = Path(path) / ADAPTER_FILE
    if not adapter.is_file():
        return None
    return read_settings(path).get("base_model") or json.loads(adapter.read_text())["base_model_name_or_path"]


def games_record(games: Iterable[tuple[GameSpec, str]]) -> list[dict[str, str]]:
    """The ``games`` a checkpoint records: each (game, observation format it was read in; "" = the game's
    own default) as its id with every option spelled out (``GameSpec.complete``) and the format resolved."""
    record = []
    for game, obs_format in games:
        entry = {"game": game.complete().label, "obs_format": obs_format or game.registered.game.default_obs_format}
        if entry not in record:
            record.append(entry)
    return record


@dataclass(frozen=True)
class Reading:
    """How one player reads a match: ``text``, what its seat is shown (``registry.SeatText``: text options
    of the game and ``obs_format``; empty = the match's own text), and ``note``, one line when the match is
    not the game it was trained on (other rules or payoff, a game it never trained, no record at all) or
    the checkpoint is from a run its time limit stopped early."""

    text: dict[str, Any] = field(default_factory=dict)
    note: str | None = None


class Trained:
    """What a model directory's settings say it was trained on, and so how it reads a given match.

    A game it trained on is shown in the text it trained on: that game's text options and observation
    format, as recorded, whatever the match's text. The rules and payoff are always the match's; where they
    differ from every variant of the game it trained on, ``note`` says which options and how. ``overrides``
    (options written on the agent spec: ``hf:PATH#board=grid``, ``#obs_format=full``) win over the record for
    every game that has that option. A checkpoint from before games were recorded reads each match as the
    match writes it (its recorded ``obs_format`` aside), with a note saying it has no record."""

    def __init__(self, settings: Mapping[str, Any], who: str, overrides: Mapping[str, Any] | None = None) -> None:
        self.who, self.overrides = who, dict(overrides or {})
        self.obs_format = settings.get("obs_format", "")  # the run's setting for every game ("" = each game's own)
        self.checkpoint = settings.get("kind") in TRAINED_KINDS
        self.games = [
            (GameSpec.parse(entry["game"]), entry.get("obs_format", "")) for entry in settings.get("games") or ()
        ]
        self.recorded = "games" in settings
        self.stopped_early = settings.get("stopped_early")  # e.g. "at step 101 of 200 by time_limit_s=900"

    def game_of(self, env_id: str) -> GameSpec:
        """The game of ``env_id`` it trained on (with its options), or the plain id when it trained on none:
        the game its policy is read on for exact analysis."""
        return next((spec for spec, _ in self.games if spec.env_id == env_id), GameSpec(env_id))

    def kuhn_game(self) -> GameSpec:
        """The single-hand Kuhn its policy is read on (exploitability): the Kuhn it trained on, one round."""
        return self.game_of("KuhnPoker-v0").with_options(rounds=1)

    def reading(self, game: GameSpec) -> Reading:
        """How this model reads ``game`` (see the class docstring)."""
        own = [(spec, form) for spec, form in self.games if spec.env_id == game.env_id]
        note = None
        if own:
            rules = game.rules()
            spec, form = min(own, key=lambda entry: len(_differences(entry[0].rules(), rules)))
            text = {**_text_of(spec), "obs_format": form}
            if changed := _differences(spec.rules(), rules):
                shown = ", ".join(f"{k}={_shown(a)} (trained {_shown(b)})" for k, a, b in changed)
                note = f"{self.who} was trained on {spec.env_id} with other rules; it plays this match's: {shown}"
        else:
            text = {"obs_format": self.obs_format} if self.obs_format else {}
            if self.recorded:
                trained = ", ".join(dict.fromkeys(spec.env_id for spec, _ in self.games)) or "no game"
                note = f"{self.who} was never trained on {game.env_id} (it trained on {trained}); it reads the "
                note += "match's text"
            elif self.checkpoint:
                note = (
                    f"{self.who} has no record of the games it was trained on (written before checkpoints kept "
                    f"one): it reads {game.env_id} as the match writes it"
                )
        if self.stopped_early:
            early = f"{self.who} is from a run STOPPED EARLY {self.stopped_early}, not the trained policy"
            note = early if note is None else f"{early}; {note}"
        allowed = game.registered.text_kwargs
        text.update((k, v) for k, v in self.overrides.items() if k in allowed)
        return Reading({k: v for k, v in text.items() if v != ""}, note)


def _text_of(spec: GameSpec) -> dict[str, Any]:
    """Every text option of ``spec``, defaults filled in (a game trained in the default layout must be shown
    that layout even when the match names another)."""
    complete = spec.complete().options
    return {k: complete[k] for k in spec.registered.game.text_options if k in complete}


def _differences(trained: Mapping[str, Any], match: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(option, the match's value, the trained value) for each rules option that differs."""
    return [(k, match.get(k), trained.get(k)) for k in sorted({*trained, *match}) if trained.get(k) != match.get(k)]


def _shown(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
