"""The vLLM engine adapter against a stand-in ``vllm`` module (vLLM itself needs a CUDA GPU).

The stand-in is a fake at the one boundary that cannot run here: it records every call the
adapter makes and serves generations from a real transformers copy of the model, so a whole
training step runs through ``--backend vllm`` on CPU and the weight sync is checked for real.
It copies vLLM where a mistake would otherwise pass silently: a request with a seed samples from
its own generator seeded with it, level-2 sleep discards the weights, and an unknown keyword or
field is an error; generating or loading weights while asleep, which vLLM leaves undefined, is an
error here. Its names come from the lists below, which ``test_vllm_contract.py`` checks against
vLLM 0.33.0 itself where it is installed. What this cannot show is that vLLM behaves as its
source says: that is what ``benchmarks/gpu_check.sh`` checks on a GPU.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass, field, make_dataclass
from typing import Any, TypedDict

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainers.engines.hf import HFEngine  # noqa: E402
from trainers.engines.vllm import SEED_SPACE, VLLMEngine, request_seeds  # noqa: E402

# --- the vLLM 0.33.0 API the adapter uses (checked against vLLM in test_vllm_contract.py) -------
LLM_KEYWORDS = (
    "model",
    "tokenizer",
    "dtype",
    "gpu_memory_utilization",
    "max_model_len",
    "enable_prefix_caching",
    "enable_sleep_mode",
    "logprobs_mode",
    "seed",
    "distributed_executor_backend",
    "tensor_parallel_size",
)
LLM_METHODS = {
    "generate": ("prompts", "sampling_params", "use_tqdm"),
    "sleep": ("level",),
    "wake_up": ("tags",),
    "apply_model": ("func",),
    "reset_prefix_cache": (),
}
SAMPLING_DEFAULTS = {
    "n": 1,
    "temperature": 1.0,
    "top_p": 1.0,
    "max_tokens": 16,
    "logprobs": None,
    "stop_token_ids": None,
    "seed": None,
}
COMPLETION_FIELDS = ("token_ids", "logprobs", "finish_reason")
LOGPROBS_MODES = ("raw_logits", "raw_logprobs", "processed_logits", "processed_logprobs")
EXECUTOR_BACKENDS = ("ray", "mp", "uni", "external_launcher")

# --- the stand-in ------------------------------------------------------------------------------
SamplingParams = make_dataclass(
    "SamplingParams", [(name, Any, field(default=value)) for name, value in SAMPLING_DEFAULTS.items()], kw_only=True
)
CompletionOutput = make_dataclass("CompletionOutput", [(name, Any) for name in COMPLETION_FIELDS])


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class RequestOutput:
    outputs: list


class TokensPrompt(TypedDict):
    prompt_token_ids: list[int]


LLM_SIGNATURE = inspect.Signature(
    [inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for name in LLM_KEYWORDS[1:]]
)


class FakeLLM:
    instances: list[FakeLLM] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.kwargs = LLM_SIGNATURE.bind(*args, **kwargs).arguments  # an unknown keyword is a TypeError
        if self.kwargs.get("logprobs_mode", "raw_logprobs") not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode {self.kwargs['logprobs_mode']!r} is not one of {LOGPROBS_MODES}")
        if self.kwargs.get("distributed_executor_backend") not in (None, *EXECUTOR_BACKENDS):
            raise ValueError(f"unknown distributed_executor_backend {self.kwargs['distributed_executor_backend']!r}")
        self.calls: list[tuple] = []
        self.asleep: set[str] = set()  # the memory tags that are not awake
        self.model = AutoModelForCausalLM.from_pretrained(self.kwargs["model"])
        tok = AutoTokenizer.from_pretrained(self.kwargs.get("tokenizer") or self.kwargs["model"])
        self.eos, self.pad = tok.eos_token_id, tok.pad_token_id
        self.global_rng = torch.Generator().manual_seed(self.kwargs.get("seed") or 0)  # for unseeded requests
        self.model.load_weights = self._load_weights
        FakeLLM.instances.append(self)

    def _load_weights(self, weights) -> None:
        if "weights" in self.asleep:
            raise RuntimeError("load_weights into weights that are asleep")
        state = dict(weights)
        self.calls.append(("load_weights", len(state)))
        self.model.load_state_dict(state)

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True) -> list[RequestOutput]:
        """One SamplingParams for every prompt, or a list paired one to one with them, as in vLLM."""
        if self.asleep:
            raise RuntimeError(f"generate while {sorted(self.asleep)} sleep")
        if isinstance(sampling_params, Sequence):
            if len(sampling_params) != len(prompts):
                raise ValueError(f"{len(prompts)} prompts but {len(sampling_params)} sampling params")
            per_request = list(sampling_params)
        else:
            per_request = [sampling_params or SamplingParams()] * len(prompts)
        self.calls.append(("generate", len(prompts)))
        return [self._request(p["prompt_token_ids"], sp) for p, sp in zip(prompts, per_request, strict=True)]

    def _request(self, prompt_ids: list[int], params) -> RequestOutput:
        """A request with a seed samples from its own generator seeded with it; one without, from
        the engine's global generator (vLLM's ``SamplingType.RANDOM_SEED`` vs ``RANDOM``)."""
        seed = (
            params.seed
            if params.seed is not None
            else int(torch.randint(SEED_SPACE - 1, (1,), generator=self.global_rng))
        )
        engine = HFEngine(self.model, [*(params.stop_token_ids or []), self.eos], self.pad)
        done = engine.generate([prompt_ids], params.max_tokens, params.temperature, params.top_p, seed)[0]
        logprobs = [{t: Logprob(lp)} for t, lp in zip(done.token_ids, done.logprobs, strict=True)]
        out = CompletionOutput(
            token_ids=tuple(done.token_ids),
            logprobs=logprobs if params.logprobs is not None else None,
            finish_reason="stop" if done.finished else "length",
        )
        return RequestOutput(outputs=[out])

    def sleep(self, level=1) -> None:
        self.calls.append(("sleep", level))
        if level == 2:  # the weights are discarded (buffers survive): whatever is not reloaded is garbage
            with torch.no_grad():
                for p in self.model.parameters():
                    p.fill_(float("nan"))
        self.asleep = {"weights", "kv_cache"}

    def wake_up(self, tags=None) -> None:
        self.calls.append(("wake_up", tuple(tags) if tags else None))
        self.asleep = self.asleep - set(tags) if tags else set()

    def apply_model(self, func) -> list:
        self.calls.append(("apply_model",))
        return [func(self.model)]

    def reset_prefix_cache(self) -> bool:
        self.calls.append(("reset_prefix_cache",))
        return True


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM = FakeLLM
    module.SamplingParams = SamplingParams
    module.TokensPrompt = TokensPrompt
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    FakeLLM.instances.clear()
    return module


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> str:
    from trainers.tiny import create_tiny

    return str(create_tiny(tmp_path_factory.mktemp("tiny") / "model", ["KuhnPoker-v0"]))


def test_stand_in_matches_the_listed_api():
    for name, parameters in LLM_METHODS.items():
        assert tuple(inspect.signature(getattr(FakeLLM, name)).parameters)[1:] == parameters, name
    with pytest.raises(TypeError):
        FakeLLM("unused", enable_prefix_cache=True)  # misspelled: vLLM's EngineArgs rejects it too
    with pytest.raises(ValueError):
        FakeLLM("unused", logprobs_mode="processed_logprob")
    with pytest.raises(TypeError):
        SamplingParams(max_new_tokens=8)
    assert SamplingParams() == SamplingParams(**SAMPLING_DEFAULTS)


def test_request_seeds_are_distinct_reproducible_and_in_range():
    seeds = request_seeds(12345, 4096)
    assert len(set(seeds)) == 4096 and all(0 <= s < SEED_SPACE for s in seeds)
    assert request_seeds(12345, 4096) == seeds
    assert not set(request_seeds(12346, 4096)) & set(seeds)  # the next wave seed shares none
    assert all(0 <= s < SEED_SPACE for s in request_seeds(-1, 8) + request_seeds(2**80, 8))


def test_identical_prompts_in_one_wave_get_their_own_samples(fake_vllm, tiny_path):
    """64 copies of one prompt must not collapse into one sample (they did with one shared seed).

    The tiny model is freshly initialised, so each of its next-token distributions is close to
    uniform over ~1,000 tokens and two 8-token samples practically never coincide: ~64 distinct
    completions are expected. 20 leaves a wide margin while a shared seed gives exactly 1.
    """
    from transformers import AutoTokenizer

    from trainers.config import TrainConfig

    tok = AutoTokenizer.from_pretrained(tiny_path)
    prompt = tok.encode("Your card: K. Check or bet?")
    engine = VLLMEngine(TrainConfig.build({"bf16": False}), None, tok, tiny_path, [tok.eos_token_id])

    wave = engine.generate([prompt] * 64, max_new_tokens=8, temperature=1.0, top_p=1.0, seed=7)
    assert len({tuple(c.token_ids) for c in wave}) >= 20
    # reproducible: a request's seed depends only on the wave's seed and its index
    head = engine.generate([prompt] * 8, max_new_tokens=8, temperature=1.0, top_p=1.0, seed=7)
    assert [c.token_ids for c in head] == [c.token_ids for c in wave[:8]]
    # the stand-in really seeds per request: 64 requests sharing one seed all sample the same completion
    prompts = [TokensPrompt(prompt_token_ids=prompt)] * 64
    shared = engine.llm.generate(prompts, SamplingParams(temperature=1.0, max_tokens=4, seed=7), use_tqdm=False)
    assert len({tuple(o.outputs[0].token_ids) for o in shared}) == 1
    # while requests without a seed draw one after another from the engine's generator, as in vLLM
    unseeded = engine.llm.generate(prompts[:8], SamplingParams(temperature=1.0, max_tokens=4), use_tqdm=False)
    assert len({tuple(o.outputs[0].token_ids) for o in unseeded}) > 1


def test_every_rank_gets_its_own_engine_under_torchrun(fake_vllm, tiny_path, monkeypatch):
    from trainers.config import TrainConfig

    config = TrainConfig.build({"seed": 3})
    single = VLLMEngine(config, None, None, tiny_path, [0]).llm.kwargs
    assert "distributed_executor_backend" not in single and single["seed"] == 3
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    ranked = VLLMEngine(config, None, None, tiny_path, [0]).llm.kwargs
    assert ranked["distributed_executor_backend"] == "external_launcher" and ranked["tensor_parallel_size"] == 1
    assert ranked["seed"] == 4


def test_a_bare_wake_reloads_the_learner(fake_vllm, tiny_path):
    """Level 2 keeps no weights, so waking without a sync must not serve the discarded ones."""
    from transformers import AutoModelForCausalLM

    from trainers.config import TrainConfig

    learner = AutoModelForCausalLM.from_pretrained(tiny_path)
    engine = VLLMEngine(TrainConfig.build({}), learner, None, tiny_path, [0])
    engine.sleep()
    engine.wake()
    assert [c[0] for c in engine.llm.calls] == [
        "sleep",
        "wake_up",
        "apply_model",
        "load_weights",
        "wake_up",
        "reset_prefix_cache",
    ]
    for name, tensor in learner.state_dict().items():
        assert torch.equal(tensor, engine.llm.model.state_dict()[name]), name


def test_training_step_through_the_vllm_adapter(fake_vllm, tmp_path):
    from trainers.config import TrainConfig
    from trainers.loop import train

    config = TrainConfig.build(
        {
            "output_dir": str(tmp_path / "run"),
            "backend": "vllm",
            "steps": 2,
            "sft_steps": 2,
            "samples_per_step": 16,
            "games_in_flight": 8,
            "max_new_tokens": 24,
            "eval_every": 100,
            "eval_games": 2,
            "eval_env_ids": "KuhnPoker-v0:rounds=1",
            "eval_opponents": "random",
            "time_limit_s": 0,
            "plots": False,
            "micro_batch": 8,
        }
    )
    run = train(config, progress=False)
    llm = FakeLLM.instances[0]
    assert llm.kwargs["enable_sleep_mode"] and llm.kwargs["logprobs_mode"] == "processed_logprobs"
    assert llm.kwargs["enable_prefix_caching"]
    names = [c[0] for c in llm.calls]
    # the warm-started weights are served before the first generation (FakeLLM loads the pre-SFT model)
    assert "generate" in names and names.index("load_weights") < names.index("generate")
    # each update: level-2 sleep, wake the weights, load them all, wake the KV cache, reset the prefix cache
    sleeps = [i for i, name in enumerate(names) if name == "sleep"]
    assert len(sleeps) == 2
    for i in sleeps:
        assert llm.calls[i : i + 3] == [("sleep", 2), ("wake_up", ("weights",)), ("apply_model",)]
        assert names[i + 3] == "load_weights"
        assert llm.calls[i + 4 : i + 6] == [("wake_up", ("kv_cache",)), ("reset_prefix_cache",)]
    # a sync while awake (the one after the warm start) loads and drops the cached prefixes too
    awake_syncs = [i for i, name in enumerate(names) if name == "apply_model" and i - 2 not in sleeps]
    assert awake_syncs and all(names[i + 1 : i + 3] == ["load_weights", "reset_prefix_cache"] for i in awake_syncs)
    # and so every step's samples are on-policy: the learner's log-probs of the sampled tokens are
    # the engine's (at step 1 too, which sampled from the pre-SFT weights before the sync existed)
    import json

    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()][1:]
    assert [s["step"] for s in steps] == [1, 2] and all(s["logprob_gap/mean"] < 1e-4 for s in steps)
    # after the last sync the served weights are exactly the learner's final weights
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(sorted((run / "checkpoints").glob("step_*"))[-1])
    for name, tensor in saved.state_dict().items():
        assert torch.equal(tensor, llm.model.state_dict()[name]), name


def test_missing_vllm_is_a_clear_error(monkeypatch):
    from trainers.config import TrainConfig

    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match="vLLM 0.33.0 on a CUDA GPU"):
        VLLMEngine(TrainConfig.build({}), None, None, "x", [0])
