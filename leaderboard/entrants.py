"""Who plays: entrant strings, checkpoint discovery, building agents, reading a Kuhn policy.

An entrant is an agent spec (``random``, ``expert``, ``hf:PATH``, ``vllm:PATH``, ``openai:MODEL``...) with optional
constructor options and an optional name::

    expert#alpha=0.2          ExpertAgent(alpha=0.2), stored as "expert#alpha=0.2"
    bluffer=expert#alpha=0.3  the same kind of agent under the name "bluffer"

The label (the name, else the redacted spec plus its options) is what the database stores, so it never
carries URL credentials, and options that look like secrets are refused: keys come from environment
variables only. One label names one agent (docs/leaderboard.md): ``random``, the rating anchor, is the
plain random agent or nothing (``random=expert`` is refused here), and a label the database already
stores for another spec is refused before any game (``reference_pool.stored_problems``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leaderboard.settings import ANCHOR
from spiral_arena.agents import MODEL_KINDS, Agent, RandomAgent, make_agent, parse_spec, redacted, split_options
from spiral_arena.analysis import KUHN_INFO_STATES
from spiral_arena.analysis.leduc import rank_key, uniform_policy
from spiral_arena.llm import PROVIDERS
from spiral_arena.models.checkpoints import READ_OPTIONS, Trained, last_checkpoint, read_settings
from spiral_arena.registry import GameSpec

BUILTIN_SPECS = ("random", "expert")
_NAME = re.compile(r"^([A-Za-z][A-Za-z0-9_.-]*)=(?=[^=])")


@dataclass(frozen=True)
class Entrant:
    """One player of the leaderboard. ``spec`` is kept in memory only (it may hold URL credentials);
    ``label`` and ``stored_spec`` are what gets written down."""

    label: str
    spec: str
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.options)

    @property
    def stored_spec(self) -> str:
        """The spec with its options, URL credentials removed: what the database may hold."""
        return _stored_text(self.spec, self.options)

    @property
    def seed(self) -> int:
        """The entrant's own seed option (0 if none): it shifts the per-game seeds of its agent."""
        value = self.kwargs.get("seed", 0)
        return value if isinstance(value, int) and value >= 0 else 0


def _option_text(value: Any) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _stored_text(spec: str, options: tuple[tuple[str, Any], ...]) -> str:
    return redacted(spec) + "".join(f"#{k}={_option_text(v)}" for k, v in options)


def parse_entrant(text: str) -> Entrant:
    """``[NAME=]SPEC[#KEY=VALUE]...`` -> an Entrant, or ValueError naming what is wrong."""
    raw = text.strip()
    if not raw:
        raise ValueError("empty agent entry; give an agent spec such as random, expert or hf:PATH")
    name_match = _NAME.match(raw)
    name = name_match.group(1) if name_match else None
    body = raw[len(name) + 1 :] if name else raw
    spec, options = split_options(body)
    if parse_spec(spec).kind == "human":
        raise ValueError(
            "human cannot play in a leaderboard (it needs a terminal); use random, expert, hf:PATH or an API spec"
        )
    ordered = tuple(sorted(options.items()))
    entrant = Entrant(label=name or _stored_text(spec, ordered), spec=spec.strip(), options=ordered)
    if entrant.label == ANCHOR and entrant.stored_spec != ANCHOR:
        raise ValueError(
            f"{ANCHOR}={entrant.stored_spec}: the label {ANCHOR!r} means the plain random agent (the rating "
            f"anchor, 1000); give this agent another name, e.g. my-agent={entrant.stored_spec}"
        )
    return entrant


def parse_entrants(text: str | list[str]) -> list[Entrant]:
    """A comma-separated list (or a list) of entries; labels must be distinct."""
    items = text.split(",") if isinstance(text, str) else list(text)
    entrants = [parse_entrant(item) for item in items if item.strip()]
    seen: set[str] = set()
    for entrant in entrants:
        if entrant.label in seen:
            raise ValueError(
                f"agent {entrant.label!r} is listed twice; give each entry once (or name copies: a=random,b=random)"
            )
        seen.add(entrant.label)
    if len(entrants) < 2:
        raise ValueError(f"a leaderboard needs at least 2 agents, got {len(entrants)}")
    return entrants


