"""Grading: maths answers with math-verify in a process pool, multiple-choice letters in-process.

Maths. math-verify (pinned 0.9.0) decides equivalence, gold first (it is not symmetric). Gold
answers are sanitised first: stray ``$`` and surrounding whitespace are removed, then the gold is
parsed as ``$gold$``. Several boxes in one response: math-verify would join them into a set (so
"first \\boxed{3} ... correct is \\boxed{2}" never equals 2), so the response is cut to its last box
before parsing. Extraction modes:

- ``last-box-or-text`` (default): the last box; a response without one goes to math-verify whole,
  which finds "final answer is ..." phrases and then the last expression (close to SPIRAL's offline
  harness, whose fallback is the last number).
- ``last-box``: the last box only; no box scores 0 (SPIRAL's online grader, Oat's ``boxed_reward_fn``).
- ``all-boxes``: math-verify on the whole response, several boxes becoming one set (its own behaviour).

math-verify's own time-outs use ``signal.alarm`` and work only in a main thread, so grading runs in
worker processes: each item gets a ``timeout_s`` interval timer inside its worker (math-verify's own
timers are switched off, as they would share that timer), and a worker that does not answer within
``kill_after_s`` (stuck inside C code, where no signal lands) is killed and replaced. Both count the
item as a ``timeout`` verdict, scored 0.

Multiple choice. ``default``: the last ``\\boxed{}`` holding one of the item's option letters
(``\\boxed{(B)}``, ``\\boxed{\\text{B}}`` and ``\\boxed{B.}`` accepted; uppercase only), else the last
"Answer: X"; letters past the item's option count never match. ``spiral``: SPIRAL's rule, the first
``\\boxed{X}`` matched case-insensitively, nothing else.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import logging
import multiprocessing
import os
import re
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from multiprocessing.connection import Connection, wait
from typing import Any, NamedTuple

from spiral_arena.evals.answers import LETTERS, boxed_contents
from spiral_arena.processes import ignore_sigint, sigint_held

MATH_EXTRACTIONS = ("last-box-or-text", "last-box", "all-boxes")
CHOICE_EXTRACTIONS = ("default", "spiral")
MISSING_MATH_VERIFY = "grading maths needs math-verify: pip install 'spiral-arena[eval]'"
_TEXT_WRAPPER = re.compile(r"^\\(?:text|textbf|mathrm|mathbf|textrm)\s*\{(.*)\}$", re.S)


@dataclass(frozen=True)
class Verdict:
    """What the grader made of one response: the answer it read (None if none) and whether it is right.

    ``status``: "graded", "no-answer" (nothing to read), "timeout" or "error" (the grader failed).
    """

    extracted: str | None
    correct: bool
    status: str


class MathTask(NamedTuple):
    response: str
    answers: tuple[str, ...]
    extraction: str


# -- extraction -------------------------------------------------------------------------------------


def sanitize_gold(answer: str) -> str:
    """A gold answer as math-verify should see it: no ``$`` anywhere, no surrounding whitespace."""
    return answer.replace("$", "").strip()


def _choice_letter(content: str) -> str | None:
    """``B``, ``(B)``, ``\\text{B}``, ``B.`` -> ``B``; anything else -> None."""
    text = content.strip()
    wrapped = _TEXT_WRAPPER.match(text)
    if wrapped:
        text = wrapped.group(1).strip()
    text = text.strip("()[] ").rstrip(".:)").strip()
    return text if len(text) == 1 and text in LETTERS else None


def extract_choice(response: str, option_count: int, mode: str = "default") -> str | None:
    """The option letter a response chose, limited to the item's ``option_count`` letters, or None."""
    if mode not in CHOICE_EXTRACTIONS:
        raise ValueError(f"unknown choice extraction {mode!r}; valid: {', '.join(CHOICE_EXTRACTIONS)}")
    letters = LETTERS[:option_count]
    if mode == "spiral":
        match = re.search(rf"\\boxed\{{([{letters}])\}}", response, re.IGNORECASE)
        return match.group(1).upper() if match else None
    for content in reversed(boxed_contents(response)):
        letter = _choice_letter(content)
        if letter is not None and letter in letters:
            return letter
    answers = re.findall(rf"(?i:answer)\s*:\s*\(?([{letters}])\)?(?![A-Za-z0-9])", response)
    return answers[-1] if answers else None


def grade_choice(response: str, gold: str, option_count: int, mode: str = "default") -> Verdict:
    letter = extract_choice(response, option_count, mode)
    if letter is None:
        return Verdict(None, False, "no-answer")
    return Verdict(letter, letter == gold, "graded")


