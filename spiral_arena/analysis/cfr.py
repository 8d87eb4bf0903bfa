"""CFR+ on a small two-player zero-sum card game, iteration for iteration as OpenSpiel's ``CFRPlusSolver``
(open_spiel/python/algorithms/cfr.py at 112b7770): regret matching+, alternating updates (player 0's
regrets, reset of negative regrets, new current policy, then player 1's), and the average policy
weighted by the iteration number times the player's own reach.

One point decides whether two implementations agree after the first iteration: every history is walked
whatever the opponent's reach, and only a history no player reaches (chance aside) is skipped. A history
the opponent never plays into changes no regret, but it does add to the learner's average policy; skipping
it (an easy speed-up) gives another sequence of average policies (tests/test_analysis.py compares with
OpenSpiel's solver on Kuhn and Leduc when open_spiel is installed).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    """A point of one deal's game tree: the player to act (-1 at the end) and the information state it
    acts in, the actions and where each leads; at the end, player 0's payoff (the game is zero-sum)."""

    player: int
    key: str = ""
    children: tuple[tuple[str, Node], ...] = ()
    payoff0: float = 0.0


class CFRPlus:
    """CFR+ over ``deals``, the roots of the equally likely deals' trees. ``average()`` after each
    ``iterate()`` is the policy OpenSpiel's ``average_policy()`` gives after as many iterations."""

    def __init__(self, deals: Sequence[Node]) -> None:
        self.deals = tuple(deals)
        self.legal: dict[str, tuple[str, ...]] = {}
        for root in self.deals:
            self._collect(root)
        self.regrets = {key: [0.0] * len(actions) for key, actions in self.legal.items()}
        self.totals = {key: [0.0] * len(actions) for key, actions in self.legal.items()}
        self.iteration = 0

    def _collect(self, node: Node) -> None:
        if node.player < 0:
            return
        self.legal.setdefault(node.key, tuple(action for action, _ in node.children))
        for _, child in node.children:
            self._collect(child)

    def current(self, key: str) -> list[float]:
        """Regret matching: positive regrets normalised, uniform where none is positive."""
        positive = [max(r, 0.0) for r in self.regrets[key]]
        norm = sum(positive)
        return [p / norm for p in positive] if norm > 0 else [1.0 / len(positive)] * len(positive)

    def iterate(self) -> None:
        self.iteration += 1
        chance = 1.0 / len(self.deals)
        for learner in (0, 1):
            sigma = {key: self.current(key) for key in self.legal}  # the policy both players play this pass
            gains: dict[str, list[float]] = {}
            for root in self.deals:
                self._walk(root, learner, 1.0, chance, sigma, gains)
            for key, gain in gains.items():
                self.regrets[key] = [max(r + g, 0.0) for r, g in zip(self.regrets[key], gain, strict=True)]

    def _walk(
        self, node: Node, learner: int, mine: float, theirs: float, sigma: dict[str, list[float]], gains: dict
    ) -> float:
        """The learner's expected payoff below ``node``, ``mine`` its own reach and ``theirs`` the chance
        times the opponent's reach; adds the learner's counterfactual regrets and average-policy weights."""
        if node.player < 0:
            return node.payoff0 if learner == 0 else -node.payoff0
        if mine == 0.0 and theirs == 0.0:  # chance is never 0 here: no player reaches this history
            return 0.0
        probs = sigma[node.key]
        if node.player != learner:
            return sum(
                p * self._walk(child, learner, mine, theirs * p, sigma, gains)
                for p, (_, child) in zip(probs, node.children, strict=True)
            )
        values = [
            self._walk(child, learner, mine * p, theirs, sigma, gains)
            for p, (_, child) in zip(probs, node.children, strict=True)
        ]
        value = sum(p * v for p, v in zip(probs, values, strict=True))
        gain = gains.setdefault(node.key, [0.0] * len(values))
        total = self.totals[node.key]
        for i, v in enumerate(values):
            gain[i] += theirs * (v - value)
            total[i] += self.iteration * mine * probs[i]
        return value

    def average(self) -> dict[str, dict[str, float]]:
        """The average policy: each state's weights normalised, uniform where they are all 0."""
        policy = {}
        for key, actions in self.legal.items():
            weights = self.totals[key]
            norm = sum(weights)
            uniform = 1.0 / len(actions)
            policy[key] = {a: (w / norm if norm > 0 else uniform) for a, w in zip(actions, weights, strict=True)}
        return policy


def cfr_plus(deals: Sequence[Node], iterations: int) -> Iterator[dict[str, dict[str, float]]]:
    """The average policy after each of ``iterations`` CFR+ iterations on ``deals``."""
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations!r}")
    solver = CFRPlus(deals)
    for _ in range(iterations):
        solver.iterate()
        yield solver.average()
