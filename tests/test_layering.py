"""The house's arrows point down: rules and games never import the layers built on them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "spiral_arena"
# layer -> the modules it must not import (anywhere in a file, function-level imports included)
FORBIDDEN = {
    "core": ("spiral_arena.games", "spiral_arena.agents", "spiral_arena.llm", "trainers", "leaderboard", "evals"),
    "games": ("spiral_arena.agents", "trainers", "leaderboard", "evals"),
    # other trainers' entry points sit on the suite, never on our own trainer or leaderboard
    "integrations": ("trainers", "leaderboard", "evals"),
}
DYNAMIC = "<dynamic>"  # an import whose name is not written in the source: the check cannot see where it goes
IMPORT_FUNCTIONS = ("import_module", "__import__")  # importlib.import_module, import_module, __import__


def resolve(name: str, level: int, package: str) -> str:
    """The absolute module of ``from <level dots><name> import ...`` written in ``package``."""
    if level == 0:
        return name
    parts = package.split(".")
    if level - 1 >= len(parts):
        raise ValueError(f"a relative import {'.' * level}{name} reaches above the top package from {package}")
    return ".".join([*parts[: len(parts) - (level - 1)], *([name] if name else [])])


def called_import(node: ast.Call, package: str) -> set[str]:
    """The modules ``import_module(name, package)`` or ``__import__(name, globals, locals, fromlist, level)``
    loads, written in ``package``; ``DYNAMIC`` where the source does not say."""
    args = dict(enumerate(node.args)) | {k.arg: k.value for k in node.keywords if k.arg}
    name = args.get(0, args.get("name"))
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        return {DYNAMIC}
    if getattr(node.func, "attr", getattr(node.func, "id", "")) == "__import__":  # relative by its level argument
        level = args.get(4, args.get("level"))
        dots = level.value if isinstance(level, ast.Constant) and isinstance(level.value, int) else 0
    else:  # import_module: leading dots are relative to its package argument
        dots = len(name.value) - len(name.value.lstrip("."))
        anchor = args.get(1, args.get("package"))
        if dots and isinstance(anchor, ast.Constant) and isinstance(anchor.value, str):
            package = anchor.value
        elif dots and not (isinstance(anchor, ast.Name) and anchor.id == "__package__"):
            return {DYNAMIC}
    base = resolve(name.value.lstrip("."), dots, package)
    fromlist = args.get(3, args.get("fromlist"))
    items = fromlist.elts if isinstance(fromlist, (ast.List, ast.Tuple)) else []
    return {base} | {f"{base}.{e.value}" for e in items if isinstance(e, ast.Constant) and e.value != "*"}


def imported_modules(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module the source of ``module`` may import, as absolute dotted names: ``import a.b``;
    ``from a import b`` (``a`` and ``a.b``, since ``b`` may be a module); relative imports, resolved
    against the module's package; ``importlib.import_module`` and ``__import__`` with a literal name
    (anything else is ``DYNAMIC``). Imports inside functions count too."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(node.module or "", node.level, package)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Call):
            called = getattr(node.func, "attr", getattr(node.func, "id", None))
            if called in IMPORT_FUNCTIONS:
                found |= called_import(node, package)
    return found


def file_imports(path: Path, root: Path = REPO) -> set[str]:
    """``imported_modules`` of a file under ``root``, its module name read from its path."""
    parts = path.relative_to(root).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    module = ".".join(parts[:-1] if is_package else parts)
    return imported_modules(path.read_text(), module, is_package)


def upward_imports(root: Path, layer: str) -> dict[str, list[str]]:
    """{file: the forbidden (or unknowable) modules it imports} for the layer's files under ``root``."""
    found = {}
    for path in sorted((root / "spiral_arena" / layer).glob("*.py")):
        bad = sorted(
            m
            for m in file_imports(path, root)
            if m == DYNAMIC or any(m == f or m.startswith(f"{f}.") for f in FORBIDDEN[layer])
        )
        if bad:
            found[str(path.relative_to(root))] = bad
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(layer):
    assert list((PACKAGE / layer).glob("*.py"))
    assert upward_imports(REPO, layer) == {}