def find_checkpoints(runs_dir: Path) -> list[str]:
    """``hf:`` specs of the latest checkpoint (``last_checkpoint``) of every run under ``runs_dir``."""
    runs = sorted(p for p in runs_dir.glob("*") if p.is_dir())
    return [f"hf:{step}" for run in runs if (step := last_checkpoint(run)) is not None]


def default_entrants(runs_dir: Path = Path("runs")) -> list[Entrant]:
    """The built-in agents and the latest checkpoint of every run."""
    return [parse_entrant(spec) for spec in (*BUILTIN_SPECS, *find_checkpoints(runs_dir))]


def build_agent(entrant: Entrant, concurrency: int = 1) -> Agent:
    """The entrant's agent. An API agent without its own ``concurrency`` option gets one connection per
    game in flight: it answers that many decisions at once, whatever its default."""
    kwargs = entrant.kwargs
    if parse_spec(entrant.spec).kind in PROVIDERS:
        kwargs = {"concurrency": concurrency, **kwargs}
    return make_agent(entrant.spec, **kwargs)


def notes(entrants: Sequence[Entrant], env_ids: Sequence[str]) -> dict[tuple[str, str], str]:
    """(label, env id) -> the one line saying how a checkpoint entrant's games of that id differ from what it
    trained on (other rules, a game it never trained, no record: ``Trained.reading``), read from its
    ``spiral_arena.json`` without loading the model; its own spec options (``#board=grid``) count."""
    found = {}
    for entrant in entrants:
        parsed = parse_spec(entrant.spec)
        if parsed.kind not in MODEL_KINDS:
            continue
        reads = {k: v for k, v in entrant.options if k in READ_OPTIONS}
        trained = Trained(read_settings(parsed.target), entrant.label, reads)
        for env_id in env_ids:
            if (note := trained.reading(GameSpec.parse(env_id)).note) is not None:
                found[(entrant.label, env_id)] = note
    return found


def _stated(agent: Agent, attribute: str, game: str, uniform: Callable[[], Mapping]) -> Mapping | None:
    """What an agent states through ``attribute`` (a mapping, or a method returning one); ``ExpertAgent``
    through its ``game`` expert's ``policy``, ``RandomAgent`` through ``uniform`` (its uniform choice among the
    legal answers); None for the others."""
    source = getattr(agent, attribute, None)
    if source is None:
        experts = getattr(agent, "experts", None)
        source = getattr(experts.get(game), "policy", None) if isinstance(experts, Mapping) else None
    if source is None and isinstance(agent, RandomAgent):
        source = uniform
    return source() if callable(source) else source


def kuhn_policy_of(agent: Agent) -> dict[str, float] | None:
    """The single-hand Kuhn policy an agent can state (probability of bet/call at the 12 info states
    of ``spiral_arena.analysis.KUHN_INFO_STATES``; ``kuhn_policy``), or None. Random's is 1/2 everywhere."""
    source = _stated(agent, "kuhn_policy", "KuhnPoker", lambda: dict.fromkeys(KUHN_INFO_STATES, 0.5))
    return None if source is None else {str(k): float(v) for k, v in dict(source).items()}


def leduc_policy_of(agent: Agent) -> dict[str, dict[str, float]] | None:
    """The Leduc Hold'em policy an agent can state (information state -> {action: probability}, keyed as
    ``spiral_arena.analysis.leduc`` reads them; ``leduc_policy``), or None. Random's is uniform over the legal
    actions at each of the 288 rank states."""
    source = _stated(
        agent, "leduc_policy", "LeducHoldem", lambda: {rank_key(k): d for k, d in uniform_policy().items()}
    )
    if source is None:
        return None
    return {str(k): {str(a): float(p) for a, p in dict(d).items()} for k, d in dict(source).items()}
