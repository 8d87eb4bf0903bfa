"""Playing the scheduled games, in this process or in worker processes that write to the database.

Each game is played on its own: both agents are reseeded from (game seed, seat, the entrant's own
seed), so a game's result does not depend on which worker played it or what ran before, and a
resumed run stores exactly what an uninterrupted one would have. An exception from an agent ends the
game as an error (stored, never scored); the run goes on. A single-player game seats one agent; its
row's seat-1 columns stay empty, and ``success`` records whether the env's outcome named it the winner.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import sqlite3
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

import spiral_arena
from leaderboard import store
from leaderboard.entrants import Entrant, build_agent, kuhn_policy_of
from leaderboard.schedule import Job, check_games, schedule
from spiral_arena.agents import Agent
from spiral_arena.core.env import TextGameEnv
from spiral_arena.registry import parse_env_id

POLL_S = 0.2
MAX_CHUNK = 64


def agent_seed(game_seed: int, seat: int, own_seed: int) -> int:
    """The seed an agent is reset with for one game. It depends on the seat, not on the agent, so two
    copies of one agent replay each other's moves when the seats swap: duplicate games cancel exactly."""
    return int(np.random.SeedSequence([game_seed, seat, own_seed]).generate_state(1)[0])


def _env_version(env_id: str) -> str:
    return parse_env_id(env_id)[0].rpartition("-")[2]


def play_game(env: TextGameEnv, job: Job, entrants: Sequence[Entrant], agents: Sequence[Agent]) -> store.GameRow:
    """One game of ``job`` with ``agents[i]`` in seat i (``entrants`` give their labels and seeds): two
    seats, or one in a single-player game."""
    started, clock = store.now(), time.perf_counter()
    for seat, (entrant, agent) in enumerate(zip(entrants, agents, strict=True)):
        reset = getattr(agent, "reset", None)
        if reset is not None:
            reset(seed=agent_seed(job.seed, seat, entrant.seed))
    env.reset(seed=job.seed)
    seats = {name: i for i, name in enumerate(env.possible_agents)}
    moves: list[list[int | str]] = []
    invalid = [False] * len(agents)
    reason = error = error_seat = winner = None
    for name in env.agent_iter():
        observation, _, terminated, truncated, info = env.last()
        seat = seats[name]
        if terminated or truncated:
            if "invalid_move" in info:
                invalid[seat], reason = True, info["invalid_move"]
            winner = info.get("outcome", {}).get("winner")
            env.step(None)
            continue
        try:
            action = agents[seat].act(observation, info)
            if not isinstance(action, str):
                raise TypeError(f"act() returned {type(action).__name__}, not str")
        except Exception as exc:  # any failure of an agent ends the game as an error, never a score
            error, error_seat = f"{entrants[seat].label} ({name}) failed: {type(exc).__name__}: {exc}", seat
            break
        moves.append([seat, action])
        env.step(action)
    finished = error is None
    chips = getattr(env.state_, "chips", None) if finished else None
    return _row(
        job,
        entrants,
        rewards=tuple(map(float, env.returns)) if finished else (None, None),
        payoffs=(None, None) if chips is None else tuple(map(float, chips)),
        invalid=invalid,
        success=winner == env.possible_agents[0] if finished and len(agents) == 1 else None,
        invalid_reason=reason,
        error=error,
        error_seat=error_seat,
        transcript={"moves": moves, "end": env.log.latest(0).removeprefix("[GAME] ") if finished else None},
        steps=len(moves),
        duration_s=time.perf_counter() - clock,
        started_at=started,
    )


def _two_seats(values: Sequence[Any], missing: Any) -> tuple[Any, Any]:
    """Per-seat values as the two seat columns: a single-player game's absent seat 1 gets ``missing``."""
    return (values[0], values[1] if len(values) > 1 else missing)


def _row(job: Job, entrants: Sequence[Entrant], *, rewards, payoffs, invalid, transcript, **columns) -> store.GameRow:
    specs = _two_seats([e.stored_spec for e in entrants], store.NO_PLAYER)
    rewards, payoffs, invalid = _two_seats(rewards, None), _two_seats(payoffs, None), _two_seats(invalid, False)
    return store.GameRow(
        env_id=job.env_id,
        env_version=_env_version(job.env_id),
        player0=job.player0,
        player1=job.player1,
        spec0=specs[0],
        spec1=specs[1],
        seed=job.seed,
        reward0=rewards[0],
        reward1=rewards[1],
        payoff0=payoffs[0],
        payoff1=payoffs[1],
        invalid0=invalid[0],
        invalid1=invalid[1],
        transcript=json.dumps(transcript),
        finished_at=store.now(),
        package_version=spiral_arena.__version__,
        **columns,
    )


