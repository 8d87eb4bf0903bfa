"""Role-conditioned Advantage Estimation: one EMA baseline per (game, role), or per (actor, game, role).

SPIRAL's rule, exactly: the baseline starts at 0, is read *before* it is updated with the
game's return, and the advantage is the return minus that old value. Self-play games are not
symmetric (first movers win more), so one baseline per seat keeps each seat's signal centred.
``state_advantages`` is an optional refinement on top (``--state-baseline``): a per-observation
baseline from the step's own samples, for positions that recur often enough.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable


class RAE:
    def __init__(self, decay: float = 0.95) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"RAE decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.baselines: dict[str, float] = {}  # "game/role" -> b

    @staticmethod
    def key(game: str, role: int | str, actor: int | None = None) -> str:
        return f"{game}/{role}" if actor is None else f"shard{actor}/{game}/{role}"

    def advantage(self, game: str, role: int | str, ret: float, actor: int | None = None) -> float:
        """A = R - b_old, then b <- decay * b_old + (1 - decay) * R; ``actor``: whose baseline (SPIRAL keeps one
        per actor process; None = one for the whole run)."""
        k = self.key(game, role, actor)
        old = self.baselines.get(k, 0.0)
        self.baselines[k] = self.decay * old + (1.0 - self.decay) * ret
        return ret - old

    def state_dict(self) -> dict:
        return {"decay": self.decay, "baselines": dict(self.baselines)}

    def load_state_dict(self, state: dict) -> None:
        self.decay = state["decay"]
        self.baselines = dict(state["baselines"])


def state_advantages(keys: list[Hashable], returns: list[float], min_others: int) -> list[float | None]:
    """Each sample's return minus the mean return of the *other* samples with the same key (game,
    seat, observation), or None where fewer than ``min_others`` others share it (the caller keeps
    RAE's advantage there). Leaving the sample itself out keeps the baseline independent of its own
    action, so the estimate stays unbiased."""
    sums: dict[Hashable, float] = defaultdict(float)
    for key, ret in zip(keys, returns, strict=True):
        sums[key] += ret
    counts = Counter(keys)
    need = max(1, min_others)
    return [
        ret - (sums[key] - ret) / (counts[key] - 1) if counts[key] - 1 >= need else None
        for key, ret in zip(keys, returns, strict=True)
    ]
