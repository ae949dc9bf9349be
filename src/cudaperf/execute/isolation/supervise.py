"""One supervisor for the evaluator's GPU child processes.

Both long-lived GPU children, the evaluator's sandboxed worker (`sandbox.WorkerHandle`) and
the bulk runner of `cudaperf data measure` (`bulk.drive.GpuDriver`), are a `LineChild`: a
process in its own session (so one `killpg` takes everything it started: nvcc, a spawned
candidate process, a stray fork), that reads JSON requests from one pipe and writes JSON lines
on another, both passed as file descriptor numbers in its argv, never its stdin/stdout (which
the candidate's own prints may reach). The parent reads a line with a deadline (`TimeoutError`
past it, `None` at EOF), and explains a death from its exit status with one table of signals
(`death_message`), also used for the spawned PyTorch candidate process (`torch_proc`).

`gpu_env` is the one place a child's GPU environment is set: the GPU index counted in
nvidia-smi's order (`CUDA_DEVICE_ORDER=PCI_BUS_ID`, so index N is the same card for CUDA, for
nvidia-smi and for the train layout), and the `TORCH_CUDA_ARCH_LIST` the prebuilds used (so
torch finds a `load_inline` build up to date instead of rebuilding it inside the child).

The bulk phase of PyTorch→CUDA tasks (`bulk.torch_phase`) is not a `LineChild`: it is a
multiprocessing child whose only channel is its results file, watched for signs of life.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["LineChild", "death_message", "exit_with_parent", "gpu_env"]

log = logging.getLogger(__name__)

# What a death by each signal means, as the end of "<who> <...>" ("the worker crashed ...").
_DEATHS = {
    signal.SIGSEGV: "crashed in host code (segmentation fault)",
    signal.SIGBUS: "crashed in host code (bus error)",
    signal.SIGFPE: "crashed in host code (arithmetic exception)",
    signal.SIGABRT: "aborted (abort() or a failed assertion)",
    signal.SIGILL: "executed an illegal instruction in host code",
    signal.SIGXFSZ: "wrote more than the output limit{limit}",
    signal.SIGXCPU: "used more than the CPU-time limit",
    signal.SIGKILL: "was killed (out of host memory?)",
}


def death_message(rc: int | None, who: str, output_mb: int | None = None) -> str:
    """Why a child with exit status `rc` (Popen's: negative for a signal) ended, as a sentence
    about `who` ("the worker", "the candidate's process")."""
    if rc is None:
        return f"{who} stopped answering"
    if rc < 0:
        try:
            sig = signal.Signals(-rc)
        except ValueError:
            return f"{who} died from signal {-rc}"
        text = _DEATHS.get(sig, f"died from {sig.name}")
        return f"{who} " + text.format(limit=f" of {output_mb} MiB" if output_mb else "")
    return f"{who} exited with code {rc} (exit() called in the candidate?)"


def gpu_env(env: dict[str, str], gpu: int | None, arch: str | None = None) -> dict[str, str]:
    """`env` for a child bound to GPU `gpu` (None: the GPUs of `env` as they are), building
    for `arch` when given or when `env` already names a TORCH_CUDA_ARCH_LIST."""
    if gpu is not None:
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # nvidia-smi's numbering, not fastest-first
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    if arch is not None or "TORCH_CUDA_ARCH_LIST" in env:
        from cudaperf.execute.build import torch_arch_list

        env["TORCH_CUDA_ARCH_LIST"] = torch_arch_list(arch or "sm_90", env)
    return env


def exit_with_parent(request_fd: int, every_s: float = 0.5) -> threading.Thread:
    """In a `LineChild`: kill this child's whole process group once the parent is gone.

    A child runs in its own session, so a parent killed by a signal (SIGTERM from `timeout`,
    SIGKILL, a crash) takes none of it along: a worker in the middle of a hanging kernel would
    keep the GPU busy for ever, and every later timing on that GPU would wait on it (time-sliced
    contexts). The parent holds the only write end of the request pipe, so its death shows as
    POLLHUP on `request_fd`, polled without reading by a daemon thread (a thread, not
    PR_SET_PDEATHSIG, which fires when the parent's starting thread ends, not the parent)."""

    # The watcher's own copy: the child closing its `request_fd` on a normal exit must read as
    # nothing (polling a closed fd gives POLLNVAL, a reused one watches another file).
    fd = os.dup(request_fd)

    def watch() -> None:
        poller = select.poll()
        poller.register(fd, 0)  # no events asked: POLLHUP/POLLERR are always reported
        while True:
            for _, ev in poller.poll(every_s * 1000):
                if ev & (select.POLLHUP | select.POLLERR):
                    os.killpg(os.getpgrp(), signal.SIGKILL)  # candidates and nvcc too
                    os._exit(137)  # not the group leader after all: this process at least

    t = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    t.start()
    return t


class LineChild:
    """A child process that speaks JSON lines over two passed pipes, in its own session."""

    def __init__(
        self,
        command: Callable[[int, int], Sequence[str]],
        env: dict[str, str],
        log_path: Path | None = None,
        pass_fds: Sequence[int] = (),
    ):
        """Start `command(request_fd, reply_fd)` (the fds the child reads requests from and
        writes replies to); its stdout and stderr go to `log_path` (appended; None: dropped),
        its stdin is /dev/null. `pass_fds` are more fds the child inherits (the caller closes
        its copies)."""
        r_req, w_req = os.pipe()
        r_rep, w_rep = os.pipe()
        theirs = (r_req, w_rep, *pass_fds)
        try:
            with open(log_path or os.devnull, "ab") as errf:
                self.proc = subprocess.Popen(
                    list(command(r_req, w_rep)),
                    pass_fds=theirs,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=errf,
                    stderr=errf,
                    start_new_session=True,
                )
        except BaseException:
            for fd in (w_req, r_rep):
                os.close(fd)
            raise
        finally:
            for fd in (r_req, w_rep):
                os.close(fd)
        self.pid = self.proc.pid
        self._w = os.fdopen(w_req, "w")
        self._rfd: int | None = r_rep
        self._buf = b""

    def send(self, obj: dict) -> bool:
        """Write one request line; False when the child no longer reads (it died)."""
        try:
            self._w.write(json.dumps(obj) + "\n")
            self._w.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):  # ValueError: closed after a kill
            return False

    def readline(self, deadline: float) -> str | None:
        """The next reply line, or None at EOF (the child died or closed its end); raises
        TimeoutError when none is complete by `deadline` (time.monotonic())."""
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            try:
                ready, _, _ = select.select([self._rfd], [], [], left)
                if not ready:
                    continue
                chunk = os.read(self._rfd, 1 << 16)  # type: ignore[arg-type]
            except (OSError, TypeError, ValueError):  # closed by a kill from another thread
                return None
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def read_json(self, deadline: float) -> dict | None:
        """The next reply line that is a JSON object (others are logged and skipped); None at
        EOF; TimeoutError past `deadline`."""
        while True:
            line = self.readline(deadline)
            if line is None:
                return None
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                obj = None
            if isinstance(obj, dict):
                return obj
            log.warning("child %s wrote a line that is not a JSON object: %r", self.pid, line[:200])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_status(self, wait_s: float) -> int | None:
        """Its exit status, waiting up to `wait_s` for it to end (None: still running)."""
        try:
            return self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """Kill the child's whole process group and close the pipes (idempotent)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is None:  # not a group leader after all: the child at least
            self.proc.kill()
        self.proc.wait()
        self._close()

    def stop(self, farewell: dict | None = None, grace_s: float = 30.0) -> None:
        """Ask the child to end (`farewell` as its last request), wait up to `grace_s`, then
        kill its process group: the group goes in every case (what it started goes too)."""
        if farewell is not None and self.alive() and self.send(farewell):
            self.exit_status(grace_s)
        self.kill()

    def _close(self) -> None:
        for close in (self._w.close, lambda: os.close(self._rfd)):  # type: ignore[arg-type]
            try:
                close()
            except (OSError, TypeError, ValueError):
                pass
        self._rfd = None
