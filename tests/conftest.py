"""Shared test helpers."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium
import pettingzoo.test.api_test  # noqa: F401  (the module, not the function it re-exports)
import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def text_space_api_test(monkeypatch):
    """PettingZoo's ``api_test`` with one private helper patched for Text spaces.

    ``_test_observation_space_compatibility`` asserts ``space.dtype == observation.dtype``; a
    ``gymnasium.spaces.Text`` has dtype ``<U0`` and a Python ``str`` has no dtype, so no text env can
    pass it. For Text spaces we check instead that the observation is a ``str``; every other check
    of ``api_test`` runs unchanged. The module is reached through ``sys.modules`` because
    ``pettingzoo.test`` re-exports a function named ``api_test`` that shadows it.
    """
    module = sys.modules["pettingzoo.test.api_test"]
    original = module._test_observation_space_compatibility

    def patched(expected, seen, recursed_keys):
        if isinstance(expected, gymnasium.spaces.Text):
            assert isinstance(seen, str), f"observation is {type(seen).__name__}, expected str"
            return
        original(expected, seen, recursed_keys)

    monkeypatch.setattr(module, "_test_observation_space_compatibility", patched)
    return module.api_test


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
