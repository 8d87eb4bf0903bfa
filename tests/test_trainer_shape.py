"""The trainer stays readable in one pass (docs/training.md, "One training step"): ``train()`` reads as its steps
in about a hundred lines, no function of ``trainers/`` runs past 120, and each step's part has its own module."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAINERS = REPO / "trainers"
LONGEST = 120  # lines, decorators and docstring included
TRAIN_LINES = 100


def functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    nodes = (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
    return [(n.name, n.end_lineno - min([n.lineno, *(d.lineno for d in n.decorator_list)]) + 1) for n in nodes]


def test_no_function_of_the_trainer_is_longer_than_a_screenful_or_two():
    long = [
        f"{path.relative_to(REPO)}:{name} ({lines} lines)"
        for path in sorted(TRAINERS.glob("*.py"))
        for name, lines in functions(path)
        if lines > LONGEST
    ]
    assert not long, f"over {LONGEST} lines: {', '.join(long)}"


def test_train_reads_as_its_steps_each_from_its_own_module():
    (lines,) = [n for name, n in functions(TRAINERS / "loop.py") if name == "train"]
    assert lines <= TRAIN_LINES
    text = (TRAINERS / "loop.py").read_text()
    train = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "train")
    called = {ast.unparse(n.func) for n in ast.walk(train) if isinstance(n, ast.Call)}
    for step in ("start_run", "source.take", "assign_advantages", "update", "evaluate_step", "save"):
        assert step in called, step
    # the rollouts' two kinds sit behind one interface: no branch of the loop asks which it has
    tests = " ".join(ast.unparse(n.test) for n in ast.walk(train) if isinstance(n, ast.If | ast.IfExp))
    assert not any(word in tests for word in ("actor", "async", "Synchronous", "Asynchronous")), tests
