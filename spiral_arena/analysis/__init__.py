"""Exact game-theoretic numbers for our games, computed on their rules layers."""

from spiral_arena.analysis.kuhn import KUHN_INFO_STATES, kuhn_exploitability, kuhn_policy_value
from spiral_arena.analysis.read_policy import PlayedKuhnPolicy, kuhn_policy_from_samples, kuhn_policy_from_scores

__all__ = [
    "KUHN_INFO_STATES",
    "PlayedKuhnPolicy",
    "kuhn_exploitability",
    "kuhn_policy_from_samples",
    "kuhn_policy_from_scores",
    "kuhn_policy_value",
]
