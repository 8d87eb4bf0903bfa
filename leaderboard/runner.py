"""Playing the scheduled games, in this process or in worker processes that write to the database.

Each game is played on its own: both agents are reseeded from (game seed, seat, the entrant's own
seed), so a game's result does not depend on which worker played it or what ran before, and a
resumed run stores exactly what an uninterrupted one would have. An exception from an agent ends the
game as an error (stored, never scored); the run goes on. A single-player game seats one agent; its
row's seat-1 columns stay empty, and ``success`` records whether the env's outcome named it the winner.

Up to ``concurrency`` games are in flight at once in each process, played in waves by
``spiral_arena.inflight`` (API requests concurrently, an ``hf:`` model's decisions in one batch, scripted
agents one by one); the stored rows are those of a sequential run (timing columns aside), and each game is
stored when it ends, on its own. What an API seat's moves cost is charged to the game they were made in:
the row stores each API seat's sums (tokens NULL once a reply did not state them); a scripted or ``hf:``
seat's stay NULL.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import multiprocessing
import os
import signal
import sqlite3
import sys
import time
import warnings
from collections.abc import Callable, Container, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

import numpy as np
from tqdm import tqdm

import spiral_arena
from leaderboard import store
from leaderboard.entrants import Entrant, build_agent, kuhn_policy_of, leduc_policy_of, notes
from leaderboard.schedule import Job, check_games, schedule
from spiral_arena.agents import Agent
from spiral_arena.analysis import kuhn_exploitability, leduc_exploitability
from spiral_arena.core.env import TextGameEnv
from spiral_arena.inflight import Game, InFlight, Spent, check_concurrency, default_concurrency, own_copy
from spiral_arena.play import GameRecord, Notes, game_moves, reading
from spiral_arena.processes import ignore_sigint, sigint_held
from spiral_arena.registry import GameSpec, seat_text_key

POLL_S = 0.2
MAX_CHUNK = 64
STOP_GRACE_S = 5.0  # how long a worker told to terminate may take before it is killed
INTERRUPTED = "interrupted: the games finished so far are stored; run the same command again to play the rest"


def entrant_seed(game_seed: int, seat: int, own_seed: int) -> int:
    """The seed an agent is reset with for one game. It depends on the seat, not on the agent, so two
    copies of one agent replay each other's moves when the seats swap: duplicate games cancel exactly."""
    return int(np.random.SeedSequence([game_seed, seat, own_seed]).generate_state(1)[0])


def _env_version(env_id: str) -> str:
    return GameSpec.parse(env_id).env_id.rpartition("-")[2]


def job_game(
    env: TextGameEnv, job: Job, entrants: Sequence[Entrant]
) -> Generator[tuple[int, str, dict[str, Any]], str, store.GameRow]:
    """One game of ``job`` (``entrants`` give the seats' labels), as a coroutine: it yields each decision
    (seat, observation, info) and is sent the seat's answer, or thrown the agent's exception, which ends
    the game as an error; it returns the game's row. The game's rules read as one loop, whoever drives it
    and however many other games share the driver's waves."""
    started, clock = store.now(), time.perf_counter()
    # any failure of an agent ends the game as an error, never a score
    record = yield from game_moves(env, job.seed, errors=(Exception,))
    chips = getattr(env.state_, "chips", None) if record.error is None else None
    payoffs = None if chips is None else tuple(map(float, chips))
    return record_row(job, entrants, record, payoffs, duration_s=time.perf_counter() - clock, started_at=started)


