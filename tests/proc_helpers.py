"""Process helpers shared by the test packages: is a process (or process group) gone, and
the cleanup that kills a test's child together with its process group and descendants.

Imported as `from tests.proc_helpers import ...` (pytest's importlib mode resolves `tests`
from the rootdir, also under a bare `pytest`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time


def pid_gone(pid: int) -> bool:
    """Whether process `pid` has ended. A zombie (killed, not yet reaped by whoever
    inherited it) counts as gone. One look, no waiting."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def group_gone(pgid: int, within_s: float, every_s: float = 0.1) -> bool:
    """Whether process group `pgid` has no member left within `within_s` seconds, looking
    every `every_s` seconds; False when a member is still there at the deadline."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(every_s)
    return False


def kill_group(p: subprocess.Popen, wait_s: float | None = None) -> None:
    """SIGKILL the process group of `p` (started with `start_new_session=True`) and every
    descendant of `p`, wherever it lives: torchrun starts each worker in a session of its
    own, and a worker that outlived the kill kept `p`'s pipes open, so the `communicate`
    after it waited forever (a hung CI run, 2026-12-06). A group with no member left is
    fine. With `wait_s`, then wait for `p` and read its pipes to the end (`communicate`) for
    at most that many seconds."""
    import psutil  # accelerate's dependency

    try:
        kids = psutil.Process(p.pid).children(recursive=True)  # before they are orphaned
    except psutil.NoSuchProcess:
        kids = []
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for k in kids:
        with contextlib.suppress(psutil.NoSuchProcess):
            k.kill()
    if wait_s is not None:
        p.communicate(timeout=wait_s)
