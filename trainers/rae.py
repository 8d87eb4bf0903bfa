"""Role-conditioned Advantage Estimation: one EMA baseline per (game, role).

SPIRAL's rule, exactly: the baseline starts at 0, is read *before* it is updated with the
game's return, and the advantage is the return minus that old value. Self-play games are not
symmetric (first movers win more), so one baseline per seat keeps each seat's signal centred.
"""

from __future__ import annotations


class RAE:
    def __init__(self, decay: float = 0.95) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"RAE decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.baselines: dict[str, float] = {}  # "game/role" -> b

    @staticmethod
    def key(game: str, role: int | str) -> str:
        return f"{game}/{role}"

    def advantage(self, game: str, role: int | str, ret: float) -> float:
        """A = R - b_old, then b <- decay * b_old + (1 - decay) * R."""
        k = self.key(game, role)
        old = self.baselines.get(k, 0.0)
        self.baselines[k] = self.decay * old + (1.0 - self.decay) * ret
        return ret - old

    def state_dict(self) -> dict:
        return {"decay": self.decay, "baselines": dict(self.baselines)}

    def load_state_dict(self, state: dict) -> None:
        self.decay = state["decay"]
        self.baselines = dict(state["baselines"])
