"""PettingZoo's official env checks, usable on our text envs (and on yours built the same way).

``api_test`` runs PettingZoo's own ``pettingzoo.test.api_test`` with one adjustment, described in its
docstring; ``seed_test`` and ``parallel_api_test`` are PettingZoo's, unchanged (they pass on text
spaces as they are) and re-exported so that one import gives every check::

    import spiral_arena
    from spiral_arena.testing import api_test, parallel_api_test, seed_test

    api_test(spiral_arena.make("KuhnPoker-v0"), num_cycles=200)
    seed_test(lambda: spiral_arena.make("KuhnPoker-v0"), num_cycles=50)
    parallel_api_test(spiral_arena.make_parallel("Snake-v0"), num_cycles=200)
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

import gymnasium
from pettingzoo import AECEnv
from pettingzoo.test import parallel_api_test, seed_test

__all__ = ["api_test", "parallel_api_test", "seed_test"]

# ``pettingzoo.test`` re-exports a function named ``api_test`` that shadows its module of the same
# name as an attribute; import_module returns the module itself.
_API_TEST_MODULE = "pettingzoo.test.api_test"


@contextlib.contextmanager
def _text_observations_accepted() -> Iterator[None]:
    """While open, PettingZoo's observation dtype check accepts a ``str`` for a ``Text`` space."""
    module = importlib.import_module(_API_TEST_MODULE)
    original = module._test_observation_space_compatibility

    def compatible(expected: gymnasium.spaces.Space, seen: Any, recursed_keys: list[str]) -> None:
        if isinstance(expected, gymnasium.spaces.Text):
            if not isinstance(seen, str):  # raised, not asserted, so it also holds under python -O
                where = f" at [{']['.join(recursed_keys)}]" if recursed_keys else ""
                raise AssertionError(f"observation{where} is {type(seen).__name__}, but a Text space holds str")
            return
        original(expected, seen, recursed_keys)

    module._test_observation_space_compatibility = compatible
    try:
        yield
    finally:
        module._test_observation_space_compatibility = original


def api_test(env: AECEnv, num_cycles: int = 1000, verbose_progress: bool = False) -> None:
    """PettingZoo's ``api_test``, every check of it, with one adjustment for text observations.

    What is adjusted: the private helper ``_test_observation_space_compatibility``, which asserts
    ``observation_space.dtype == observation.dtype``. Why: the observations of a ``gymnasium.spaces.Text``
    space are Python ``str``, which have no ``dtype`` at all, so for every env with text observations
    that line fails (``AttributeError``) although ``Text.contains`` accepts the observations. For
    ``Text`` spaces the helper checks instead that the observation is a ``str``; for every other space
    it runs unchanged, and ``api_test`` still checks ``observation_space.contains(observation)``.

    The adjustment holds only while this call runs (it is undone even when a check fails) and is not
    thread-safe: do not run PettingZoo's own ``api_test`` in another thread at the same time.
    """
    with _text_observations_accepted():
        importlib.import_module(_API_TEST_MODULE).api_test(
            env, num_cycles=num_cycles, verbose_progress=verbose_progress
        )
