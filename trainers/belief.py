"""The questioner's belief in the secret, under the current policy (ΔBelief-RL).

At a point of the game the questioner is about to reply to ``policy.prompt_ids(history)``. Its belief
in the secret is how likely it would be to name it right there: we append the assistant reply probe
``Is it '<secret>'?`` and sum the log-probs of the secret's tokens only,

    log b = sum_k log pi(secret_k | prompt, "Is it '", secret_<k)

at temperature 1, with no gradient. The closing ``'?`` comes after the secret, so under causal
attention it cannot change these numbers and is not fed to the model.

That is upstream's probe (``probe="quoted"``), for a questioner that replies in plain text. A questioner
trained on this project's games replies inside ``\\boxed{}`` and names a noun as the experts do (``Is it a
crocodile?``); a small model that never saw the quoted form gives it no meaningful probability, so
``probe="named"`` reads the belief off that form instead: the prefix ``\\boxed{Is it`` and, scored, the
article with the secret (`` a crocodile``).

The probe is tokenised in pieces, prefix and secret separately, and the ids concatenated. Tokenising
the whole string instead lets the pre-tokeniser and BPE merge across the quote: Qwen's and GPT-2's
pre-tokenisers read "'table" as the contraction "'t" + "able", and Qwen's keeps one punctuation
character with the letters after it, so "'cat" is a single piece. The secret's first token would then
hold part of the quote, and which tokens are "the secret" would be ambiguous. In pieces, the secret
always has the same tokens and a well-defined span.
"""

from __future__ import annotations

import torch

from spiral_arena.agents.experts.twenty_questions import naming_question
from spiral_arena.analysis.read_policy import answer_text
from spiral_arena.models.logprobs import pack, response_logprobs
from spiral_arena.models.policy import Policy
from trainers.config import choices

PROBE_PREFIX = "Is it '"
PROBES = choices("belief_probe")  # "quoted" (upstream's) and "named"


def probe_pieces(secret: str, probe: str = "quoted") -> tuple[str, str]:
    """(the reply's prefix, the scored piece) of the probe that names ``secret``."""
    if probe == "quoted":
        return PROBE_PREFIX, secret
    if probe == "named":
        named = answer_text(naming_question(secret))  # \boxed{Is it a crocodile?}
        prefix = answer_text("Is it").removesuffix("}")
        return prefix, named.removeprefix(prefix).removesuffix("?}")
    raise ValueError(f"probe must be one of {', '.join(PROBES)}, got {probe!r}")


def log_beliefs(
    model, policy: Policy, histories: list[str], secrets: list[str], batch_size: int = 64, probe: str = "quoted"
) -> list[float]:
    """log b for each (history observation, secret) pair, in input order, read with ``probe``.

    Probes are sorted by prompt length before batching, so a batch holds prompts of similar length
    and little padding. The model is in eval mode while scoring (no dropout) and goes back to the
    mode it was in.
    """
    if len(histories) != len(secrets):
        raise ValueError(f"histories and secrets must have the same length, got {len(histories)} and {len(secrets)}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if not histories:
        return []
    tokenizer = policy.tokenizer
    pieces = [probe_pieces(secret, probe) for secret in secrets]
    prefix_ids = tokenizer(pieces[0][0], add_special_tokens=False)["input_ids"]  # the same for every secret
    secret_ids = tokenizer([scored for _, scored in pieces], add_special_tokens=False)["input_ids"]
    for secret, ids in zip(secrets, secret_ids, strict=True):
        if not ids:
            raise ValueError(f"the secret {secret!r} has no tokens")
    prompt_ids = policy.prompt_ids_batch(histories)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0  # masked out: any id works
    device = next(model.parameters()).device
    order = sorted(range(len(histories)), key=lambda i: len(prompt_ids[i]))
    beliefs = [0.0] * len(histories)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(order), batch_size):
                batch = order[start : start + batch_size]
                ids, attention, positions, response_mask = pack(
                    [prompt_ids[i] for i in batch], [prefix_ids + secret_ids[i] for i in batch], pad_id, device
                )
                token_logprobs, _ = response_logprobs(model, ids, attention, positions, response_mask)
                # response columns: the probe prefix, the secret, then right padding
                secret_mask = torch.zeros_like(response_mask, dtype=torch.bool)
                for row, i in enumerate(batch):
                    secret_mask[row, len(prefix_ids) : len(prefix_ids) + len(secret_ids[i])] = True
                sums = torch.where(secret_mask, token_logprobs, 0.0).sum(dim=1)
                for i, value in zip(batch, sums.tolist(), strict=True):
                    beliefs[i] = value
    finally:
        model.train(was_training)
    return beliefs
