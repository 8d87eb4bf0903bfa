"""Players: the Agent protocol, the built-in agents, and ``make_agent(spec)`` for a spec of the one
grammar used everywhere (``agents.specs``: ``random``, ``expert``, ``human``, ``hf:PATH``, ``vllm:PATH``,
``PROVIDER:MODEL[@URL]``, options after ``#``)."""

from __future__ import annotations

from typing import Any

from spiral_arena.agents.api import APIAgent
from spiral_arena.agents.base import Agent, BaseAgent
from spiral_arena.agents.expert import ExpertAgent
from spiral_arena.agents.human import HumanAgent
from spiral_arena.agents.random_agent import RandomAgent
from spiral_arena.agents.specs import (
    MODEL_KINDS,
    SIMPLE_KINDS,
    SPEC_FORMS,
    AgentSpec,
    describe,
    masked,
    model_path_problem,
    parse_spec,
    redacted,
    spec_problem,
    split_options,
    unknown,
)
from spiral_arena.llm import KEY_ENV_OPTION, PROVIDERS, APIError, key_from_variable


def options_problem(spec: str, options: dict[str, Any]) -> str | None:
    """Options the agent will not take (``random#bogus=1``), found before any game: scripted agents are
    built (it costs nothing), model and API agents are checked against their constructor's parameters
    without loading anything. None when the options fit."""
    if not options:
        return None
    kind = parse_spec(split_options(spec)[0]).kind
    if kind in ("random", "expert"):
        try:
            make_agent(kind, **options)
        except (TypeError, ValueError) as error:
            return f"{masked(spec)!r}: {error}"
        return None
    import inspect

    if kind == "hf":
        from spiral_arena.agents.hf import HFAgent as agent_class
    elif kind == "vllm":
        from spiral_arena.agents.vllm import VLLMAgent as agent_class
    else:
        agent_class = HumanAgent if kind == "human" else APIAgent
    fixed = ("self", "spec", "path", "provider", "model", "base_url", "api_key")  # given by the spec or the environment
    parameters = inspect.signature(agent_class.__init__).parameters.values()
    valid = [p.name for p in parameters if p.name not in fixed and p.kind is not p.VAR_KEYWORD]
    if kind in MODEL_KINDS:  # what a checkpoint reads can be overridden: hf:PATH#board=grid
        from spiral_arena.agents.model import ModelAgent
        from spiral_arena.models.checkpoints import READ_OPTIONS

        try:
            ModelAgent.read_options(repr(masked(spec)), {k: v for k, v in options.items() if k in READ_OPTIONS})
        except ValueError as error:
            return str(error)
        valid += READ_OPTIONS
    unknown = sorted(set(options) - set(valid))
    if unknown:
        return f"{masked(spec)!r}: unknown option(s) {', '.join(unknown)}; valid: {', '.join(valid)}"
    if KEY_ENV_OPTION in options:  # an unset variable is found now, not when the first game builds the agent
        try:
            key_from_variable(options[KEY_ENV_OPTION], repr(masked(spec)))
        except ValueError as error:
            return str(error)
    return None


def make_agent(spec: str | Agent, **kwargs: Any) -> Agent:
    """An agent from a spec string, or the agent itself; kwargs go to the agent's constructor
    (``seed`` for random; ``temperature``, ``max_tokens``, ``api_key``... for API specs), as do
    options written in the spec (``hf:PATH#temperature=0``; a kwarg wins over the same option)."""
    if not isinstance(spec, str):
        return spec
    spec, options = split_options(spec)
    kwargs = {**options, **kwargs}
    parsed = parse_spec(spec)
    if parsed.kind == "random":
        return RandomAgent(**kwargs)
    if parsed.kind == "human":
        return HumanAgent(**kwargs)
    if parsed.kind == "expert":
        return ExpertAgent(**kwargs)
    if parsed.kind in PROVIDERS:
        return APIAgent(provider=parsed.kind, model=parsed.target, base_url=parsed.base_url, **kwargs)
    if parsed.kind == "hf":
        from spiral_arena.agents.hf import HFAgent

        return HFAgent(parsed.target, **kwargs)
    if parsed.kind == "vllm":
        from spiral_arena.agents.vllm import VLLMAgent

        return VLLMAgent(parsed.target, **kwargs)
    raise unknown(spec)


__all__ = [
    "MODEL_KINDS",
    "SIMPLE_KINDS",
    "SPEC_FORMS",
    "APIAgent",
    "APIError",
    "Agent",
    "AgentSpec",
    "BaseAgent",
    "ExpertAgent",
    "HumanAgent",
    "RandomAgent",
    "describe",
    "make_agent",
    "model_path_problem",
    "options_problem",
    "parse_spec",
    "spec_problem",
    "split_options",
    "redacted",
]
