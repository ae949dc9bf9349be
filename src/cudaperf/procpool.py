"""Process pools that stop at once: `pool_map`; `stop` and `worker_init` for a
ProcessPoolExecutor.

`concurrent.futures.ProcessPoolExecutor.map` submits every item up front, and leaving its
`with` block on an exception waits for all of them to finish; a SIGINT sent to the parent
alone (a job scheduler, `kill -INT`) then left the workers computing for minutes, and a Ctrl-C
at a terminal printed a traceback from every worker. Here the workers ignore SIGINT (the
parent decides), and any exception in the parent, or a consumer that stops early, terminates
them before it propagates.

`stop(pool)` ends a `ProcessPoolExecutor` for good: queued work cancelled, workers terminated
and joined. `pool.shutdown(wait=False)` is not enough inside a multiprocessing child: the
child's exit joins its non-daemon children (the pool's workers) before it runs the thread-exit
hooks that would tell those workers to leave, so it can wait for ever (seen: `data measure`'s
PyTorch child hung after its last row until killed, every run). `stop` also waits for the
pool's manager thread to end: that thread closes its wake-up pipe as it ends, while the
interpreter's exit hook writes to the same pipe without a lock (CPython 3.11), so a process that
exited right after `stop` could die with `OSError: [Errno 9] Bad file descriptor` and exit code
1 (seen in CI: `data measure`'s PyTorch child, its work done, was restarted for it).
`worker_init` is the pools' initializer: workers ignore SIGINT, so a terminal's Ctrl-C prints
no traceback from each.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import queue
import signal
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

__all__ = ["pool_map", "stop", "wait_get", "worker_init"]

T = TypeVar("T")
R = TypeVar("R")


def worker_init(nice: int = 0) -> None:
    """Initializer of a pool worker: SIGINT ignored (a terminal's Ctrl-C reaches the whole
    process group; the parent decides, and ends its workers, instead of every worker printing
    a KeyboardInterrupt traceback), and `nice` added to its priority."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if nice:
        os.nice(nice)


# The kernel may deliver a SIGINT sent to the process to any of its threads (the pool's own
# helper threads included); Python then acts on it only when the main thread next runs, and a
# main thread blocked in an untimed wait for the next result slept through it until that result
# came (seen: a parent interrupted mid-way ran on for a whole 60 s item). Waking every _WAKE_S
# seconds bounds that delay.
_WAKE_S = 0.2


def wait_get(q: queue.Queue):
    """`q.get()` in timed slices (see _WAKE_S): a SIGINT that reached another thread of the
    process is acted on within _WAKE_S seconds, not when the next item comes."""
    while True:
        try:
            return q.get(timeout=_WAKE_S)
        except queue.Empty:
            continue


def pool_map(
    fn: Callable[[T], R],
    items: Iterable[T],
    workers: int,
    chunksize: int = 1,
) -> Iterator[R]:
    """`fn(item)` for every item, in order, computed in `workers` processes (the platform's
    default start method) as they are consumed. On an exception in the caller
    (KeyboardInterrupt included) or when the iterator is closed early, the workers are
    terminated and no work is left running."""
    pool = multiprocessing.Pool(workers, initializer=worker_init)
    try:
        # chunks made here: imap's own chunking returns a generator with no timed next()
        results = pool.imap(_apply, _chunks(fn, items, max(chunksize, 1)))
        while True:
            try:  # a timed wait: see _WAKE_S
                yield from results.next(timeout=_WAKE_S)
            except multiprocessing.TimeoutError:
                continue
            except StopIteration:
                return
    finally:  # after a full run the workers are idle; else this stops them mid-item
        pool.terminate()
        pool.join()


def _chunks(fn, items, n: int):
    it = iter(items)
    while chunk := list(itertools.islice(it, n)):
        yield fn, chunk


def _apply(job):
    fn, chunk = job
    return [fn(x) for x in chunk]


def stop(pool: ProcessPoolExecutor, grace_s: float = 2.0) -> None:
    """Cancel `pool`'s queued work and end its workers (running work is lost): returns within
    about `grace_s` seconds and leaves no worker behind."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # shutdown drops them,
    manager = getattr(pool, "_executor_manager_thread", None)  # and this
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:  # all of them first: a second Ctrl-C during the joins leaves none
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(grace_s)
        if proc.is_alive():
            proc.kill()
            proc.join(grace_s)
    if manager is not None and manager.is_alive():  # see the module docstring's last part
        manager.join(grace_s)
