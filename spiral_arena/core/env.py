"""TextGameEnv: one game's rules + its text + the action parser, as a PettingZoo AEC env.

What every env promises beyond PettingZoo's API:

- **Seeds.** ``reset(seed=...)`` takes None (fresh entropy) or an integer in [0, 2**64): a Python
  ``int`` or a numpy integer. Anything else raises before the env changes: ``TypeError`` for another
  type (``"7"``, ``1.5``, and also ``True``: a bool is almost always a flag passed by mistake),
  ``ValueError`` for an integer out of range (``-1`` and ``2**64`` would otherwise alias other seeds).
  The rule is ``check_seed``, applied to every game, with or without chance.
- **Order.** Before the first ``reset()``, ``step``, ``observe``, ``last``, ``agent_iter``,
  ``render``, ``check_action``, ``truncate``, ``returns`` and the per-game attributes (``agents``,
  ``agent_selection``, ``rewards``, ``infos``, ...) raise ``ResetNeededError``.
- **Outcome.** When a game ends, every agent's info holds ``outcome = {"winner": <agent name or None
  for a draw>, "reason": "normal" | "invalid_move" | "truncation"}``. ``"normal"``: the rules ended it
  (turn and round caps of the rules included); ``"invalid_move"``: an invalid answer under
  ``invalid_move="lose"`` (the offender loses; two offenders at once draw); ``"truncation"``:
  ``truncate()`` stopped it early (no winner). The winner of a two-player game is the agent with the
  higher return. The one-player Twenty Questions has no opponent: its winner is the questioner when it
  found the secret, else None (its returns cannot tell, so the game says it through ``winner(state)``).
- **Views.** Players may read one match in different texts: ``views`` gives each seat its own text game
  (the same rules, other ``text_options``, e.g. TicTacToe's board layout) and ``obs_formats`` its own
  observation format. The rules, moves, parsing, rewards and infos are the match's; only what each player
  is told differs (``registry.make(..., seat_text=...)`` builds them).
- **Infos on read.** A step builds no info; ``last()`` and ``env.infos`` build them when read, with
  the content the step would have given them. A dict kept from an earlier read of ``env.infos`` is
  filled in for a new turn only when ``env.infos`` is read again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import gymnasium
import numpy as np
from pettingzoo import AECEnv

from spiral_arena.core.actions import InvalidMove
from spiral_arena.core.game import Message, TextGame
from spiral_arena.core.observations import CHARSET, OBS_FORMATS, MessageLog

INVALID_MOVE_MODES = ("lose", "retry")
OUTCOME_REASONS = ("normal", "invalid_move", "truncation")
SEED_LIMIT = 1 << 64  # seeds are integers in [0, SEED_LIMIT)
_MASK64 = SEED_LIMIT - 1
# Attributes that exist only once a game is under way (PettingZoo's OrderEnforcingWrapper guards
# the same ones). ``num_agents`` and ``returns`` are properties that read them: an AttributeError
# raised inside a property sends Python to ``__getattr__`` with the property's name.
_GAME_ATTRIBUTES = frozenset(
    {"agents", "num_agents", "agent_selection", "rewards", "terminations", "truncations", "infos"}
    | {"_cumulative_rewards", "log", "rng", "returns"}
)


class ResetNeededError(RuntimeError, AttributeError):
    """The env was used before its first ``reset()``.

    A RuntimeError because the call order is wrong; also an AttributeError, so ``hasattr(env,
    "agents")`` stays False before reset, as PettingZoo's own tools expect.
    """


def check_seed(seed: Any) -> int | None:
    """``seed`` as an int, or None; the one seed rule of every env (see the module docstring)."""
    if type(seed) is int and 0 <= seed < SEED_LIMIT:  # the usual case, first: reset() runs every game
        return seed
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be None or an integer in [0, 2**64), got {seed!r} ({type(seed).__name__})")
    if not 0 <= int(seed) < SEED_LIMIT:
        raise ValueError(f"seed must be None or an integer in [0, 2**64), got {int(seed)}")
    return int(seed)


def _splitmix64(x: int) -> int:
    """A 64-bit mixing function: nearby seeds map to unrelated generator states."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _rewards_text(names: tuple[str, ...], returns: tuple[float, ...]) -> str:
    """The end-of-game summary ("Player 0 +1, Player 1 -1"): formatted once per distinct result, except
    results with a zero (a cache cannot tell 0.0 from -0.0, which print as +0 and -0)."""
    return _format_rewards(names, returns) if 0.0 in returns else _cached_rewards_text(names, returns)


