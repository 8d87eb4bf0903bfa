"""The policy read off its answer log-probs, exactly, at every position that matters: Kuhn Poker's 12 single-hand
information states and Leduc Hold'em's 288 (exploitability, ``spiral_arena.analysis``), and TicTacToe's
positions with a win to take or a threat to block. Each answer's probability is normalised over the legal
answers; the mass on anything else is reported as the invalid mass."""

from __future__ import annotations

from spiral_arena.analysis import (
    kuhn_exploitability,
    kuhn_policy_from_scores,
    leduc_exploitability,
    leduc_policy_from_scores,
)
from spiral_arena.analysis.tictactoe import tactics_from_scores
from spiral_arena.models.policy import Policy
from spiral_arena.models.scoring import answer_scorer


def kuhn_metrics(
    model, policy: Policy, obs_format: str = "", temperature: float = 1.0, game: str = "KuhnPoker-v0"
) -> dict[str, float]:
    """Exact exploitability of the single-hand policy read off the model at temperature 1
    (``eval/kuhn_exploitability``; ours: SPIRAL reports win rates only, no exploitability) and, when it
    differs, at ``temperature``, the way the evaluation samples it (``eval/kuhn_exploitability_at_eval_t``,
    what an ``hf:`` agent of the checkpoint plays and the leaderboard reads), on the text of ``game`` (the
    Kuhn the run trains)."""
    probs, invalid_mass = kuhn_policy_from_scores(answer_scorer(model, policy), obs_format, game)
    out = {"eval/kuhn_exploitability": kuhn_exploitability(probs), "eval/kuhn_invalid_mass": invalid_mass}
    out.update({f"eval/kuhn_p_bet/{k}": v for k, v in probs.items()})
    if temperature != 1.0:
        sampled, _ = kuhn_policy_from_scores(answer_scorer(model, policy, temperature), obs_format, game)
        out["eval/kuhn_exploitability_at_eval_t"] = kuhn_exploitability(sampled)
    return out


def leduc_metrics(
    model, policy: Policy, obs_format: str = "", temperature: float = 1.0, game: str = "LeducHoldem-v0"
) -> dict[str, float]:
    """Exact exploitability of the Leduc Hold'em policy read off the model at its 288 rank information
    states, at temperature 1 (``eval/leduc_exploitability``) and, when it differs, at ``temperature``
    (``eval/leduc_exploitability_at_eval_t``, what an ``hf:`` agent of the checkpoint plays and the
    leaderboard reads), on the text of ``game`` (the Leduc the run trains). Uniform play: 2.37 chips a hand."""
    probs, invalid_mass = leduc_policy_from_scores(answer_scorer(model, policy), obs_format, game)
    out = {"eval/leduc_exploitability": leduc_exploitability(probs), "eval/leduc_invalid_mass": invalid_mass}
    if temperature != 1.0:
        sampled, _ = leduc_policy_from_scores(answer_scorer(model, policy, temperature), obs_format, game)
        out["eval/leduc_exploitability_at_eval_t"] = leduc_exploitability(sampled)
    return out


def tictactoe_metrics(
    model, policy: Policy, obs_format: str = "", temperature: float = 1.0, game: str = "TicTacToe-v0"
) -> dict[str, float]:
    """Whether the policy reads the board: the probability that it takes an available win, and that it
    blocks the opponent's single threat, exactly over every position where one applies, sampled as the
    evaluation samples (``temperature``), on the text of ``game`` (its board layout); plus the probability
    mass it puts on invalid answers there."""
    tactics = tactics_from_scores(answer_scorer(model, policy, temperature), obs_format, game=game)
    return {f"eval/ttt_{name}": tactics[name] for name in ("takes_win", "blocks", "invalid_mass")}
