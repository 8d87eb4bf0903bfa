"""Env ids -> the game that implements them and the env it is wrapped in.

One grammar names a game with its options everywhere (``make``, ``play``, ``train --games``, the
leaderboard): ``ID`` or ``ID:key=value;key=value``, e.g. ``KuhnPoker-v0:rounds=1;reward=chips``.
Options are separated by ';' because ',' separates games in a list.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import turn_based_aec_to_parallel

from spiral_arena.core.env import TextGameEnv
from spiral_arena.core.game import TextGame
from spiral_arena.games.connect_four import ConnectFour
from spiral_arena.games.kuhn_poker import KuhnPoker
from spiral_arena.games.leduc_holdem import LeducHoldem
from spiral_arena.games.liars_dice import LiarsDice
from spiral_arena.games.pig_dice import PigDice
from spiral_arena.games.simple_negotiation import SimpleNegotiation
from spiral_arena.games.snake import Snake
from spiral_arena.games.tictactoe import TicTacToe
from spiral_arena.games.truth_and_deception import TruthAndDeception
from spiral_arena.games.twenty_questions import TwentyQuestions

ENV_KWARGS = ("obs_format", "invalid_move", "render_mode")
SeatText = Mapping[str, Any]  # what one seat reads a game in: text options of the game, and obs_format
# option names that hold credentials (Twenty Questions' "secret" is the word to find, not one of them)
# (whole words between underscores: max_new_tokens is no token; client_secret is one, the bare secret not)
_SECRET = re.compile(r"(?:^|_)(?:api_?key|key|token|password|passwd|credentials?|auth)(?:$|_)|._secrets?$", re.I)


def looks_like_secret(name: str) -> bool:
    """Whether an option name (of a game or an agent spec) would hold a credential: such options are
    refused, since env ids and specs are logged and stored."""
    return bool(_SECRET.search(name))


@dataclass(frozen=True)
class EnvSpec:
    env_id: str
    game: type[TextGame]
    defaults: dict[str, Any] = field(default_factory=dict)

    @property
    def options(self) -> dict[str, Any]:
        """The game's options and their defaults (its constructor's keyword parameters)."""
        params = inspect.signature(self.game.__init__).parameters.values()
        named = [p for p in params if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        return {p.name: self.defaults.get(p.name, p.default) for p in named}

    @property
    def game_kwargs(self) -> tuple[str, ...]:
        return tuple(self.options)

    @property
    def text_kwargs(self) -> tuple[str, ...]:
        """What a seat may read differently (``TextGame.text_options``, and the observation format)."""
        return (*self.game.text_options, "obs_format")


REGISTRY: dict[str, EnvSpec] = {
    spec.env_id: spec
    for spec in (
        EnvSpec("TicTacToe-v0", TicTacToe),
        EnvSpec("KuhnPoker-v0", KuhnPoker),
        EnvSpec("SimpleNegotiation-v0", SimpleNegotiation),
        EnvSpec("Snake-v0", Snake),
        EnvSpec("PigDice-v0", PigDice),
        EnvSpec("LiarsDice-v0", LiarsDice),
        EnvSpec("TruthAndDeception-v0", TruthAndDeception),
        EnvSpec("TwentyQuestions-v0", TwentyQuestions),
        EnvSpec("LeducHoldem-v0", LeducHoldem),
        EnvSpec("ConnectFour-v0", ConnectFour),
    )
}


def seat_text_key(seat_text: Sequence[SeatText]) -> tuple:
    """What each seat reads, as a key: envs built for equal keys are interchangeable (pools of idle envs)."""
    return tuple(tuple(sorted(text.items())) for text in seat_text)


# every game's text options (``TextGame.text_options``), e.g. what a model agent's spec may override
TEXT_OPTIONS: tuple[str, ...] = tuple(dict.fromkeys(o for s in REGISTRY.values() for o in s.game.text_options))


def list_envs() -> list[str]:
    """Every registered env id."""
    return list(REGISTRY)


def spec(env_id: str) -> EnvSpec:
    if env_id not in REGISTRY:
        close = difflib.get_close_matches(env_id, REGISTRY, n=3, cutoff=0.4)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"unknown env id {env_id!r}.{hint} Registered: {', '.join(REGISTRY)}")
    return REGISTRY[env_id]


def parse_env_id(text: str) -> tuple[str, dict[str, Any]]:
    """``"KuhnPoker-v0:rounds=1;reward=chips"`` -> ``("KuhnPoker-v0", {"rounds": 1, "reward": "chips"})``.

    Values read as int, float or true/false where they can, else as text. A key given twice is refused:
    which value wins would be a guess."""
    env_id, _, opts = text.strip().partition(":")
    env_id = env_id.strip()
    options: dict[str, Any] = {}
    for item in filter(None, (o.strip() for o in opts.split(";"))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ValueError(f"game option {item!r} of {env_id} must look like key=value (ID:key=value;key=value)")
        if looks_like_secret(key):
            raise ValueError(
                f"option {key!r} looks like a secret, and env ids are logged and stored; "
                "pass keys by environment variable (e.g. OPENAI_API_KEY) or as a make() keyword"
            )
        if key in options:  # named, never its values: one may be a secret (``env_id_problem``)
            raise ValueError(f"game option {key!r} of {env_id} is given twice; give each option once")
        options[key] = option_value(value.strip())
    return env_id, options


@dataclass(frozen=True)
class GameSpec:
    """A game with its options, parsed once from ``ID:key=value;...``: what rollouts, evaluation, the
    leaderboard and the integrations pass around instead of the text. ``label`` is the text as given
    (metric keys and logs show it); ``canonical`` the one spelling stored as a game's identity."""

    env_id: str
    options: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.canonical)

    @classmethod
    def parse(cls, text: str) -> GameSpec:
        env_id, options = parse_env_id(text)
        return cls(env_id, options, text.strip())

    @property
    def canonical(self) -> str:
        """Options sorted, no spaces, and those equal to their default left out, so one game has one name:
        ``KuhnPoker-v0: rounds=1 ; ante=2`` -> ``KuhnPoker-v0:ante=2;rounds=1``, ``LeducHoldem-v0:reward=chips``
        -> ``LeducHoldem-v0``. An unregistered id keeps every option (``registered`` names the problem)."""
        defaults = REGISTRY[self.env_id].options if self.env_id in REGISTRY else {}
        given = {k: v for k, v in self.options.items() if not (k in defaults and _same(v, defaults[k]))}
        return _spelling(self.env_id, dict(sorted(given.items())))

    @property
    def registered(self) -> EnvSpec:
        """The registered game (ValueError naming the registered ids when there is none)."""
        return spec(self.env_id)

    @property
    def players(self) -> int:
        return len(self.registered.game.agents)

    @property
    def text(self) -> dict[str, Any]:
        """The options given that change only the text (``TextGame.text_options``)."""
        kinds = self.registered.game.text_options
        return {k: v for k, v in self.options.items() if k in kinds}

    def rules(self) -> dict[str, Any]:
        """Every option that is part of the rules or the payoff, defaults filled in: what two games must
        share to be the same game whatever their text (options that hold no plain value are left out)."""
        kinds = self.registered.game.text_options
        return {k: v for k, v in self.complete().options.items() if k not in kinds}

    def complete(self) -> GameSpec:
        """The game with every option spelled out, defaults included, in the registry's order: what a
        checkpoint records, so a later change of a default does not change what it was trained on. Options
        whose value is no plain value (None, a file, an object) and credential-like names are left out."""
        plain = (bool, int, float, str)
        registered = self.registered.options.items()
        defaults = {k: v for k, v in registered if isinstance(v, plain) and not looks_like_secret(k)}
        options = {**defaults, **self.options}
        return GameSpec(self.env_id, options, _spelling(self.env_id, options))

    def with_options(self, **options: Any) -> GameSpec:
        """The same game with these options set (replacing any given before, appended after the rest)."""
        merged = {**{k: v for k, v in self.options.items() if k not in options}, **options}
        return GameSpec(self.env_id, merged, _spelling(self.env_id, merged))

    def make(self, **kwargs: Any) -> TextGameEnv:
        """The env, built as ``make`` builds ``ID:options`` (kwargs: env options such as ``obs_format``)."""
        return make(self.env_id, **self.options, **kwargs)


