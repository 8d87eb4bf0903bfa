"""The TextArena-style loop (what SPIRAL's code was written against) over any of our envs."""

from __future__ import annotations

from typing import Any

from spiral_arena.core.env import TextGameEnv


class TextArenaCompat:
    """``reset / get_observation / step / close`` as in TextArena, so such loops run unchanged::

        env = TextArenaCompat(spiral_arena.make("KuhnPoker-v0"))
        env.reset(num_players=2, seed=0)
        done = False
        while not done:
            player_id, observation = env.get_observation()
            done, info = env.step(agents[player_id](observation))
        rewards = env.close()  # {0: r0, 1: r1}
    """

    def __init__(self, env: TextGameEnv) -> None:
        self.env = env

    def reset(self, num_players: int = 2, seed: int | None = None) -> None:
        expected = len(self.env.possible_agents)
        if num_players != expected:
            raise ValueError(f"{self.env.env_id} is played by {expected} player(s), not {num_players}")
        self.env.reset(seed=seed)

    def get_observation(self) -> tuple[int, str]:
        agent = self.env.agent_selection
        return self.env.possible_agents.index(agent), self.env.observe(agent)

    def step(self, action: str) -> tuple[bool, dict[str, Any]]:
        agent = self.env.agent_selection
        if self.env.terminations.get(agent, True):
            raise RuntimeError("the game is over; call close() for the rewards or reset() to play again")
        self.env.step(action)
        done = all(self.env.terminations.values())
        return done, dict(self.env.infos[agent])

    def close(self) -> dict[int, float]:
        return dict(enumerate(self.env.returns))
