"""CFR+ (spiral_arena.analysis.cfr) is OpenSpiel's CFRPlusSolver iteration for iteration: the average
policy after each iteration equal within 1e-9 at every information state, on Kuhn and on Leduc Hold'em
(OpenSpiel's suited states read as our rank-only ones)."""

from __future__ import annotations

import pytest

from spiral_arena.analysis import cfr, kuhn, leduc
from spiral_arena.analysis.kuhn import kuhn_exploitability
from spiral_arena.analysis.leduc import leduc_exploitability

pyspiel = pytest.importorskip("pyspiel")
openspiel_cfr = pytest.importorskip("open_spiel.python.algorithms.cfr")

KUHN_COLUMNS = {"check": 0, "fold": 0, "bet": 1, "call": 1}  # OpenSpiel's Pass, Bet
LEDUC_COLUMNS = {"fold": 0, "call": 1, "raise": 2}


def worst_difference(table, ours: dict, read_key, columns) -> float:
    """The largest |OpenSpiel's probability - ours| over every (information state, action)."""
    worst = 0.0
    for key, row in table.state_lookup.items():
        for action, p in ours[read_key(key)].items():
            worst = max(worst, abs(table.action_probability_array[row][columns[action]] - p))
    return worst


def kuhn_key(openspiel_key: str) -> str:
    return "JQK"[int(openspiel_key[0])] + openspiel_key[1:]


def leduc_key(openspiel_key: str) -> str:
    return leduc.rank_key(leduc.expand_key(openspiel_key)[0])


@pytest.mark.parametrize(
    "name, trees, read_key, columns, iterations",
    [
        ("kuhn_poker", kuhn.deal_trees, kuhn_key, KUHN_COLUMNS, 40),
        ("leduc_poker", leduc.deal_trees, leduc_key, LEDUC_COLUMNS, 20),
    ],
)
def test_cfr_plus_is_openspiels_iteration_for_iteration(name, trees, read_key, columns, iterations):
    game = pyspiel.load_game(name)
    solver = openspiel_cfr.CFRPlusSolver(game)
    ours = cfr.cfr_plus(trees(), iterations)
    for t in range(1, iterations + 1):
        solver.evaluate_and_update_policy()
        average = next(ours)
        assert worst_difference(solver.average_policy(), average, read_key, columns) < 1e-9, f"iteration {t}"


def test_solvers_converge_and_refuse_no_iterations():
    """The exploitability falls (OpenSpiel's CFRPlusSolver on Leduc: 2.373611 after 1 iteration,
    0.034121 after 50); Kuhn's reaches its Nash family."""
    assert leduc_exploitability(leduc.solve_cfr(1)) == pytest.approx(2.3736111111, abs=1e-9)
    assert kuhn_exploitability(kuhn.solve_cfr(200)) < 0.01
    with pytest.raises(ValueError, match="iterations must be at least 1"):
        kuhn.solve_cfr(0)
