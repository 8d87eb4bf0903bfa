"""Chunked response log-probs equal the full log_softmax, in value and gradient, and their extra
memory is bounded by the chunk rather than by [batch, response, vocab]."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spiral_arena.models.logprobs import pack, response_logprobs  # noqa: E402
from trainers.tiny import build_model  # noqa: E402

VOCAB = 97
# left padding comes from prompts of different lengths, right padding from responses of different lengths
PROMPT_LENGTHS = (5, 1, 9)
RESPONSE_LENGTHS = (7, 12, 3)


def random_batch(vocab: int, prompt_lengths: tuple[int, ...], response_lengths: tuple[int, ...], seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(1, vocab, (n,), generator=generator).tolist() for n in prompt_lengths]
    responses = [torch.randint(1, vocab, (n,), generator=generator).tolist() for n in response_lengths]
    return pack(prompts, responses, 0, "cpu")


def full_logprobs(model, ids, attention, positions, response_mask, temperature: float = 1.0) -> torch.Tensor:
    """The reference: the model's own forward, every logit at once, one log_softmax."""
    r_width = response_mask.shape[1]
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions).logits.float()
    response_logits = logits[:, -r_width - 1 : -1, :] / temperature
    return torch.log_softmax(response_logits, dim=-1).gather(2, ids[:, -r_width:].unsqueeze(2)).squeeze(2)


def gradients(model, logp: torch.Tensor, response_mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Parameter gradients of a loss that weighs every response token differently."""
    weights = torch.linspace(-1.0, 2.0, logp.numel()).view_as(logp)
    model.zero_grad(set_to_none=True)
    (logp * weights * response_mask).sum().backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.requires_grad}


def assert_same_gradients(chunked: dict[str, torch.Tensor], full: dict[str, torch.Tensor]) -> None:
    assert chunked.keys() == full.keys()
    for name, grad in full.items():
        assert grad.abs().sum() > 0, name  # every parameter is reached, so the comparison means something
        # float noise in the sums is ~1e-6 of the largest entry; a wrong gradient is off by its own size
        torch.testing.assert_close(chunked[name], grad, rtol=1e-4, atol=1e-5 * float(grad.abs().max()), msg=name)


@pytest.mark.parametrize("chunk_size", [1, 5, 1024, 0, None])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_values_match_full_log_softmax(chunk_size: int | None, temperature: float) -> None:
    model = build_model(VOCAB)
    batch = random_batch(VOCAB, PROMPT_LENGTHS, RESPONSE_LENGTHS)
    with torch.no_grad():
        expected = full_logprobs(model, *batch, temperature=temperature)
        logp, mask = response_logprobs(model, *batch, temperature=temperature, chunk_size=chunk_size)
    assert mask is batch[3]
    assert logp.shape == (len(PROMPT_LENGTHS), max(RESPONSE_LENGTHS))
    torch.testing.assert_close(logp, expected, rtol=1e-5, atol=1e-5)


def test_temperature_changes_the_numbers() -> None:
    """Guards the comparisons above: a temperature that were ignored would not pass them both."""
    model = build_model(VOCAB)
    batch = random_batch(VOCAB, PROMPT_LENGTHS, RESPONSE_LENGTHS)
    with torch.no_grad():
        plain, _ = response_logprobs(model, *batch, chunk_size=5)
        tempered, _ = response_logprobs(model, *batch, temperature=0.7, chunk_size=5)
    assert (plain - tempered).abs().max() > 1e-3


@pytest.mark.parametrize("chunk_size", [5, 0])
def test_gradients_match_full_log_softmax(chunk_size: int) -> None:
    model = build_model(VOCAB)
    batch = random_batch(VOCAB, PROMPT_LENGTHS, RESPONSE_LENGTHS)
    full = gradients(model, full_logprobs(model, *batch, temperature=0.7), batch[3])
    logp, mask = response_logprobs(model, *batch, temperature=0.7, chunk_size=chunk_size)
    assert logp.requires_grad
    assert_same_gradients(gradients(model, logp, mask), full)


def test_lora_model_matches_its_full_forward() -> None:
    """Through peft's wrapper the adapter is applied (the numbers move off the base model's) and
    its gradients equal the full computation's."""
    from peft import LoraConfig, get_peft_model

    # init_lora_weights=False: a random B, so the adapter changes the outputs from the start
    config = LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False, task_type="CAUSAL_LM")
    model = get_peft_model(build_model(VOCAB), config)
    batch = random_batch(VOCAB, PROMPT_LENGTHS, RESPONSE_LENGTHS)
    with torch.no_grad(), model.disable_adapter():
        base = full_logprobs(model, *batch)
    full = full_logprobs(model, *batch)
    assert (full - base).abs().max() > 1e-3
    full_grads = gradients(model, full, batch[3])
    assert full_grads and all("lora_" in name for name in full_grads)

    logp, mask = response_logprobs(model, *batch, chunk_size=5)
    torch.testing.assert_close(logp, full, rtol=1e-5, atol=1e-5)
    assert_same_gradients(gradients(model, logp, mask), full_grads)