# -- maths, inside a worker process -----------------------------------------------------------------


class _ItemTimeout(BaseException):
    """Raised by the worker's interval timer; a BaseException so math-verify's ``except Exception`` lets it by."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _ItemTimeout


@functools.lru_cache(maxsize=4096)
def _parsed_gold(answer: str) -> list:
    from math_verify import parse

    return parse(f"${sanitize_gold(answer)}$", parsing_timeout=None)


def _target(response: str, extraction: str) -> tuple[str | None, str | None]:
    """(text for math-verify to parse, the answer as read) under ``extraction``; (None, None) = no answer."""
    if extraction == "all-boxes":
        return response, None
    boxes = boxed_contents(response)
    if boxes:
        return "\\boxed{" + boxes[-1] + "}", boxes[-1].strip()
    if extraction == "last-box":
        return None, None
    return response, None


def grade_math_here(task: MathTask) -> Verdict:
    """Grade one maths response in this process, without a time limit (workers add theirs)."""
    from math_verify import parse, verify

    if task.extraction not in MATH_EXTRACTIONS:
        raise ValueError(f"unknown maths extraction {task.extraction!r}; valid: {', '.join(MATH_EXTRACTIONS)}")
    text, extracted = _target(task.response, task.extraction)
    if text is None:
        return Verdict(None, False, "no-answer")
    target = parse(text, parsing_timeout=None)
    if not target:
        return Verdict(extracted, False, "no-answer")
    if extracted is None:  # math-verify found it: keep the text it matched
        extracted = next((t for t in reversed(target) if isinstance(t, str)), str(target[0]))
    correct = any(verify(_parsed_gold(answer), target, timeout_seconds=None) for answer in task.answers)
    return Verdict(extracted, bool(correct), "graded")


def _worker_main(connection: Connection, timeout_s: float) -> None:
    """Grade tasks sent over ``connection`` until it closes; each one under its own interval timer."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its "time-outs disabled" notice: ours are on
    ignore_sigint()  # Ctrl-C is the parent's to handle (one that came while this process started is dropped)
    signal.signal(signal.SIGALRM, _on_alarm)
    import math_verify  # noqa: F401  (imported once, before the first item's timer starts)

    connection.send("ready")
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        index, task = message
        try:
            signal.setitimer(signal.ITIMER_REAL, timeout_s)
            verdict = grade_math_here(task)
        except _ItemTimeout:
            verdict = Verdict(_target(task.response, task.extraction)[1], False, "timeout")
        except Exception:
            verdict = Verdict(None, False, "error")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        connection.send((index, verdict))


# -- the pool -------------------------------------------------------------------------------------


def require_math_verify() -> None:
    """Fail early, in the parent, with one line naming the extra (workers would only die)."""
    try:
        found = importlib.util.find_spec("math_verify") is not None
    except ValueError:  # sys.modules["math_verify"] is None: the import is blocked
        found = False
    if not found:
        raise ImportError(MISSING_MATH_VERIFY)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def math_grader_info(extraction: str, timeout_s: float) -> dict[str, Any]:
    """The grader's identity for the manifest: versions, extraction mode, box policy, time-out."""
    return {
        "name": "math-verify",
        "version": _version("math-verify"),
        "dependencies": {p: _version(p) for p in ("latex2sympy2_extended", "antlr4-python3-runtime", "sympy")},
        "extraction": extraction,
        "several_boxes": "all boxes joined into one set" if extraction == "all-boxes" else "last box only",
        "gold": "sanitised ($ and surrounding whitespace removed), parsed as $gold$, compared gold first",
        "multiple_golds": "any may match",
        "timeout_s": timeout_s,
    }


def choice_grader_info(mode: str) -> dict[str, Any]:
    return {"name": "spiral-arena choice extractor", "version": _version("spiral-arena"), "mode": mode}


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    connection: Connection
    ready: bool = False  # it has imported math-verify; time-outs count from then on