def option_value(value: str) -> Any:
    """An option's text as a value (game options and agent spec options alike): ``3`` -> 3, ``0.2`` ->
    0.2, ``true`` -> True; anything else stays text."""
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def _same(value: Any, default: Any) -> bool:
    """Whether an option given as ``value`` is its ``default``: 1 and 1.0 are, True and 1 are not."""
    if isinstance(value, bool) or isinstance(default, bool):
        return value is default
    if isinstance(value, int | float) and isinstance(default, int | float):
        return value == default
    return isinstance(value, str) and isinstance(default, str) and value == default


def _spelling(env_id: str, options: dict[str, Any]) -> str:
    shown = ";".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in options.items())
    return f"{env_id}:{shown}" if shown else env_id


def make(env_id: str, *, seat_text: Sequence[SeatText] | None = None, **kwargs: Any) -> TextGameEnv:
    """Build the PettingZoo AEC env for ``env_id`` (which may carry options, ``ID:key=value;...``);
    kwargs are game options or env options (an option may not be given both ways). ``seat_text``, one
    mapping per seat, lets seats read the match in other texts: a text option of the game
    (``TextGame.text_options``, e.g. ``{"board": "lines"}``) or ``obs_format``; the rules stay the match's."""
    env_id, id_options = parse_env_id(env_id)
    both = sorted(set(id_options) & set(kwargs))
    if both:
        raise TypeError(f"{env_id} got {', '.join(both)} both in the env id and as keyword argument(s)")
    kwargs = {**id_options, **kwargs}
    s = spec(env_id)
    allowed = s.game_kwargs
    unknown = [k for k in kwargs if k not in allowed and k not in ENV_KWARGS]
    if unknown:
        raise TypeError(
            f"{env_id} got unexpected keyword argument(s) {', '.join(unknown)}; "
            f"valid: {', '.join(allowed + ENV_KWARGS)}"
        )
    game_kwargs = {**s.defaults, **{k: v for k, v in kwargs.items() if k in allowed}}
    env_kwargs = {k: v for k, v in kwargs.items() if k in ENV_KWARGS}
    if not seat_text or not any(seat_text):
        return TextGameEnv(s.game(**game_kwargs), env_id, **env_kwargs)
    seats = len(s.game.agents)
    if len(seat_text) != seats:
        raise ValueError(f"{env_id} seats {seats} player(s); seat_text gives {len(seat_text)}")
    for seat, text in enumerate(seat_text):
        if unknown := sorted(set(text) - set(s.text_kwargs)):
            raise ValueError(
                f"{env_id}: seat {seat} reads unknown text option(s) {', '.join(unknown)}; "
                f"valid: {', '.join(s.text_kwargs)} (options that change the rules are the match's)"
            )
    formats = [text.get("obs_format") for text in seat_text]
    # each distinct text gets one game; a game every seat reads alike is the match's own
    wanted = [tuple(sorted((k, v) for k, v in text.items() if k != "obs_format")) for text in seat_text]
    if len(set(wanted)) == 1:  # one text for everyone (a one-player game, say): no second game is built
        return TextGameEnv(s.game(**{**game_kwargs, **dict(wanted[0])}), env_id, obs_formats=formats, **env_kwargs)
    game = s.game(**game_kwargs)
    built: dict[tuple, TextGame] = {}
    for text in wanted:
        if text not in built:
            own = {**game_kwargs, **dict(text)}
            built[text] = game if own == game_kwargs else s.game(**own)
    return TextGameEnv(game, env_id, views=[built[t] for t in wanted], obs_formats=formats, **env_kwargs)


def env_id_problem(text: str, obs_format: str = "") -> str | None:
    """What ``make`` refuses about an env id with options, found by building the env once as the
    commands and rollouts build it; None when it builds. The message names the bare id, never an
    option's value (one may be a secret)."""
    try:
        GameSpec.parse(text).make(**({"obs_format": obs_format} if obs_format else {}))
    except (TypeError, ValueError, OSError) as error:
        name = text.split(":")[0].strip()
        return str(error) if name in str(error) else f"{name}: {error}"
    return None


def make_parallel(env_id: str, **kwargs: Any) -> ParallelEnv:
    """The PettingZoo Parallel API view of ``env_id``.

    Turn-based games go through PettingZoo's own ``turn_based_aec_to_parallel`` (only the player
    to act has an effect each step); games with simultaneous moves resolve both moves at once.
    """
    env = make(env_id, **kwargs)  # the same id grammar as make
    parallel = getattr(env.game, "parallel_env", None)
    return parallel(env) if parallel is not None else turn_based_aec_to_parallel(env)