def fsdp_rank(rank: int, store: str) -> None:
    """One of two gloo ranks: the same batch through a fully_shard-ed copy and an unsharded one."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        torch.set_num_threads(1)
        reference, model = build_model(VOCAB), build_model(VOCAB)
        for layer in model.get_decoder().layers:  # as trainers.distributed.shard does
            fully_shard(layer)
        fully_shard(model)
        batch = random_batch(VOCAB, PROMPT_LENGTHS, RESPONSE_LENGTHS)
        full = full_logprobs(reference, *batch, temperature=0.7)
        full_grads = gradients(reference, full, batch[3])
        logp, mask = response_logprobs(model, *batch, temperature=0.7, chunk_size=5)
        torch.testing.assert_close(logp, full, rtol=1e-5, atol=1e-5)
        # both ranks saw the same batch, so FSDP's mean over ranks is the one-process gradient
        sharded_grads = {name: grad.full_tensor() for name, grad in gradients(model, logp, mask).items()}
        assert_same_gradients(sharded_grads, full_grads)
    finally:
        dist.destroy_process_group()


def test_fsdp_sharded_model_matches_unsharded(tmp_path) -> None:
    """Under FSDP2 the embeddings, final norm and head live in the root's shard; calling the decoder
    and head directly, outside a forward FSDP knows of, would meet sharded weights."""
    import torch.multiprocessing as mp

    mp.spawn(fsdp_rank, args=(str(tmp_path / "store"),), nprocs=2)


def test_final_logit_softcapping_is_applied() -> None:
    """A Gemma-2 head caps its logits in the model's forward; the chunked path must do the same."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(0)
    config = Gemma2Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        final_logit_softcapping=0.5,  # small enough to reshape these logits
    )
    model = Gemma2ForCausalLM(config)
    batch = random_batch(VOCAB, PROMPT_LENGTHS, RESPONSE_LENGTHS)
    with torch.no_grad():
        expected = full_logprobs(model, *batch)
        logp, _ = response_logprobs(model, *batch, chunk_size=5)
        model.config.final_logit_softcapping = None
        uncapped = full_logprobs(model, *batch)
    torch.testing.assert_close(logp, expected, rtol=1e-5, atol=1e-5)
    assert (expected - uncapped).abs().max() > 1e-2


def peak_allocated_bytes(step) -> int:
    """The highest point of the running sum of CPU allocations and frees while ``step`` runs."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    # every allocation (+bytes) and free (-bytes) the profiler saw, not only those outside an op
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    running = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        running += event.nbytes()
        peak = max(peak, running)
    return peak


def test_chunked_memory_does_not_grow_with_the_vocabulary() -> None:
    """A real 151,936-token vocabulary with a 16-wide model, so the logits are almost all the memory."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    vocab, chunk_size = 151_936, 128
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        tie_word_embeddings=False,
    )
    model = Qwen3ForCausalLM(config)
    batch = random_batch(vocab, (16, 9), (512, 480))
    tokens = batch[3].numel()  # padded response positions go through the head too

    def forward_backward(size: int) -> None:
        logp, mask = response_logprobs(model, *batch, chunk_size=size)
        (logp * mask).sum().backward()

    def decoder_forward_backward() -> None:
        ids, attention, positions, _ = batch
        model.get_decoder()(
            input_ids=ids, attention_mask=attention, position_ids=positions
        ).last_hidden_state.sum().backward()

    def peak_from_no_gradients(step) -> int:
        model.zero_grad(set_to_none=True)  # outside the measurement, so freeing old gradients does not offset it
        return peak_allocated_bytes(step)

    chunked = peak_from_no_gradients(lambda: forward_backward(chunk_size))
    unchunked = peak_from_no_gradients(lambda: forward_backward(0))
    hidden_states = peak_from_no_gradients(decoder_forward_backward)  # the decoder's own activations and grads

    all_logits = tokens * vocab * 4
    chunk_logits = chunk_size * vocab * 4
    head_gradient = model.get_output_embeddings().weight.numel() * 4
    # the measurement sees the logits: one pass over every token holds several [tokens, vocab] copies
    assert unchunked > 3 * all_logits
    # chunked: a few [chunk, vocab] tensors at a time (logits, softmax, their grads) besides what the
    # decoder alone needs and the head's gradient, whatever the response length
    assert chunked < 5 * chunk_logits + hidden_states + head_gradient
    assert unchunked > 5 * chunked


@pytest.mark.parametrize("chunk_size", [5, 0])
def test_entropy_matches_the_full_softmax(chunk_size: int) -> None:
    """The entropy bonus's numbers: each response position's entropy over the whole vocabulary at
    the sampling temperature, in value and gradient, with the same log-probs as without it."""
    model = build_model(VOCAB)
    batch = random_batch(VOCAB, PROMPT_LENGTHS, RESPONSE_LENGTHS)
    r_width = batch[3].shape[1]
    logits = model(input_ids=batch[0], attention_mask=batch[1], position_ids=batch[2]).logits.float()
    log_probs = torch.log_softmax(logits[:, -r_width - 1 : -1, :] / 0.7, dim=-1)
    expected = -(log_probs.exp() * log_probs).sum(dim=-1)
    full = gradients(model, expected, batch[3])
    logp, mask, entropy = response_logprobs(model, *batch, temperature=0.7, chunk_size=chunk_size, entropy=True)
    assert entropy.shape == logp.shape and mask is batch[3]
    torch.testing.assert_close(entropy.detach(), expected.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        logp.detach(), full_logprobs(model, *batch, temperature=0.7).detach(), rtol=1e-5, atol=1e-5
    )
    assert float(entropy.max()) < torch.log(torch.tensor(float(VOCAB))) + 1e-4  # at most uniform's log V
    assert_same_gradients(gradients(model, entropy, mask), full)
