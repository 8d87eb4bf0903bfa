"""spiral_arena: two-player text games for training and evaluating LLMs by self-play."""

from spiral_arena.integrations.text_env import make_text_env
from spiral_arena.registry import list_envs, make, make_parallel
from spiral_arena.wrappers.gym import make_gym

__all__ = ["list_envs", "make", "make_gym", "make_parallel", "make_text_env"]
__version__ = "0.1.0"
