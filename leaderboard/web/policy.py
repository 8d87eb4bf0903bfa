"""What a client of ``spiral-arena web`` may name, checked before anything is built, loaded or stored.

The page is a public door to the server's machine, its keys and its database, so a client chooses only
among what the person who started the server allows (docs/web.md, "What a client can reach"):

- **Seats**: ``human``, the scripted agents (``random``, ``expert``, with their options), the server's own
  agents (``--agents NAME=SPEC``, named by label or spec; an API agent among them keeps the key its spec binds
  to its host), and local models (``hf:``/``vllm:``): a named model (``smollm2-135m``, ``models.named``) or a
  directory under one of the server's model folders (``--model-root``, default: the folder it started in).
  A client never names an API agent, a ``key_env`` or a base URL: the server's environment is not its to
  spend or send. A path outside the model folders is refused without looking at it (no probing of what
  exists elsewhere); a hub id is refused unless the server was started with ``--allow-hub``.
- **Games**: any registered game and its options, except those that would reach beyond the machine or read
  its files: Twenty Questions' LLM oracles (their URL and key) and word lists other than the built-in one.
- **Sizes**: a spec, a game id and a move are bounded (``MAX_SPEC_CHARS``, ``MAX_GAME_CHARS``,
  ``MAX_MOVE_CHARS``), and a server run builds at most ``MAX_CLIENT_AGENTS`` agents for its clients, so no
  client grows the database's agent table or the server's memory without bound.
- **Seeds**: whole numbers from 0 to 2**63 - 1 (what the database stores exactly), as a number or as a
  decimal string (the page sends text: JavaScript rounds integers above 2**53).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leaderboard.entrants import Entrant, parse_entrant
from leaderboard.schedule import SEED_MAX
from spiral_arena.agents import MODEL_KINDS, parse_spec
from spiral_arena.agents.specs import HUB_ID, model_path_problem
from spiral_arena.llm import KEY_ENV_OPTION, PROVIDERS
from spiral_arena.models.named import is_named
from spiral_arena.registry import GameSpec

HUMAN = "human"  # the seat a person plays from the page
MAX_SPEC_CHARS = 300  # an agent spec: a model path with a few options fits many times over
MAX_GAME_CHARS = 300  # a game id with its options
MAX_MOVE_CHARS = 2000  # a person's move: Truth and Deception's own message limit is 2000 characters
MAX_CLIENT_AGENTS = 32  # agents one server run builds for its clients (each is a stored label and memory)
SHOWN_CHARS = 60  # how much of a refused text an error message repeats
CLIENT_GAME_OPTIONS: dict[str, tuple[Any, ...]] = {  # option -> the only values a client may give it
    "oracle": ("table",),  # an LLM judge spends a key at a URL
    "oracle_base_url": (),
    "oracle_api_key": (),
    "words": ("builtin",),  # the others are downloaded
    "words_file": (),  # a file on the server
}


class Refused(ValueError):
    """What a client asked for that the server does not allow, in one sentence; ``status`` is its HTTP status."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def shown(text: str) -> str:
    """``text`` as an error message may repeat it: its start, quoted (a client's text can be long)."""
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "...")


