"""HFEngine on tiny Qwen3 models built here: stop tokens, last-position logits, batching, log-probs.

The tokenizer ends a turn with ``<|im_end|>`` while its EOS is ``<|endoftext|>``, as Qwen's chat
models do, so an engine that stops on one of them only is caught.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import spiral_arena  # noqa: E402
from spiral_arena.models import Sampling  # noqa: E402
from spiral_arena.models.hf import HFEngine  # noqa: E402
from spiral_arena.models.prompting import stop_token_ids  # noqa: E402
from trainers.tiny import build_model, build_tokenizer, game_corpus  # noqa: E402

END_OF_TURN, EOS = "<|im_end|>", "<|endoftext|>"


@pytest.fixture(scope="module")
def tok():
    from transformers import PreTrainedTokenizerFast

    base = build_tokenizer(game_corpus(["KuhnPoker-v0"], games_per_env=5))
    return PreTrainedTokenizerFast(
        tokenizer_object=base.backend_tokenizer, eos_token=EOS, pad_token=EOS, chat_template=base.chat_template
    )


def encode(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def chat_prompt(tok, text: str) -> list[int]:
    messages = [{"role": "user", "content": text}]
    return encode(tok, tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))


def teach(model, pairs: list[tuple[list[int], list[int]]], steps: int = 40, lr: float = 1e-2) -> None:
    """Fit the model to reply to each prompt with its reply (cross-entropy on the reply tokens)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        loss = sum(
            torch.nn.functional.cross_entropy(
                model(input_ids=torch.tensor([prompt + reply])).logits[0, len(prompt) - 1 : -1], torch.tensor(reply)
            )
            for prompt, reply in pairs
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


@pytest.fixture(scope="module")
def replies(tok) -> list[tuple[list[int], list[int]]]:
    """Two prompts and their replies, one ending with the end-of-turn token and one with EOS. Each
    reply goes on after its stop token, so an engine that misses a stop returns the tail too."""
    end, eos = tok.convert_tokens_to_ids([END_OF_TURN, EOS])
    return [
        (chat_prompt(tok, "Say one."), encode(tok, "one bet") + [end] + encode(tok, " check fold")),
        (chat_prompt(tok, "Say two, please."), encode(tok, "two") + [eos] + encode(tok, " bet bet")),
    ]


@pytest.fixture(scope="module")
def taught(tok, replies):
    """A model that has learned ``replies`` by heart."""
    model = build_model(len(tok), seed=0)
    teach(model, replies)
    with torch.no_grad():  # teacher-forced argmax: every reply token, tail included, was learned
        for prompt, reply in replies:
            logits = model(input_ids=torch.tensor([prompt + reply])).logits[0, len(prompt) - 1 : -1]
            assert logits.argmax(dim=-1).tolist() == reply
    return model


@pytest.fixture(scope="module")
def untrained(tok):
    """Random weights: flat, varied distributions, and replies that run to the token limit."""
    return build_model(len(tok), seed=1).eval()


def kuhn_prompts(tok, n: int) -> list[list[int]]:
    env = spiral_arena.make("KuhnPoker-v0")
    prompts = []
    for seed in range(n):
        env.reset(seed=seed)
        prompts.append(chat_prompt(tok, env.observe(env.agent_selection)))
    return prompts


def test_stops_on_every_stop_token_and_keeps_it_last(tok, replies, taught):
    end, eos = tok.convert_tokens_to_ids([END_OF_TURN, EOS])
    stops = stop_token_ids(tok)
    assert stops == [end, eos]  # the chat template's end of turn first, then the tokenizer's EOS
    engine = HFEngine(taught, stops, tok.pad_token_id)
    completions = engine.generate([prompt for prompt, _ in replies], Sampling(0.0, 1.0, 12), seed=0)
    for (_, reply), completion, stop in zip(replies, completions, stops, strict=True):
        through_stop = reply[: reply.index(stop) + 1]
        assert completion.token_ids == through_stop  # nothing after the stop token
        assert completion.finished and len(completion.logprobs) == len(through_stop)
    cut = engine.generate([replies[0][0]], Sampling(0.0, 1.0, 2), seed=0)[0]
    assert cut.token_ids == replies[0][1][:2] and not cut.finished


def test_vocabulary_projection_only_for_the_last_position(tok, untrained):
    """The prefill too: logits for every prompt position would cost prompt length x vocabulary."""
    lengths: list[int] = []
    hook = untrained.get_output_embeddings().register_forward_hook(
        lambda module, args, output: lengths.append(args[0].shape[1])
    )
    try:
        engine = HFEngine(untrained, stop_token_ids(tok), tok.pad_token_id)
        engine.generate(kuhn_prompts(tok, 3), Sampling(1.0, 1.0, 5), seed=0)
    finally:
        hook.remove()
    assert len(lengths) == 5  # one prefill, then one call per token after the first
    assert set(lengths) == {1}


@pytest.mark.parametrize("weights", ["taught", "untrained"])
def test_batched_equals_one_prompt_at_a_time(tok, replies, weights, request):
    """Left padding, per-row positions and rows finishing early must not leak across rows. The
    taught model's two taught rows stop after 4 and 3 tokens (then get pads); the untrained one's run to the limit."""
    model = request.getfixturevalue(weights)
    engine = HFEngine(model, stop_token_ids(tok), tok.pad_token_id)
    prompts = [prompt for prompt, _ in replies] + kuhn_prompts(tok, 1)
    prompts += [chat_prompt(tok, "hi"), chat_prompt(tok, "What is your next move?")]
    assert len({len(p) for p in prompts}) == len(prompts)
    batched = engine.generate(prompts, Sampling(0.0, 1.0, 10), seed=0)
    for prompt, together in zip(prompts, batched, strict=True):
        alone = engine.generate([prompt], Sampling(0.0, 1.0, 10), seed=0)[0]
        assert (together.token_ids, together.finished) == (alone.token_ids, alone.finished)
        assert together.logprobs == pytest.approx(alone.logprobs, abs=1e-5)
    if weights == "taught":  # the two taught replies stop early, while other rows may run on beside them
        assert [len(c.token_ids) for c in batched[:2]] == [4, 3] and all(c.finished for c in batched[:2])
    else:
        assert {len(c.token_ids) for c in batched} == {10}


def test_sampled_row_does_not_depend_on_its_neighbours(tok, untrained):
    """One generator per call, drawn the same way for every row: a row's sample is fixed by the
    seed and its place in the batch, whatever the other prompts are and however much padding they bring."""
    engine = HFEngine(untrained, stop_token_ids(tok), tok.pad_token_id)
    first, last = chat_prompt(tok, "hi"), chat_prompt(tok, "What is your next move?")
    with_long = engine.generate([first, *kuhn_prompts(tok, 1), last], Sampling(1.0, 0.9, 8), seed=7)
    with_short = engine.generate([first, chat_prompt(tok, "ok"), last], Sampling(1.0, 0.9, 8), seed=7)
    for i in (0, 2):
        assert with_long[i].token_ids == with_short[i].token_ids
        assert with_long[i].logprobs == pytest.approx(with_short[i].logprobs, abs=1e-5)
    assert engine.generate([first], Sampling(1.0, 0.9, 8), seed=8)[0].token_ids != with_long[0].token_ids


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_match_a_full_forward_pass(tok, untrained, temperature):
    engine = HFEngine(untrained, stop_token_ids(tok), tok.pad_token_id)
    prompts = kuhn_prompts(tok, 2) + [chat_prompt(tok, "hi")]
    completions = engine.generate(prompts, Sampling(temperature, 1.0, 8), seed=3)
    with torch.no_grad():
        for prompt, completion in zip(prompts, completions, strict=True):
            ids = torch.tensor([prompt + completion.token_ids])
            logits = untrained(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
            expected = torch.log_softmax(logits / temperature, dim=-1).gather(1, ids[0, len(prompt) :, None])
            assert completion.logprobs == pytest.approx(expected.squeeze(1).tolist(), abs=1e-4)


@pytest.mark.parametrize("top_p", [1.0, 0.7])
def test_draws_follow_the_tempered_and_cut_distribution(top_p):
    """The sampler draws each token with its probability (after temperature and top-p): 20,000 draws from one
    row agree with it within a chi-square bound, and a token top-p cuts is never drawn."""
    import torch

    from spiral_arena.models.hf import sample

    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -30.0]]).repeat(20_000, 1)
    token, logp = sample(logits, 0.8, top_p, torch.Generator().manual_seed(0))
    counts = torch.bincount(token, minlength=6).double()
    probs = torch.softmax(logits[0] / 0.8, dim=-1).double()
    if top_p < 1.0:  # the nucleus: the most likely tokens whose mass before them is under top_p
        keep = torch.cumsum(probs, 0) - probs <= top_p
        probs = torch.where(keep, probs, 0.0) / probs[keep].sum()
    seen = probs > 0
    assert counts[~seen].sum() == 0
    chi2 = (((counts - 20_000 * probs) ** 2)[seen] / (20_000 * probs[seen])).sum()
    assert chi2 < 20  # 5 degrees of freedom at most: p < 0.002 above this
    assert torch.allclose(logp.exp().double(), probs[token], atol=1e-6)  # each draw's log-prob is its own
