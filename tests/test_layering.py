"""The house's arrows point down: rules and games never import the layers built on them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "spiral_arena"
# layer -> the modules it must not import (anywhere in a file, function-level imports included)
FORBIDDEN = {
    "core": ("spiral_arena.games", "spiral_arena.agents", "spiral_arena.llm", "trainers", "leaderboard", "evals"),
    "games": ("spiral_arena.agents", "trainers", "leaderboard", "evals"),
    # other trainers' entry points sit on the suite, never on our own trainer or leaderboard
    "integrations": ("trainers", "leaderboard", "evals"),
}


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(layer):
    files = sorted((PACKAGE / layer).glob("*.py"))
    assert files
    for path in files:
        above = [m for m in imported_modules(path) if m.startswith(FORBIDDEN[layer])]
        assert not above, f"{path.relative_to(PACKAGE.parent)} imports {above}"


def test_the_chat_client_sits_below_games_and_agents():
    assert "spiral_arena.llm" in imported_modules(PACKAGE / "games" / "twenty_questions_oracles.py")
    assert not [m for m in imported_modules(PACKAGE / "llm.py") if m.startswith("spiral_arena.")]