@dataclass(frozen=True)
class Policy:
    """The server's rules for what its clients name (see the module docstring)."""

    agents: Mapping[str, Entrant] = field(default_factory=dict)  # the server's own, by label
    model_roots: tuple[Path, ...] = field(default_factory=lambda: (Path.cwd().resolve(),))
    allow_hub: bool = False

    @classmethod
    def make(
        cls, agents: Sequence[str] = (), model_roots: Sequence[str | Path] = (), allow_hub: bool = False
    ) -> Policy:
        """The rules of a server started with these ``--agents``, ``--model-root`` and ``--allow-hub``; a
        ValueError names a bad entry."""
        own: dict[str, Entrant] = {}
        for text in agents:
            entrant = parse_entrant(text)
            if entrant.label in own or entrant.label == HUMAN:
                raise ValueError(f"--agents: {entrant.label!r} is given twice or is reserved; give each agent once")
            own[entrant.label] = entrant
        roots = tuple(Path(root).expanduser().resolve() for root in model_roots) or (Path.cwd().resolve(),)
        for root in roots:
            if not root.is_dir():
                raise ValueError(f"--model-root {root} is not a directory")
        return cls(own, roots, allow_hub)

    def offered(self) -> list[str]:
        """The labels of the server's own agents, as ``/api/games`` lists them."""
        return list(self.agents)

    def seat(self, text: Any, seat: int) -> Entrant:
        """The player a client puts in ``seat``, or Refused saying why and what is allowed."""
        if not isinstance(text, str) or not text.strip():
            raise Refused(f"seat {seat}: give 'human' or an agent spec such as expert, random or hf:PATH")
        text = text.strip()
        if len(text) > MAX_SPEC_CHARS:
            raise Refused(f"seat {seat}: an agent spec has at most {MAX_SPEC_CHARS} characters; got {len(text)}")
        if text == HUMAN:
            return Entrant(HUMAN, HUMAN)
        own = self.agents.get(text) or next((e for e in self.agents.values() if e.stored_spec == text), None)
        if own is not None:
            return own
        try:
            entrant = parse_entrant(text)
            kind, target = (parsed := parse_spec(entrant.spec)).kind, parsed.target
        except ValueError as error:
            raise Refused(f"seat {seat}: {clipped(str(error))}") from None
        if entrant.label in self.agents:
            raise Refused(f"seat {seat}: the name {entrant.label!r} is the server's own agent; give it alone")
        if kind in PROVIDERS or KEY_ENV_OPTION in entrant.kwargs:
            listed = ", ".join(self.agents) or "none"
            raise Refused(
                f"seat {seat}: API agents and their keys are the server's to choose; this server offers {listed} "
                f"(start it with --agents NAME=SPEC to offer one)"
            )
        if kind in MODEL_KINDS and (problem := self.model_problem(target)) is not None:
            raise Refused(f"seat {seat}: {kind}:{shown(target)[1:-1]}: {problem}")
        return entrant

    def model_problem(self, target: str) -> str | None:
        """Why a client may not play the local model ``target``, or None: a named model, a directory under a
        model folder that ``play`` would load, or (with ``allow_hub``) a hub id."""
        if is_named(target):
            return None
        try:
            resolved = Path(target).expanduser().resolve()  # links followed: a link out of a folder leads out
        except (OSError, ValueError, RuntimeError):
            resolved = None
        inside = resolved is not None and any(resolved.is_relative_to(root) for root in self.model_roots)
        if not inside and HUB_ID.fullmatch(target) is not None:
            if self.allow_hub:
                return None
            return "a model hub id; this server downloads from the hub only when started with --allow-hub"
        if not inside:
            roots = ", ".join(str(root) for root in self.model_roots)
            return (f"not under the folders this server plays models from ({roots}); a named model "
                    "(smollm2-135m) or a directory there, or start the server with --model-root")  # fmt: skip
        problem = model_path_problem(target, hub=False)
        return None if problem is None else clipped(problem)

    def game(self, text: Any) -> GameSpec:
        """The game a client asks for, or Refused: not a registered id with valid options, too long, or an
        option a client may not set (``CLIENT_GAME_OPTIONS``)."""
        if not isinstance(text, str) or not text.strip():
            raise Refused("'game' must be an env id, e.g. TicTacToe-v0 or KuhnPoker-v0:rounds=1")
        if len(text) > MAX_GAME_CHARS:
            raise Refused(f"'game' has at most {MAX_GAME_CHARS} characters; got {len(text)}")
        try:
            spec = GameSpec.parse(text)
            spec.registered  # noqa: B018 (raises, naming the registered ids, for an unknown one)
        except ValueError as error:
            raise Refused(f"game: {clipped(str(error), 400)}") from None
        for name, value in spec.options.items():
            if name in CLIENT_GAME_OPTIONS and value not in CLIENT_GAME_OPTIONS[name]:
                allowed = " or ".join(map(str, CLIENT_GAME_OPTIONS[name])) or "left out"
                raise Refused(f"game option {name}: {allowed} on this page (it would reach beyond the server)")
        return spec


def seed_of(value: Any) -> int | None:
    """A client's seed: None (drawn by the server), a whole number, or one as a decimal string, from 0 to
    ``SEED_MAX``; Refused otherwise."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdecimal() and len(value.strip()) <= 20:
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= SEED_MAX:
        raise Refused(f"seed must be a whole number from 0 to {SEED_MAX} (2**63 - 1), as a number or a decimal "
                      "string, or left out")  # fmt: skip
    return value


def moves_seen(value: Any) -> int:
    """``at``, the number of moves the page has seen: required, so a repeated request never plays twice."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Refused("'at' is required: the number of moves the page has seen (a whole number), so that a "
                      "repeated request is refused, never played twice")  # fmt: skip
    return value


def move_text(text: Any) -> str:
    """A person's move: text, not blank, at most ``MAX_MOVE_CHARS`` (413 beyond)."""
    if not isinstance(text, str) or not text.strip():
        raise Refused("'text' must be the move as text, e.g. [4] or [check]")
    if len(text) > MAX_MOVE_CHARS:
        raise Refused(f"a move has at most {MAX_MOVE_CHARS} characters; got {len(text)}", status=413)
    return text


def clipped(message: str, limit: int = 300) -> str:
    """An error message on one line, at most ``limit`` characters (it may quote a client's text)."""
    line = " ".join(message.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
