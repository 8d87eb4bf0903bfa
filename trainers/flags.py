"""A training config from the outside: one command-line flag per field, grouped by the config's sections (its help
is the field's), and TOML/YAML/JSON config files; values stay text until ``TrainConfig.build`` validates them."""

from __future__ import annotations

import argparse
import json
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from trainers.config import FIELDS, SECTIONS, TrainConfig
from trainers.recipes import RECIPES
from trainers.validation import ConfigError, shown


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Fields from a .toml, .yaml/.yml or .json file; a file that cannot be used is a ``ConfigError``."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml", ".json"):
        raise ConfigError([f"--config: {path} must end in .toml, .yaml, .yml or .json"])
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError([f"--config: no such file: {path}"]) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError([f"--config: cannot read {path}: {error}"]) from None
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigError([f"--config: reading {path} needs PyYAML: pip install pyyaml"]) from None
        parse, kind, errors = (lambda t: yaml.safe_load(t) or {}), "YAML", (yaml.YAMLError,)
    elif suffix == ".toml":
        parse, kind, errors = tomllib.loads, "TOML", (tomllib.TOMLDecodeError,)
    else:
        parse, kind, errors = json.loads, "JSON", (json.JSONDecodeError,)
    try:
        values = parse(text)
    except errors as error:
        raise ConfigError([f"--config: {path} is not valid {kind}: {' '.join(str(error).split())}"]) from None
    if not isinstance(values, dict):
        raise ConfigError([f"--config: {path} must hold keys and values at the top level, not {type(values).__name__}"])
    return values


def read_settings(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` overrides (a benchmark's ``--set``) as fields; values stay text, as from a flag."""
    settings = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError([f"--set {item!r}: expected KEY=VALUE, e.g. --set steps=100"])
        settings[key.strip()] = value.strip()
    return settings


def field_help(name: str) -> str:
    """A flag's help: the field's help, its choices or valid range, and its defaults."""
    f = FIELDS[name]
    parts = [f.metadata["help"]]
    if f.metadata["choices"]:
        parts.append(f"One of: {', '.join(map(shown, f.metadata['choices']))}.")
    if f.metadata["valid"] is not None:
        parts.append(f"Valid: {f.metadata['valid']}.")
    tiny = RECIPES["tiny"].get(name, f.default)
    recipe = "" if tiny == f.default else f"; tiny recipe: {shown(tiny)}"
    parts.append(f"(default: {shown(f.default)}{recipe})")
    return " ".join(p for p in parts if p).replace("%", "%%")  # argparse formats help with %


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per field, a group per section: --name VALUE, and --no-name for booleans. Values stay text until
    ``TrainConfig.validate``, so a bad flag and a bad config key get the same one-line error."""
    parser.add_argument("--config", metavar="FILE", help="a TOML/YAML/JSON file of fields; flags override it")
    for section in SECTIONS:
        group = parser.add_argument_group(section.__name__.removesuffix("Config").lower(), section.__doc__)
        for f in fields(section):
            flag, choices = "--" + f.name.replace("_", "-"), f.metadata["choices"]
            if str(f.type) in ("bool", "bool | None"):  # --bf16 / --no-bf16; leaving both out keeps "auto"
                action = argparse.BooleanOptionalAction
                group.add_argument(flag, dest=f.name, action=action, default=None, help=field_help(f.name))
            else:
                metavar = "{" + ",".join(map(shown, choices)) + "}" if choices else str(f.type).upper()
                group.add_argument(flag, dest=f.name, default=None, metavar=metavar, help=field_help(f.name))


def from_arguments(args: argparse.Namespace) -> TrainConfig:
    """The config of parsed flags: the ``--config`` file's fields, then the flags given, validated."""
    overrides = read_config_file(args.config) if getattr(args, "config", None) else {}
    overrides.update({name: getattr(args, name) for name in FIELDS if getattr(args, name, None) is not None})
    return TrainConfig.build(overrides)
