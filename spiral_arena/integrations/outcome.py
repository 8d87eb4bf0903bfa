"""What a finished game tells a trainer, the same for every integration: each seat's return, the
outcome, who made an invalid move and why, and the rewards after our recipe's invalid-move shaping."""

from __future__ import annotations

from typing import Any

from spiral_arena.core.env import TextGameEnv

# Our recipe's shaping (trainers/config.py: invalid_penalty, invalid_opponent_reward), as defaults of the
# integrations' options. None as the penalty keeps the env's own zero-sum returns (-1 / +1).
RECIPE_INVALID_PENALTY = -1.5
RECIPE_INVALID_OPPONENT_REWARD = 0.5


def game_summary(env: TextGameEnv) -> dict[str, Any]:
    """A finished (or truncated) game as JSON-ready data: ``game`` (its id with options), ``returns``
    (the env's own, zero-sum in two-player games), ``outcome`` ({"winner", "reason"}), ``invalid_move``
    (the reason, or None) and ``offender`` (the seat that made it, or None)."""
    agents = env.possible_agents
    offender = next((i for i, a in enumerate(agents) if "invalid_move" in env.infos[a]), None)
    outcome = next((env.infos[a]["outcome"] for a in agents if "outcome" in env.infos[a]), None)
    return {
        "game": env.env_id,
        "returns": [float(r) for r in env.returns],
        "outcome": dict(outcome) if outcome is not None else None,
        "invalid_move": None if offender is None else env.infos[agents[offender]]["invalid_move"],
        "offender": offender,
    }


def shaped_rewards(
    summary: dict[str, Any],
    invalid_penalty: float | None = None,
    invalid_opponent_reward: float = RECIPE_INVALID_OPPONENT_REWARD,
) -> list[float]:
    """Each seat's training reward: the env's returns, except that with ``invalid_penalty`` set, a game
    ended by an invalid move pays the offender ``invalid_penalty`` and every other seat
    ``invalid_opponent_reward`` (what our trainer does). A truncated game pays what the env paid."""
    returns = list(summary["returns"])
    offender = summary["offender"]
    if invalid_penalty is None or offender is None:
        return returns
    return [invalid_penalty if i == offender else invalid_opponent_reward for i in range(len(returns))]
