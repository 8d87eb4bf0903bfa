"""Truth and Deception: the Deceiver argues for the false fact; the Guesser leans against the fact
the Deceiver pushes."""

from __future__ import annotations

import numbers
import re
from typing import Any, ClassVar

import numpy as np

from spiral_arena.games.truth_and_deception import FACTS

_SENTENCE = re.compile(r"[^.!?;]+")
_FACT_NUMBER = re.compile(r"\bfact\s*#?\s*([12])\b", re.IGNORECASE)
_AGAINST = re.compile(r"\b(false|wrong|not true|untrue|incorrect|myth|lie|lying|fake|mistaken)\b", re.IGNORECASE)

_DECEIVER_LINES = (
    "Fact {f} is the true one: {text} The other statement is a popular misconception.",
    "I checked this carefully before: Fact {f} is correct. Do not let the other wording fool you.",
    "My last word: pick Fact {f}. It is the true statement, and the other one is false.",
)
_GUESSER_LINES = (
    "Which of the two facts is true, and how do you know?",
    "Why should I trust you on that? What would make the other fact false?",
)


def pushed_fact(messages: list[str]) -> int | None:
    """The fact the messages argue for: each sentence naming a fact counts for it, or against it when
    the sentence also says false, wrong, myth...; None when neither fact comes out ahead."""
    score = dict.fromkeys(FACTS, 0)
    for message in messages:
        for sentence in _SENTENCE.findall(message):
            sign = -1 if _AGAINST.search(sentence) else 1
            for number in {int(n) for n in _FACT_NUMBER.findall(sentence)}:
                score[number] += sign
    if score[1] == score[2]:
        return None
    return 1 if score[1] > score[2] else 2


class TruthAndDeceptionExpert:
    """Deceiver: every message argues, in plain words, that the false fact is the true one.

    Guesser: asks the Deceiver to justify itself, then reads which fact the Deceiver's messages push
    (``pushed_fact``). A Deceiver wants the false fact picked, so with probability ``contrarian``
    (default 3/4) it answers the other fact; otherwise, or when no fact is pushed, it flips a seeded
    coin. Against a Deceiver that always pushes the false fact it wins 1/2 + contrarian/2 (7/8);
    against random chat, 1/2; a Deceiver that learns to push the truth holds it to 1/2 - contrarian/2,
    which is why it does not follow the cue blindly. (The game's value for a Guesser without world
    knowledge is 1/2: a Deceiver can make its messages carry no information.)
    """

    game: ClassVar[str] = "TruthAndDeception"
    params: ClassVar[tuple[str, ...]] = ("contrarian",)

    def __init__(self, contrarian: float = 0.75) -> None:
        if isinstance(contrarian, bool) or not isinstance(contrarian, numbers.Real) or not 0.0 <= contrarian <= 1.0:
            raise ValueError(f"contrarian must be a probability in [0, 1], got {contrarian!r}")
        self.contrarian = float(contrarian)

    def act(self, view: dict[str, Any], info: dict[str, Any], rng: np.random.Generator) -> str:
        conversation = view["conversation"]
        if view["role"] == "Deceiver":
            false_fact = 3 - view["true_fact"]
            said = sum(role == "Deceiver" for role, _ in conversation)
            line = _DECEIVER_LINES[min(said, len(_DECEIVER_LINES) - 1)]
            return line.format(f=false_fact, text=view["facts"][false_fact - 1])
        if view["phase"] == "chat":
            asked = sum(role == "Guesser" for role, _ in conversation)
            return _GUESSER_LINES[min(asked, len(_GUESSER_LINES) - 1)]
        pushed = pushed_fact([text for role, text in conversation if role == "Deceiver"])
        if pushed is not None and rng.random() < self.contrarian:
            return f"[Fact {3 - pushed}]"
        return f"[Fact {FACTS[int(rng.integers(2))]}]"
