"""Exact game-theoretic numbers for our games, computed on their rules layers."""

from spiral_arena.analysis.kuhn import KUHN_INFO_STATES, kuhn_exploitability, kuhn_policy_value
from spiral_arena.analysis.leduc import LEDUC_INFO_STATES, LEDUC_RANK_STATES, leduc_exploitability, leduc_policy_value
from spiral_arena.analysis.read_policy import (
    PlayedKuhnPolicy,
    kuhn_policy_from_samples,
    kuhn_policy_from_scores,
    leduc_policy_from_scores,
)

__all__ = [
    "KUHN_INFO_STATES",
    "LEDUC_INFO_STATES",
    "LEDUC_RANK_STATES",
    "PlayedKuhnPolicy",
    "kuhn_exploitability",
    "kuhn_policy_from_samples",
    "kuhn_policy_from_scores",
    "kuhn_policy_value",
    "leduc_exploitability",
    "leduc_policy_from_scores",
    "leduc_policy_value",
]
