"""Every registered game, every obs_format, AEC and Parallel, replayed against transcripts recorded from the
env as it was before infos were rendered lazily (tests/data/env_transcripts.json).

Each recorded step holds the action played and a digest of everything a caller can read at that moment: the
acting agent, every agent's observation and message log, the infos (all keys, in order), rewards, cumulative
rewards, terminations, truncations, the live agents and the returns. Games mix uniformly random legal moves
with invalid answers (under ``invalid_move="lose"`` and ``"retry"``) and ``truncate()`` calls, so every path
that writes an info runs. The replay reads at only some steps and in a shuffled order: what a caller reads
must not depend on when, or whether, it read before.

Re-record (only when a game's text or infos change on purpose): ``python tests/test_env_transcripts.py``.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import spiral_arena
from spiral_arena.core.observations import OBS_FORMATS

FIXTURE = Path(__file__).parent / "data" / "env_transcripts.json"
SEEDS = range(10)
MAX_STEPS = 400  # a cap for the recorder; every recorded game ends well before it
INVALID = "[no such move]"  # invalid in every game with bracketed moves; chat in the free-text ones
TRUNCATE = "<truncate>"  # the recorded "action" of a truncate() call


def cases() -> list[tuple[str, str, str, int]]:
    """(env id, obs_format, invalid_move, seed): odd seeds play under "retry", even ones under "lose"."""
    return [
        (env_id, fmt, "retry" if seed % 2 else "lose", seed)
        for env_id in spiral_arena.list_envs()
        for fmt in OBS_FORMATS
        for seed in SEEDS
    ]


def case_key(env_id: str, fmt: str, invalid_move: str, seed: int, api: str) -> str:
    return f"{api}|{env_id}|{fmt}|{invalid_move}|{seed}"


def _digest(parts: dict[str, Any]) -> str:
    """A short (32-bit) hash of ``repr`` (key order and float bits included) of the parts in a fixed order."""
    text = repr([(name, parts[name]) for name in sorted(parts)])
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _aec_readers(env: Any) -> dict[str, Callable[[], Any]]:
    """Everything a caller of the AEC env can read, one reader per part."""
    readers: dict[str, Callable[[], Any]] = {
        "agent_selection": lambda: env.agent_selection,
        "agents": lambda: list(env.agents),
        "infos": lambda: env.infos,
        "rewards": lambda: env.rewards,
        "cumulative": lambda: env._cumulative_rewards,
        "terminations": lambda: env.terminations,
        "truncations": lambda: env.truncations,
        "returns": lambda: env.returns,
        "log": lambda: env.log.lines,
    }
    for agent in env.possible_agents:
        readers[f"observe:{agent}"] = lambda agent=agent: env.observe(agent)
    return readers


def _read(readers: dict[str, Callable[[], Any]], rng: random.Random | None) -> str:
    """The digest of every part, read in a shuffled order when ``rng`` is given."""
    names = list(readers)
    if rng is not None:
        rng.shuffle(names)
    return _digest({name: readers[name]() for name in names})


def _choose(rng: random.Random, legal: list[str]) -> str:
    """A random legal move, or now and then an invalid answer."""
    return INVALID if not legal or rng.random() < 0.03 else rng.choice(legal)


def record_aec(env_id: str, fmt: str, invalid_move: str, seed: int) -> dict[str, list]:
    """Play one seeded game through the AEC API, reading everything after reset and after every step."""
    env = spiral_arena.make(env_id, obs_format=fmt, invalid_move=invalid_move)
    rng = random.Random(seed)
    readers = _aec_readers(env)
    env.reset(seed=seed)
    actions: list[str | None] = []
    digests = [_read(readers, None)]
    truncate_at = rng.randrange(40) if seed % 3 == 2 else None
    while env.agents and len(actions) < MAX_STEPS:
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            action = None
            env.step(None)
        elif len(actions) == truncate_at:
            action = TRUNCATE
            env.truncate()
        else:
            info = env.infos[agent]
            action = _choose(rng, info["legal_actions"] or info.get("action_examples") or [])
            env.step(action)
        actions.append(action)
        digests.append(_read(readers, None))
    assert not env.agents, f"{env_id} did not end within {MAX_STEPS} steps"
    return {"actions": actions, "digests": digests}


def record_parallel(
    env_id: str, fmt: str, invalid_move: str, seed: int, check: Callable[[int, str], None] | None = None
) -> dict[str, list]:
    """Play one seeded game through ``make_parallel``: a digest of what each call returns, and one of the AEC
    env below it. Replaying (``check``), the env is read only at some steps, in a shuffled order, and each
    digest taken goes to ``check(index, digest)``."""
    par = spiral_arena.make_parallel(env_id, obs_format=fmt, invalid_move=invalid_move)
    env = getattr(par, "aec_env", None) or par.env  # PettingZoo's turn-based conversion, or Snake's own
    rng, reads = random.Random(seed), random.Random(f"replay {seed}")
    readers = _aec_readers(env)
    returned: list[str] = []
    below: list[str] = []

    def read_env() -> None:
        if check is None:
            below.append(_read(readers, None))
        elif reads.random() < 0.3:
            check(len(returned) - 1, _read(readers, reads))

    observations, infos = par.reset(seed=seed)
    returned.append(_digest({"reset": (observations, infos)}))
    read_env()
    while par.agents and len(returned) <= MAX_STEPS:
        legal = {a: infos[a]["legal_actions"] or infos[a].get("action_examples") or [] for a in par.agents}
        observations, rewards, terminations, truncations, infos = par.step({a: _choose(rng, legal[a]) for a in legal})
        returned.append(_digest({"step": (observations, rewards, terminations, truncations, infos)}))
        read_env()
    assert not par.agents, f"{env_id} did not end within {MAX_STEPS} steps"
    # the moves follow from the seed and the returned infos, so only digests are kept
    return {"returned": returned, "env": below}


@pytest.fixture(scope="module")
def recorded() -> dict[str, dict[str, list]]:
    return json.loads(FIXTURE.read_text())


def test_the_fixture_covers_every_registered_game_and_format(recorded):
    expected = {case_key(*case, api) for case in cases() for api in ("aec", "parallel")}
    assert set(recorded) == expected
    steps = [a for key, t in recorded.items() if key.startswith("aec|") for a in t["actions"]]
    assert INVALID in steps and TRUNCATE in steps and None in steps  # every path that writes infos ran


@pytest.mark.parametrize("env_id", spiral_arena.list_envs())
def test_aec_replay_reads_what_was_recorded(recorded, env_id):
    """The recorded moves replayed; at a random subset of steps (always the first and last) every part is
    read, in a shuffled order, and must hash to what the eager env gave at that step."""
    for _, fmt, invalid_move, seed in (c for c in cases() if c[0] == env_id):
        key = case_key(env_id, fmt, invalid_move, seed, "aec")
        actions, digests = recorded[key]["actions"], recorded[key]["digests"]
        env = spiral_arena.make(env_id, obs_format=fmt, invalid_move=invalid_move)
        readers = _aec_readers(env)
        rng = random.Random(f"replay {key}")
        every = seed % 4 < 2  # half the games are read at every step, half at about a third of them
        env.reset(seed=seed)
        if every or rng.random() < 0.3:
            assert _read(readers, rng) == digests[0], f"{key}: after reset"
        for step, action in enumerate(actions, 1):
            if action == TRUNCATE:
                env.truncate()
            else:
                env.step(action)
            if every or step == len(actions) or rng.random() < 0.3:
                assert _read(readers, rng) == digests[step], f"{key}: after step {step} ({action!r})"
        assert not env.agents


@pytest.mark.parametrize("env_id", spiral_arena.list_envs())
def test_parallel_replay_returns_what_was_recorded(recorded, env_id):
    """Every return value must match; the AEC env below, read at a random subset of steps, too."""
    for _, fmt, invalid_move, seed in (c for c in cases() if c[0] == env_id):
        key = case_key(env_id, fmt, invalid_move, seed, "parallel")
        expected = recorded[key]["env"]

        def check(index: int, digest: str, key: str = key, expected: list[str] = expected) -> None:
            assert digest == expected[index], f"{key}: the env below, after step {index}"

        replayed = record_parallel(env_id, fmt, invalid_move, seed, check)
        assert replayed["returned"] == recorded[key]["returned"], key


def test_step_builds_no_info_and_last_builds_only_the_acting_one(monkeypatch):
    """What makes a move cheaper: step() leaves the infos (player view, examples, step info) to their first
    read; last() builds the acting player's info once per turn, ``infos`` completes the others."""
    env = spiral_arena.make("TruthAndDeception-v0")  # free text and roles: every part of an info
    built: list[str] = []
    for name in ("player_view", "action_examples"):
        method = getattr(env.game, name)
        monkeypatch.setattr(env.game, name, lambda *args, name=name, method=method: built.append(name) or method(*args))
    env.reset(seed=3)
    for _ in range(3):
        env.step(f"Move {len(built)}.")
    assert built == []
    info = env.last()[-1]
    assert env.last()[-1] is info and built == ["player_view", "action_examples"]
    waiting = env.possible_agents[1 - env.possible_agents.index(env.agent_selection)]
    assert env.infos[env.agent_selection] is info and env.infos[waiting]["legal_actions"] is None
    assert built == ["player_view", "action_examples"] and info["view"] and info["action_examples"]


def record_all() -> dict[str, dict[str, list]]:
    out = {}
    for case in cases():
        out[case_key(*case, "aec")] = record_aec(*case)
        out[case_key(*case, "parallel")] = record_parallel(*case)
    return out


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(record_all(), separators=(",", ":")) + "\n")
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size:,} bytes)", file=sys.stderr)
