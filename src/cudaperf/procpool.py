"""A process pool that Ctrl-C stops at once: `pool_map`.

`concurrent.futures.ProcessPoolExecutor.map` submits every item up front, and leaving its
`with` block on an exception waits for all of them to finish; a SIGINT sent to the parent
alone (a job scheduler, `kill -INT`) then left the workers computing for minutes, and a Ctrl-C
at a terminal printed a traceback from every worker. Here the workers ignore SIGINT (the
parent decides), and any exception in the parent, or a consumer that stops early, terminates
them before it propagates.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

__all__ = ["pool_map"]

T = TypeVar("T")
R = TypeVar("R")


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def pool_map(
    fn: Callable[[T], R],
    items: Iterable[T],
    workers: int,
    chunksize: int = 1,
    start_method: str | None = None,
) -> Iterator[R]:
    """`fn(item)` for every item, in order, computed in `workers` processes as they are
    consumed. On an exception in the caller (KeyboardInterrupt included) or when the
    iterator is closed early, the workers are terminated and no work is left running.
    `start_method`: a multiprocessing start method ("spawn" where the caller may hold a
    CUDA context); the platform's default when None."""
    ctx = multiprocessing.get_context(start_method)
    pool = ctx.Pool(workers, initializer=_ignore_sigint)
    try:
        yield from pool.imap(fn, items, chunksize=chunksize)
    finally:  # after a full run the workers are idle; else this stops them mid-item
        pool.terminate()
        pool.join()
