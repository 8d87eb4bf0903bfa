"""Maths grading with math-verify in worker processes (real ones), and multiple-choice extraction."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("math_verify", reason="needs the eval extra")

from spiral_arena.cli import main  # noqa: E402
from spiral_arena.evals.answers import boxed_contents  # noqa: E402
from spiral_arena.evals.grading import (  # noqa: E402
    MISSING_MATH_VERIFY,
    MathGrader,
    MathTask,
    Verdict,
    extract_choice,
    grade_choice,
    sanitize_gold,
)

DEFAULT = "last-box-or-text"
HARD = "\\boxed{2^{2^{2^{2^{2^{5}}}}}}"  # sympy spends over a minute on this one (measured: 77 s)

# (response, gold answers, extraction, correct, status)
CASES = [
    ("So it is \\boxed{0.75}.", ("\\frac{3}{4}",), DEFAULT, True, "graded"),
    ("\\boxed{\\dfrac{6}{8}}", ("\\frac{3}{4}",), DEFAULT, True, "graded"),
    ("\\boxed{\\frac{3}{5}}", ("\\frac{3}{4}",), DEFAULT, False, "graded"),
    ("\\boxed{(2, 5]}", ("(2,5]",), DEFAULT, True, "graded"),
    ("\\boxed{[2,5]}", ("(2,5]",), DEFAULT, False, "graded"),  # closed is not half-open
    ("\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", ("(3,\\frac{\\pi}{2})",), DEFAULT, True, "graded"),
    ("\\boxed{(\\frac{\\pi}{2}, 3)}", ("(3,\\frac{\\pi}{2})",), DEFAULT, False, "graded"),  # ordered tuple
    ("\\boxed{5, 3, 1}", ("1,3,5",), DEFAULT, True, "graded"),  # an unordered list of answers
    ("\\boxed{9.6}", ("9.6 \\text{ eV}",), DEFAULT, True, "graded"),  # units in the gold
    ("\\boxed{10}", ("10\\%",), DEFAULT, True, "graded"),  # percent
    ("\\boxed{x=2}", ("2",), DEFAULT, True, "graded"),
    ("\\boxed{2}", ("x=2",), DEFAULT, True, "graded"),
    ("\\boxed{x^2+2x+1}", ("(x+1)^2",), DEFAULT, True, "graded"),
    ("\\boxed{27.0}", ("27",), DEFAULT, True, "graded"),
    ("\\boxed{0.5}", ("$\\frac{1}{2}$\n",), DEFAULT, True, "graded"),  # stray $ and newline in the gold
    ("\\boxed{x=2}", ("$2$", "$x=2$"), DEFAULT, True, "graded"),  # several golds: any
    # several boxes: cut to the last one, unless math-verify's own set-joining is asked for
    ("First \\boxed{3}, but that is wrong: \\boxed{2}", ("2",), DEFAULT, True, "graded"),
    ("First \\boxed{3}, but that is wrong: \\boxed{2}", ("2",), "last-box", True, "graded"),
    ("First \\boxed{3}, but that is wrong: \\boxed{2}", ("2",), "all-boxes", False, "graded"),
    ("\\boxed{2} then \\boxed{3}", ("2",), DEFAULT, False, "graded"),
    # no box: the text fallback reads "final answer is", the strict mode scores it 0
    ("so the final answer is 4", ("4",), DEFAULT, True, "graded"),
    ("so the final answer is 4", ("4",), "last-box", False, "no-answer"),
    ("I do not know.", ("4",), DEFAULT, False, "no-answer"),
    ("", ("4",), DEFAULT, False, "no-answer"),
]


@pytest.fixture(scope="module")
def grader():
    with MathGrader(workers=2, timeout_s=3.0) as pool:
        yield pool


def test_math_cases_get_the_expected_verdicts(grader):
    verdicts = grader.grade([MathTask(r, g, e) for r, g, e, _, _ in CASES] + [MathTask("\\boxed{1}", ("1",), "x")])
    for (response, golds, extraction, correct, status), verdict in zip(CASES, verdicts, strict=False):
        assert (verdict.correct, verdict.status) == (correct, status), (response, golds, extraction, verdict)
    assert verdicts[-1] == Verdict(None, False, "error")  # an unknown extraction mode fails that item only


def test_the_extracted_answer_is_kept(grader):
    tasks = [
        MathTask("First \\boxed{3}, then \\boxed{ 2 }", ("2",), DEFAULT),
        MathTask("so the final answer is 4", ("4",), DEFAULT),
        MathTask("\\boxed{3} and \\boxed{2}", ("2",), "all-boxes"),
    ]
    assert [v.extracted for v in grader.grade(tasks)] == ["2", "4", "3,2"]


def test_an_item_that_hangs_times_out_and_the_rest_is_graded():
    with MathGrader(workers=1, timeout_s=0.5) as pool:
        start = time.monotonic()
        verdicts = pool.grade([MathTask(HARD, ("3",), DEFAULT), MathTask("\\boxed{7}", ("7",), DEFAULT)])
        assert time.monotonic() - start < 20  # not the minute sympy would take
    assert verdicts == [Verdict("2^{2^{2^{2^{2^{5}}}}}", False, "timeout"), Verdict("7", True, "graded")]


def test_a_worker_that_ignores_its_timer_is_killed_and_replaced():
    """The in-worker timer is set far away, so only the parent's deadline can stop the item."""
    with MathGrader(workers=1, timeout_s=600, kill_after_s=1.0) as pool:
        verdicts = pool.grade([MathTask(HARD, ("3",), DEFAULT), MathTask("\\boxed{1}", ("1",), DEFAULT)])
    assert verdicts == [Verdict(None, False, "timeout"), Verdict("1", True, "graded")]


