"""Play whole games between agents and summarise them (used by ``spiral-arena play``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from spiral_arena.agents import Agent, HumanAgent
from spiral_arena.core.env import TextGameEnv


@dataclass
class GameRecord:
    seed: int | None
    returns: tuple[float, ...]
    invalid: dict[str, str] = field(default_factory=dict)  # offender -> reason
    steps: int = 0


def play_game(
    env: TextGameEnv,
    agents: Sequence[Agent],
    seed: int | None = None,
    on_step: Callable[[str, str], None] | None = None,
) -> GameRecord:
    """One game, agent i in seat i. Human agents get the env's validator, so typos re-prompt."""
    for agent in agents:
        if isinstance(agent, HumanAgent):
            agent.validate = env.check_action
        if hasattr(agent, "reset"):
            agent.reset(seed=None if seed is None else seed + 1 + agents.index(agent))
    env.reset(seed=seed)
    record = GameRecord(seed, ())
    for name in env.agent_iter():
        obs, _, term, trunc, info = env.last()
        if term or trunc:
            if "invalid_move" in info:
                record.invalid[name] = info["invalid_move"]
            env.step(None)
            continue
        action = agents[env.possible_agents.index(name)].act(obs, info)
        if on_step is not None:
            on_step(name, action)
        env.step(action)
        record.steps += 1
    record.returns = env.returns
    return record
