"""spiral-arena's two-player games under their Hub id: ``--env.taskset.id spiral-arena-games``."""

from spiral_arena.integrations.verifiers import GameEnv, GameTaskset

__all__ = ["GameEnv", "GameTaskset"]
