"""Ctrl-C and the worker processes we spawn: the parent handles it, a worker never sees it.

A terminal's Ctrl-C goes to the whole process group. Workers that ignore SIGINT only once their own code
runs could still be hit while the interpreter imported that code, and printed a traceback from
``multiprocessing/spawn.py`` (and a run's Ctrl-C test failed at random). So the parent starts them inside
``sigint_held``, with SIGINT blocked in its thread: a spawned child inherits the blocked mask from its
first instruction, a Ctrl-C stays pending in it while it starts, and ``ignore_sigint`` (the first thing
its code does) drops it. The parent's own pending Ctrl-C reaches it when the block is lifted, so none is
lost. multiprocessing's resource tracker, started by the first spawn, unblocks SIGINT after starting
itself, so it is started before the block.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_MASKS = hasattr(signal, "pthread_sigmask")  # POSIX


@contextmanager
def sigint_held() -> Iterator[None]:
    """SIGINT blocked in this thread for the duration: wrap the start of worker processes."""
    if not _MASKS or threading.current_thread() is not threading.main_thread():
        yield
        return
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()  # it would unblock SIGINT when a spawn inside the block started it
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # a Ctrl-C held meanwhile arrives now


def ignore_sigint() -> None:
    """In a worker: ignore Ctrl-C from now on, dropping one that came while it started (see the module)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if _MASKS:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
