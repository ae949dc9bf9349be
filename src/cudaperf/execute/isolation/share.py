"""Several workers on one GPU (`EvalConfig.workers_per_gpu`): what may overlap, what may not.

With one worker per GPU, a job has the card to itself. With k > 1, the k workers of a GPU
(each its own process, `sandbox.WorkerHandle`) take turns through a readers-writer lock on two
files, locked with `flock` on descriptors their parent opened for each of them:

- **shared** sections: a C→CUDA job's checked work on one config (drawing its input sets and
  references, the checked calls, comparing their outputs) and the start of its candidate's
  process. Shared sections of different workers overlap: this is where k workers gain.
- **exclusive** sections: timed trials, the traced call (its device share), a CPU baseline
  timed inside a job or in a `c_baselines` request, and every PyTorch→CUDA job and baseline
  request whole. While one is held, no other worker's candidate runs and no other worker checks
  or draws, so a number measured there sees the card (and the host's memory bandwidth) as a
  worker alone sees it.

Writers are not starved: a writer first takes the turnstile file, which every reader also
passes through (takes and releases) before it takes the room's shared lock; while a writer
waits, no new reader enters. No section is ever taken inside another.

A candidate's process runs only inside its worker's sections: it is stopped (SIGSTOP, which
it cannot catch) when a section ends and continued (SIGCONT) when the next begins, so a thread
it left running cannot launch work while another worker times. What this cannot stop: GPU work
the candidate queued asynchronously right before its call's reply stays queued on the card
after its process is stopped, and can slow another worker's timed trials; it cannot change
any verdict on itself or read another's data. Where that matters (numbers to publish), keep
one worker per GPU, the default.

A worker that waits for a section tells its parent (`lock_wait` lines ahead of the reply), and
the parent does not count the wait against the job's deadline: a job waiting behind another
worker's hung candidate (which holds its section until that worker is killed, releasing every
lock of its process) is neither timed out nor blamed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["DeviceShare", "kill_stopped", "lock_paths", "open_lock_fds"]

_STOP_WAIT_S = 1.0  # how long a section's end waits for its candidate's process to stop


def lock_paths(cache_dir: Path, gpu: int | None) -> tuple[Path, Path]:
    """The room and turnstile files of one GPU (shared by every worker of this host that
    evaluates on it with the same cache folder)."""
    d = Path(cache_dir) / "locks"
    name = "cpu" if gpu is None else f"gpu{gpu}"
    return d / f"{name}.room", d / f"{name}.turn"


def open_lock_fds(cache_dir: Path, gpu: int | None) -> tuple[int, int]:
    """Fresh descriptors of the two files for one worker: each worker needs open file
    descriptions of its own (flock locks belong to them, not to the process)."""
    room, turn = lock_paths(cache_dir, gpu)
    room.parent.mkdir(parents=True, exist_ok=True)
    fds = []
    for p in (room, turn):
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fds.append(fd)
    return fds[0], fds[1]


class DeviceShare:
    """One worker's side of the lock (module doc). Without descriptors it is inactive: every
    section is free and no candidate is stopped (one worker per GPU)."""

    def __init__(
        self, fds: tuple[int, int] | None = None, notify: Callable[[dict], None] | None = None
    ) -> None:
        self.room, self.turn = fds if fds is not None else (None, None)
        self.notify = notify  # sends a line ahead of the reply (the worker's pipe)

    @property
    def active(self) -> bool:
        return self.room is not None

    @contextlib.contextmanager
    def section(self, child=None, exclusive: bool = False) -> Iterator[None]:
        """Hold the GPU shared (or `exclusive`) for the block; `child` (a `SpawnedChild`) is
        continued for it and stopped after it."""
        if not self.active:
            yield
            return
        waiting = self._take(exclusive)
        try:
            if waiting:
                self._tell(False)
            _signal(child, signal.SIGCONT)
            yield
        finally:
            _stop(child)
            self._give(exclusive)

    def _take(self, exclusive: bool) -> bool:
        """Acquire; whether it had to wait (the parent was told so)."""
        assert self.room is not None and self.turn is not None
        waited = self._flock(self.turn, fcntl.LOCK_EX, False)
        try:
            waited = self._flock(self.room, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, waited)
        except BaseException:
            fcntl.flock(self.turn, fcntl.LOCK_UN)
            if waited:
                self._tell(False)
            raise
        if not exclusive:  # a reader only passes through the turnstile
            fcntl.flock(self.turn, fcntl.LOCK_UN)
        return waited

    def _give(self, exclusive: bool) -> None:
        assert self.room is not None and self.turn is not None
        fcntl.flock(self.room, fcntl.LOCK_UN)
        if exclusive:
            fcntl.flock(self.turn, fcntl.LOCK_UN)

    def _flock(self, fd: int, op: int, waited: bool) -> bool:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return waited
        except BlockingIOError:
            pass
        if not waited:
            self._tell(True)
        fcntl.flock(fd, op)
        return True

    def _tell(self, waiting: bool) -> None:
        if self.notify is not None:
            self.notify({"lock_wait": waiting})


def _signal(child, sig: int) -> bool:
    proc = getattr(child, "proc", None)
    pid = getattr(proc, "pid", None)
    if pid is None:
        return False
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _stop(child) -> None:
    """SIGSTOP `child`'s process and wait (briefly) until it is stopped or gone."""
    if not _signal(child, signal.SIGSTOP):
        return
    pid = child.proc.pid
    end = time.monotonic() + _STOP_WAIT_S
    while time.monotonic() < end:
        state = _state(pid)
        if state is None or state in "TtZX":
            return
        time.sleep(0.0005)


def _state(pid: int) -> str | None:
    """The process's state letter from /proc (None: gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def kill_stopped(child) -> None:
    """End a candidate's process that may be stopped: SIGKILL (a stopped process could not
    read the polite request to exit, and continuing it would let it run outside a section)."""
    _signal(child, signal.SIGKILL)
