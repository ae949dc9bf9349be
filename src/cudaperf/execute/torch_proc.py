"""`CandidateProcess`: the trusted side's handle on one spawned candidate process.

Requests go to the child pickled by `torch.multiprocessing` (tensors as CUDA IPC handles or
shared memory); replies come back as JSON bytes, never pickles, so nothing the candidate sends
can run code in the trusted process. A child that dies (segfault, output limit, `exit()`)
or that replies with something malformed raises `ChildError` with a message for the model;
the handle is then useless and is closed. One job per child: `torch_trusted` closes it at the
end of every job, whatever happened, so a sticky CUDA error (which poisons the whole CUDA
context of the child) never meets the next candidate. A spare child can be started ahead of
time so the next job does not wait for `import torch` and CUDA initialisation.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from cudaperf.execute.supervise import death_message

__all__ = ["CandidateProcess", "ChildError", "take_child"]

log = logging.getLogger(__name__)

_MAX_REPLY = 1 << 20  # bytes; a reply is metadata and numbers, never tensors
_spare: CandidateProcess | None = None


class ChildError(Exception):
    """The candidate's process raised (message from its side) or died (died=True)."""

    def __init__(self, message: str, died: bool = False):
        super().__init__(message)
        self.message, self.died = message, died


class CandidateProcess:
    """A fresh interpreter (spawn start method) running `torch_child.child_main`."""

    def __init__(self) -> None:
        import torch.multiprocessing as tmp

        from cudaperf.execute.torch_child import child_main

        ctx = tmp.get_context("spawn")
        self.conn, theirs = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=child_main, args=(theirs,), daemon=True)
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

    def ask(self, kind: str, arg: Any = None) -> Any:
        """Send one request; the child's value, or ChildError."""
        try:
            self.conn.send((kind, arg))
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
        return death_message(self.proc.exitcode, "the candidate's process")

    def alive(self) -> bool:
        return self.proc.is_alive()

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


def take_child(spare: bool) -> CandidateProcess:
    """A ready child for the next job: the spare started earlier if it is alive, else a new one.
    With `spare`, one more is started in the background for the job after."""
    global _spare
    child, _spare = _spare, None
    if child is None or not child.alive():
        if child is not None:
            child.close()
        child = CandidateProcess()
    if spare:
        _spare = CandidateProcess()
    return child
