"""scripts/mutants.py, the project's mutation check: its list must match the code as it is (or a bug would
be put nowhere), and the check must tell a caught bug from a surviving one. The bugs themselves are run
by the script (minutes), not here."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def load_mutants():
    spec = importlib.util.spec_from_file_location("mutants", REPO / "scripts" / "mutants.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutants"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


mutants = load_mutants()


@pytest.mark.parametrize("mutant", mutants.MUTANTS, ids=[m.name for m in mutants.MUTANTS])
def test_each_bug_goes_into_code_that_is_there_once(mutant):
    assert (REPO / mutant.file).is_file(), mutant.file
    assert (REPO / mutant.file).read_text().count(mutant.code) == 1, f"{mutant.file} no longer holds {mutant.code!r}"
    assert mutant.bug != mutant.code and mutant.tests


@pytest.mark.parametrize("mutant", mutants.MUTANTS, ids=[m.name for m in mutants.MUTANTS])
def test_each_named_test_exists(mutant):
    for node_id in mutant.tests:
        path, _, name = node_id.partition("::")
        assert (REPO / path).is_file(), node_id
        if name:  # a test function of that module (a parameter id in brackets may follow)
            defined = {n.name for n in ast.parse((REPO / path).read_text()).body if isinstance(n, ast.FunctionDef)}
            assert re.sub(r"\[.*\]$", "", name) in defined, node_id
    assert mutant.requires == "" or re.fullmatch(r"[A-Za-z_][\w.]*", mutant.requires)


def test_names_are_unique():
    names = [m.name for m in mutants.MUTANTS]
    assert len(set(names)) == len(names)


def test_the_check_tells_caught_survived_and_skipped_apart(tmp_path, monkeypatch, capsys):
    """A small tree with one test: a bug it sees is caught, one it cannot see survives (exit 1), one
    that needs a missing module is skipped with the reason; the file is restored after each bug."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (tmp_path / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    monkeypatch.setattr(mutants, "REPO", tmp_path)
    entries = [
        mutants.Mutant("minus", "calc.py", "a + b", "a - b", ("tests/test_calc.py::test_add",)),
        mutants.Mutant("only at 7", "calc.py", "a + b", "a + b if a != 7 else 0", ("tests/test_calc.py::test_add",)),
        mutants.Mutant("needs a module", "calc.py", "a + b", "a * b", ("tests/test_calc.py",), requires="no_such_mod"),
    ]
    assert mutants.check(entries) == 1
    table = capsys.readouterr().out.split("mutation", 1)[1]
    rows = {line.split("  ")[0]: line for line in table.splitlines()[1:] if line.strip()}
    assert " caught " in rows["minus"] and "tests/test_calc.py::test_add" in rows["minus"]
    assert " SURVIVED " in rows["only at 7"]
    assert " skipped " in rows["needs a module"] and "no_such_mod does not import" in rows["needs a module"]
    assert "1 caught, 1 survived, 0 error, 1 skipped" in table
    assert (tmp_path / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"  # never touched
    assert mutants.check(entries[:1]) == 0


def test_a_list_entry_whose_code_is_gone_stops_the_check(tmp_path, monkeypatch, capsys):
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    monkeypatch.setattr(mutants, "REPO", tmp_path)
    assert mutants.check([mutants.Mutant("gone", "calc.py", "a * b", "a / b", ("tests/test_calc.py",))]) == 2
    assert "gone: its code occurs 0 times in calc.py, not once" in capsys.readouterr().err
