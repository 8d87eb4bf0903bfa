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
    def p_bet(probs: dict[str, float]) -> dict[str, float]:
        return {f"eval/kuhn_p_bet/{k}": v for k, v in probs.items()}

    read = (kuhn_policy_from_scores, kuhn_exploitability)
    return exact_metrics("kuhn", read, model, policy, obs_format, temperature, game, p_bet)


def leduc_metrics(
    model, policy: Policy, obs_format: str = "", temperature: float = 1.0, game: str = "LeducHoldem-v0"
) -> dict[str, float]:
    """Exact exploitability of the Leduc Hold'em policy read off the model at its 288 rank information
    states, at temperature 1 (``eval/leduc_exploitability``) and, when it differs, at ``temperature``
    (``eval/leduc_exploitability_at_eval_t``, what an ``hf:`` agent of the checkpoint plays and the
    leaderboard reads), on the text of ``game`` (the Leduc the run trains). Uniform play: 2.37 chips a hand."""
    read = (leduc_policy_from_scores, leduc_exploitability)
    return exact_metrics("leduc", read, model, policy, obs_format, temperature, game)


def exact_metrics(
    family: str, read, model, policy: Policy, obs_format: str, temperature: float, game: str, extra=None
) -> dict[str, float]:
    """A poker policy's exact numbers: ``read`` = (its policy from answer scores, that policy's
    exploitability), at temperature 1 and, when it differs, at ``temperature``; ``extra(policy)``: more of
    the temperature-1 policy's numbers."""
    from_scores, exploitability = read
    probs, invalid_mass = from_scores(answer_scorer(model, policy), obs_format, game)
    out = {f"eval/{family}_exploitability": exploitability(probs), f"eval/{family}_invalid_mass": invalid_mass}
    out.update(extra(probs) if extra is not None else {})
    if temperature != 1.0:
        sampled, _ = from_scores(answer_scorer(model, policy, temperature), obs_format, game)
        out[f"eval/{family}_exploitability_at_eval_t"] = exploitability(sampled)
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
