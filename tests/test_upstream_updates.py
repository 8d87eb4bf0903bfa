"""Reference tests: the learner's update against independent references written from the upstream code.

delta-belief-rl (bethgelab/delta-belief-rl at f173b54) runs verl's PPO actor (volcengine/verl at e95bd9e, its
submodule): ``delta_belief_rl/workers/actor/dp_actor.py: update_policy`` splits the step's rows, in order, into
mini-batches of ``ppo_mini_batch_size`` x n = 1,280 game rows (3 of its 3,840: l.365-369), each mini-batch into
micro-batches of 16 rows (one group), and backpropagates ``agg_loss(pg_losses) / gradient_accumulation``
per micro-batch (l.393-480) before one clipped optimiser step per mini-batch (l.490, ``_optimizer_step``
l.230-248: grad-norm clip 1.0, a non-finite norm skips the step). The per-token loss is
``verl/trainer/ppo/core_algos.py: compute_policy_loss_vanilla`` (l.815-901): ratio exp(clamp(logp - old,
-20, 20)), clip [1 - 0.2, 1 + 0.28], dual clip 3 for negative advantages. ``agg_loss`` (l.703-737):
"token-mean" is the masked token mean of the micro-batch (ΔBelief: delta-belief-rl/qwen*.sh l.56),
"seq-mean-token-mean" the mean over rows of each row's token mean (StarPO: grpo/qwen*.sh l.52), a row being
a whole game (``llm_agent/generation.py: _format_responses_loss`` l.244-375, whose mask covers each assistant
turn's content and not its ``<|im_end|>``). Zero-advantage rows stay in (``filter_groups`` off,
base_multiturn.yaml l.342-343).

SPIRAL (spiral-rl/spiral at a02d0ed) filters turns whose advantage is exactly 0 (``train_spiral.py`` l.513-514)
and keeps one RAE EMA per player in each actor (l.158-163, read before it is updated: l.488-493); oat (its
learner) sums each turn's token losses over ``generate_max_length`` and averages over turns (Dr.GRPO).

The references below recompute those rules from the model's log-probs, with none of the trainer's code
but ``response_logprobs`` (the model's log-prob of each response token), in float64, and compare the
weights after the trainer's ``update`` to 1e-6.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_learner_merge import small_model as merge_test_model  # noqa: E402

from spiral_arena.models.logprobs import pack, response_logprobs  # noqa: E402
from spiral_arena.rollout import Turn  # noqa: E402
from trainers.config import TrainConfig  # noqa: E402
from trainers.distributed import Distributed  # noqa: E402
from trainers.learner import update  # noqa: E402
from trainers.losses import policy_loss  # noqa: E402
from trainers.rae import RAE  # noqa: E402

CPU = torch.device("cpu")
STOP = 2  # the end-of-turn token of these hand-made turns


def small_model():
    return merge_test_model(vocab_size=40, dtype=torch.float64)


def twenty_questions_step() -> list[Turn]:
    """Three groups of two games of two or three turns, in the order the loop hands them over: group 0 with
    games of different lengths and outcomes, group 1 all of advantage 0 (both games scored alike), group 2 with
    one turn of advantage 0, one reply cut at the token limit (no end-of-turn token) and one that repeats the
    first turn of group 0 with a negative advantage (the first mini-batch's step raises its probability, so
    the third one's dual clip has something to bound)."""
    rng = np.random.default_rng(3)
    plan = [  # (group, game, advantage per turn)
        (0, 0, [1.2, 0.8, 1.0]), (0, 1, [-1.1, -0.9]),
        (1, 2, [0.0, 0.0]), (1, 3, [0.0, 0.0, 0.0]),
        (2, 4, [0.7, 0.0]), (2, 5, [-0.6, -1.4, -0.5]),
    ]  # fmt: skip
    turns = []
    for group, game, advantages in plan:
        for k, advantage in enumerate(advantages):
            response = rng.integers(3, 40, size=int(rng.integers(2, 5))).tolist()
            finished = not (game == 5 and k == 1)
            turn = Turn(
                "TwentyQuestions-v0",
                0,
                "",
                rng.integers(3, 40, size=int(rng.integers(4, 9))).tolist(),
                [*response, STOP] if finished else response,
                [],
                "",
                finished,
            )
            if (game, k) == (5, 0):
                turn.prompt_ids, turn.response_ids = turns[0].prompt_ids, turns[0].response_ids
            turn.advantage, turn.game_id, turn.group_id = advantage, game, group
            turns.append(turn)
    return turns


def verl_token_loss(logp, old, advantage, clip_low=0.2, clip_high=0.28, clip_c=3.0):
    """compute_policy_loss_vanilla's per-token loss (core_algos.py l.866-891), for one row."""
    ratio = torch.exp(torch.clamp(logp - old, -20.0, 20.0))
    pg_losses1 = -advantage * ratio
    pg_losses2 = -advantage * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_losses3 = torch.full_like(ratio, -advantage * clip_c)
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    return torch.where(torch.tensor(advantage < 0), clip_pg_losses2, clip_pg_losses1)


def per_turn_logprobs(model, turns, grad: bool) -> list[torch.Tensor]:
    """Each turn's response-token log-probs, its end-of-turn token dropped (the game row's mask)."""
    ids, attention, positions, mask = pack([t.prompt_ids for t in turns], [t.response_ids for t in turns], 0, CPU)
    with torch.set_grad_enabled(grad):
        logp = response_logprobs(model, ids, attention, positions, mask)[0]
    return [logp[i, : len(t.response_ids) - (1 if t.finished else 0)] for i, t in enumerate(turns)]


def verl_update(model, turns, mode: str, mini_batches: int, lr: float) -> list[float]:
    """update_policy by hand: mini-batches of whole groups in order; each micro-batch one group; ``mode``
    "token-mean" (per micro-batch) or "seq-mean-token-mean" over game rows; loss / gradient_accumulation;
    grad-norm clip 1.0; one SGD step per mini-batch. Returns each mini-batch's largest |log-ratio|."""
    groups = sorted({t.group_id for t in turns})
    old = [lp.detach() for lp in per_turn_logprobs(model, turns, grad=False)]
    per_mini = len(groups) // mini_batches
    sgd = torch.optim.SGD(model.parameters(), lr=lr)
    moved = []
    for m in range(mini_batches):
        in_mini = groups[m * per_mini : (m + 1) * per_mini]
        sgd.zero_grad()
        logp = per_turn_logprobs(model, turns, grad=True)
        moved.append(
            max(float((logp[i].detach() - old[i]).abs().max()) for i, t in enumerate(turns) if t.group_id in in_mini)
        )
        accumulation = len(in_mini)  # ppo_mini_batch_size // micro-batch size: one group per micro-batch
        for group in in_mini:
            members = [i for i, t in enumerate(turns) if t.group_id == group]
            losses = {i: verl_token_loss(logp[i], old[i], turns[i].advantage) for i in members}
            if mode == "token-mean":  # masked_mean over the micro-batch's tokens
                loss = torch.cat([losses[i] for i in members]).sum() / sum(len(losses[i]) for i in members)
            else:  # a row per game: each game's token mean, then the mean over the micro-batch's rows
                games = sorted({turns[i].game_id for i in members})
                rows = [torch.cat([losses[i] for i in members if turns[i].game_id == g]) for g in games]
                loss = torch.stack([row.mean() for row in rows]).mean()
            (loss / accumulation).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        sgd.step()
    return moved


@pytest.mark.parametrize(
    ("algo", "mode"),
    [("delta-belief", "token-mean"), ("starpo", "seq-mean-token-mean")],
    ids=["delta-belief", "starpo"],
)
def test_twenty_questions_update_is_verls(algo, mode):
    """The recipe's update (3 mini-batches, its aggregation, zero advantages kept, the end-of-turn token out of
    the loss) against verl's, with micro-batches of 4 rows that cut across groups: same weights to 1e-6,
    and the second and third mini-batches really are off-policy (the clips act there)."""
    torch.manual_seed(0)
    turns = twenty_questions_step()
    config = TrainConfig.build(
        {"algo": algo, "games": "TwentyQuestions-v0", "micro_batch": 4, "mini_batches": 3, "group_size": 2}
    )
    assert (config.mini_batches, config.filter_zero_adv, config.train_stop_token) == (3, False, False)
    assert (config.loss, config.clip, config.clip_high, config.dual_clip, config.epochs) == ("ppo", 0.2, 0.28, 3.0, 1)
    lr = 3.0
    model, reference = small_model(), small_model()
    moved = verl_update(reference, turns, mode, 3, lr)
    assert moved[0] < 1e-12 < 0.2 < min(moved[1:])  # on-policy first, then ratios far from 1

    stats = update(model, None, torch.optim.SGD(model.parameters(), lr=lr), turns, config, np.random.default_rng(0),
                   CPU, Distributed(CPU))  # fmt: skip
    assert stats["trained"] == len(turns)  # the advantage-0 turns too
    assert stats["clip_fraction"] > 0 and stats["dual_clip_fraction"] > 0
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=1e-6, msg=name)


