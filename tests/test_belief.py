"""ΔBelief-RL's belief probe equals a direct, unbatched forward pass summed over the secret's tokens,
whatever the batching and padding, and leaves the model as it found it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spiral_arena.models.policy import Policy  # noqa: E402
from trainers.belief import PROBE_PREFIX, log_beliefs  # noqa: E402
from trainers.tiny import build_model, build_tokenizer, game_corpus  # noqa: E402

# prompts of different lengths (left padding) and secrets of different token lengths (right padding)
HISTORIES = [
    "Twenty Questions. Ask your first question.",
    "",
    "Q1: Is it an animal? A: Yes.\nQ2: Does it live in water? A: No.\nQ3: Is it bigger than a dog? A: Yes.",
    "Q1: Is it an animal? A: No.",
    "Q1: Is it a tool? A: No.\nQ2: Is it food? A: Yes.",
]
SECRETS = ["cat", "hippopotamus", "table", "a", "apple pie"]


@pytest.fixture(scope="module")
def policy() -> Policy:
    tokenizer = build_tokenizer(game_corpus(["KuhnPoker-v0"], games_per_env=5))
    return Policy(None, tokenizer, "spiral")


@pytest.fixture(scope="module")
def model(policy: Policy):
    return build_model(len(policy.tokenizer))


def direct_log_belief(model, policy: Policy, history: str, secret: str) -> float:
    """One sequence, no padding: the model's own logits, one log_softmax, the secret's positions."""
    tokenizer = policy.tokenizer
    prompt = policy.prompt_ids(history)
    prefix = tokenizer(PROBE_PREFIX, add_special_tokens=False)["input_ids"]
    secret_ids = tokenizer(secret, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + prefix + secret_ids])
    with torch.no_grad():
        logprobs = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
    first = len(prompt) + len(prefix)  # position of the secret's first token
    # the logits at position p predict the token at p + 1
    return sum(float(logprobs[first + k - 1, token]) for k, token in enumerate(secret_ids))


def test_secrets_and_prompts_differ_in_length(policy: Policy):
    """Otherwise the batch would need no padding and the comparison below would prove less."""
    secret_lengths = {len(policy.tokenizer(s, add_special_tokens=False)["input_ids"]) for s in SECRETS}
    prompt_lengths = {len(policy.prompt_ids(h)) for h in HISTORIES}
    assert len(secret_lengths) >= 3 and len(prompt_lengths) == len(HISTORIES)


@pytest.mark.parametrize("batch_size", [1, 2, 64])
def test_matches_a_direct_forward_pass(model, policy: Policy, batch_size: int):
    expected = [direct_log_belief(model, policy, h, s) for h, s in zip(HISTORIES, SECRETS, strict=True)]
    got = log_beliefs(model, policy, HISTORIES, SECRETS, batch_size=batch_size)
    assert got == pytest.approx(expected, abs=1e-5)
    assert all(value < 0 for value in got)


def test_only_the_secret_tokens_count(model, policy: Policy):
    """A longer secret that starts like a shorter one adds its extra tokens' log-probs (all negative)."""
    short, long = log_beliefs(model, policy, ["Q1: Is it food? A: Yes."] * 2, ["apple", "apple pie"])
    assert long < short


def test_restores_the_mode_scores_in_eval_and_makes_no_gradients(model, policy: Policy):
    seen: list[tuple[bool, bool]] = []
    hook = model.get_decoder().register_forward_pre_hook(
        lambda module, args: seen.append((module.training, torch.is_grad_enabled()))
    )
    try:
        for training in (True, False):
            model.train(training)
            log_beliefs(model, policy, HISTORIES, SECRETS, batch_size=2)
            assert all(module.training is training for module in model.modules())
    finally:
        hook.remove()
        model.eval()
    assert seen and all(state == (False, False) for state in seen)
    assert all(p.grad is None for p in model.parameters())


def test_rejects_bad_input(model, policy: Policy):
    assert log_beliefs(model, policy, [], []) == []
    with pytest.raises(ValueError, match="histories and secrets must have the same length, got 2 and 1"):
        log_beliefs(model, policy, ["a", "b"], ["cat"])
    with pytest.raises(ValueError, match="the secret '' has no tokens"):
        log_beliefs(model, policy, ["a"], [""])
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        log_beliefs(model, policy, ["a"], ["cat"], batch_size=0)


def test_the_named_probe_scores_the_article_and_the_secret_after_the_boxed_question(model, policy: Policy):
    """probe="named" reads the belief off the reply a questioner trained on our games gives: the prefix
    ``\\boxed{Is it``, then the article and the secret, both scored (a/an differ by noun)."""
    tokenizer = policy.tokenizer
    prompt = policy.prompt_ids(HISTORIES[2])
    for secret, scored_text in (("owl", " an owl"), ("table", " a table")):
        prefix = tokenizer("\\boxed{Is it", add_special_tokens=False)["input_ids"]
        scored = tokenizer(scored_text, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([prompt + prefix + scored])
        with torch.no_grad():
            logprobs = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
        first = len(prompt) + len(prefix)
        expected = sum(float(logprobs[first + k - 1, token]) for k, token in enumerate(scored))
        (got,) = log_beliefs(model, policy, [HISTORIES[2]], [secret], probe="named")
        assert got == pytest.approx(expected, abs=1e-5)
        assert got != pytest.approx(log_beliefs(model, policy, [HISTORIES[2]], [secret])[0], abs=1e-3)
    with pytest.raises(ValueError, match="probe must be one of quoted, named, got 'boxed'"):
        log_beliefs(model, policy, ["a"], ["cat"], probe="boxed")
