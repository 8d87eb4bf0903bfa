"""A local model as a player: what ``hf:PATH`` (transformers) and ``vllm:PATH`` (vLLM) agents share.

The prompt is one user turn (framing, observation, answer instruction) through the model's chat
template, as in SPIRAL. A training checkpoint's ``spiral_arena.json`` says how it was prompted
(``prompt_template`` "bare" = the observation alone; ``obs_format`` "last" = only the latest message;
``thinking``), and the agent prompts it the same way in any env, through the trainer's own prompt
renderer (``Policy``); the run's evaluation sampling (temperature, top-p, answer length) are the
defaults of ``temperature``, ``top_p`` and ``max_new_tokens``. ``temperature=0`` decodes greedily.
It also records the games the model trained on, each with its text options (TicTacToe's ``board``) and
observation format: ``trained.reading(game)`` says what the agent's seat is shown of a match (the runners
build each seat its own text: ``spiral_arena.play``) and whether the match's rules differ from those it
trained on. Options on the spec override the record: ``hf:PATH#board=grid``, ``#obs_format=full``,
``#prompt_template=spiral``, ``#thinking=false``.

Each decision is sampled with a seed drawn from the agent's own generator, which ``reset(seed)``
replaces: a shallow copy that is reset holds its own random stream but shares the loaded model, so
games played at once each get a copy, ``act_together`` answers all of them in one engine call, and a
game's replies depend only on its own stream, not on which other games share the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spiral_arena.agents.base import BaseAgent
from spiral_arena.core.observations import OBS_FORMATS, last_message
from spiral_arena.models import Engine, Sampling
from spiral_arena.models.checkpoints import DEFAULT_SAMPLING, READ_OPTIONS, Trained
from spiral_arena.models.policy import PROMPT_TEMPLATES, Policy
from spiral_arena.registry import REGISTRY

DRAW_LIMIT = 2**62  # seeds drawn from an agent's generator lie below this


class ModelAgent(BaseAgent):
    """A model behind an ``Engine``, prompted and sampled as its checkpoint's settings say."""

    spec: str

    def _setup(
        self,
        engine: Engine,
        tokenizer,
        stop_ids: list[int],
        settings: dict[str, Any],
        temperature: float | None,
        top_p: float | None,
        max_new_tokens: int | None,
        seed: int | None,
        reads: dict[str, Any],
    ) -> None:
        """``reads``: the spec's options that override the checkpoint's record (``read_options``)."""
        import torch

        self.torch, self.tokenizer, self.stop_ids = torch, tokenizer, stop_ids
        settings = {**settings, **{k: v for k, v in reads.items() if k in ("prompt_template", "thinking")}}
        self.trained = Trained(settings, self.spec, reads)
        self.obs_format = reads.get("obs_format") or settings.get("obs_format", "")
        template, thinking = settings.get("prompt_template", "spiral"), settings.get("thinking", True)
        self.policy = Policy(engine, tokenizer, template, stop_ids, thinking=thinking)
        given = {"temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens}
        recorded = {**DEFAULT_SAMPLING, **settings.get("sampling", {})}
        self.sampling = Sampling.of({k: recorded[k] if v is None else v for k, v in given.items()})
        self.reset(seed)

    @staticmethod
    def read_options(spec: str, options: dict[str, Any]) -> dict[str, Any]:
        """The spec options that change what the model reads (``#obs_format=full``, a game's text option
        such as ``#board=grid``, ``#prompt_template``, ``#thinking``), checked; ValueError naming the valid
        ones for anything else."""
        if unknown := sorted(set(options) - set(READ_OPTIONS)):
            raise ValueError(f"{spec}: unknown option(s) {', '.join(unknown)}; valid: {', '.join(READ_OPTIONS)}")
        for name, valid in (("obs_format", OBS_FORMATS), ("prompt_template", PROMPT_TEMPLATES)):
            if name in options and options[name] not in valid:
                raise ValueError(f"{spec}: {name} must be one of {', '.join(valid)}, got {options[name]!r}")
        if not isinstance(options.get("thinking", True), bool):
            raise ValueError(f"{spec}: thinking must be true or false, got {options['thinking']!r}")
        for name, value in options.items():  # a game's text option: a value every game that has it takes
            for registered in REGISTRY.values():
                valid = registered.game.text_options.get(name, (value,))
                if value not in valid or isinstance(value, bool) != isinstance(valid[0], bool):
                    shown = ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in valid)
                    raise ValueError(f"{spec}: {name} must be one of {shown} ({registered.env_id}), got {value!r}")
        return dict(options)

    def reset(self, seed: int | None = None) -> None:
        """A new generator (rebound, never reseeded in place, so copies do not share it). ``None`` keeps
        the one the agent has, or seeds a first one from torch's global generator, so ``torch.manual_seed``
        still fixes an unseeded agent's sampling."""
        if seed is None and hasattr(self, "generator"):
            return
        if seed is None:
            seed = int(self.torch.randint(DRAW_LIMIT, ()).item())
        self.generator = self.torch.Generator().manual_seed(seed)

    def shown(self, observation: str) -> str:
        """What of the observation the model reads: only the latest message when trained on that."""
        return last_message(observation) if self.obs_format == "last" else observation

    def prompt_text(self, observation: str) -> str:
        return self.policy.prompt_text(self.shown(observation))

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return self.act_batch([observation], [info])[0]

    def act_batch(self, observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
        """One engine call; each row's seed drawn from this agent's generator, row after row."""
        return self.act_together([self] * len(observations), observations)

    @property
    def batch_key(self) -> Any:
        """Copies of this agent share the engine: their decisions go in one batch (``spiral_arena.inflight``)."""
        return self.policy.engine

    @staticmethod
    def act_together(agents: Sequence[ModelAgent], observations: list[str]) -> list[str]:
        """Replies to ``observations[i]`` by ``agents[i]``: copies of one loaded model (one per game in flight),
        answered in one engine call, row i sampled with a seed from ``agents[i]``'s generator. A row's logits
        may still differ from an unbatched call's in the last bits (a batched matrix product may round
        differently), which can change a token only when a draw falls within that rounding of a boundary."""
        if not agents:
            return []
        first = agents[0]
        if any(agent.policy.engine is not first.policy.engine for agent in agents):
            raise ValueError("act_together answers for copies of one loaded model only")
        seeds = [int(first.torch.randint(DRAW_LIMIT, (), generator=agent.generator)) for agent in agents]
        return first.policy.answer_batch([first.shown(o) for o in observations], first.sampling, seeds)[2]
