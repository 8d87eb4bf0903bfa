"""The house's arrows point down (docs/architecture.md): every module of spiral_arena, trainers and
leaderboard sits on a floor, imports nothing on a floor above its own (function-level imports included),
trainers and leaderboard never import each other, and no modules import each other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "spiral_arena"
# Floors, bottom to top: a module may import its own floor's and lower floors' modules only. Each entry is a
# room (a package or a module); within a room anything goes, between the rooms of floor 8 nothing does.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("spiral_arena.core", "spiral_arena.processes", "spiral_arena.outputs"),  # rules contract, text env; OS helpers
    ("spiral_arena.llm", "spiral_arena.wordlists"),  # the chat client (Twenty Questions' judge), word lists
    ("spiral_arena.games",),
    ("spiral_arena.registry", "spiral_arena.analysis"),  # env ids and their option grammar; exact analysis
    ("spiral_arena.models",),  # engines, weights, prompts, checkpoint settings
    ("spiral_arena.agents",),
    ("spiral_arena.inflight", "spiral_arena.rollout", "spiral_arena.play", "spiral_arena.wrappers",
     "spiral_arena.testing"),  # games in flight (agents' matches, a model's training turns); env shapes
    ("spiral_arena.evals", "spiral_arena.serve", "spiral_arena.integrations"),
    ("trainers", "leaderboard"),  # they meet through a checkpoint on disk or an agent spec, never an import
    ("spiral_arena.cli", "trainers.__main__"),  # the command line: the top floor
)
SEPARATE = {"trainers", "leaderboard"}  # rooms of one floor that must not import each other
FACADE = "spiral_arena"  # the package's __init__: re-exports from several floors for users, imported by no module
# layer -> the modules it must not import: the strictest rooms, kept as a plain list for their own test
FORBIDDEN = {
    "core": ("spiral_arena.games", "spiral_arena.agents", "spiral_arena.llm", "trainers", "leaderboard",
             "spiral_arena.evals"),
    "games": ("spiral_arena.agents", "spiral_arena.models", "trainers", "leaderboard", "spiral_arena.evals"),
    # other trainers' entry points sit on the suite, never on our own trainer or leaderboard
    "integrations": ("trainers", "leaderboard"),
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


def room_of(module: str) -> tuple[int, str] | None:
    """(floor, room) of a module: the room whose name is the module's longest prefix; None outside the house."""
    found = [(n, room) for n, rooms in enumerate(FLOORS) for room in rooms if f"{module}.".startswith(f"{room}.")]
    return max(found, key=lambda pair: len(pair[1])) if found else None


def project_modules(root: Path = REPO) -> dict[str, Path]:
    """Every module of the three packages, by name (a package's __init__ under the package's name)."""
    modules = {}
    for top in ("spiral_arena", "trainers", "leaderboard"):
        for path in sorted((root / top).rglob("*.py")):
            if "hub" in path.relative_to(root).parts:  # verifiers' Hub packages: installed apart, re-exports only
                continue
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def house_violations(root: Path = REPO) -> list[str]:
    """Each import that goes up a floor or between separate rooms, and each module on no floor."""
    found = []
    for module, path in project_modules(root).items():
        if module == FACADE:
            continue
        mine = room_of(module)
        if mine is None:
            found.append(f"{module} is on no floor: add it to FLOORS")
            continue
        for imported in sorted(file_imports(path, root)):
            theirs = room_of(imported)  # DYNAMIC is on no floor: refused in FORBIDDEN's layers, not known here
            if theirs is None or imported == FACADE:
                continue
            if theirs[0] > mine[0] or (mine[1] != theirs[1] and {mine[1], theirs[1]} <= SEPARATE):
                found.append(f"{module} (floor {mine[0]}) imports {theirs[1]} (floor {theirs[0]})")
    return sorted(set(found))


def circles(root: Path = REPO) -> list[list[str]]:
    """The groups of modules that import each other in a circle (strongly connected, more than one)."""
    modules = project_modules(root)

    def target(name: str) -> str | None:  # ``from a.b import c``: the module c if it is one, else a.b
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {m: {t for i in file_imports(p, root) if (t := target(i)) and t != m} for m, p in modules.items()}
    order, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        order[node] = low[node] = len(order)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in order:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], order[nxt])
        if low[node] == order[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in graph:
        if node not in order:
            visit(node)
    return groups


def test_every_module_is_on_a_floor_and_imports_nothing_above_it():
    assert house_violations() == []


def test_no_modules_import_each_other_in_a_circle():
    assert circles() == []


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(layer):
    assert list((PACKAGE / layer).glob("*.py"))
    assert upward_imports(REPO, layer) == {}


def test_the_house_check_finds_an_upward_import_a_separate_room_and_a_circle(tmp_path):
    files = {
        "spiral_arena/__init__.py": "",
        "spiral_arena/core/__init__.py": "",
        "spiral_arena/core/env.py": "def later():\n    from spiral_arena.agents import make_agent\n",
        "spiral_arena/agents/__init__.py": "from spiral_arena.agents.a import x\n",
        "spiral_arena/agents/a.py": "from spiral_arena.agents import y\n",
        "spiral_arena/stray.py": "",
        "trainers/__init__.py": "",
        "trainers/loop.py": "import leaderboard.store\n",
        "leaderboard/__init__.py": "",
        "leaderboard/store.py": "from spiral_arena.core import env\n",
    }
    for name, source in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    assert house_violations(tmp_path) == [
        "spiral_arena.core.env (floor 0) imports spiral_arena.agents (floor 5)",
        "spiral_arena.stray is on no floor: add it to FLOORS",
        "trainers.loop (floor 8) imports leaderboard (floor 8)",
    ]
    assert circles(tmp_path) == [["spiral_arena.agents", "spiral_arena.agents.a"]]


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
