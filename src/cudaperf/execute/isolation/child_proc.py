"""`SpawnedChild`: the trusted side's handle on one spawned candidate process (both tracks).

A candidate's code runs only in a fresh interpreter started with the `spawn` start method:
none of the worker's memory (secret salt, reference outputs, the request) is in it. Requests
go to the child pickled by `multiprocessing` (trusted -> untrusted only); replies come back as
JSON bytes, never pickles, so nothing the candidate sends can run code in the trusted process.
A child that dies (segfault, output limit, `exit()`) or replies with something malformed
raises `ChildError` with a message for the model; the handle is then useless and is closed.

The two tracks' children: `torch_proc.CandidateProcess` (PyTorch→CUDA, through
`torch.multiprocessing`, so tensors travel as CUDA IPC handles) and `c_proc.CProcess`
(C→CUDA: the harness library, arrays in a shared memory segment). `Spare` keeps one child
started ahead of time, so the next job does not wait for a fresh interpreter's imports.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cudaperf.execute.isolation.supervise import death_message

__all__ = [
    "ChildError",
    "Spare",
    "SpawnedChild",
    "flush_stdio",
    "read_log",
    "redirect_output",
    "serve",
]

log = logging.getLogger(__name__)

_MAX_REPLY = 1 << 20  # bytes; a reply is metadata and numbers, never arrays
_FLUSH_S = 2.0  # seconds a child gets to flush its stdio before its output is read


class ChildError(Exception):
    """The candidate's process raised (message from its side) or died (died=True)."""

    def __init__(self, message: str, died: bool = False):
        super().__init__(message)
        self.message, self.died = message, died


class SpawnedChild:
    """A fresh interpreter (`ctx`: a spawn context) running `target(conn)`."""

    def __init__(self, ctx, target: Callable) -> None:
        self.conn, theirs = ctx.Pipe(duplex=True)
        self.output_mb: int | None = None  # the child's file-size limit once its job set it
        self.proc = ctx.Process(target=target, args=(theirs,), daemon=True)
        # A spawned child starts in the parent's working directory, which is the current job's
        # folder: a spare outlives that job, and its folder is removed when the job ends (the
        # worker's private copy at once), so start it from a folder that stays.
        cwd = os.getcwd()
        os.chdir("/")
        try:
            self.proc.start()
        finally:
            os.chdir(cwd)
        theirs.close()  # so the child's death reads as EOF here

    def send(self, kind: str, arg: Any = None) -> None:
        """Send one request without waiting for its reply (ChildError when the child is gone)."""
        try:
            self.conn.send((kind, arg))
        except OSError:
            raise ChildError(self._death(), died=True) from None

    def ask(self, kind: str, arg: Any = None) -> Any:
        """Send one request; the child's value, or ChildError."""
        self.send(kind, arg)
        return self.reply()

    def reply(self) -> Any:
        """The child's reply to the last request sent, or ChildError."""
        try:
            raw = self.conn.recv_bytes(_MAX_REPLY)
        except (EOFError, OSError) as e:
            if self.proc.is_alive() and not isinstance(e, EOFError):
                raise ChildError(f"the candidate's process sent a malformed reply ({e})") from e
            raise ChildError(self._death(), died=True) from None
        try:
            status, value = json.loads(raw)
        except (ValueError, TypeError):
            raise ChildError("the candidate's process sent a malformed reply") from None
        if status == "error":
            raise ChildError(str(value))
        if status != "ok":
            raise ChildError("the candidate's process sent a malformed reply")
        return value

    def _death(self) -> str:
        self.proc.join(10)
        return death_message(self.proc.exitcode, "the candidate's process", self.output_mb)

    def alive(self) -> bool:
        return self.proc.is_alive()

    def flush(self, wait_s: float = _FLUSH_S) -> None:
        """Ask the child to flush its stdio buffers (`flush_stdio`); ChildError when it has not
        answered within `wait_s` (a later reply would be taken for the next request's)."""
        self.send("flush")
        try:
            ready = self.conn.poll(wait_s)
        except OSError:
            ready = True  # the read below names the death
        if not ready:
            raise ChildError("the candidate's process did not flush its output in time")
        self.reply()

    def close(self) -> None:
        """Stop the child (idempotent): ask it to exit, then kill it."""
        if self.proc.is_alive():
            try:
                self.conn.send(("exit", None))
            except OSError:
                pass
            self.proc.join(2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.conn.close()


class Spare:
    """At most one child started ahead of time by `make`, handed out by `take`."""

    def __init__(self, make: Callable[[], SpawnedChild]) -> None:
        self.make = make
        self.child: SpawnedChild | None = None

    def take(self, spare: bool) -> SpawnedChild:
        """A ready child for the next job: the spare started earlier if it is alive, else a new
        one. With `spare`, one more is started in the background for the job after."""
        child, self.child = self.child, None
        if child is None or not child.alive():
            if child is not None:
                child.close()
            child = self.make()
        if spare:
            self.child = self.make()
        return child


def redirect_output(workdir: str, truncate: bool = False) -> None:
    """Make `workdir` the cwd and its `output.log` this process's stdout and stderr (what
    was buffered is flushed first). The worker truncates it at the start of a job; a
    candidate's process appends to it, so both write one log."""
    import sys

    os.chdir(workdir)
    mode = os.O_TRUNC if truncate else os.O_APPEND
    fd = os.open("output.log", os.O_WRONLY | os.O_CREAT | mode, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def read_log(workdir: str | Path, limit: int) -> str:
    """The tail of a job's `output.log` (what the candidate printed), at most `limit` bytes
    ("" when there is none)."""
    p = Path(workdir) / "output.log"
    if not p.exists():
        return ""
    size = p.stat().st_size
    with open(p, "rb") as f:
        f.seek(max(0, size - limit))
        text = f.read().decode(errors="replace")
    return (f"[... {size - limit} bytes cut]\n" if size > limit else "") + text


def flush_stdio() -> None:
    """Flush Python's and C's stdio buffers (what the candidate printed reaches output.log)."""
    import ctypes
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    ctypes.CDLL(None).fflush(None)


def serve(conn, handle: Callable[[str, Any], Any]) -> None:
    """The child's loop: each request `(kind, arg)` is answered `["ok", handle(kind, arg)]` or
    `["error", message]` as JSON bytes, until the connection closes or `("exit",)` arrives.
    `("flush",)` is answered here for every child (`flush_stdio`)."""
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        kind, arg = msg[0], (msg[1] if len(msg) > 1 else None)
        if kind == "exit":
            return
        try:
            value = flush_stdio() if kind == "flush" else handle(kind, arg)
            data = json.dumps(["ok", value]).encode()
        except BaseException as e:  # noqa: BLE001 - the candidate's error is the reply
            data = json.dumps(["error", f"{type(e).__name__}: {str(e)[:500]}"]).encode()
        conn.send_bytes(data)
