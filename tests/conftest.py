"""Shared test helpers."""

from __future__ import annotations

from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def play_random_game(env, agents, seed=None):
    """Play one game with ``agents`` (one per seat); returns the env's final returns."""
    env.reset(seed=seed)
    for agent in env.agent_iter():
        obs, _, term, trunc, info = env.last()
        if term or trunc:
            env.step(None)
        else:
            env.step(agents[env.possible_agents.index(agent)].act(obs, info))
    return env.returns