def test_missing_math_verify_is_one_line_naming_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "math_verify", None)  # as if it were not installed
    with pytest.raises(ImportError) as error:
        MathGrader()
    assert str(error.value) == MISSING_MATH_VERIFY
    assert MISSING_MATH_VERIFY == "grading maths needs math-verify: pip install 'spiral-arena[eval]'"
    data = str(Path(__file__).parent / "data" / "evals")
    assert main(["eval", "--model", "hf:org/unused", "--benchmarks", "math500", "--data-dir", data]) == 2
    assert capsys.readouterr().err == f"spiral-arena eval: error: {MISSING_MATH_VERIFY}\n"


def test_boxes_are_brace_matched():
    assert boxed_contents("a \\boxed{\\frac{1}{2}} b \\fbox{x} c \\boxed {(1,\\{2\\})}") == [
        "\\frac{1}{2}",
        "x",
        "(1,\\{2\\})",
    ]
    assert boxed_contents("\\boxed{12} then \\boxed{unclosed") == ["12"]
    assert sanitize_gold("  $\\frac{1}{2}$\n") == "\\frac{1}{2}"


@pytest.mark.parametrize(
    ("response", "count", "mode", "expected"),
    [
        ("so \\boxed{B}", 4, "default", "B"),
        ("so \\boxed{(C)}", 4, "default", "C"),
        ("so \\boxed{\\text{D}}", 4, "default", "D"),
        ("so \\boxed{ A. }", 4, "default", "A"),
        ("so \\boxed{E}", 4, "default", None),  # past the option count
        ("so \\boxed{E}", 5, "default", "E"),
        ("so \\boxed{J}", 10, "default", "J"),
        ("so \\boxed{K}", 10, "default", None),
        ("\\boxed{B} ... on reflection \\boxed{E}", 4, "default", "B"),  # the last box that is an option
        ("\\boxed{A} ... no: \\boxed{C}", 4, "default", "C"),
        ("\\boxed{b}", 4, "default", None),  # uppercase only
        ("The reasoning... Answer: C", 4, "default", "C"),
        ("Answer: (D)", 4, "default", "D"),
        ("Answer: E", 4, "default", None),
        ("I think (D) is right", 4, "default", None),  # no pronoun "I", no loose letters
        ("Answer: B, but \\boxed{A}", 4, "default", "A"),  # a box wins over the fallback
        ("", 4, "default", None),
        # SPIRAL's rule: the first box, any case, nothing else
        ("\\boxed{A} ... no: \\boxed{C}", 4, "spiral", "A"),
        ("\\boxed{b}", 4, "spiral", "B"),
        ("\\boxed{(B)}", 4, "spiral", None),
        ("Answer: C", 4, "spiral", None),
        ("\\boxed{E}", 4, "spiral", None),
    ],
)
def test_choice_extraction(response, count, mode, expected):
    assert extract_choice(response, count, mode) == expected


def test_choice_verdicts():
    assert grade_choice("\\boxed{B}", "B", 4) == Verdict("B", True, "graded")
    assert grade_choice("\\boxed{C}", "B", 4) == Verdict("C", False, "graded")
    assert grade_choice("no idea", "B", 4) == Verdict(None, False, "no-answer")
    with pytest.raises(ValueError, match="unknown choice extraction 'first'; valid: default, spiral"):
        extract_choice("x", 4, "first")