class Player:
    """Builds each entrant's agent once and one env per game id; records once per database what can be
    known of an agent without playing it (its Kuhn policy and that policy's exploitability)."""

    def __init__(self, entrants: Sequence[Entrant], conn: sqlite3.Connection) -> None:
        self.entrants = {e.label: e for e in entrants}
        self.conn = conn
        self.recorded = set(store.load_agents(conn))
        self.agents: dict[str, Agent | Exception] = {}
        self.envs: dict[str, TextGameEnv] = {}

    def _agent(self, label: str) -> Agent | Exception:
        if label not in self.agents:
            entrant = self.entrants[label]
            try:
                agent = build_agent(entrant)
            except Exception as exc:  # recorded on each of its games, like a crash in act()
                self.agents[label] = exc
                return exc
            self.agents[label] = agent
            if label not in self.recorded:
                self._record(entrant, agent)
        return self.agents[label]

    def _record(self, entrant: Entrant, agent: Agent) -> None:
        from spiral_arena.analysis import kuhn_exploitability

        try:
            policy = kuhn_policy_of(agent)
            exploitability = None if policy is None else kuhn_exploitability(policy)
        except Exception as exc:  # a policy that cannot be read only costs the exploitability column
            warnings.warn(
                f"could not read the Kuhn policy of {entrant.label}: {type(exc).__name__}: {exc}", stacklevel=2
            )
            policy = exploitability = None
        store.record_agent(self.conn, entrant.label, entrant.stored_spec, policy, exploitability)
        self.recorded.add(entrant.label)

    def close(self) -> None:
        """Release what agents hold (API connection pools)."""
        for agent in self.agents.values():
            close = None if isinstance(agent, Exception) else getattr(agent, "close", None)
            if callable(close):
                close()

    def play(self, job: Job) -> store.GameRow:
        entrants = [self.entrants[label] for label in job.players]
        agents = [self._agent(label) for label in job.players]
        if job.env_id not in self.envs:
            self.envs[job.env_id] = spiral_arena.make(job.env_id)
        env = self.envs[job.env_id]
        broken = [seat for seat, agent in enumerate(agents) if isinstance(agent, Exception)]
        if broken:
            return _unbuilt(env, job, entrants, broken[0], agents[broken[0]])
        return play_game(env, job, entrants, agents)


def _unbuilt(env: TextGameEnv, job: Job, entrants: Sequence[Entrant], seat: int, exc: Exception) -> store.GameRow:
    """The error row of a game whose agent could not even be built."""
    name = env.possible_agents[seat]
    return _row(
        job,
        entrants,
        rewards=(None, None),
        payoffs=(None, None),
        invalid=(False, False),
        invalid_reason=None,
        error=f"{entrants[seat].label} ({name}) could not be built: {type(exc).__name__}: {exc}",
        error_seat=seat,
        transcript={"moves": [], "end": None},
        steps=0,
        duration_s=0.0,
        started_at=store.now(),
    )


def _worker(db_path: str, entrants: list[Entrant], jobs: multiprocessing.Queue, parent: int) -> None:
    """Plays chunks of jobs until it reads None; stops between games if the parent process is gone
    (a killed ``leaderboard run`` must not leave workers behind)."""
    conn = store.connect(db_path)
    player = Player(entrants, conn)
    try:
        while os.getppid() == parent:
            try:
                chunk = jobs.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if chunk is None:
                return
            for job in chunk:
                if os.getppid() != parent:
                    return
                store.insert_game(conn, player.play(job))
    finally:
        player.close()
        conn.close()


@dataclass
class RunSummary:
    scheduled: int
    already_stored: int
    played: int
    errors: list[store.StoredGame] = field(default_factory=list)  # error games among the scheduled ones


def run(
    db_path: str,
    entrants: Sequence[Entrant],
    env_ids: Sequence[str],
    games_per_pair: int,
    seed: int = 0,
    workers: int = 1,
    retry_errors: bool = False,
    progress: bool | None = None,
) -> RunSummary:
    """Play every scheduled game not yet stored: ``games_per_pair`` per pair in two-player games, per agent
    in single-player ones. ``progress=None`` shows a bar when stderr is a terminal."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    labels = [e.label for e in entrants]
    env_ids = check_games(env_ids)  # canonical spellings: the ids games are stored under
    jobs = schedule(labels, env_ids, games_per_pair, seed)
    conn = store.connect(db_path)
    try:
        keys = {job.key for job in jobs}
        if retry_errors:
            store.delete_errors(conn, keys)
        done = store.stored_keys(conn, env_ids) & keys
        todo = [job for job in jobs if job.key not in done]
        bar = tqdm(total=len(jobs), initial=len(done), unit="game", disable=None if progress is None else not progress)
        with bar:
            if workers == 1 or len(todo) <= 1:
                player = Player(entrants, conn)
                try:
                    for job in todo:
                        store.insert_game(conn, player.play(job))
                        bar.update()
                finally:
                    player.close()
            else:
                _run_workers(db_path, list(entrants), todo, workers, conn, bar)
        stored = store.stored_keys(conn, env_ids)
        played = sum(job.key in stored for job in todo)
        scheduled = store.load_games(conn, env_ids, labels)
        errors = [g for g in scheduled if g.error is not None and (g.env_id, g.player0, g.player1, g.seed) in keys]
        return RunSummary(len(jobs), len(done), played, errors)
    finally:
        conn.close()


def _run_workers(
    db_path: str, entrants: list[Entrant], todo: list[Job], workers: int, conn: sqlite3.Connection, bar: tqdm
) -> None:
    # spawn, not fork: workers may load torch/CUDA, which do not survive a fork.
    context = multiprocessing.get_context("spawn")
    jobs = context.Queue()
    size = max(1, min(MAX_CHUNK, len(todo) // (workers * 16)))
    for start in range(0, len(todo), size):
        jobs.put(todo[start : start + size])
    for _ in range(workers):
        jobs.put(None)
    processes = [
        context.Process(target=_worker, args=(db_path, entrants, jobs, os.getpid()), daemon=True)
        for _ in range(workers)
    ]
    for process in processes:
        process.start()
    shown = store.count_games(conn)
    running = True
    while running:
        time.sleep(POLL_S)
        running = any(p.is_alive() for p in processes)
        count = store.count_games(conn)
        bar.update(count - shown)
        shown = count
    failed = [p.exitcode for p in processes if p.exitcode != 0]
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {workers} workers failed (exit codes {failed}); the games they finished are stored: "
            "run the same command again to play the rest"
        )
