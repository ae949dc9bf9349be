"""Process pools that stop at once: `pool_map`, and `stop` for a ProcessPoolExecutor.

`concurrent.futures.ProcessPoolExecutor.map` submits every item up front, and leaving its
`with` block on an exception waits for all of them to finish; a SIGINT sent to the parent
alone (a job scheduler, `kill -INT`) then left the workers computing for minutes, and a Ctrl-C
at a terminal printed a traceback from every worker. Here the workers ignore SIGINT (the
parent decides), and any exception in the parent, or a consumer that stops early, terminates
them before it propagates.

`stop(pool)` ends a `ProcessPoolExecutor` for good: queued work cancelled, workers terminated
and joined. `pool.shutdown(wait=False)` is not enough inside a multiprocessing
child: the child's exit joins its non-daemon children (the pool's workers) before it runs the
thread-exit hooks that would have told those workers to leave, so it never exits (seen: `data
measure`'s PyTorch child hung after its last row until killed).
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

__all__ = ["pool_map", "stop"]

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


def stop(pool: ProcessPoolExecutor, grace_s: float = 2.0) -> None:
    """Cancel `pool`'s queued work and end its workers (running work is lost): returns within
    about `grace_s` seconds and leaves no worker behind."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # shutdown drops them
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(grace_s)
        if proc.is_alive():
            proc.kill()
            proc.join(grace_s)