class MathGrader:
    """A pool of ``workers`` processes grading maths responses with per-item time-outs.

    Use as a context manager (or call ``close``). Workers start at once (importing math-verify takes
    a second or two, which overlaps whatever the caller does next) and serve any number of ``grade``
    calls; an item's time-out starts when a ready worker receives it, and a worker killed for a
    time-out is replaced.
    """

    STARTUP_LIMIT_S = 120.0  # a worker not ready by then is broken, not slow

    def __init__(self, workers: int = 2, timeout_s: float = 5.0, kill_after_s: float | None = None) -> None:
        require_math_verify()
        if workers < 1 or timeout_s <= 0:
            raise ValueError(f"need workers >= 1 and timeout_s > 0, got {workers} and {timeout_s}")
        self.timeout_s = timeout_s
        self.kill_after_s = timeout_s + 5.0 if kill_after_s is None else kill_after_s
        self._context = multiprocessing.get_context("spawn")  # no fork of a parent holding torch's threads
        self._workers = [self._start() for _ in range(workers)]

    def _start(self) -> _Worker:
        parent, child = self._context.Pipe()
        process = self._context.Process(target=_worker_main, args=(child, self.timeout_s), daemon=True)
        with sigint_held():
            process.start()
        child.close()
        return _Worker(process, parent)

    def _replace(self, slot: int) -> None:
        worker = self._workers[slot]
        worker.process.kill()
        worker.process.join()
        worker.connection.close()
        self._workers[slot] = self._start()

    def grade(self, tasks: Sequence[MathTask], on_done: Callable[[int], None] | None = None) -> list[Verdict]:
        """Verdicts in the order of ``tasks``; ``on_done(1)`` after each (for a progress bar)."""
        results: list[Verdict | None] = [None] * len(tasks)
        queue = deque(range(len(tasks)))
        busy: dict[int, tuple[int, float]] = {}  # worker slot -> (task index, kill deadline)
        deaths_in_a_row = 0
        startup_deadline = time.monotonic() + self.STARTUP_LIMIT_S

        def finish(index: int, verdict: Verdict) -> None:
            results[index] = verdict
            if on_done:
                on_done(1)

        while queue or busy:
            for slot, worker in enumerate(self._workers):
                if worker.ready and slot not in busy and queue:
                    index = queue.popleft()
                    worker.connection.send((index, tasks[index]))
                    busy[slot] = (index, time.monotonic() + self.kill_after_s)
            listening = [s for s, w in enumerate(self._workers) if s in busy or not w.ready]
            deadline = min([d for _, d in busy.values()], default=startup_deadline)
            ready = wait([self._workers[s].connection for s in listening], max(0.0, deadline - time.monotonic()))
            for slot in [s for s in listening if self._workers[s].connection in ready]:
                try:
                    message = self._workers[slot].connection.recv()
                except (EOFError, OSError):  # the worker died (out of memory, killed, failed to start)
                    deaths_in_a_row += 1
                    if deaths_in_a_row > 2 * len(self._workers):
                        raise RuntimeError(
                            "maths grading workers keep dying; a script that grades must start under "
                            "`if __name__ == '__main__':` (workers are spawned and import the main module)"
                        ) from None
                    if slot in busy:
                        finish(busy.pop(slot)[0], Verdict(None, False, "error"))
                    self._replace(slot)
                    continue
                if message == "ready":
                    self._workers[slot].ready = True
                    continue
                deaths_in_a_row = 0
                busy.pop(slot)
                finish(*message)
            now = time.monotonic()
            for slot, (index, deadline) in list(busy.items()):
                if deadline <= now:
                    del busy[slot]
                    self._replace(slot)
                    finish(index, Verdict(None, False, "timeout"))
            if not busy and queue and now > startup_deadline and not any(w.ready for w in self._workers):
                raise RuntimeError(f"no maths grading worker started within {self.STARTUP_LIMIT_S:g} s")
        return [r for r in results if r is not None]

    def close(self) -> None:
        for worker in self._workers:
            try:
                worker.connection.send(None)
            except OSError:
                pass
        for worker in self._workers:
            worker.process.join(timeout=2)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.connection.close()
        self._workers = []

    def __enter__(self) -> MathGrader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_shared: dict[tuple[int, int, float], MathGrader] = {}


def shared_grader(workers: int = 2, timeout_s: float = 5.0) -> MathGrader:
    """A pool kept for the life of this process (closed at exit): starting workers costs a second or
    two each, so a process that grades again and again (the trainer's hook, a test session) pays once."""
    key = (os.getpid(), workers, timeout_s)  # a forked child never reuses its parent's pipes
    if key not in _shared:
        if not _shared:
            atexit.register(_close_shared)
        _shared[key] = MathGrader(workers, timeout_s)
    return _shared[key]


def _close_shared() -> None:
    for key, grader in list(_shared.items()):
        if key[0] == os.getpid():
            grader.close()
    _shared.clear()
