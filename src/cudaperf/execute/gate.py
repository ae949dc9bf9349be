"""A gate between the evaluator's CPU-heavy work and its CPU timing.

The serial C reference is the C→CUDA track's CPU baseline (`speedup_vs_cpu`). Timed while
the nvcc pool compiles other candidates on every core, it runs slower by a factor that
depends on the run (how many compiles overlapped it), and every later candidate of the task
is compared with that time. `QuietGate` lets the timing wait for the compiles that are
running, keeps new ones from starting while it times, and lets them go on after:

    with gate.busy():    # each compile (the pool's threads)
        ...
    with gate.quiet():   # the CPU-baseline timing (`isolation.sandbox.WorkerHandle`)
        ...

`quiet` is exclusive (one timing at a time) and takes precedence: once it waits, no new
`busy` section starts, so a steady stream of compiles cannot starve it. Only the compile pool
holds `busy`: a GPU worker's own jobs (one thread each) keep running. A gate of None is no
gate (the Ray backend, tests): timing then runs whenever it comes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["QuietGate", "busy", "quiet"]


class QuietGate:
    """Many `busy` holders or one `quiet` holder, never both; a waiting `quiet` goes first."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = 0
        self._quiet = False  # held
        self._waiting = 0  # quiet sections waiting for the busy ones to end

    @contextmanager
    def busy(self) -> Iterator[None]:
        with self._cond:
            while self._quiet or self._waiting:
                self._cond.wait()
            self._busy += 1
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()

    @contextmanager
    def quiet(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            try:
                while self._quiet or self._busy:
                    self._cond.wait()
            finally:
                self._waiting -= 1
                self._cond.notify_all()  # a quiet that gave up waiting lets compiles go on
            self._quiet = True
        try:
            yield
        finally:
            with self._cond:
                self._quiet = False
                self._cond.notify_all()

    @property
    def holders(self) -> tuple[int, bool]:
        """(busy sections running, whether a quiet one runs): for tests and logs."""
        with self._cond:
            return self._busy, self._quiet


@contextmanager
def busy(gate: QuietGate | None) -> Iterator[None]:
    """`gate.busy()`, or nothing for no gate."""
    if gate is None:
        yield
    else:
        with gate.busy():
            yield


@contextmanager
def quiet(gate: QuietGate | None) -> Iterator[None]:
    """`gate.quiet()`, or nothing for no gate."""
    if gate is None:
        yield
    else:
        with gate.quiet():
            yield
