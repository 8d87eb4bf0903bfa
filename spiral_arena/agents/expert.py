"""``ExpertAgent``: a strong scripted player for every game, dispatching on ``info["game"]``.

The strategies live in ``spiral_arena.agents.experts`` (one module per game); each documents its
strength as measured against ``RandomAgent`` in ``tests/test_experts.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spiral_arena.agents.base import BaseAgent
from spiral_arena.agents.experts import GameExpert
from spiral_arena.agents.experts.connect_four import ConnectFourExpert
from spiral_arena.agents.experts.kuhn import KuhnExpert, nash_policy
from spiral_arena.agents.experts.leduc import LeducExpert
from spiral_arena.agents.experts.liars_dice import LiarsDiceExpert
from spiral_arena.agents.experts.negotiation import NegotiationExpert
from spiral_arena.agents.experts.pig import PigExpert
from spiral_arena.agents.experts.snake import SnakeExpert
from spiral_arena.agents.experts.tictactoe import TicTacToeExpert
from spiral_arena.agents.experts.truth_and_deception import TruthAndDeceptionExpert
from spiral_arena.agents.experts.twenty_questions import TwentyQuestionsExpert

EXPERTS: tuple[type[GameExpert], ...] = (
    TicTacToeExpert,
    KuhnExpert,
    NegotiationExpert,
    PigExpert,
    LiarsDiceExpert,
    SnakeExpert,
    TruthAndDeceptionExpert,
    TwentyQuestionsExpert,
    LeducExpert,
    ConnectFourExpert,
)


class ExpertAgent(BaseAgent):
    """The expert of whichever game it is asked to play.

    ``params`` are the options of the per-game experts (e.g. ``alpha`` for Kuhn poker); each goes to
    the game that takes it. Randomness (mixed strategies, tie breaks) comes from one generator
    seeded by ``seed`` and restarted by ``reset(seed)``.
    """

    def __init__(self, seed: int | None = None, **params: Any) -> None:
        valid = sorted({name for expert in EXPERTS for name in expert.params})
        unknown = sorted(set(params) - set(valid))
        if unknown:
            raise TypeError(
                f"ExpertAgent got unknown parameter(s) {', '.join(unknown)}; valid: {', '.join(valid) or 'none'}"
            )
        self.experts: dict[str, GameExpert] = {
            expert.game: expert(**{k: v for k, v in params.items() if k in expert.params}) for expert in EXPERTS
        }
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        game = info.get("game")
        expert = self.experts.get(game)
        if expert is None:
            raise ValueError(f"ExpertAgent has no strategy for game {game!r}; it plays: {', '.join(self.experts)}")
        view = info.get("view")
        if not view:
            raise ValueError(f"ExpertAgent needs info['view'] (the acting player's view) to play {game}; got {view!r}")
        return expert.act(view, info, self.rng)


__all__ = ["EXPERTS", "ExpertAgent", "nash_policy"]
