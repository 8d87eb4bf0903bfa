"""One seat of a game, the opponent inside: the single-seat text-env shape that OpenEnv, GEM, SkyRL-gym
and TRL's ``environment_factory`` loops share.

``make_text_env(env_id, seat=0, opponent="random")`` is ``spiral_arena.make_gym`` (the Gymnasium
``OpponentEnv``: ``reset(seed=...) -> (observation, info)``, ``step(text) -> (observation, reward,
terminated, truncated, info)``), with the opponent left out for one-player games (Twenty Questions). The
reward of a step is what the seat received since its previous action; the final info holds ``outcome``
and, after an invalid answer, ``invalid_move``. ``new_messages`` gives what the game told the seat since
a given point, for chat loops that keep the history themselves.

Shims: ``GemEnv`` (GEM's ``gem.Env`` shape, registered with ``register_gem``) and ``SkyRLTextEnv``
(SkyRL-gym's ``BaseTextEnv``: ``init(prompt)``, ``step(text) -> {observations, reward, done, metadata}``)
wrap the same object; each imports its library only when built.
"""

from __future__ import annotations

from typing import Any

from spiral_arena.agents import Agent
from spiral_arena.registry import GameSpec
from spiral_arena.wrappers.gym import OpponentEnv, seated


def make_text_env(env_id: str, seat: int = 0, opponent: str | Agent | None = "random", **options: Any) -> OpponentEnv:
    """``env_id`` (options included) played from ``seat``, ``opponent`` (an agent or spec) in the other
    seat; one-player games take no opponent. ``options`` go to ``make`` (``obs_format``, game options)."""
    solo = GameSpec.parse(env_id).players == 1
    return OpponentEnv(*seated(env_id, None if solo else opponent, seat, **options), seat=seat)


def new_messages(text_env: OpponentEnv, since: int) -> tuple[str, int]:
    """The messages the game sent the seat from message ``since`` on, joined as one text, and the count
    to pass next time (``since=0`` gives everything, the rules first)."""
    lines = text_env.env.log.lines[text_env.env.possible_agents.index(text_env.learner)]
    return "\n\n".join(lines[since:]), len(lines)


def is_over(text_env: OpponentEnv) -> bool:
    env = text_env.env
    return env.terminations[text_env.learner] or env.truncations[text_env.learner]


class GemEnv:
    """GEM's env shape over ``make_text_env``: ``reset(seed) -> (observation, info)`` and ``step(action)
    -> (observation, reward, terminated, truncated, info)``; ``register_gem`` makes ``gem.make`` build it."""

    def __init__(self, game: str = "KuhnPoker-v0", seat: int = 0, opponent: str | None = "random", **options: Any):
        # ``game``, not ``env_id``: gem.make sets ``env.env_id`` to the id it was registered under
        self.text_env = make_text_env(game, seat=seat, opponent=opponent, **options)

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return self.text_env.reset(seed=seed)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.text_env.step(action)

    def sample_random_action(self) -> str:
        """A legal move where the game lists them (GEM's envs offer one)."""
        legal = self.text_env.env.infos[self.text_env.learner].get("legal_actions") or []
        return legal[int(self.text_env.np_random.integers(len(legal)))] if legal else ""


def register_gem(env_id: str, gem_id: str | None = None, **kwargs: Any) -> str:
    """Register ``env_id`` with GEM as ``spiral_arena:<env_id>`` (or ``gem_id``), so ``gem.make(gem_id)``
    returns a ``GemEnv``; ``kwargs`` (seat, opponent, options) become its defaults. Returns the id."""
    import gem

    name = gem_id or f"spiral_arena:{env_id}"
    gem.register(name, entry_point=f"{__name__}:GemEnv", game=env_id, **kwargs)
    return name


def skyrl_env_class() -> type:
    """SkyRL-gym's ``BaseTextEnv`` subclass over ``make_text_env`` (built on call, so SkyRL is imported
    only here). Its ``extras`` are ``env_id``, ``seat``, ``opponent`` and ``seed``."""
    from skyrl_gym.envs.base_text_env import BaseTextEnv

    class SkyRLTextEnv(BaseTextEnv):
        def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
            super().__init__()
            extras = dict(extras or {})
            self.seed = extras.pop("seed", None)
            self.text_env = make_text_env(extras.pop("env_id", "KuhnPoker-v0"), **extras)

        def init(self, prompt: Any) -> tuple[Any, dict[str, Any]]:
            observation, info = self.text_env.reset(seed=self.seed)
            return [*(prompt or []), {"role": "user", "content": observation}], info

        def step(self, action: str) -> dict[str, Any]:
            self.turns += 1
            observation, reward, terminated, truncated, info = self.text_env.step(action)
            done = terminated or truncated
            return {
                "observations": [] if done else [{"role": "user", "content": observation}],
                "reward": reward,
                "done": done,
                "metadata": info,
            }

    return SkyRLTextEnv
