"""The agent protocol every player follows: raw observation text in, raw answer text out."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Agent(Protocol):
    def act(self, observation: str, info: dict[str, Any]) -> str:
        """Answer for one decision; the env's parser reads the text."""

    def act_batch(self, observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
        """Answers for many decisions at once (model-backed agents batch for real)."""


class BaseAgent:
    """Default ``act_batch`` (a loop) and ``reset`` (nothing to reseed)."""

    def act(self, observation: str, info: dict[str, Any]) -> str:
        raise NotImplementedError

    def act_batch(self, observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
        return [self.act(o, i) for o, i in zip(observations, infos, strict=True)]

    def reset(self, seed: int | None = None) -> None:
        """Called at the start of a game; seeded agents restart their generator here."""
