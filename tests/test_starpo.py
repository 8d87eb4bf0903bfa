"""20 Questions recipe pieces against hand-computed values: StarPO and ΔBelief-RL advantages, and the
PPO loss with a decoupled clip range, dual clip and per-sequence token means."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from trainers.losses import AGGREGATIONS, aggregate, policy_loss, row_coefficients  # noqa: E402
from trainers.starpo import (  # noqa: E402
    DEFAULT_GROUP_SIZE,
    DELTA_BELIEF_LAMBDA,
    delta_belief_rewards,
    starpo_advantages,
    turnwise_advantages,
)

EPS = 1e-6


def test_recipe_constants():
    assert DEFAULT_GROUP_SIZE == 16
    assert DELTA_BELIEF_LAMBDA == 0.1


# ---- StarPO: one advantage per game ------------------------------------------------------


def test_starpo_normalises_within_each_group():
    # group "a": returns 1, 2, 3, 6 -> mean 3, deviations -2, -1, 0, 3, Bessel variance (4+1+0+9)/3
    # group "b": returns 0, 0 -> no spread -> 0; the two groups are interleaved in the input
    returns = [1.0, 0.0, 2.0, 3.0, 0.0, 6.0]
    groups = ["a", "b", "a", "a", "b", "a"]
    std = math.sqrt(14 / 3)
    expected = [-2 / (std + EPS), 0.0, -1 / (std + EPS), 0.0, 0.0, 3 / (std + EPS)]
    assert starpo_advantages(returns, groups) == pytest.approx(expected, rel=1e-12)


def test_starpo_zero_variance_and_single_game_groups_give_exactly_zero():
    # 0.1 * 3 / 3 is not exactly 0.1 in floating point: the result must still be exactly 0
    assert starpo_advantages([0.1, 0.1, 0.1], ["w"] * 3) == [0.0, 0.0, 0.0]
    # Bessel's std of one value is undefined: a lone game learns nothing (not R itself);
    # the pair 1, 3 has mean 2, deviations -1, 1 and std sqrt(2)
    advantages = starpo_advantages([5.0, 1.0, 3.0], ["lone", "pair", "pair"])
    assert advantages == pytest.approx([0.0, -1 / (math.sqrt(2) + EPS), 1 / (math.sqrt(2) + EPS)])
    assert starpo_advantages([], []) == []


def test_starpo_accepts_any_hashable_group_key():
    advantages = starpo_advantages([1.0, 3.0, 7.0], [("cat", 0), ("cat", 0), ("cat", 1)])
    assert advantages == pytest.approx([-1 / (math.sqrt(2) + EPS), 1 / (math.sqrt(2) + EPS), 0.0])


def test_starpo_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="returns and groups must have the same length, got 2 and 1"):
        starpo_advantages([1.0, 2.0], ["a"])


# ---- ΔBelief-RL: per-turn rewards ----------------------------------------------------------


def test_delta_belief_rewards_of_a_won_game():
    # 3 questions, won on the last: end reward 2 - 0.05 * 3 = 1.85 on every turn
    log_beliefs = [-5.0, -4.0, -4.5, -2.0]  # gains +1.0, -0.5, +2.5
    penalties = [0.0, -1.0, 0.0]  # the second question was a repeat
    rewards = delta_belief_rewards(log_beliefs, penalties, end_reward=1.85, won=True)
    # turn 1: 0 + 1.85 + 0.1 * 1.0; turn 2: a belief drop is not punished; turn 3: winning turn, no bonus
    assert rewards == pytest.approx([1.95, -1.0 + 1.85, 1.85])


def test_delta_belief_rewards_of_a_lost_game_keep_the_last_gain():
    log_beliefs = [-5.0, -4.0, -4.5, -2.0]
    rewards = delta_belief_rewards(log_beliefs, [0.0, -1.0, 0.0], end_reward=-0.15, won=False, lam=0.1)
    assert rewards == pytest.approx([-0.15 + 0.1, -1.0 - 0.15, -0.15 + 0.25])
    # lam scales the bonus only
    rewards = delta_belief_rewards(log_beliefs, [0.0, -1.0, 0.0], end_reward=-0.15, won=False, lam=0.05)
    assert rewards == pytest.approx([-0.15 + 0.05, -1.15, -0.15 + 0.125])


def test_delta_belief_rewards_with_falling_belief_are_penalties_plus_end_reward():
    rewards = delta_belief_rewards([-1.0, -2.0, -7.0], [-5.0, 0.0], end_reward=-0.1, won=False)
    assert rewards == pytest.approx([-5.1, -0.1])


def test_delta_belief_rewards_reject_bad_lengths():
    with pytest.raises(ValueError, match=r"one value per turn plus the initial one \(3\), got 2"):
        delta_belief_rewards([-1.0, -2.0], [0.0, 0.0], end_reward=0.0, won=False)
    with pytest.raises(ValueError, match="at least one turn"):
        delta_belief_rewards([-1.0], [], end_reward=0.0, won=False)


# ---- ΔBelief-RL: per-turn group normalisation ------------------------------------------------

# one group of three games of 1, 2 and 3 turns
THREE_GAMES = [[3.0], [1.0, 2.0], [0.0, -1.0, 4.0]]


def test_turnwise_padded_counts_finished_games_as_zeros():
    # turn 0: [3, 1, 0], mean 4/3, deviations 5/3, -1/3, -4/3, Bessel variance (25 + 1 + 16) / 9 / 2 = 7/3
    # turn 1: [0 (game 0 is over), 2, -1], mean 1/3, deviations -1/3, 5/3, -4/3: the same std
    # turn 2: [0, 0, 4], mean 4/3, deviations -4/3, -4/3, 8/3, variance (16 + 16 + 64) / 9 / 2 = 16/3
    s01, s2 = math.sqrt(7 / 3) + EPS, 4 / math.sqrt(3) + EPS
    expected = [[(5 / 3) / s01], [(-1 / 3) / s01, (5 / 3) / s01], [(-4 / 3) / s01, (-4 / 3) / s01, (8 / 3) / s2]]
    advantages = turnwise_advantages(THREE_GAMES, ["g"] * 3, max_turns=20)
    assert [len(a) for a in advantages] == [1, 2, 3]
    for got, want in zip(advantages, expected, strict=True):
        assert got == pytest.approx(want, rel=1e-12)


def test_turnwise_active_compares_only_running_games():
    # turn 0 as padded; turn 1: [2, -1], mean 0.5, deviations 1.5, -1.5, variance 4.5;
    # turn 2: game 2 alone -> 0
    s0, s1 = math.sqrt(7 / 3) + EPS, math.sqrt(4.5) + EPS
    expected = [[(5 / 3) / s0], [(-1 / 3) / s0, 1.5 / s1], [(-4 / 3) / s0, -1.5 / s1, 0.0]]
    advantages = turnwise_advantages(THREE_GAMES, ["g"] * 3, max_turns=3, mode="active")
    for got, want in zip(advantages, expected, strict=True):
        assert got == pytest.approx(want, rel=1e-12)


def test_turnwise_padding_pushes_a_lone_late_game_by_the_sign_of_its_reward():
    # 15 games won at turn 1, one lost game running to turn 3 with a small negative reward
    rewards = [[1.95]] * 15 + [[-0.15, -0.15, -0.15]]
    padded = turnwise_advantages(rewards, ["cat"] * 16, max_turns=20)
    active = turnwise_advantages(rewards, ["cat"] * 16, max_turns=20, mode="active")
    # one value r among 15 zeros: mean r / 16, Bessel std |r| / 4, so (15 / 16) r / (|r| / 4) = 3.75
    # times its sign, however small r is (up to the 1e-6 in the denominator)
    expected = -(0.15 * 15 / 16) / (0.15 / 4 + EPS)
    assert padded[-1][1:] == pytest.approx([expected, expected], rel=1e-12)
    assert expected == pytest.approx(-3.75, abs=1e-3)
    assert active[-1][1:] == [0.0, 0.0]


def test_turnwise_groups_are_independent():
    together = turnwise_advantages([*THREE_GAMES, [5.0, 5.0]], ["g", "g", "g", "lone"], max_turns=3)
    alone = turnwise_advantages(THREE_GAMES, ["g"] * 3, max_turns=3)
    assert together[:3] == alone
    assert together[3] == [0.0, 0.0]


def test_turnwise_rejects_bad_input():
    with pytest.raises(ValueError, match=r"mode must be one of \('padded', 'active'\), got 'zeros'"):
        turnwise_advantages(THREE_GAMES, ["g"] * 3, max_turns=3, mode="zeros")
    with pytest.raises(ValueError, match="game 2 has 3 turns, more than max_turns=2"):
        turnwise_advantages(THREE_GAMES, ["g"] * 3, max_turns=2)
    with pytest.raises(ValueError, match="rewards and groups must have the same length, got 3 and 2"):
        turnwise_advantages(THREE_GAMES, ["g"] * 2, max_turns=3)


# ---- the loss: decoupled clip, dual clip, per-sequence token mean --------------------------


def one_token_loss(ratio: float, advantage: float, **options) -> tuple[float, dict[str, float]]:
    """The loss of a single token with the given ratio pi / pi_old and advantage."""
    logp = torch.tensor([[math.log(ratio)]], dtype=torch.float64)
    loss, stats = policy_loss(
        logp, torch.zeros_like(logp), torch.tensor([advantage], dtype=torch.float64), torch.ones_like(logp),
        torch.ones(1, dtype=torch.float64), "ppo", clip=0.2, **options,
    )  # fmt: skip
    return float(loss), stats


@pytest.mark.parametrize(
    ("ratio", "advantage", "loss", "clipped", "dual_clipped"),
    [
        (1.1, 1.0, -1.1, 0.0, 0.0),  # inside [0.8, 1.28]
        (1.25, 1.0, -1.25, 0.0, 0.0),  # above symmetric 1.2 but below 1 + eps_high 1.28
        (1.5, 1.0, -1.28, 1.0, 0.0),  # clipped at 1.28
        (5.0, 2.0, -2.56, 1.0, 0.0),  # clipped at 1.28; dual clip never touches A > 0
        (0.5, 1.0, -0.5, 0.0, 0.0),  # A > 0 and the ratio fell: min(r A, 0.8 A) = r A, unclipped
        (0.7, -1.0, 0.8, 1.0, 0.0),  # A < 0 and the ratio fell below 0.8: clipped at 0.8
        (1.5, -1.0, 1.5, 0.0, 0.0),  # A < 0, ratio up: unclipped, 1.5 < c = 3
        (5.0, -1.0, 3.0, 0.0, 1.0),  # A < 0, ratio 5: the loss 5 is bounded by -c A = 3
        (4.0, -0.5, 1.5, 0.0, 1.0),  # 0.5 * 4 = 2 bounded by 3 * 0.5
    ],
)
def test_decoupled_and_dual_clip_by_hand(ratio, advantage, loss, clipped, dual_clipped):
    got, stats = one_token_loss(ratio, advantage, clip_high=0.28, dual_clip=3.0)
    assert got == pytest.approx(loss, rel=1e-12)
    assert stats == {"clip_fraction": clipped, "dual_clip_fraction": dual_clipped}


def test_symmetric_clip_is_the_default():
    assert one_token_loss(1.25, 1.0)[0] == pytest.approx(-1.2)
    assert one_token_loss(5.0, -1.0)[0] == pytest.approx(5.0)  # no dual clip: unbounded
    assert one_token_loss(5.0, -1.0)[1] == {"clip_fraction": 0.0}


def test_dual_clip_gradient():
    def gradient(ratio: float, advantage: float) -> float:
        logp = torch.tensor([[math.log(ratio)]], requires_grad=True)
        loss, _ = policy_loss(
            logp, torch.zeros(1, 1), torch.tensor([advantage]), torch.ones(1, 1), torch.ones(1), "ppo",
            clip_high=0.28, dual_clip=3.0,
        )  # fmt: skip
        loss.backward()
        return float(logp.grad)

    assert gradient(5.0, -1.0) == 0.0  # bounded: a constant
    assert gradient(1.5, -1.0) == pytest.approx(1.5)  # d(-A r)/d log pi = -A r


def test_defaults_reproduce_the_symmetric_loss_exactly():
    generator = torch.Generator().manual_seed(0)
    logp = -torch.rand(4, 6, generator=generator) * 3
    old = logp + (torch.rand(4, 6, generator=generator) - 0.5)
    adv = torch.tensor([1.5, -0.7, 0.0, -2.0])
    mask = (torch.rand(4, 6, generator=generator) > 0.3).float()
    ratio = torch.exp(logp - old)
    spiral = -torch.minimum(ratio * adv[:, None], ratio.clamp(0.8, 1.2) * adv[:, None])
    took_clip = (ratio * adv[:, None] > ratio.clamp(0.8, 1.2) * adv[:, None]).float()
    for how in ("dr_grpo", "token_mean"):
        coefficients = row_coefficients(mask.sum(1), how, 16)
        expected = aggregate(spiral, mask, coefficients)
        for options in ({}, {"clip_high": 0.2}):
            loss, stats = policy_loss(logp, old, adv, mask, coefficients, "ppo", 0.2, **options)
            assert torch.equal(loss, expected)
            assert stats == {"clip_fraction": float((took_clip * mask).sum() / mask.sum())}
    token_mean = row_coefficients(mask.sum(1), "token_mean", 1)
    loss, stats = policy_loss(logp, None, adv, mask, token_mean, "reinforce")
    assert torch.equal(loss, aggregate(-logp * adv[:, None], mask, token_mean))
    assert stats == {"clip_fraction": 0.0}


def test_seq_mean_token_mean_by_hand():
    assert "seq_mean_token_mean" in AGGREGATIONS
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0], [5.0, 6.0, 7.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    # sequence means 2 and 4; the empty third sequence does not count
    per_turn = row_coefficients(mask.sum(1), "seq_mean_token_mean", 1)
    assert float(aggregate(per_token, mask, per_turn)) == pytest.approx(3.0)
    none = torch.zeros_like(mask)
    assert float(aggregate(per_token, none, row_coefficients(none.sum(1), "seq_mean_token_mean", 1))) == 0.0
    # through the loss: REINFORCE with A = 1 gives -mean log pi per sequence
    logp = -per_token
    loss, _ = policy_loss(logp, None, torch.ones(3), mask, per_turn, "reinforce")
    assert float(loss) == pytest.approx(3.0)


def test_policy_loss_rejects_bad_options():
    logp, mask, one = torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1)
    with pytest.raises(ValueError, match=r"advantages must have shape \[batch\] \(one per turn\), got \(1, 2\)"):
        policy_loss(logp, logp, torch.ones(1, 2), mask, one)
    with pytest.raises(ValueError, match="dual_clip must be greater than 1, got 1.0"):
        policy_loss(logp, logp, torch.ones(1), mask, one, dual_clip=1.0)
    with pytest.raises(ValueError, match="clip_high must be positive, got 0.0"):
        policy_loss(logp, logp, torch.ones(1), mask, one, clip_high=0.0)
