"""The recipes (``recipes.toml``, beside this file): field values that ``TrainConfig.build`` puts under the user's
overrides, one table per recipe and per algorithm. This module reads them and says how they layer."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any


def _read(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Each kind's tables (``recipe``, ``algorithm``), each with what it ``extends`` merged under its own values."""
    data = tomllib.loads(path.read_text())

    def resolved(tables: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
        table = dict(tables[name])
        base = table.pop("extends", None)
        return {**resolved(tables, base), **table} if base else table

    return {kind: {name: resolved(tables, name) for name in tables} for kind, tables in data.items()}


_TABLES = _read(Path(__file__).with_name("recipes.toml"))
RECIPES: dict[str, dict[str, Any]] = _TABLES["recipe"]
ALGO_RECIPES: dict[str, dict[str, Any]] = _TABLES["algorithm"]
TINY_GAMES: str = RECIPES["tiny"]["games"]
CLOSED_WORLD: str = ALGO_RECIPES["starpo/tiny"]["games"]  # the CPU 20 Questions world of starpo and delta-belief


def recipe_settings(recipe: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """What ``recipe`` sets for a config with ``overrides``: the recipe's table, then the algorithm's (``algo``'s
    own, MARSHAL's rewards with ``advantage marshal``), then the algorithm's under this recipe. An unknown recipe
    sets nothing (validation reports it)."""
    settings = dict(RECIPES.get(recipe, {}))
    algo = overrides.get("algo", settings.get("algo", "rae"))
    settings.update(ALGO_RECIPES.get(algo, {}))
    if algo == "rae" and overrides.get("advantage") == "marshal":
        settings.update(ALGO_RECIPES["marshal"])
    settings.update(ALGO_RECIPES.get(f"{algo}/{recipe}", {}))
    return settings
