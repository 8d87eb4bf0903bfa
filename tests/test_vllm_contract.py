"""Every vLLM name the engine adapter uses, checked against vLLM itself where it is installed.

Only introspection (signatures, dataclass and msgspec fields, ``Literal`` types, constructing a
``SamplingParams``), so it needs no GPU and loads no model. The names come from the lists in
``test_vllm_engine.py``, from which the CPU stand-in is built, so the stand-in cannot accept
something vLLM 0.33.0 would reject: a keyword misspelled in the adapter fails there, and a name
vLLM renamed fails here.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Sequence

import pytest

vllm = pytest.importorskip(
    "vllm",
    reason="vLLM is not installed (GPU machines only); the adapter is tested against a stand-in in test_vllm_engine.py",
)

from test_vllm_engine import (  # noqa: E402
    COMPLETION_FIELDS,
    EXECUTOR_BACKENDS,
    LLM_KEYWORDS,
    LLM_METHODS,
    LOGPROBS_MODES,
    SAMPLING_DEFAULTS,
)

from trainers.engines.vllm import PINNED_VERSION, SEED_SPACE, request_seeds  # noqa: E402


def field_defaults(cls: type) -> dict[str, typing.Any]:
    """Field name to default of a dataclass or a msgspec Struct (``SamplingParams`` is the latter)."""
    if dataclasses.is_dataclass(cls):
        return {f.name: f.default for f in dataclasses.fields(cls)}
    import msgspec

    return {f.name: f.default for f in msgspec.structs.fields(cls)}


def allows_sequence_of(annotation: typing.Any, item: type) -> bool:
    """Whether a type annotation admits a list (any Sequence) of ``item``."""
    if isinstance(annotation, str):  # postponed annotations: read the text
        return any(f"{seq}[{item.__name__}]" in annotation for seq in ("Sequence", "list"))
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(origin, type) and issubclass(origin, Sequence) and args == (item,):
        return True
    return any(allows_sequence_of(arg, item) for arg in args)


def test_the_pinned_version_is_installed():
    assert vllm.__version__ == PINNED_VERSION


def test_llm_accepts_every_keyword_the_adapter_passes():
    # LLM.__init__ names some keywords and hands the rest (**kwargs) to the EngineArgs dataclass,
    # whose generated __init__ rejects any name that is not one of its fields
    parameters = inspect.signature(vllm.LLM.__init__).parameters
    accepted = {name for name, p in parameters.items() if p.kind is not p.VAR_KEYWORD}
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        accepted |= {f.name for f in dataclasses.fields(vllm.EngineArgs) if f.init}
    assert set(LLM_KEYWORDS) - accepted == set()
    assert list(parameters)[1] == LLM_KEYWORDS[0] == "model"


def test_llm_methods_take_the_arguments_the_adapter_passes():
    for method, names in LLM_METHODS.items():
        parameters = inspect.signature(getattr(vllm.LLM, method)).parameters
        assert set(names) <= set(parameters), method
    sampling = inspect.signature(vllm.LLM.generate).parameters["sampling_params"].annotation
    assert allows_sequence_of(sampling, vllm.SamplingParams), sampling  # one SamplingParams per prompt


def test_the_values_the_adapter_passes_are_accepted():
    import vllm.envs
    from vllm.config.model import LogprobsMode
    from vllm.config.parallel import DistributedExecutorBackend

    assert set(LOGPROBS_MODES) <= set(typing.get_args(LogprobsMode))
    assert set(EXECUTOR_BACKENDS) <= set(typing.get_args(DistributedExecutorBackend))
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" in vllm.envs.environment_variables


def test_sampling_params_fields_and_defaults():
    defaults = field_defaults(vllm.SamplingParams)
    assert {name: defaults.get(name, "missing") for name in SAMPLING_DEFAULTS} == SAMPLING_DEFAULTS
    for seed in request_seeds(0, 4) + [0, SEED_SPACE - 1]:  # the request seeds pass vLLM's validation
        params = vllm.SamplingParams(
            temperature=1.0, top_p=1.0, max_tokens=8, logprobs=0, stop_token_ids=[0], seed=seed
        )
        assert params.seed == seed


def test_prompt_and_output_types():
    assert "prompt_token_ids" in vllm.TokensPrompt.__required_keys__ | vllm.TokensPrompt.__optional_keys__
    assert set(COMPLETION_FIELDS) <= set(field_defaults(vllm.CompletionOutput))
    assert "outputs" in inspect.signature(vllm.RequestOutput.__init__).parameters
    from vllm.logprobs import Logprob

    assert "logprob" in field_defaults(Logprob)
