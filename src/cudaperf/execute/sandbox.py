"""`WorkerHandle`: one sandboxed worker process for one GPU, restarted after any fault.

The parent talks to `cudaperf.execute.worker` over two pipes (JSON lines). A request that
gets no reply within its timeout kills the worker's whole process group (TIMEOUT); a worker
that dies mid-request (segfault, exit(), file-size or CPU limit) is reported from its exit
signal (RUNTIME_ERROR); in both cases the next request starts a fresh worker. Replies that
ask for a restart (after a CUDA error) also retire the worker.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from cudaperf.execute.config import EvalConfig

log = logging.getLogger(__name__)

__all__ = ["WorkerHandle"]

_SIGNALS = {
    signal.SIGSEGV: "the host code crashed (segmentation fault)",
    signal.SIGBUS: "the host code crashed (bus error)",
    signal.SIGFPE: "the host code crashed (arithmetic exception)",
    signal.SIGABRT: "the process aborted (abort() or a failed assertion)",
    signal.SIGILL: "the host code executed an illegal instruction",
    signal.SIGXFSZ: "the candidate wrote more than the output limit of {mb} MiB",
    signal.SIGXCPU: "the candidate used more than the CPU-time limit",
    signal.SIGKILL: "the worker was killed (out of host memory?)",
}


class WorkerHandle:
    """A worker process bound to one GPU (or none, for CPU-side tests)."""

    def __init__(self, gpu: int | None, config: EvalConfig, python: str = sys.executable):
        self.gpu = gpu  # CUDA_VISIBLE_DEVICES for the worker (None: inherit)
        self.config = config
        self.python = python
        self.proc: subprocess.Popen | None = None
        self.jobs = 0  # requests served by the current process
        self.restarts = 0  # processes started so far minus one
        self.limits: dict = {}  # what the worker could apply (from its ready line)
        self._buf = b""

    def _start(self) -> None:
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        env = dict(os.environ)
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self.gpu)
        limits = {
            "max_output_mb": self.config.max_output_mb,
            "max_open_files": self.config.max_open_files,
            "isolate_network": self.config.isolate_network,
        }
        logdir = self.config.cache_dir / "workers"
        logdir.mkdir(parents=True, exist_ok=True)
        with open(logdir / f"worker-{os.getpid()}-{self.gpu}.log", "ab") as errf:
            self.proc = subprocess.Popen(
                [
                    self.python,
                    "-m",
                    "cudaperf.execute.worker",
                    str(r1),
                    str(w2),
                    json.dumps(limits),
                ],
                pass_fds=(r1, w2),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=errf,
                stderr=errf,
                start_new_session=True,
            )
        os.close(r1)
        os.close(w2)
        self._wf = os.fdopen(w1, "w")
        self._rfd, self._buf, self.jobs = r2, b"", 0
        ready = self._readline(time.monotonic() + 120)
        if ready is None:
            raise RuntimeError(f"worker failed to start: {self._death()}")
        self.limits = json.loads(ready).get("limits", {})

    def _readline(self, deadline: float) -> str | None:
        """One reply line, or None on EOF; raises TimeoutError past the deadline."""
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self._rfd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._rfd, 1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def _death(self) -> str:
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.returncode
        if rc is not None and rc < 0:
            sig = signal.Signals(-rc)
            return _SIGNALS.get(sig, f"the worker died from {sig.name}").format(
                mb=self.config.max_output_mb
            )
        return f"the process exited with code {rc} (exit() called in the candidate?)"

    def kill(self) -> None:
        """Kill the worker's process group (idempotent)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._close()

    def _close(self) -> None:
        for f in (lambda: self._wf.close(), lambda: os.close(self._rfd)):
            try:
                f()
            except OSError:
                pass
        self.proc = None

    def request(self, req: dict, timeout: float) -> dict:
        """Send one request; the reply, or a timeout/crash reply. Restarts as needed."""
        if (
            self.proc is None
            or self.proc.poll() is not None
            or self.jobs >= self.config.worker_max_jobs
        ):
            if self.proc is not None:
                self.kill()
                self.restarts += 1
            self._start()
        self.jobs += 1
        try:
            self._wf.write(json.dumps(req) + "\n")
            self._wf.flush()
            line = self._readline(time.monotonic() + timeout)
        except TimeoutError:
            self.kill()
            return {
                "status": "timeout",
                "message": f"no result within {timeout:.0f} s",
                "configs": [],
            }
        except BrokenPipeError:
            line = None
        if line is None:
            msg = self._death()
            self._close()
            return {"status": "runtime_error", "message": msg, "configs": [], "crashed": True}
        reply = json.loads(line)
        if reply.get("restart"):
            self.kill()
        return reply

    def close(self) -> None:
        self.kill()


def read_log(workdir: Path, limit: int) -> str:
    """The tail of a job's output.log (what the candidate printed), at most `limit` chars."""
    p = Path(workdir) / "output.log"
    if not p.exists():
        return ""
    size = p.stat().st_size
    with open(p, "rb") as f:
        f.seek(max(0, size - limit))
        text = f.read().decode(errors="replace")
    return (f"[... {size - limit} bytes cut]\n" if size > limit else "") + text
