"""A colocated vLLM engine (GPU only), written against vLLM 0.33.0's offline API.

The engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so after each
update the learner's tensors are handed straight to the served model's ``load_weights`` through
``LLM.apply_model``. Around the update the engine sleeps (level 1: weights to CPU, KV cache
freed); waking is two-phase (weights, load, then KV cache) to avoid a memory spike, and the
prefix cache is reset after every sync because cached prefixes hold old-weight activations.
Log-probs are requested as ``processed_logprobs`` (after temperature), like the HF engine's.
"""

from __future__ import annotations

import os

from trainers.engines import Completion

PINNED_VERSION = "0.33.0"


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
        self.stop_ids = list(stop_ids)
        self.llm = vllm.LLM(
            model=str(model_path),
            tokenizer=str(model_path),
            dtype="bfloat16" if config.bf16 else "auto",
            gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            max_model_len=config.vllm_max_model_len,
            enable_prefix_caching=True,
            enable_sleep_mode=True,
            logprobs_mode="processed_logprobs",
            seed=config.seed,
        )
        self.asleep = False

    def generate(
        self, prompts: list[list[int]], max_new_tokens: int, temperature: float, top_p: float, seed: int
    ) -> list[Completion]:
        if not prompts:
            return []
        params = self.vllm.SamplingParams(
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_new_tokens,
            logprobs=0,  # only the sampled token's log-prob
            stop_token_ids=self.stop_ids,
            seed=seed,
        )
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
        self.llm.sleep(level=1)
        self.asleep = True

    def wake(self) -> None:
        if self.asleep:
            self.llm.wake_up()
            self.asleep = False

    def load_weights(self, model) -> None:
        """Copy the learner's weights into the served model, then drop stale cached prefixes."""
        if self.asleep:
            self.llm.wake_up(tags=["weights"])
        weights = [(name, tensor.detach()) for name, tensor in model.state_dict().items()]
        self.llm.apply_model(lambda served: served.load_weights(iter(weights)))
        if self.asleep:
            self.llm.wake_up(tags=["kv_cache"])
            self.asleep = False
        self.llm.reset_prefix_cache()