def test_the_chat_client_sits_below_games_and_agents():
    assert "spiral_arena.llm" in file_imports(PACKAGE / "games" / "twenty_questions_oracles.py")
    assert not [m for m in file_imports(PACKAGE / "llm.py") if m.startswith("spiral_arena.")]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import spiral_arena.agents", "spiral_arena.agents"),
        ("import spiral_arena.agents.hf as hf", "spiral_arena.agents.hf"),
        ("from spiral_arena.agents import make_agent", "spiral_arena.agents"),
        ("from spiral_arena import agents", "spiral_arena.agents"),
        ("from .. import agents", "spiral_arena.agents"),
        ("from ..agents import make_agent", "spiral_arena.agents"),
        ("from ..agents.hf import HFAgent", "spiral_arena.agents.hf"),
        ("from . import observations", "spiral_arena.core.observations"),
        ("from .game import State", "spiral_arena.core.game"),
        ("def later():\n    from spiral_arena import agents", "spiral_arena.agents"),
        ("import importlib\nimportlib.import_module('spiral_arena.agents')", "spiral_arena.agents"),
        ("import importlib as il\nil.import_module('..agents', __package__)", "spiral_arena.agents"),
        ("from importlib import import_module\nimport_module('.agents', 'spiral_arena')", "spiral_arena.agents"),
        ("from importlib import import_module\nimport_module(name='trainers.loop')", "trainers.loop"),
        ("__import__('trainers.loop')", "trainers.loop"),
        ("__import__('spiral_arena', globals(), locals(), ['agents'])", "spiral_arena.agents"),
        ("__import__('agents', globals(), locals(), [], 2)", "spiral_arena.agents"),
        ("import importlib\nimportlib.import_module(f'spiral_arena.{name}')", DYNAMIC),
        ("import importlib\nimportlib.import_module('.agents', package)", DYNAMIC),
    ],
)
def test_the_checker_resolves_every_import_form(source, expected):
    """Written in spiral_arena/core/env.py, each of these imports ``expected``."""
    assert expected in imported_modules(source, "spiral_arena.core.env")


def test_relative_imports_in_a_package_init_start_from_the_package_itself():
    assert "spiral_arena.core.game" in imported_modules("from .game import State", "spiral_arena.core", True)
    assert "spiral_arena.agents" in imported_modules("from ..agents import make_agent", "spiral_arena.core", True)
    with pytest.raises(ValueError, match="reaches above the top package"):
        imported_modules("from .... import x", "spiral_arena.core.env")


def test_the_layer_check_names_each_upward_import_in_a_synthetic_tree(tmp_path):
    """The check the real layers go through, on a small tree: every form is reported, with its file,
    and what may be imported is not."""
    core, games = tmp_path / "spiral_arena" / "core", tmp_path / "spiral_arena" / "games"
    core.mkdir(parents=True)
    games.mkdir()
    files = {
        core / "fine.py": "from . import game\nfrom spiral_arena.registry import parse_env_id\nimport json\n",
        core / "absolute.py": "from spiral_arena import agents\n",
        core / "relative.py": "def later():\n    from ..games import kuhn_poker\n",
        core / "dynamic.py": "import importlib\nMODULE = importlib.import_module('spiral_arena.llm')\n",
        core / "unknowable.py": "import importlib\n\ndef load(name):\n    return importlib.import_module(name)\n",
        games / "fine.py": "from ..core import game\nfrom spiral_arena.llm import ChatClient\n",
        games / "relative.py": "from ..agents import make_agent\n",
        games / "trainer.py": "__import__('trainers.loop')\n",
    }
    for path, source in files.items():
        path.write_text(source)
    assert upward_imports(tmp_path, "core") == {
        "spiral_arena/core/absolute.py": ["spiral_arena.agents"],
        "spiral_arena/core/dynamic.py": ["spiral_arena.llm"],
        "spiral_arena/core/relative.py": ["spiral_arena.games", "spiral_arena.games.kuhn_poker"],
        "spiral_arena/core/unknowable.py": [DYNAMIC],
    }
    assert upward_imports(tmp_path, "games") == {
        "spiral_arena/games/relative.py": ["spiral_arena.agents", "spiral_arena.agents.make_agent"],
        "spiral_arena/games/trainer.py": ["trainers.loop"],
    }
