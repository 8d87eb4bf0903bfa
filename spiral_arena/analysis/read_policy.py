"""Read a language model's single-hand Kuhn policy off its answer log-probabilities.

For each of the 12 information states we build the real observation through our env and ask
the model how likely it is to answer ``\\boxed{[bet]}`` (or call) versus ``\\boxed{[check]}``
(or fold). The two are normalised against each other; whatever probability is left over is
mass on invalid answers and is reported separately, never silently folded into a move.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from spiral_arena.analysis.kuhn import KUHN_INFO_STATES
from spiral_arena.registry import GameSpec

# history -> (aggressive answer, passive answer)
_ANSWERS = {"": ("[bet]", "[check]"), "p": ("[bet]", "[check]"), "b": ("[call]", "[fold]"), "pb": ("[call]", "[fold]")}

ScoreFn = Callable[[str, list[str]], list[float]]
"""(observation, candidate answers) -> natural log-probability of each whole answer."""


def score_all(score: ScoreFn, items: Sequence[tuple[str, list[str]]]) -> list[list[float]]:
    """Each (observation, answers) item's scores; in batches across observations where the scorer offers
    it (``many``, as ``models.scoring.AnswerScorer`` does), else one observation at a time."""
    many = getattr(score, "many", None)
    return many(items) if many is not None else [score(observation, answers) for observation, answers in items]


def answer_text(action: str) -> str:
    """The canonical answer a trained model gives for a move."""
    return f"\\boxed{{{action}}}"


def kuhn_policy_from_scores(
    score: ScoreFn, obs_format: str = "", game: str = "KuhnPoker-v0"
) -> tuple[dict[str, float], float]:
    """P(bet or call) at each information state, and the mean probability of any other answer, read on
    single hands of ``game`` (a Kuhn id with options, e.g. the ``reward=chips`` a model trained on: its text
    is what the model is shown; rounds is set to 1)."""
    import math

    kuhn = GameSpec.parse(game).with_options(rounds=1)
    env = kuhn.make(**({"obs_format": obs_format} if obs_format else {}))
    seeds: dict[tuple[int, int], int] = {}
    for seed in range(200):  # a seed that deals each card to each seat
        env.reset(seed=seed)
        for seat in (0, 1):
            seeds.setdefault((seat, env.state_.cards[seat]), seed)
    policy, invalid = {}, []
    for key in KUHN_INFO_STATES:
        card, history = "JQK".index(key[0]), key[1:]
        env.reset(seed=seeds[(len(history) % 2, card)])
        for letter in history:
            env.step("[check]" if letter == "p" else "[bet]")
        aggressive, passive = _ANSWERS[history]
        p_aggressive, p_passive = (
            math.exp(x)
            for x in score(env.observe(env.agent_selection), [answer_text(aggressive), answer_text(passive)])
        )
        total = p_aggressive + p_passive
        policy[key] = p_aggressive / total if total > 0 else 0.5
        invalid.append(max(0.0, 1.0 - total))
    return policy, sum(invalid) / len(invalid)
