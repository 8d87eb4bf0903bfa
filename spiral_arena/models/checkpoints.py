"""What a trained model directory says about itself: ``spiral_arena.json``, written last into every
trainer checkpoint and SFT output. It records how the model was prompted (prompt template, observation
format, thinking), how its run sampled it, the games it was trained on (each id with every option, and the
observation format it read) and, for a LoRA checkpoint, the base model the adapter applies to. Whoever plays
it prompts and samples it the same way and shows it each game in the text it trained on (``Trained``).
``read_settings`` checks every field it knows (``RECORD``) as it reads the file, so a bad value is one line
naming the file and the field before any model loads, never a failure in the middle of a game.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spiral_arena.core.observations import OBS_FORMATS
from spiral_arena.models import Sampling
from spiral_arena.models.policy import PROMPT_TEMPLATES
from spiral_arena.registry import TEXT_OPTIONS, GameSpec, env_id_problem

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
    try:
        for name in JSON_FILES:
            file = path / name
            if not file.is_file():
                continue
            data = _json_object(file)
            if name == "config.json" and "auto_map" not in data:  # (a model with its own code names its classes)
                if (problem := _model_type_problem(data.get("model_type"))) is not None:
                    return f"{file}: {problem}"
        read_settings(path)  # and the fields of its record
    except ValueError as error:
        return str(error)
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


def _json_object(file: Path) -> dict[str, Any]:
    """The JSON object ``file`` holds; a ValueError naming the file when it does not parse or is no object."""
    try:
        data = json.loads(file.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{file} is not valid JSON ({error}): the file is damaged or cut short") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"{file} holds a JSON {type(data).__name__}, not an object: not the {file.name} of a model directory"
        )
    return data


# A check of one value: None when it is valid, else (where in the value it fails: "", ".top_p" or "[1].game";
# what is held there; what is valid there).
Problem = tuple[str, Any, str]
Check = Callable[[Any], Problem | None]
_MISSING = object()  # a required field that is not there
# The longest answer a record may ask for. A move, reasoned or not, takes tens to a few thousand tokens (the
# eval presets allow 8192), and 32768 tokens fill the whole context of the larger models one trains here
# (SmolLM2's holds 8192), so a larger value is no run's real setting but a damaged record: 10**12 made the
# engine allocate an 8 TB attention mask at the first move, 10**7 an 80 MB one per row.
MAX_NEW_TOKENS = 32768
SHOWN_CHARS = 80  # of a bad value, in its error line


def _valid(valid: str, ok: Callable[[Any], bool]) -> Check:
    """The check of one value that ``ok`` passes; ``valid`` says which values those are."""
    return lambda value: None if value is not _MISSING and ok(value) else ("", value, valid)


def _one_of(choices: Iterable[str]) -> Check:
    choices = tuple(choices)
    return _valid(
        " or ".join(json.dumps(c) for c in choices), lambda value: isinstance(value, str) and value in choices
    )


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _samples(name: str, value: Any) -> bool:
    """Whether ``Sampling``, the one home of the sampling rules, takes ``value`` as its ``name``."""
    try:
        Sampling(**{**DEFAULT_SAMPLING, name: value})
    except (TypeError, ValueError):
        return False
    return True


def _game(value: Any) -> Problem | None:
    """A game id with its options that the registry builds (``env_id_problem``, the one check of game ids)."""
    valid = "a registered game id with options its game takes, e.g. KuhnPoker-v0:rounds=1"
    if not isinstance(value, str):
        return ("", value, valid)
    problem = env_id_problem(value)
    return None if problem is None else ("", value, f"{valid} ({problem})")


def _object(fields: Mapping[str, Check], required: Iterable[str] = ()) -> Check:
    """An object whose fields each pass their check and that has each ``required`` one. Fields not in
    ``fields`` are left alone: a newer spiral-arena may record more."""

    def check(value: Any) -> Problem | None:
        if not isinstance(value, dict):
            return ("", value, f"an object of {', '.join(fields)}")
        for name, inner in fields.items():
            held = value.get(name, _MISSING)
            if (held is not _MISSING or name in required) and (problem := inner(held)) is not None:
                return (f".{name}{problem[0]}", *problem[1:])
        return None

    return check


def _list_of(item: Check, valid: str) -> Check:
    def check(value: Any) -> Problem | None:
        if not isinstance(value, list):
            return ("", value, valid)
        for index, entry in enumerate(value):
            if (problem := item(entry)) is not None:
                return (f"[{index}]{problem[0]}", *problem[1:])
        return None

    return check


RECORD: dict[str, Check] = {  # every field trainers/checkpoint.py and trainers/sft.py write, each one's check
    "step": _valid("a whole number >= 0", lambda value: _whole(value) and value >= 0),
    "kind": _one_of(TRAINED_KINDS),
    "prompt_template": _one_of(PROMPT_TEMPLATES),
    "obs_format": _one_of(("", *OBS_FORMATS)),  # "" = each game's own
    "thinking": _valid("true or false", lambda value: isinstance(value, bool)),
    "games": _list_of(
        _object({"game": _game, "obs_format": _one_of(OBS_FORMATS)}, required=("game",)),
        'a list of {"game": ID, "obs_format": FORMAT} objects',
    ),
    "base_model": _valid(
        "text: the model a LoRA adapter applies to (empty: full weights)", lambda value: isinstance(value, str)
    ),
    "stopped_early": _valid("text saying where the run stopped", lambda value: isinstance(value, str)),
    "sampling": _object(
        {
            "temperature": _valid("a number >= 0 (0 = greedy)", lambda value: _samples("temperature", value)),
            "top_p": _valid("a number in (0, 1]", lambda value: _samples("top_p", value)),
            "max_new_tokens": _valid(
                f"a whole number of tokens from 1 to {MAX_NEW_TOKENS}",
                lambda value: _samples("max_new_tokens", value) and value <= MAX_NEW_TOKENS,
            ),
        }
    ),
    "loss_first": _valid("a number", _number),  # SFT's first and last loss
    "loss_last": _valid("a number", _number),
}
_check_record = _object(RECORD)


def read_settings(path: str | Path) -> dict[str, Any]:
    """The directory's settings, every field checked (``RECORD``), or {} for a plain model directory. A bad
    one is a ValueError of one line naming the file, the field, what it holds and what is valid."""
    file = Path(path) / SETTINGS_FILE
    if not file.is_file():
        return {}
    settings = _json_object(file)
    if (problem := _check_record(settings)) is not None:
        where, held, valid = problem
        shown = "nothing" if held is _MISSING else json.dumps(held)
        shown = shown if len(shown) <= SHOWN_CHARS else f"{shown[:SHOWN_CHARS]}..."
        raise ValueError(f"{file}: {where.removeprefix('.')} holds {shown}; valid: {valid}")
    return settings


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


def write_record(
    directory: str | Path,
    kind: str,
    games: Iterable[tuple[GameSpec, str]],
    prompt_template: str,
    obs_format: str,
    thinking: bool,
    **fields: Any,
) -> None:
    """Write the record of a checkpoint the project trained (``SETTINGS_FILE``), the one file its readers
    (``read_settings``, ``Trained``) read: its kind, how it reads a game (prompt template, observation format,
    thinking), the games it trained on (``games_record``), then ``fields`` (its step, base model, sampling...)."""
    record = {
        "kind": kind,
        "prompt_template": prompt_template,
        "obs_format": obs_format,
        "thinking": thinking,
        # each game with every option and the format it read them in: whoever plays it shows it a match in
        # that text (``Trained.reading``)
        "games": games_record(games),
        **fields,
    }
    (Path(directory) / SETTINGS_FILE).write_text(json.dumps(record))


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
