"""The vLLM engine adapter against a stand-in ``vllm`` module (vLLM itself needs a CUDA GPU).

The stand-in is a fake at the one boundary that cannot run here: it records every call the
adapter makes and serves generations from a real transformers copy of the model, so a whole
training step runs through ``--backend vllm`` on CPU and the weight sync is checked for real.
What this cannot show is that vLLM 0.33.0 itself behaves as its docs say: that is what
``benchmarks/gpu_smoke.sh`` checks on a GPU.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainers.engines.hf import HFEngine  # noqa: E402


@dataclass
class Logprob:
    logprob: float


class FakeLLM:
    instances: list = []

    def __init__(self, **kwargs):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.kwargs = kwargs
        self.calls: list[tuple] = []
        self.model = AutoModelForCausalLM.from_pretrained(kwargs["model"])
        tok = AutoTokenizer.from_pretrained(kwargs["tokenizer"])
        self.engine = HFEngine(self.model, [tok.eos_token_id], tok.pad_token_id)
        self.model.load_weights = self._load_weights
        FakeLLM.instances.append(self)

    def _load_weights(self, weights):
        state = dict(weights)
        self.calls.append(("load_weights", len(state)))
        self.model.load_state_dict(state)

    def generate(self, prompts, params, use_tqdm=True):
        self.calls.append(("generate", len(prompts)))
        ids = [p["prompt_token_ids"] for p in prompts]
        done = self.engine.generate(ids, params.max_tokens, params.temperature, params.top_p, params.seed)
        outputs = []
        for c in done:
            o = types.SimpleNamespace(
                token_ids=tuple(c.token_ids),
                logprobs=[{t: Logprob(lp)} for t, lp in zip(c.token_ids, c.logprobs, strict=True)],
                finish_reason="stop" if c.finished else "length",
            )
            outputs.append(types.SimpleNamespace(outputs=[o]))
        return outputs

    def sleep(self, level=1):
        self.calls.append(("sleep", level))

    def wake_up(self, tags=None):
        self.calls.append(("wake_up", tuple(tags) if tags else None))

    def apply_model(self, func):
        self.calls.append(("apply_model",))
        return [func(self.model)]

    def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache",))


@dataclass
class SamplingParams:
    temperature: float
    top_p: float
    max_tokens: int
    logprobs: int
    stop_token_ids: list
    seed: int


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM = FakeLLM
    module.SamplingParams = SamplingParams
    module.TokensPrompt = lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids}
    monkeypatch.setitem(sys.modules, "vllm", module)
    FakeLLM.instances.clear()
    return module


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
    # each step: generate ..., sleep, wake weights, load, wake kv cache, reset prefix cache
    first_sleep = names.index("sleep")
    assert names[first_sleep : first_sleep + 5] == ["sleep", "wake_up", "apply_model", "load_weights", "wake_up"]
    assert llm.calls[first_sleep + 1] == ("wake_up", ("weights",)) and llm.calls[first_sleep + 4] == (
        "wake_up",
        ("kv_cache",),
    )
    assert names[first_sleep + 5] == "reset_prefix_cache"
    assert names.count("sleep") == 2 and names.count("reset_prefix_cache") == 2
    # after the last sync the served weights are exactly the learner's final weights
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(sorted((run / "checkpoints").glob("step_*"))[-1])
    for name, tensor in saved.state_dict().items():
        assert torch.equal(tensor, llm.model.state_dict()[name]), name


def test_missing_vllm_is_a_clear_error(monkeypatch):
    from trainers.config import TrainConfig
    from trainers.engines.vllm import VLLMEngine

    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match="vLLM 0.33.0 on a CUDA GPU"):
        VLLMEngine(TrainConfig.build({}), None, None, "x", [0])