def record_row(
    job: Job, entrants: Sequence[Entrant], record: GameRecord, payoffs: tuple[float, ...] | None, **columns: Any
) -> store.GameRow:
    """The stored row of a played game's record (``payoffs``: the chips of a game that keeps them)."""
    finished = record.error is None
    seats = {name: seat for seat, name in enumerate(record.players)}
    agent = record.players[record.error_seat] if record.error_seat is not None else ""
    moves = [[seats[name], text] for name, text in record.moves]
    return _row(
        job,
        entrants,
        rewards=tuple(map(float, record.returns)) if finished else (None, None),
        payoffs=payoffs or (None, None),
        invalid=[name in record.invalid for name in record.players],
        success=record.winner == record.players[0] if finished and len(entrants) == 1 else None,
        invalid_reason=next(reversed(record.invalid.values()), None),
        error=None if finished else f"{entrants[record.error_seat].label} ({agent}) failed: {record.error}",
        error_seat=record.error_seat,
        transcript={"moves": moves, "end": record.ends[0] if finished else None},
        steps=record.steps,
        **columns,
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


def charged(row: store.GameRow, spent: Sequence[Spent | None]) -> store.GameRow:
    """``row`` with the usage columns of its API seats filled in (the others stay NULL)."""
    columns = {}
    for seat, tally in enumerate(spent):
        if tally is not None:
            columns |= {
                f"prompt_tokens{seat}": tally.prompt_tokens,
                f"completion_tokens{seat}": tally.completion_tokens,
                f"api_moves{seat}": tally.moves,
                f"latency_s{seat}": tally.latency_s,
            }
    return dataclasses.replace(row, **columns) if columns else row


@dataclass
class _Game(Game[store.GameRow]):
    """A game of the schedule in flight: also its job and the env it is played in."""

    job: Job = field(kw_only=True)
    env: TextGameEnv = field(kw_only=True)
    kind: tuple = field(kw_only=True)  # game id and what each seat reads: the env's pool


def _over(row: store.GameRow) -> Generator[tuple[int, str, dict[str, Any]], str, store.GameRow]:
    """A game that is over before it begins (an agent could not be built): its coroutine returns its row."""
    return row
    yield  # a generator, with no decision


def _stated(
    entrant: Entrant, agent: Agent, game: str, read: Callable[[Agent], Any], exploitability: Callable[[Any], float]
) -> store.StatedPolicy | None:
    """The ``game`` policy ``agent`` states (``read``) with its exploitability, or None; a policy that cannot
    be read only costs the exploitability column (one warning)."""
    try:
        policy = read(agent)
        return None if policy is None else store.StatedPolicy(policy, exploitability(policy))
    except Exception as exc:
        warnings.warn(f"could not read the {game} policy of {entrant.label}: {type(exc).__name__}: {exc}", stacklevel=3)
        return None


# the games whose policy an agent may state, for their exact exploitability: base id -> family
POLICY_READS = {"KuhnPoker-v0": "kuhn", "LeducHoldem-v0": "leduc"}
POLICY_READERS: dict[str, tuple[str, Callable[[Agent], Any], Callable[[Any], float]]] = {
    "kuhn": ("Kuhn", kuhn_policy_of, kuhn_exploitability),
    "leduc": ("Leduc Hold'em", leduc_policy_of, leduc_exploitability),
}


class Player:
    """Builds each entrant's agent once and keeps idle envs per game id; records once per database what
    can be known of an agent without playing it (its Kuhn and Leduc policies, and their exploitability).
    Plays up to ``concurrency`` games at once (see the module docstring)."""

    def __init__(self, entrants: Sequence[Entrant], conn: sqlite3.Connection, concurrency: int = 1) -> None:
        self.entrants = {e.label: e for e in entrants}
        self.conn = conn
        self.flight = InFlight(concurrency)
        self.concurrency = self.flight.concurrency
        self.recorded = store.load_agents(conn)
        self.read: set[tuple[str, str]] = set()  # (label, game family) whose policy this player has read
        self.agents: dict[str, Agent | Exception] = {}
        self.envs: dict[tuple, list[TextGameEnv]] = {}  # idle envs by game id and what each seat reads
        self.texts: dict[tuple[str, str], dict[str, Any]] = {}  # (label, env id) -> what that seat reads

    def enter(self, entrants: Sequence[Entrant]) -> None:
        """Let more entrants play (``spiral-arena web`` seats whoever a person picks); a label already
        entered for another spec is a ValueError."""
        for entrant in entrants:
            known = self.entrants.setdefault(entrant.label, entrant)
            if known.stored_spec != entrant.stored_spec:
                spec = entrant.stored_spec
                raise ValueError(f"{entrant.label!r} already plays here as {known.stored_spec}, not {spec}")

    def _agent(self, label: str, env_id: str) -> Agent | Exception:
        if label not in self.agents:
            try:
                self.agents[label] = build_agent(self.entrants[label], self.concurrency)
            except Exception as exc:  # recorded on each of its games, like a crash in act()
                self.agents[label] = exc
        agent = self.agents[label]
        if not isinstance(agent, Exception):
            self._record(self.entrants[label], agent, GameSpec.parse(env_id).env_id)
        return agent

    def _record(self, entrant: Entrant, agent: Agent, env_id: str) -> None:
        """Store the agent under its label once per database, and the policy it states of a game with an exact
        analysis (Kuhn, Leduc) when it first plays that game: reading a model's 288 Leduc states takes minutes
        for a real model, so it is not paid by a run that never plays Leduc."""
        label, family = entrant.label, POLICY_READS.get(env_id)
        known = self.recorded.get(label)
        stated = None
        if family is not None and (label, family) not in self.read and getattr(known, f"{family}_policy", None) is None:
            name, read, exploitability = POLICY_READERS[family]
            stated = _stated(entrant, agent, name, read, exploitability)
            self.read.add((label, family))
        if known is None or known.spec != entrant.stored_spec:  # its first record here (the label checked again)
            store.record_agent(self.conn, label, entrant.stored_spec, **({family: stated} if stated else {}))
        elif stated is not None:
            store.record_policy(self.conn, label, family, stated)
        else:
            return
        self.recorded[label] = store.load_agents(self.conn)[label]

    def close(self) -> None:
        """Release what agents hold (API connection pools) and the request threads, without waiting for
        requests still out (a run stopped midway)."""
        self.flight.close()
        for agent in self.agents.values():
            close = None if isinstance(agent, Exception) else getattr(agent, "close", None)
            if callable(close):
                close()

    def play(self, jobs: Iterable[Job]) -> Iterator[store.GameRow]:
        """The row of every job, each as its game ends, with up to ``concurrency`` games in flight; jobs
        are read only as games start, so a lazy iterable keeps feeding the waves."""
        for game in self.flight.play(self.start(job) for job in jobs):
            self.envs[game.kind].append(game.env)  # back in the pool
            yield charged(game.result, game.spent)

    def _text(self, label: str, agent: Agent | Exception, env_id: str) -> dict[str, Any]:
        """What ``label``'s seat reads of ``env_id``: a checkpoint the text it trained on (``play.reading``;
        its notes were said and stored by ``run``), any other agent the game's own."""
        if (label, env_id) not in self.texts:
            built = not isinstance(agent, Exception)
            self.texts[(label, env_id)] = reading(agent, GameSpec.parse(env_id)).text if built else {}
        return self.texts[(label, env_id)]

    def start(self, job: Job) -> _Game:
        """The game of ``job``, in an idle env where each seat reads its own text, with its own copy of
        each seat's agent."""
        entrants = [self.entrants[label] for label in job.players]
        agents = [self._agent(label, job.env_id) for label in job.players]
        texts = [self._text(label, agent, job.env_id) for label, agent in zip(job.players, agents, strict=True)]
        kind = (job.env_id, *seat_text_key(texts))
        idle = self.envs.setdefault(kind, [])
        env = idle.pop() if idle else spiral_arena.make(job.env_id, seat_text=texts)
        broken = [seat for seat, agent in enumerate(agents) if isinstance(agent, Exception)]
        if broken:
            row = _unbuilt(env, job, entrants, broken[0], agents[broken[0]])
            return _Game(_over(row), [], job=job, env=env, kind=kind)
        seeds = [entrant_seed(job.seed, seat, entrant.seed) for seat, entrant in enumerate(entrants)]
        own = [own_copy(agent, seed) for agent, seed in zip(agents, seeds, strict=True)]
        return _Game(job_game(env, job, entrants), own, job=job, env=env, kind=kind)


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


def _worker(db_path: str, entrants: list[Entrant], channel: Connection, parent: int, concurrency: int) -> None:
    """Asks the parent for a chunk of jobs whenever its games in flight (up to ``concurrency``) need more,
    until the answer is None. Stops between games, or at its next request (end of file), if the parent
    process is gone: a killed ``leaderboard run`` must not leave workers behind. Ignores SIGINT: Ctrl-C
    reaches the whole process group, and the parent, which ends its workers itself, then prints one line
    instead of a traceback per worker. It was started with SIGINT ignored already (``processes``), so a
    Ctrl-C while it imports this code does not reach it either."""
    ignore_sigint()
    conn = store.connect(db_path)
    player = Player(entrants, conn, concurrency)

    def dealt() -> Iterator[Job]:
        while True:
            try:
                channel.send(None)  # ready for the next chunk
                chunk = channel.recv()
            except (EOFError, OSError):  # the parent is gone
                return
            if chunk is None:
                return
            yield from chunk

    try:
        for row in player.play(dealt()):
            if os.getppid() != parent:
                return
            store.insert_game(conn, row)
    finally:
        player.close()
        conn.close()


@dataclass
class RunSummary:
    scheduled: int
    already_stored: int
    played: int
    errors: list[store.StoredGame] = field(default_factory=list)  # error games among the scheduled ones
    keys: Container[tuple[str, str, str, int]] = frozenset()  # the scheduled games' keys (``key in keys``)


def run(
    db_path: str,
    entrants: Sequence[Entrant],
    env_ids: Sequence[str],
    games_per_pair: int,
    seed: int = 0,
    workers: int = 1,
    retry_errors: bool = False,
    progress: bool | None = None,
    concurrency: int | None = None,
    reference: Sequence[str] | None = None,
) -> RunSummary:
    """Play every scheduled game not yet stored: ``games_per_pair`` per pair in two-player games, per agent
    in single-player ones. ``progress=None`` shows a bar when stderr is a terminal. ``concurrency``: games
    in flight per process, with the same results as one at a time; None is ``default_concurrency``:
    ``MODEL_CONCURRENCY`` (32) when an entrant is an API or ``hf:`` agent, else 1. ``reference``: the
    labels of a reference pool among ``entrants``; the others then play the pool only (``schedule``).
    Ctrl-C stops the run at once, with any number of workers (the games in hand are lost, never half-stored),
    with one line saying that the same command resumes it."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    if concurrency is None:
        concurrency = default_concurrency(e.spec for e in entrants)
    concurrency = check_concurrency(concurrency)
    labels = [e.label for e in entrants]
    env_ids = check_games(env_ids)  # canonical spellings: the ids games are stored under
    jobs = schedule(labels, env_ids, games_per_pair, seed, reference)  # lazy: never a list of every game
    conn = store.connect(db_path)
    try:
        # checked before (``stored_problems``), and again now: another run may have stored one of the labels since;
        # after this, ``store.record_agent`` checks each label where it first writes it
        store.check_labels(conn, {e.label: e.stored_spec for e in entrants})
        # where a checkpoint plays other rules than it trained on (or a game it never trained): said once here,
        # stored for the tables to mark (the games themselves show each checkpoint the text it trained on)
        marked = notes(entrants, env_ids)
        store.record_notes(conn, marked)
        say = Notes(lambda line: tqdm.write(f"note: {line}", file=sys.stderr))
        for line in marked.values():
            say(line)
        if retry_errors:
            store.delete_errors(conn, [key for key in store.error_keys(conn, env_ids) if key in jobs])
        done = {key for key in store.stored_keys(conn, env_ids) if key in jobs}
        todo = (job for job in jobs if job.key not in done)
        left = len(jobs) - len(done)
        bar = tqdm(total=len(jobs), initial=len(done), unit="game", disable=None if progress is None else not progress)
        with bar:
            if workers == 1 or left <= 1:
                player = Player(entrants, conn, concurrency)
                try:
                    for row in player.play(todo):
                        store.insert_game(conn, row)
                        bar.update()
                except KeyboardInterrupt:  # each game is committed on its own: nothing half-stored
                    bar.write(INTERRUPTED, file=sys.stderr)
                    raise
                finally:
                    player.close()
            else:
                _run_workers(db_path, list(entrants), todo, left, workers, conn, bar, concurrency)
        played = sum(key in jobs and key not in done for key in store.stored_keys(conn, env_ids))
        scheduled = store.load_games(conn, env_ids, labels)
        errors = [g for g in scheduled if g.error is not None and (g.env_id, g.player0, g.player1, g.seed) in jobs]
        return RunSummary(len(jobs), len(done), played, errors, jobs)
    finally:
        conn.close()


def _run_workers(
    db_path: str,
    entrants: list[Entrant],
    todo: Iterator[Job],
    left: int,
    workers: int,
    conn: sqlite3.Connection,
    bar: tqdm,
    concurrency: int,
) -> None:
    """Deal chunks of ``todo`` (``left`` games, read as they are dealt) to ``workers`` processes, each chunk
    to whichever asks first, over one pipe per worker. Not a shared queue: its feeder thread kept the parent
    from exiting while the queue's pipe was full, and a worker killed while reading held the queue's lock
    forever. Ctrl-C or a dead worker stops every worker at once; each finished game is already committed,
    so the same command resumes."""
    context = multiprocessing.get_context("spawn")  # not fork: workers may load torch/CUDA
    size = max(1, min(MAX_CHUNK, left // (workers * 16)))
    chunks = iter(lambda: list(itertools.islice(todo, size)), [])
    processes: list[BaseProcess] = []
    asking: dict[Connection, BaseProcess] = {}  # the workers not yet told to stop, by their pipe
    dead: BaseProcess | None = None
    try:
        for _ in range(workers):
            mine, theirs = context.Pipe()
            args = (db_path, entrants, theirs, os.getpid(), concurrency)  # games in flight in each worker
            process = context.Process(target=_worker, args=args, daemon=True)
            processes.append(process)
            asking[mine] = process
            with sigint_held():  # the worker ignores Ctrl-C from its first instruction
                process.start()
            theirs.close()  # held by the worker alone, so its death reads as end of file here
        shown = store.count_games(conn)
        while asking and dead is None:
            for channel in wait(list(asking), timeout=POLL_S):
                try:
                    channel.recv()
                    chunk = next(chunks, None)
                    channel.send(chunk)
                except (EOFError, OSError):  # it died: its exit status tells how
                    dead = asking[channel]
                    dead.join(STOP_GRACE_S)
                    break
                if chunk is None:  # it is done and exits
                    del asking[channel]
                    channel.close()
            count = store.count_games(conn)
            bar.update(count - shown)
            shown = count
    except KeyboardInterrupt:
        bar.write(INTERRUPTED, file=sys.stderr)
        raise
    finally:
        _stop(processes, terminate=bool(asking))  # workers not told to stop: Ctrl-C, a dead worker, an error
        for channel in asking:
            channel.close()
    if dead is not None:
        raise RuntimeError(
            f"worker process {dead.pid} died ({_exit_status(dead.exitcode)}), so the run stopped; the games "
            "finished so far are stored: run the same command again to play the rest"
        )
    failed = [_exit_status(p.exitcode) for p in processes if p.exitcode != 0]
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {workers} workers failed ({', '.join(failed)}); the games they finished are stored: "
            "run the same command again to play the rest"
        )


def _stop(processes: Sequence[BaseProcess], terminate: bool) -> None:
    """Wait for the workers to exit. With ``terminate``, end them now instead (a game in hand is lost,
    never half-stored: each game is one transaction) and kill any still there after ``STOP_GRACE_S``."""
    started = [p for p in processes if p.pid is not None]
    if terminate:
        for process in started:
            process.terminate()
    for process in started:
        process.join(STOP_GRACE_S if terminate else None)
        if process.is_alive():
            process.kill()
            process.join()


def _exit_status(code: int | None) -> str:
    return f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
