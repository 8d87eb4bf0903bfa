"""TextGameEnv: one game's rules + its text + the action parser, as a PettingZoo AEC env."""

from __future__ import annotations

import functools
from typing import Any

import gymnasium
import numpy as np
from pettingzoo import AECEnv

from spiral_arena.core.actions import InvalidMove
from spiral_arena.core.game import TextGame
from spiral_arena.core.observations import CHARSET, OBS_FORMATS, MessageLog, sanitize

INVALID_MOVE_MODES = ("lose", "retry")
_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    """A 64-bit mixing function: nearby seeds map to unrelated generator states."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


MAX_OBSERVATION_CHARS = 1_000_000
MAX_ACTION_CHARS = 4096  # bound of the action space's samples; step() accepts longer text


class TextGameEnv(AECEnv):
    """A two-player (or one-learner) text game.

    Observations are strings; actions are raw model text (reasoning allowed, the last
    ``\\boxed{}`` or bracketed token is the move). ``infos[agent]["legal_actions"]`` lists the
    legal bracketed actions when the game has finitely many, so agents never parse prose.

    ``invalid_move="lose"`` (default): an invalid answer ends the game, offender -1, other +1.
    ``invalid_move="retry"``: the offender is told why and must answer again (human play).
    """

    metadata = {"render_modes": ["ansi", "human"], "is_parallelizable": True, "render_fps": 1}

    def __init__(
        self,
        game: TextGame,
        env_id: str,
        obs_format: str | None = None,
        invalid_move: str = "lose",
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        obs_format = obs_format or game.default_obs_format
        if obs_format not in OBS_FORMATS:
            raise ValueError(f"obs_format={obs_format!r} is not one of {OBS_FORMATS}")
        if invalid_move not in INVALID_MOVE_MODES:
            raise ValueError(f"invalid_move={invalid_move!r} is not one of {INVALID_MOVE_MODES}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode={render_mode!r} is not one of {self.metadata['render_modes']}")
        self.game = game
        self.env_id = env_id
        self.obs_format = obs_format
        self.invalid_move = invalid_move
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "name": env_id, "nondeterministic": not game.deterministic}
        self.possible_agents = list(game.agents)
        self._seat = {a: i for i, a in enumerate(game.agents)}
        self._prompts = [game.prompt(p) for p in range(len(game.agents))]  # fixed per game options
        self._names = [a.replace("_", " ").capitalize() for a in game.agents]  # "Player 0"
        self.state_: Any = None
        self._bit_generator: np.random.PCG64 | None = None

    # -- PettingZoo API -------------------------------------------------------------------

    # Built on first use and then always the same objects (PettingZoo checks identity): a Text
    # space over the printable charset costs more to build than a whole game, and trainers that
    # make many envs never ask for one.
    @functools.cached_property
    def observation_spaces(self) -> dict[str, gymnasium.spaces.Text]:
        return {a: gymnasium.spaces.Text(MAX_OBSERVATION_CHARS, charset=CHARSET) for a in self.possible_agents}

    @functools.cached_property
    def action_spaces(self) -> dict[str, gymnasium.spaces.Text]:
        return {a: gymnasium.spaces.Text(MAX_ACTION_CHARS, charset=CHARSET) for a in self.possible_agents}

    def observation_space(self, agent: str) -> gymnasium.spaces.Text:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.spaces.Text:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        # Games without chance skip the Generator: creating one costs as much as a whole move.
        self.rng = self._generator(seed) if self.game.has_chance else None
        self.state_ = self.game.new_state(self.rng)
        n = len(self.possible_agents)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {} for a in self.agents}
        self._returns = (0.0,) * n
        self.log = MessageLog(self._prompts, self.obs_format)
        for to, text in self.game.start_messages(self.state_):
            self._post(to, "GAME", text)
        self._after_move()

    def _generator(self, seed: int | None) -> np.random.Generator:
        """A Generator determined by ``seed`` (fresh entropy for None).

        Building ``default_rng(seed)`` costs several times a whole Kuhn round, so the env keeps
        one PCG64 and re-seeds it in place: state and stream increment are two splitmix64 mixes
        of the seed, so different seeds get different streams.
        """
        if seed is None:
            return np.random.default_rng()
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
        if self._bit_generator is None:
            self._bit_generator = np.random.PCG64(0)
            self._rng = np.random.Generator(self._bit_generator)
        seed = int(seed) & _MASK64
        self._bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {
                "state": _splitmix64(seed) << 64 | _splitmix64(seed ^ 0x5851F42D4C957F2D),
                "inc": (_splitmix64(seed ^ 0x14057B7EF767814F) << 1) | 1,
            },
            "has_uint32": 0,
            "uinteger": 0,
        }
        return self._rng

    def observe(self, agent: str) -> str:
        return self.log.observation(self._seat[agent])

    def step(self, action: Any) -> None:
        if not self.agents:
            raise RuntimeError("the game is over and every agent has stepped out; call reset()")
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        if not isinstance(action, str):
            raise TypeError(
                f"{agent} must act with a str (raw model text), got {type(action).__name__}"
                + (" (None is only for agents whose game is over)" if action is None else "")
            )
        state = self.state_
        player = state.current_player
        self._cumulative_rewards[agent] = 0.0
        try:
            move = self.game.parse(state, action)
        except InvalidMove as invalid:
            self._on_invalid(player, invalid.reason)
            return
        state.apply(move)
        for to, text in self.game.move_messages(state, player, move):
            self._post(to, "GAME", text)
        self._after_move()

    def render(self) -> str | None:
        if self.render_mode is None:
            gymnasium.logger.warn("render() called without a render_mode; pass render_mode='ansi'")
            return None
        text = self.game.render(self.state_)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        pass

    # -- helpers --------------------------------------------------------------------------

    @property
    def returns(self) -> tuple[float, ...]:
        """Total reward of each player since reset (the final result once the game is over)."""
        return self._returns

    def check_action(self, text: str) -> str | None:
        """Why ``text`` would be an invalid move for the player to act now, or None if it is fine."""
        try:
            self.game.parse(self.state_, text)
        except InvalidMove as invalid:
            return invalid.reason
        return None

    def _post(self, to: int | None, sender: str, text: str) -> None:
        line = f"[{sender}] {text}"
        if to is None:
            for lines in self.log.lines:
                lines.append(line)
        else:
            self.log.lines[to].append(line)

    def _after_move(self) -> None:
        """Rewards, infos and whose turn it is, after reset or a legal move."""
        state, game, agents = self.state_, self.game, self.possible_agents
        if state.is_terminal():
            self._finish(state.returns())
            return
        if game.step_rewards:
            self._set_rewards(state.returns())
        elif any(self.rewards.values()):
            self.rewards = dict.fromkeys(agents, 0.0)
        player = state.current_player
        legal = game.legal_action_strings(state)
        info: dict[str, Any] = {"game": game.name, "legal_actions": legal, "view": game.player_view(state, player)}
        if legal is None:
            info["action_format"] = action_line = game.action_format(state)
            info["action_examples"] = game.action_examples(state)
        else:
            action_line = f"Legal actions: {', '.join(legal)}."
        if game.roles:
            info["role"] = game.roles[player]
        info.update(game.step_info(state))
        for i, agent in enumerate(agents):
            self.infos[agent] = info if i == player else self._waiting_info(i, legal is None)
        # The position comes last, right before the answer: small models use private information
        # (the card, the board) far better when it is the last thing they read.
        self.log.lines[player].append(f"[GAME] Your turn. {action_line}\n{game.turn_message(state, player)}")
        self.agent_selection = agents[player]

    def _waiting_info(self, player: int, free_text: bool) -> dict[str, Any]:
        """The info of a player who is not to act: nothing is legal for it now."""
        info: dict[str, Any] = {"game": self.game.name, "legal_actions": None if free_text else [], "view": {}}
        if self.game.roles:
            info["role"] = self.game.roles[player]
        return info

    def _set_rewards(self, returns: tuple[float, ...]) -> None:
        previous, self._returns = self._returns, returns
        self.rewards = {a: float(returns[i] - previous[i]) for i, a in enumerate(self.possible_agents)}
        for a, r in self.rewards.items():
            self._cumulative_rewards[a] += r

    def _finish(self, returns: tuple[float, ...], extra: dict[str, Any] | None = None) -> None:
        agents = self.possible_agents
        self._set_rewards(returns)
        self.terminations = dict.fromkeys(agents, True)
        for i, agent in enumerate(agents):
            info = self._waiting_info(i, free_text=False)  # nothing is legal for anyone any more
            info.update(self.game.step_info(self.state_))
            info.update(extra or {})
            self.infos[agent] = info
        reason = self.game.outcome_reason(self.state_) if extra is None else ""
        summary = ", ".join(f"{self._names[i]} {returns[i]:+g}" for i in range(len(agents)))
        self._post(None, "GAME", f"Game over. {reason}{' ' if reason else ''}Rewards: {summary}.")
        # Everyone still holds a (final) observation; agents step out with step(None).
        current = self.state_.current_player
        self.agent_selection = agents[(current + 1) % len(agents)] if current >= 0 else agents[0]

    def _on_invalid(self, player: int, reason: str) -> None:
        reason = sanitize(reason)  # reasons may quote player text; observations must stay in the space
        agents = self.possible_agents
        offender = agents[player]
        if self.invalid_move == "retry":
            self.rewards = dict.fromkeys(agents, 0.0)
            self.infos[offender] = {**self.infos[offender], "invalid_move": reason}
            self._post(player, "GAME", f"Invalid move: {reason}. Try again.")
            return
        returns = tuple(-1.0 if i == player else 1.0 for i in range(len(agents)))
        self._post(None, "GAME", f"{self._names[player]} made an invalid move: {reason}")
        self._finish(returns, {"offender": offender})
        self.infos[offender]["invalid_move"] = reason
        self.agent_selection = offender
