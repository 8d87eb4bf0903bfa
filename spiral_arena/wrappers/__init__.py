"""Other ways to hold a game: Gymnasium with the opponent inside, the TextArena-style loop."""

from spiral_arena.wrappers.gym import OpponentEnv, make_gym
from spiral_arena.wrappers.textarena import TextArenaCompat

__all__ = ["OpponentEnv", "TextArenaCompat", "make_gym"]
