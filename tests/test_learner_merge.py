"""The learner merges turns with the same prompt, response and sign of advantage into one row (their
summed coefficient, their coefficient-weighted mean advantage): the update must be the unmerged batch's
update, for both losses and every aggregation, while the model sees each distinct turn once."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spiral_arena.models.logprobs import pack, response_logprobs  # noqa: E402
from spiral_arena.rollout import Turn  # noqa: E402
from trainers.config import TrainConfig  # noqa: E402
from trainers.distributed import Distributed  # noqa: E402
from trainers.learner import merge_duplicates, update  # noqa: E402
from trainers.losses import AGGREGATIONS, aggregate, policy_loss, row_coefficients  # noqa: E402
from trainers.tiny import build_model  # noqa: E402


def small_model(vocab_size: int = 48, dtype=torch.float32):
    model = build_model(vocab_size=vocab_size, hidden_size=32, seed=0).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.05)
    model.config.pad_token_id = 0
    return model


GAMES = TrainConfig.build({}).games.split(",")[:2]  # two of the tiny recipe's games: the turns' labels


def duplicated_turns() -> list[Turn]:
    """13 turns in 5 groups: a repeated Kuhn-like decision with positive advantages of different sizes
    (one of them last), the same answer with negative ones, and responses of different lengths; two turns
    a game and four a group, so merged rows span games and groups of different token counts."""
    rng = np.random.default_rng(1)
    prompts = [rng.integers(3, 48, size=n).tolist() for n in (5, 7, 6)]
    responses = [rng.integers(3, 48, size=n).tolist() for n in (3, 2, 4)]
    plan = [(0, 0, 1.0), (0, 0, 0.4), (0, 0, 1.0), (0, 0, 2.0), (0, 0, -0.5), (0, 0, -0.2), (0, 0, -1.5)]
    plan += [(1, 1, 0.7), (1, 1, 0.9), (2, 2, -1.2), (2, 2, -0.3), (1, 2, 0.3), (0, 0, 0.1)]
    turns = []
    for k, (p, r, adv) in enumerate(plan):
        sampled = (-1.0 - 0.1 * k - 0.01 * np.arange(len(responses[r]))).tolist()  # each turn its own
        turn = Turn(GAMES[p % 2], k % 2, "", prompts[p], responses[r], sampled, "", True)
        turn.advantage = adv
        turn.game_id, turn.group_id = k // 2, k // 4
        turns.append(turn)
    return turns


def coefficients_of(turns, how, max_tokens):
    units = torch.tensor([t.game_id if how == "game_mean_token_mean" else t.group_id for t in turns])
    return row_coefficients(torch.tensor([float(len(t.response_ids)) for t in turns]), how, max_tokens, units)


def test_merge_groups_by_prompt_response_and_sign_of_advantage():
    turns = duplicated_turns()
    coefficients = [0.1 * (k + 1) for k in range(len(turns))]
    rows = merge_duplicates(turns, coefficients)
    assert [len(r.turns) for r in rows] == [5, 3, 2, 2, 1]
    assert rows[0].turns == turns[:4] + turns[-1:]  # first appearance first, members in order
    assert sorted(id(t) for r in rows for t in r.turns) == sorted(id(t) for t in turns)
    for r in rows:
        assert len({(tuple(t.prompt_ids), tuple(t.response_ids), t.advantage > 0) for t in r.turns}) == 1
    first = [0, 1, 2, 3, 12]  # the summed coefficient and the coefficient-weighted mean advantage
    assert rows[0].coefficient == pytest.approx(sum(coefficients[k] for k in first))
    weighted = sum(coefficients[k] * turns[k].advantage for k in first) / rows[0].coefficient
    assert rows[0].advantage == pytest.approx(weighted)


@pytest.mark.parametrize("how", AGGREGATIONS)
def test_merged_coefficients_give_the_repeated_rows_loss(how):
    per_token = torch.tensor([[1.0, 2.0, 0.0], [3.0, 0.0, 0.0], [0.5, -1.0, 4.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    repeat = torch.tensor([0, 0, 0, 1, 2, 2])  # rows repeated 3, 1, 2 times, in units 0 0 1 1 1 2
    units = torch.tensor([0, 0, 1, 1, 1, 2])
    coefficients = row_coefficients(mask[repeat].sum(1), how, 5, units)
    expected = aggregate(per_token[repeat], mask[repeat], coefficients)
    merged = torch.zeros(3).index_add_(0, repeat, coefficients)
    assert float(aggregate(per_token, mask, merged)) == pytest.approx(float(expected), rel=1e-6)
    by_hand = {  # row sums 3, 3, 3.5 over 2, 1, 3 tokens; the units hold rows [0, 0], [0, 1, 2], [2]
        "dr_grpo": (3 * 3 + 3 + 2 * 3.5) / 5 / 6,
        "token_mean": (3 * 3 + 3 + 2 * 3.5) / (3 * 2 + 1 + 2 * 3),
        "seq_mean_token_mean": (3 * 1.5 + 3 + 2 * 3.5 / 3) / 6,
        "game_mean_token_mean": (6 / 4 + (3 + 3 + 3.5) / 6 + 3.5 / 3) / 3,
        "group_mean_token_mean": (6 / 4 + (3 + 3 + 3.5) / 6 + 3.5 / 3) / 3,
    }
    assert float(expected) == pytest.approx(by_hand[how])


def unmerged_gradient(model, reference, turns, config) -> dict[str, torch.Tensor]:
    """The full batch's objective, turn by turn as written in the losses, without merging: the policy
    loss, the KL to the reference and the entropy bonus."""
    model.zero_grad()
    ids, attention, positions, mask = pack([t.prompt_ids for t in turns], [t.response_ids for t in turns], 0, "cpu")
    logp, mask, entropy = response_logprobs(model, ids, attention, positions, mask, config.temperature, entropy=True)
    advantages = torch.tensor([t.advantage for t in turns])
    with torch.no_grad():
        old = response_logprobs(model, ids, attention, positions, mask, config.temperature)[0]
        ref = response_logprobs(reference, ids, attention, positions, mask, config.temperature)[0]
    coefficients = coefficients_of(turns, config.aggregation, 8)
    loss, _ = policy_loss(logp, old, advantages, mask, coefficients, config.loss, config.clip)
    d = ref - logp  # the estimator per token, each turn at its game's KL weight
    per_token = torch.exp(d) - d - 1.0 if config.kl_estimator == "k3" else 0.5 * d * d
    weighted = per_token * torch.tensor([config.kl_by_game[t.game] for t in turns])[:, None]
    objective = loss + aggregate(weighted, mask, coefficients)
    objective = objective - config.entropy_coef * aggregate(entropy, mask, coefficients)
    objective.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


# (micro-batch, KL coefficient, per-game KL coefficients, KL estimator, entropy coefficient): merged rows of
# weights 5, 3, 2, 2, 1 share micro-batches ([5, 3], [2, 2], [1] at 2; all five at 5), and each term alone
# carries the gradient once, so a term that ignores the row weights (or the turn's game, or the estimator)
# moves the step by far more than float rounding
TERMS = [
    (2, 0.3, "", "k3", 0.0), (5, 0.3, "", "k3", 0.0), (5, 0.0, "", "k3", 0.0), (5, 0.0, "", "k3", 0.5),
    (3, 0.3, "", "k3", 0.5), (2, 0.0, "0.05,0.6", "k3", 0.0), (5, 0.3, "0.6,0", "k2", 0.0), (2, 0.3, "", "k2", 0.0),
]  # fmt: skip


@pytest.mark.parametrize(("micro_batch", "kl_coef", "game_kl_coefs", "kl_estimator", "entropy_coef"), TERMS)
@pytest.mark.parametrize("loss", ["reinforce", "ppo"])
@pytest.mark.parametrize("how", AGGREGATIONS)
def test_merged_update_is_the_unmerged_update(
    loss, how, micro_batch, kl_coef, game_kl_coefs, kl_estimator, entropy_coef
):
    """SGD with lr 1 moves each weight by minus its gradient: the merged learner's step must be the
    gradient of the unmerged objective, while its forward passes see 5 rows, not 13."""
    torch.manual_seed(0)
    model = small_model()
    reference = copy.deepcopy(model).eval().requires_grad_(False)
    with torch.no_grad():  # a reference that differs, so the KL term has a gradient
        for p in reference.parameters():
            p.add_(0.05 * torch.randn_like(p))
    config = TrainConfig.build(
        {
            "games": ",".join(GAMES),
            "loss": loss,
            "aggregation": how,
            "epochs": 1,
            "micro_batch": micro_batch,
            "kl_coef": kl_coef,
            "game_kl_coefs": game_kl_coefs,
            "kl_estimator": kl_estimator,
            "entropy_coef": entropy_coef,
            "max_new_tokens": 8,
        }
    )
    config.grad_clip = 1e9
    turns = duplicated_turns()
    expected = unmerged_gradient(copy.deepcopy(model), reference, turns, config)

    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rows: list[int] = []
    hook = model.get_output_embeddings().register_forward_hook(lambda m, i, out: rows.append(out.shape[0]))
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    cpu = torch.device("cpu")
    anchor = reference if any(config.kl_by_game.values()) else None
    stats = update(model, anchor, optimizer, turns, config, np.random.default_rng(0), cpu, Distributed(cpu))
    hook.remove()

    for name, p in model.named_parameters():
        # float rounding moves entries by up to ~3e-7 (gradients up to ~0.2); an unweighted term by ~1e-2
        torch.testing.assert_close(before[name] - p.detach(), expected[name], rtol=1e-4, atol=1e-6, msg=name)

    # the head sees each micro-batch's response columns; merged rows of response lengths 3, 3, 2, 4, 4:
    # at 2, [5, 3] x 3 wide, [2, 2] x 4, [1] x 4; at 3, [5, 3, 2] x 3, [2, 1] x 4; at 5, all five x 4
    # (13 unmerged turns would be more rows); PPO adds the pass for the old log-probs
    per_pass = {2: 2 * 3 + 2 * 4 + 1 * 4, 3: 3 * 3 + 2 * 4, 5: 5 * 4}[micro_batch]
    assert sum(rows) == per_pass * (2 if loss == "ppo" else 1)
    # every turn's own sampled log-probs enter the on-policy check, not one per group
    learner = response_logprobs(before_model(model, before), *pack_all(turns))[0].detach()
    gaps = [(learner[k, : len(t.logprobs)] - torch.tensor(t.logprobs)).abs() for k, t in enumerate(turns)]
    assert stats["logprob_gap/mean"] == pytest.approx(float(torch.cat(gaps).mean()), rel=1e-5)
    if entropy_coef:  # the logged entropy is the unmerged batch's mean entropy under the aggregation
        with torch.no_grad():
            entropy = response_logprobs(before_model(model, before), *pack_all(turns), entropy=True)[2]
        expected_entropy = aggregate(entropy, pack_all(turns)[3], coefficients_of(turns, how, 8))
        assert stats["entropy"] == pytest.approx(float(expected_entropy), rel=1e-5)


def pack_all(turns):
    return pack([t.prompt_ids for t in turns], [t.response_ids for t in turns], 0, "cpu")


def before_model(model, before):
    restored = copy.deepcopy(model)
    restored.load_state_dict(before)
    return restored.eval()


@pytest.mark.parametrize("dual_clip", [0.0, 3.0])
def test_merged_ppo_with_clipping_is_the_unmerged_ppo(dual_clip):
    """Two PPO epochs: in the second the ratios have moved, clipping is active, and the merged rows
    (one mean advantage per sign) must still give the unmerged batch's parameters."""
    torch.manual_seed(0)
    model = small_model()
    config = TrainConfig.build(
        {"loss": "ppo", "aggregation": "token_mean", "epochs": 2, "micro_batch": 2, "kl_coef": 0.0}
    )
    config.grad_clip, config.dual_clip, lr = 1e9, dual_clip, 20.0
    turns = duplicated_turns()

    by_hand = copy.deepcopy(model)
    ids, attention, positions, mask = pack_all(turns)
    advantages = torch.tensor([t.advantage for t in turns])
    with torch.no_grad():
        old = response_logprobs(by_hand, ids, attention, positions, mask)[0]
    sgd = torch.optim.SGD(by_hand.parameters(), lr=lr)
    clipped = []
    for _ in range(2):
        sgd.zero_grad()
        logp = response_logprobs(by_hand, ids, attention, positions, mask)[0]
        token_mean = row_coefficients(mask.sum(1), "token_mean", 8)
        loss, info = policy_loss(logp, old, advantages, mask, token_mean, "ppo", 0.2, dual_clip=dual_clip or None)
        clipped.append(info["clip_fraction"])
        loss.backward()
        sgd.step()
    assert clipped[1] > 0.2  # the second epoch really clips

    cpu = torch.device("cpu")
    sgd = torch.optim.SGD(model.parameters(), lr=lr)
    stats = update(model, None, sgd, turns, config, np.random.default_rng(0), cpu, Distributed(cpu))
    for p, q in zip(model.parameters(), by_hand.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-4, atol=5e-4)  # weights move by up to ~10
    assert stats["clip_fraction"] == pytest.approx(sum(clipped) / 2, rel=1e-5)