def test_spiral_filters_zero_advantages_and_takes_the_dr_grpo_mean():
    """SPIRAL's side: turns of advantage exactly 0 leave the batch before anything is counted
    (train_spiral.py l.513-514), and oat's Dr.GRPO loss is each turn's token sum over generate_max_length,
    averaged over the remaining turns; one epoch, so the ratio is 1 and the symmetric clip is idle."""
    turns = twenty_questions_step()
    config = TrainConfig.build({"recipe": "spiral", "model": "tiny", "epochs": 1, "max_new_tokens": 16})
    assert (config.aggregation, config.filter_zero_adv, config.train_stop_token) == ("dr_grpo", True, True)
    model, reference = small_model(), small_model()
    kept = [t for t in turns if t.advantage != 0.0]
    ids, attention, positions, mask = pack([t.prompt_ids for t in kept], [t.response_ids for t in kept], 0, CPU)
    logp = response_logprobs(reference, ids, attention, positions, mask)[0]
    advantage = torch.tensor([t.advantage for t in kept], dtype=torch.float64)
    per_turn = (-advantage[:, None] * torch.exp(logp - logp.detach()) * mask).sum(1) / 16  # masked_sum / 4096
    per_turn.mean().backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
    torch.optim.SGD(reference.parameters(), lr=2.0).step()

    stats = update(model, None, torch.optim.SGD(model.parameters(), lr=2.0), turns, config, np.random.default_rng(0),
                   CPU, Distributed(CPU))  # fmt: skip
    assert stats["trained"] == len(kept) < len(turns)
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=1e-6, msg=name)


