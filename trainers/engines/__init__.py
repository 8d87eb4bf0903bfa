"""Generation engines behind one small interface: token ids in, token ids and log-probs out.

``hf``: transformers on CPU or GPU, sampling from the very model being trained.
``vllm``: a colocated vLLM engine on GPUs, sleeping during updates, reloaded after each one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass
class Completion:
    token_ids: list[int]
    logprobs: list[float]  # log-prob of each sampled token under the sampling distribution
    finished: bool  # ended with the end-of-turn token (else cut at max_new_tokens)


class Engine(Protocol):
    def generate(
        self, prompts: list[list[int]], max_new_tokens: int, temperature: float, top_p: float, seed: int
    ) -> list[Completion]:
        """One completion per prompt, in the same order."""

    def load_weights(self, model) -> None:
        """Make the engine sample from the learner's current weights."""

    def sleep(self) -> None:
        """Free accelerator memory for the update (no-op where it does not apply)."""

    def wake(self) -> None: ...