def _format_rewards(names: tuple[str, ...], returns: tuple[float, ...]) -> str:
    return ", ".join([f"{name} {r:+g}" for name, r in zip(names, returns, strict=True)])


_cached_rewards_text = functools.lru_cache(maxsize=1024)(_format_rewards)


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
        views: Sequence[TextGame] | None = None,
        obs_formats: Sequence[str | None] | None = None,
    ) -> None:
        """``views``: each seat's text game (same rules, own text options), None = the match's ``game`` for
        every seat; ``obs_formats``: each seat's observation format, a None or empty one = ``obs_format``."""
        super().__init__()
        obs_format = obs_format or game.default_obs_format
        seats = len(game.agents)
        formats = tuple(f or obs_format for f in (obs_formats or ())) or (obs_format,) * seats
        for form in {obs_format, *formats}:
            if form not in OBS_FORMATS:
                raise ValueError(f"obs_format={form!r} is not one of {OBS_FORMATS}")
        for given, name in ((views, "views"), (obs_formats, "obs_formats")):
            if given is not None and len(given) != seats:
                raise ValueError(f"{name} needs one entry per seat ({seats}), got {len(given)}")
        if invalid_move not in INVALID_MOVE_MODES:
            raise ValueError(f"invalid_move={invalid_move!r} is not one of {INVALID_MOVE_MODES}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode={render_mode!r} is not one of {self.metadata['render_modes']}")
        self.game = game
        self.env_id = env_id
        self.obs_format = obs_format
        self.obs_formats = formats
        # None while every seat reads the match's own text (the usual case, and the fast path of every move)
        self._views = tuple(views) if views is not None and any(v is not game for v in views) else None
        self.invalid_move = invalid_move
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "name": env_id, "nondeterministic": not game.deterministic}
        self.possible_agents = list(game.agents)
        self._seat = {a: i for i, a in enumerate(game.agents)}
        self._prompts = [self.view(p).prompt(p) for p in range(seats)]  # fixed per game options
        self._names = tuple(a.replace("_", " ").capitalize() for a in game.agents)  # "Player 0"
        self.state_: Any = None  # None until the first reset()
        # the turn whose infos wait for their first read (``_render_infos``): (player, legal strings, action
        # line, the acting player's info once built)
        self._unrendered: tuple[int, list[str] | None, str, dict[str, Any] | None] | None = None
        self._step_info = type(game).step_info is not TextGame.step_info  # skip the call where it adds nothing
        self._bit_generator: np.random.PCG64 | None = None

    def __getattr__(self, name: str) -> Any:
        """Only reached for attributes that do not exist: explain the ones reset() creates."""
        if name in _GAME_ATTRIBUTES and self.__dict__.get("state_") is None:
            raise ResetNeededError(f"{self.__dict__.get('env_id', 'this env')}: call reset() before reading {name}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _require_reset(self, what: str) -> None:
        if self.state_ is None:
            raise ResetNeededError(f"{self.env_id}: call reset() before {what}()")

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
        seed = check_seed(seed)  # also in games without chance: one rule for every env
        # Games without chance skip the Generator: creating one costs as much as a whole move.
        self.rng = self._generator(seed) if self.game.has_chance else None
        self.state_ = self.game.new_state(self.rng)
        n = len(self.possible_agents)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self._infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self._returns = (0.0,) * n
        self.log = MessageLog(self._prompts, self.obs_formats)
        state = self.state_
        self._tell(lambda game: game.start_messages(state))
        self._after_move()

    def _generator(self, seed: int | None) -> np.random.Generator:
        """A Generator determined by ``seed`` (fresh entropy for None).

        Building ``default_rng(seed)`` costs several times a whole Kuhn round, so the env keeps
        one PCG64 and re-seeds it in place: state and stream increment are two splitmix64 mixes
        of the seed, so different seeds get different streams.
        """
        if seed is None:
            return np.random.default_rng()
        if self._bit_generator is None:
            self._bit_generator = np.random.PCG64(0)
            self._rng = np.random.Generator(self._bit_generator)
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
        if self.state_ is None:
            self._require_reset("observe")
        return self.log.observation(self._seat[agent])

    def last(self, observe: bool = True) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        # PettingZoo's ``last``, spelled out: it runs before every move, so each call it saves counts
        if self.state_ is None:
            self._require_reset("last")
        agent = self.agent_selection
        return (
            self.observe(agent) if observe else None,
            self._cumulative_rewards[agent],
            self.terminations[agent],
            self.truncations[agent],
            self._infos[agent] if self._unrendered is None else self._acting_info(),
        )

    def agent_iter(self, max_iter: int = 2**63) -> Iterator[str]:
        """PettingZoo's ``agent_iter``: the agent to act, until every agent has stepped out or ``max_iter``
        turns have passed; a generator, which resumes faster than PettingZoo's iterator class."""
        self._require_reset("agent_iter")
        return self._agents_in_turn(max_iter)

    def _agents_in_turn(self, max_iter: int) -> Iterator[str]:
        while self.agents and max_iter > 0:
            max_iter -= 1
            yield self.agent_selection

    def step(self, action: Any) -> None:
        if self.state_ is None:
            self._require_reset("step")
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
        self._unrendered = None  # the state moves on: infos nobody read are never built
        state.apply(move)
        if self._views is None:
            self.log.post_all(self.game.move_messages(state, player, move))
        else:
            self._tell(lambda game: game.move_messages(state, player, move))
        self._after_move()

    def render(self) -> str | None:
        if self.render_mode is None:
            gymnasium.logger.warn("render() called without a render_mode; pass render_mode='ansi'")
            return None
        self._require_reset("render")
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
        self._require_reset("check_action")
        try:
            self.game.parse(self.state_, text)
        except InvalidMove as invalid:
            return invalid.reason
        return None

    def view(self, player: int) -> TextGame:
        """The text game ``player`` reads the match in: its own view, or the match's game."""
        return self.game if self._views is None else self._views[player]

    def _tell(self, messages: Callable[[TextGame], Iterable[Message]]) -> None:
        """Post the messages ``messages(game)`` writes: the match's, or each seat those of its own view."""
        if self._views is None:
            self.log.post_all(messages(self.game))
            return
        written: dict[int, list[Message]] = {}
        for seat, view in enumerate(self._views):
            if id(view) not in written:
                written[id(view)] = list(messages(view))
            self.log.post_own(seat, written[id(view)])

    def _after_move(self) -> None:
        """Rewards, whose turn it is and its message, after reset or a legal move; the turn's infos
        wait for their first read (``_render_infos``)."""
        state = self.state_
        if state.is_terminal():
            self._finish(state.returns())
            return
        if self.game.step_rewards:
            self._set_rewards(state.returns())
        player = state.current_player
        game = self.game if self._views is None else self._views[player]
        legal = game.legal_action_strings(state)
        action_line = game.action_format(state) if legal is None else f"Legal actions: {', '.join(legal)}."
        # The position comes last, right before the answer: small models use private information
        # (the card, the board) far better when it is the last thing they read. (A log.post line, built
        # in one piece: this runs every move.)
        self.log.lines[player].append(f"[GAME] Your turn. {action_line}\n{game.turn_message(state, player)}")
        self._unrendered = (player, legal, action_line, None)
        self.agent_selection = self.possible_agents[player]

    @property
    def infos(self) -> dict[str, dict[str, Any]]:
        """Each agent's info (PettingZoo's ``infos``), completed on read: read it from the env after a step."""
        if self._unrendered is not None:
            self._render_infos()
        return self._infos

    def _render_infos(self) -> None:
        """Build every agent's info for the turn that waits for its first read, if one waits.

        Infos are built when read (``infos``, ``last()``), not by every ``step()``: most callers read the
        info of the player to act and no other, or none at all, and the player view, the game's step info
        and the waiting players' infos were most of what a step built. ``last()`` builds the acting
        player's alone (``_acting_info``); this adds the others. Built later, they are the same: a move
        drops a turn nobody read before the state changes, and only ``step()`` changes it (Snake's
        parallel env, which applies moves itself, calls this first). While a turn waits,
        ``agent_selection`` is its player. Messages are not deferred: each is history (``full``
        observations, ``log.lines``) that shows the state of its moment; ``observe()`` only joins them.
        """
        if self._unrendered is None:
            return
        info = self._acting_info()
        player, legal = self._unrendered[:2]
        self._unrendered = None
        for i, agent in enumerate(self.possible_agents):
            self._infos[agent] = info if i == player else self._waiting_info(i, legal is None)

    def _acting_info(self) -> dict[str, Any]:
        """The info of the player to act in the waiting turn, built once (see ``_render_infos``)."""
        player, legal, action_line, info = self._unrendered
        if info is None:
            state, game = self.state_, self.game
            info = {"game": game.name, "legal_actions": legal, "view": game.player_view(state, player)}
            if legal is None:
                info["action_format"] = action_line
                info["action_examples"] = game.action_examples(state)
            if game.roles:
                info["role"] = game.roles[player]
            if self._step_info:
                info.update(game.step_info(state))
            self._unrendered = (player, legal, action_line, info)
        return info

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

    def _finish(self, returns: tuple[float, ...], reason: str = "normal", extra: dict[str, Any] | None = None) -> None:
        """End the game: final rewards, everyone terminated, and the outcome in every info."""
        agents, game = self.possible_agents, self.game
        self._unrendered = None  # every info is replaced
        self._set_rewards(returns)
        self.terminations = dict.fromkeys(agents, True)
        winner = self._winner(returns, reason)
        for i, agent in enumerate(agents):
            info = self._waiting_info(i, free_text=False)  # nothing is legal for anyone any more
            if self._step_info:
                info.update(game.step_info(self.state_))
            if extra:
                info.update(extra)
            info["outcome"] = {"winner": winner, "reason": reason}
            self._infos[agent] = info
        rewards, state = _rewards_text(self._names, returns), self.state_

        def ending(view: TextGame) -> list[Message]:
            why = view.outcome_reason(state) if reason == "normal" else ""
            return [(None, f"Game over. {why}{' ' if why else ''}Rewards: {rewards}.")]

        self._tell(ending)
        # Everyone still holds a (final) observation; agents step out with step(None).
        current = self.state_.current_player
        self.agent_selection = agents[(current + 1) % len(agents)] if current >= 0 else agents[0]

    def _winner(self, returns: tuple[float, ...], reason: str) -> str | None:
        """The agent with the strictly highest return; in a one-player game, the game's own verdict."""
        agents = self.possible_agents
        if len(agents) == 1:
            # Returns cannot say whether a lone player succeeded; a game with one player says it.
            decide = getattr(self.game, "winner", None)
            won = reason == "normal" and decide is not None and decide(self.state_) == 0
            return agents[0] if won else None
        best = max(returns)
        return agents[returns.index(best)] if returns.count(best) == 1 else None

    def truncate(self) -> None:
        """Stop the game where it stands, without a result: for limits outside the rules (a trainer's
        cap on actions, a time budget). Every agent is truncated, this call pays no reward, and every
        info holds ``outcome = {"winner": None, "reason": "truncation"}``; agents then step out with
        ``step(None)``. ``returns`` keeps what the game paid so far."""
        self._require_reset("truncate")
        agents = self.possible_agents
        if not self.agents or any(self.terminations.values()) or any(self.truncations.values()):
            raise RuntimeError(f"{self.env_id}: the game is already over; call reset()")
        self._unrendered = None  # every info is replaced
        self.rewards = dict.fromkeys(agents, 0.0)
        self.truncations = dict.fromkeys(agents, True)
        for i, agent in enumerate(agents):
            info = self._waiting_info(i, free_text=False)
            info["outcome"] = {"winner": None, "reason": "truncation"}
            self._infos[agent] = info
        self.log.post(None, "Game stopped before its end (truncated): no result.")

    def _on_invalid(self, player: int, reason: str) -> None:
        agents = self.possible_agents
        offender = agents[player]
        if self.invalid_move == "retry":
            self.rewards = dict.fromkeys(agents, 0.0)
            self.infos[offender] = {**self.infos[offender], "invalid_move": reason}
            self.log.post(player, f"Invalid move: {reason}. Try again.")
            return
        returns = tuple(-1.0 if i == player else 1.0 for i in range(len(agents)))
        self.log.post(None, f"{self._names[player]} made an invalid move: {reason}")
        self._finish(returns, "invalid_move", {"offender": offender})
        self.infos[offender]["invalid_move"] = reason
        self.agent_selection = offender
