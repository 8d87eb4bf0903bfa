"""Players: the Agent protocol, the built-in agents, and ``make_agent(spec)``."""

from __future__ import annotations

from typing import Any

from spiral_arena.agents.base import Agent, BaseAgent
from spiral_arena.agents.human import HumanAgent
from spiral_arena.agents.random_agent import RandomAgent

SPEC_FORMS = ("random", "human")


def make_agent(spec: str | Agent, **kwargs: Any) -> Agent:
    """An agent from a spec string (``"random"``, ``"human"``), or the agent itself."""
    if not isinstance(spec, str):
        return spec
    if spec == "random":
        return RandomAgent(**kwargs)
    if spec == "human":
        return HumanAgent(**kwargs)
    raise ValueError(f"unknown agent spec {spec!r}; valid forms: {', '.join(SPEC_FORMS)}")


__all__ = ["Agent", "BaseAgent", "HumanAgent", "RandomAgent", "make_agent"]
