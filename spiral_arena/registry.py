"""Env ids -> the game that implements them and the env it is wrapped in."""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass, field
from typing import Any

from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import turn_based_aec_to_parallel

from spiral_arena.core.env import TextGameEnv
from spiral_arena.core.game import TextGame
from spiral_arena.games.kuhn_poker import KuhnPoker
from spiral_arena.games.liars_dice import LiarsDice
from spiral_arena.games.pig_dice import PigDice
from spiral_arena.games.simple_negotiation import SimpleNegotiation
from spiral_arena.games.snake import Snake
from spiral_arena.games.tictactoe import TicTacToe
from spiral_arena.games.truth_and_deception import TruthAndDeception
from spiral_arena.games.twenty_questions import TwentyQuestions

ENV_KWARGS = ("obs_format", "invalid_move", "render_mode")


@dataclass(frozen=True)
class EnvSpec:
    env_id: str
    game: type[TextGame]
    defaults: dict[str, Any] = field(default_factory=dict)

    @property
    def game_kwargs(self) -> tuple[str, ...]:
        params = inspect.signature(self.game.__init__).parameters
        return tuple(p for p in params if p != "self")


REGISTRY: dict[str, EnvSpec] = {
    spec.env_id: spec
    for spec in (
        EnvSpec("TicTacToe-v0", TicTacToe),
        EnvSpec("KuhnPoker-v0", KuhnPoker),
        EnvSpec("SimpleNegotiation-v0", SimpleNegotiation),
        EnvSpec("Snake-v0", Snake),
        EnvSpec("PigDice-v0", PigDice),
        EnvSpec("LiarsDice-v0", LiarsDice),
        EnvSpec("TruthAndDeception-v0", TruthAndDeception),
        EnvSpec("TwentyQuestions-v0", TwentyQuestions),
    )
}


def list_envs() -> list[str]:
    """Every registered env id."""
    return list(REGISTRY)


def spec(env_id: str) -> EnvSpec:
    if env_id not in REGISTRY:
        close = difflib.get_close_matches(env_id, REGISTRY, n=3, cutoff=0.4)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"unknown env id {env_id!r}.{hint} Registered: {', '.join(REGISTRY)}")
    return REGISTRY[env_id]


def make(env_id: str, **kwargs: Any) -> TextGameEnv:
    """Build the PettingZoo AEC env for ``env_id``; kwargs are game options or env options."""
    s = spec(env_id)
    allowed = s.game_kwargs
    unknown = [k for k in kwargs if k not in allowed and k not in ENV_KWARGS]
    if unknown:
        raise TypeError(
            f"{env_id} got unexpected keyword argument(s) {', '.join(unknown)}; "
            f"valid: {', '.join(allowed + ENV_KWARGS)}"
        )
    game_kwargs = {**s.defaults, **{k: v for k, v in kwargs.items() if k in allowed}}
    env_kwargs = {k: v for k, v in kwargs.items() if k in ENV_KWARGS}
    return TextGameEnv(s.game(**game_kwargs), env_id, **env_kwargs)


def make_parallel(env_id: str, **kwargs: Any) -> ParallelEnv:
    """The PettingZoo Parallel API view of ``env_id``.

    Turn-based games go through PettingZoo's own ``turn_based_aec_to_parallel`` (only the player
    to act has an effect each step); games with simultaneous moves resolve both moves at once.
    """
    env = make(env_id, **kwargs)
    parallel = getattr(env.game, "parallel_env", None)
    return parallel(env) if parallel is not None else turn_based_aec_to_parallel(env)