def test_the_stop_token_is_trained_unless_the_recipe_masks_it():
    """train_stop_token decides whether the sampled end-of-turn token is in the loss: with it off the update
    is that of the same turns without it (a reply cut at the limit keeps every token)."""
    turns = twenty_questions_step()
    cut = [copy.copy(t) for t in turns]
    for t in cut:
        if t.finished:
            t.response_ids, t.finished = t.response_ids[:-1], False
    models = []
    for batch, stop_token in ((turns, False), (cut, True), (turns, True)):
        model = small_model()
        config = TrainConfig.build({"algo": "starpo", "games": "TwentyQuestions-v0", "train_stop_token": stop_token})
        update(model, None, torch.optim.SGD(model.parameters(), lr=3.0), batch, config, np.random.default_rng(0),
               CPU, Distributed(CPU))  # fmt: skip
        models.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    torch.testing.assert_close(models[0], models[1], rtol=0, atol=1e-12)
    assert float((models[0] - models[2]).abs().max()) > 1e-4


def test_rae_is_spirals_ema_per_actor_and_role():
    """SPIRAL's EMA (spiral/utils.py l.18-32: starts at 0, no bias correction) read before its update
    (train_spiral.py l.488-493), one per player in each actor: returns 1, -1, 1 for one seat give
    advantages 1, -1.05, 1.0025; another actor's and the other seat's baselines do not move."""
    rae = RAE(0.95)
    got = [rae.advantage("KuhnPoker-v0", 0, r, actor=3) for r in (1.0, -1.0, 1.0)]
    assert got == pytest.approx([1.0, -1.05, 1.0025], abs=1e-12)
    assert rae.baselines["shard3/KuhnPoker-v0/0"] == pytest.approx(0.047625, abs=1e-12)
    assert rae.advantage("KuhnPoker-v0", 0, 1.0, actor=4) == 1.0  # a fresh actor starts at 0
    assert rae.advantage("KuhnPoker-v0", 1, 1.0, actor=3) == 1.0  # so does the other seat
    assert rae.advantage("KuhnPoker-v0", 0, 1.0) == 1.0  # and the run-wide baseline of rae_scope "step"


def test_a_huge_log_ratio_is_held_as_verl_holds_it():
    """exp(clamp(log-ratio, -20, 20)): a token whose ratio would overflow keeps a finite loss (with advantage 0,
    0 x inf would be NaN and spoil the whole step) and matches verl's per-token value."""
    logp = torch.tensor([[0.0, 0.0, 0.0]], dtype=torch.float64)
    old = torch.tensor([[-1000.0, -30.0, -0.1]], dtype=torch.float64)
    for advantage in (0.0, 1.5, -2.0):
        advantages, one = torch.tensor([advantage], dtype=torch.float64), torch.ones(1, dtype=torch.float64)
        loss, _ = policy_loss(
            logp, old, advantages, torch.ones_like(logp), one, "ppo", 0.2, clip_high=0.28, dual_clip=3.0
        )
        expected = float(verl_token_loss(logp[0], old[0], advantage).sum())
        assert math.isfinite(float(loss)) and float(loss) == pytest.approx(expected, abs=1e-12)


def test_a_step_with_a_non_finite_gradient_is_skipped():
    """verl's ``_optimizer_step`` skips a step whose gradient norm is not finite (dp_actor.py l.230-248): one
    NaN advantage must leave every weight as it was, not turn them all into NaN."""
    turns = twenty_questions_step()
    turns[0].advantage = float("nan")
    model = small_model()
    before = [p.detach().clone() for p in model.parameters()]
    config = TrainConfig.build({"algo": "starpo", "games": "TwentyQuestions-v0", "mini_batches": 1})
    stats = update(model, None, torch.optim.SGD(model.parameters(), lr=3.0), turns, config, np.random.default_rng(0),
                   CPU, Distributed(CPU))  # fmt: skip
    assert stats["skipped_steps"] == 1
    assert all(torch.equal(p.detach(), q) for p, q in zip(model.parameters(), before, strict=True))
