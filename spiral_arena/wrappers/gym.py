"""A single-learner Gymnasium env: one seat is yours, the opponent plays inside ``step``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from spiral_arena.agents import Agent, make_agent
from spiral_arena.core.env import TextGameEnv
from spiral_arena.play import Notes, seat_texts
from spiral_arena.registry import ENV_KWARGS, GameSpec, make

NOTES = Notes()  # what a checkpoint opponent says of a game it did not train on, once per process


class OpponentEnv(gym.Env):
    """Gymnasium view of a text game with a fixed opponent in the other seat.

    The reset seed decides the game's chance draws and the opponent's randomness (the opponent's
    ``reset(seed)`` is called with a seed drawn from ``self.np_random``), so runs replay exactly.
    The reward of a step is what the learner received since its previous action.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        env: TextGameEnv,
        opponent: str | Agent | None = "random",
        seat: int = 0,
        render_mode: str | None = None,
    ) -> None:
        n = len(env.possible_agents)
        if not 0 <= seat < n:
            raise ValueError(f"seat must be in 0..{n - 1}, got {seat!r}")
        if n > 1 and opponent is None:
            raise ValueError("a two-player game needs an opponent (an agent or a spec such as 'random')")
        self.env = env
        self.env.render_mode = render_mode
        self.render_mode = render_mode
        self.learner = env.possible_agents[seat]
        self.opponent = make_agent(opponent) if opponent is not None else None
        self.observation_space = env.observation_space(self.learner)
        self.action_space = env.action_space(self.learner)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        game_seed, opponent_seed = (int(s) for s in self.np_random.integers(2**63 - 1, size=2))
        self.env.reset(seed=game_seed)
        if self.opponent is not None and hasattr(self.opponent, "reset"):
            self.opponent.reset(seed=opponent_seed)
        self._let_opponent_play()
        return self.env.observe(self.learner), dict(self.env.infos[self.learner])

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        env = self.env
        if env.terminations.get(self.learner, True):
            raise RuntimeError("the game is over; call reset()")
        if env.agent_selection != self.learner:
            raise RuntimeError("internal error: it is not the learner's turn")
        env.step(action)
        self._let_opponent_play()
        reward = float(env._cumulative_rewards[self.learner])
        terminated = env.terminations[self.learner]
        return env.observe(self.learner), reward, terminated, False, dict(env.infos[self.learner])

    def _let_opponent_play(self) -> None:
        env = self.env
        while not env.terminations[self.learner] and env.agent_selection != self.learner:
            agent = env.agent_selection
            env.step(self.opponent.act(env.observe(agent), env.infos[agent]))

    def render(self) -> str | None:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


def make_gym(
    env_id: str, opponent: str | Agent | None = "random", seat: int = 0, render_mode: str | None = None, **kwargs: Any
) -> OpponentEnv:
    """``make(env_id, **kwargs)`` as a Gymnasium env with ``opponent`` in the other seat; a checkpoint
    opponent (``hf:PATH``) reads the game in the text it was trained on (``play.seat_texts``), the learner's
    seat the text asked for here. A one-player game takes ``opponent=None``."""
    return OpponentEnv(*seated(env_id, opponent, seat, **kwargs), seat=seat, render_mode=render_mode)


def seated(env_id: str, opponent: str | Agent | None, seat: int, **kwargs: Any) -> tuple[TextGameEnv, Agent | None]:
    """The env of ``env_id`` with ``kwargs`` (``make``'s) where every seat but ``seat`` reads the game as
    ``opponent`` (built from its spec here) knows it, and that agent; its note, if any, is said once."""
    agent = make_agent(opponent) if opponent is not None else None
    if agent is None:
        return make(env_id, **kwargs), None
    game = GameSpec.parse(env_id).with_options(**{k: v for k, v in kwargs.items() if k not in ENV_KWARGS})
    (text,) = seat_texts(game, [agent], NOTES)
    seats = game.players
    return make(env_id, seat_text=[{} if s == seat else text for s in range(seats)], **kwargs), agent
