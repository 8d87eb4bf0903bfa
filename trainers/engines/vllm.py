"""A colocated vLLM engine (GPU only), written against vLLM 0.33.0's offline API.

The engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so after each
update the learner's tensors are handed straight to the served model's ``load_weights`` through
``LLM.apply_model``. Under torchrun every rank builds its own engine (tensor parallel 1) with
``distributed_executor_backend="external_launcher"``: vLLM then joins the process group the
trainer opened instead of spawning workers, and treats the ranks as independent replicas, each
generating its own games. Each rank's engine seed is ``config.seed + rank``.

Seeds: vLLM gives every request whose ``SamplingParams.seed`` is set its own generator seeded
from it, so one seed shared by a wave would give identical prompts (every Kuhn opening with the
same card, every empty board) identical completions. Each request therefore gets its own
``SamplingParams`` with a seed derived from the wave's seed and the request's index.

Sleep: level 2, which discards the weights instead of copying them to CPU memory, because they
are overwritten from the learner after every update anyway; that saves a CPU copy of the model
and both copies' time. vLLM keeps the model's buffers (rotary tables) on the CPU and restores
them on waking, but parameters wake up as garbage (vLLM issue 29341), so every wake is followed
by a full ``load_weights``. Waking is two-phase (weights, load, then the KV cache) so the load
never holds the cache too, and the prefix cache is reset after every sync because cached
prefixes hold old-weight activations. Log-probs are requested as ``processed_logprobs`` (after
temperature and top-p), like the HF engine's.
"""

from __future__ import annotations

import hashlib
import os

from trainers.distributed import full_tensors
from trainers.engines import Completion

PINNED_VERSION = "0.33.0"
SLEEP_LEVEL = 2
SEED_SPACE = 2**63  # request seeds are non-negative int64s: valid for torch's generators, never vLLM's "no seed" -1


def request_seeds(seed: int, n: int) -> list[int]:
    """One seed per request of a wave: distinct within it and reproducible from the wave's seed.

    The wave's seed is hashed to a base and request i gets base + i, so a wave's seeds never
    repeat and two waves' seeds practically never overlap (with ``seed + i``, the waves seeded
    s and s + 1 would share all but one).
    """
    base = int.from_bytes(hashlib.blake2b(str(seed).encode(), digest_size=8).digest(), "big")
    return [(base + i) % SEED_SPACE for i in range(n)]


class VLLMEngine:
    def __init__(self, config, model, tokenizer, model_path: str, stop_ids: list[int]) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process: weights load by reference
        try:
            import vllm
        except ImportError as error:
            raise ImportError(
                f"--backend vllm needs vLLM {PINNED_VERSION} on a CUDA GPU: pip install 'spiral-arena[vllm]'"
            ) from error
        if getattr(config, "lora_rank", 0) > 0:
            raise ValueError("--backend vllm with --lora-rank is not supported yet; use --backend hf for LoRA")
        self.vllm = vllm
        self.learner = model  # what a bare wake() reloads from: a level-2 sleep keeps no weights
        self.stop_ids = list(stop_ids)
        world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
        # torchrun: one engine per rank inside the trainer's process group, as TRL's colocate mode does
        ranks = {"distributed_executor_backend": "external_launcher", "tensor_parallel_size": 1} if world > 1 else {}
        self.llm = vllm.LLM(
            model=str(model_path),
            tokenizer=str(model_path),
            dtype="bfloat16" if config.bf16 else "auto",
            gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            max_model_len=config.vllm_max_model_len,
            enable_prefix_caching=True,
            enable_sleep_mode=True,
            logprobs_mode="processed_logprobs",
            seed=config.seed + rank,
            **ranks,
        )
        self.asleep = False

    def generate(
        self, prompts: list[list[int]], max_new_tokens: int, temperature: float, top_p: float, seed: int
    ) -> list[Completion]:
        if not prompts:
            return []
        params = [
            self.vllm.SamplingParams(
                temperature=temperature,
                top_p=top_p,
                max_tokens=max_new_tokens,
                logprobs=0,  # only the sampled token's log-prob
                stop_token_ids=self.stop_ids,
                seed=request_seed,
            )
            for request_seed in request_seeds(seed, len(prompts))
        ]
        outputs = self.llm.generate(
            [self.vllm.TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False
        )
        completions = []
        for out in outputs:  # returned in the order of the prompts
            o = out.outputs[0]
            ids = list(o.token_ids)
            logprobs = [step[token].logprob for step, token in zip(o.logprobs or [], ids, strict=False)]
            completions.append(Completion(ids, logprobs, o.finish_reason == "stop"))
        return completions

    def sleep(self) -> None:
        self.llm.sleep(level=SLEEP_LEVEL)
        self.asleep = True

    def wake(self) -> None:
        """Waking alone would serve discarded weights, so it reloads the learner's."""
        if self.asleep:
            self.load_weights(self.learner)

    def load_weights(self, model) -> None:
        """Copy the learner's weights into the served model, then drop stale cached prefixes."""
        if self.asleep:
            self.llm.wake_up(tags=["weights"])
        # tensors by reference; under FSDP gathered from the shards one at a time (every rank in step)
        self.llm.apply_model(lambda served: served.load_weights(full_tensors(model)))
        if self.asleep:
            self.llm.wake_up(tags=["kv_cache"])
            self.asleep = False
        self.llm.reset_prefix_cache()
