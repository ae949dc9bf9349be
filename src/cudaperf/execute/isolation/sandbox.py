"""`WorkerHandle`: one sandboxed worker process for one GPU, restarted after any fault.

The parent talks to `cudaperf.execute.isolation.worker` over two pipes (JSON lines), as a
`supervise.LineChild` in its own session. A request that
gets no reply within its timeout kills the worker's whole process group (TIMEOUT); a worker
that dies mid-request (segfault, exit(), file-size or CPU limit) is reported from its exit
signal (RUNTIME_ERROR); in both cases the next request starts a fresh worker. Replies that
ask for a restart (after a CUDA error) also retire the worker.

With `EvalConfig.isolate_files` the worker is confined by the kernel (`confine`): its /tmp,
/dev/shm and the evaluator's cache dir are empty private tmpfs, everything else is read-only,
it has no network, no capabilities and a seccomp filter. Compiled libraries (`<cache>/build`,
the native cache) stay readable. Per request the parent stages what the job names (its
workdir, libraries outside those folders, a load_inline extension folder, the baseline cache)
into the worker's private view at the same paths, and copies `output.log` back afterwards;
the worker never sees another candidate's folder. The PyTorch baseline cache is never staged:
its records travel in the request, and new ones come only from a `baselines` request to a
worker process that has served no candidate (`baseline_job` says why).
A job's `VisibleOutput` line (the candidate's output before its first held-out config) is
kept and put into a timeout's or a crash's reply as `output`, so what the candidate printed
with a held-out size in hand never reaches a result (`held_out`).
Every reply (timeouts and crashes included) carries `protections`: the `confine.Protections`
the worker reported when it started (set here, never read from the worker's own reply), which
`Evaluator.finish` puts into `ExecResult.protections` as the "run" stage.
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cudaperf.execute import baseline_records
from cudaperf.execute.c import baselines as c_baselines
from cudaperf.execute.config import EvalConfig
from cudaperf.execute.gate import QuietGate, quiet
from cudaperf.execute.isolation import confine
from cudaperf.execute.isolation.share import open_lock_fds
from cudaperf.execute.isolation.supervise import LineChild, death_message, gpu_env
from cudaperf.execute.protocol import VisibleOutput
from cudaperf.execute.pytorch import baseline_job

log = logging.getLogger(__name__)

__all__ = ["WorkerHandle", "available_memory", "set_cache_bytes"]


def available_memory() -> int:
    """Bytes of host memory available now (/proc/meminfo's MemAvailable; else free pages)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 8 << 30


def set_cache_bytes(gib: float | None, workers: int = 1) -> int:
    """One worker's byte bound for cached input sets: `gib` GiB, or for None half the host's
    available memory shared by `workers` workers and by the processes on this host that each
    run an evaluator (LOCAL_WORLD_SIZE, which `accelerate launch` and `torchrun` set), at
    least 1 GiB."""
    if gib is not None:
        return int(gib * (1 << 30))
    try:
        procs = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        procs = 1
    return max(1 << 30, available_memory() // 2 // max(1, workers) // procs)


class WorkerHandle:
    """A worker process bound to one GPU (or none, for CPU-side tests)."""

    def __init__(
        self,
        gpu: int | None,
        config: EvalConfig,
        python: str = sys.executable,
        arch: str | None = None,
        peers: int = 1,
        gate: QuietGate | None = None,
        slot: int = 0,
        sharers: int = 1,
    ):
        self.gpu = gpu  # CUDA_VISIBLE_DEVICES for the worker (None: inherit)
        self.slot = slot  # which of the GPU's workers this is (0 .. sharers - 1)
        self.sharers = sharers  # workers on this GPU: > 1 takes turns through `share`
        self.wait_s = 0.0  # seconds the current request's worker waited for the GPU (`share`)
        self.config = config
        self.set_cache_bytes = set_cache_bytes(config.set_cache_gib, peers)  # peers: workers
        self.python = python
        self.arch = arch or config.arch  # nvcc arch of the prebuilds (TORCH_CUDA_ARCH_LIST)
        self.child: LineChild | None = None  # the current worker process
        self.proc = None  # its Popen (None: no live worker)
        self.jobs = 0  # requests served by the current process
        self.restarts = 0  # processes started so far minus one
        self.limits: dict = {}  # what the worker could apply (from its ready line)
        self.protections: dict = {}  # confine.Protections of the current worker, as a dict
        self._views: dict[str, int] = {}  # private path -> O_PATH fd of the worker's tmpfs
        self._staged: list[str] = []  # staged paths (private view) to remove after the job
        self.tainted = False  # the current process has been sent candidate code
        self._baselined: set[str] = set()  # tasks (content prefix) whose baselines were asked
        # a task's records once none is missing (prefix -> key -> Timing as a dict): later
        # jobs of the task read no file (the host file holds every task's lines)
        self._complete: dict[str, dict[str, dict]] = {}
        self._device_id: str | None = None  # baseline key's device part, from a clean reply
        self._clean_s = 0.0  # seconds in clean (baseline) requests: a job's `baseline` phase
        self.gate = gate  # CPU baselines are timed in gate.quiet() (the compile pool idle)
        self._host: str | None = None  # CPU-baseline key's host part (`c_baselines.host_id`)

    def policy(self) -> confine.Policy | None:
        """The worker's confinement (None when `isolate_files` is off)."""
        if not self.config.isolate_files:
            return None
        cache = self.config.cache_dir.expanduser()
        native = Path.home() / ".cache" / "cudaperf"
        for d in (cache / "build", native / "native"):  # present before the worker starts,
            d.mkdir(parents=True, exist_ok=True)  # so builds made later are visible inside
        # tempfile's folder too: the evaluator makes each job's workdir there (TMPDIR may move it)
        private = ["/tmp", "/dev/shm", tempfile.gettempdir(), str(cache), str(native)]
        readable = [str(cache / "build"), str(native / "native")]
        return confine.Policy(
            private=tuple(dict.fromkeys(private)),
            readable=tuple(r for r in readable if Path(r).is_dir()),
            network=not self.config.isolate_network,
        )

    def _start(self) -> None:
        env = gpu_env(dict(os.environ), self.gpu, self.arch)
        policy = self.policy()
        limits = {
            "max_output_mb": self.config.max_output_mb,
            "max_open_files": self.config.max_open_files,
            "isolate_network": self.config.isolate_network and policy is None,
            "set_cache_bytes": self.set_cache_bytes,
        }
        share_fds = open_lock_fds(self.config.cache_dir, self.gpu) if self.sharers > 1 else ()
        if share_fds:
            limits["share_fds"] = list(share_fds)
        rr, rw = os.pipe() if policy else (-1, -1)

        def command(rfd: int, wfd: int) -> list[str]:
            target = [
                "-m",
                "cudaperf.execute.isolation.worker",
                str(rfd),
                str(wfd),
                json.dumps(limits),
            ]
            if policy is None:
                return [self.python, *target]
            return [self.python, *confine.command(policy, target, rw)[1:]]

        if policy:
            env.setdefault("TRITON_CACHE_DIR", "/tmp/.triton")  # home is read-only in there
            env.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/.inductor")
        logdir = self.config.cache_dir / "workers"
        logdir.mkdir(parents=True, exist_ok=True)
        log_path = logdir / f"worker-{os.getpid()}-{self.gpu}-{self.slot}.log"
        fds = ((rw,) if policy else ()) + share_fds
        try:
            self.child = LineChild(command, env, log_path, pass_fds=fds)
        except BaseException:
            if policy:
                os.close(rr)
            raise
        finally:
            if policy:
                os.close(rw)
            for fd in share_fds:  # the worker's own copies are the lock's holders
                os.close(fd)
        self.proc = self.child.proc
        self.jobs, self.tainted = 0, False
        if policy:
            self._read_protections(rr)
        else:
            self.protections = {"active": [], "missing": {"all": "isolate_files is off"}}
        ready = self.child.readline(time.monotonic() + 120)
        if ready is None:
            raise RuntimeError(f"worker failed to start: {self._death()}")
        self.limits = json.loads(ready).get("limits", {})
        if policy:
            self.limits["network_isolated"] = "net_ns" in self.protections.get("active", [])
            self._open_views(policy)

    def _read_protections(self, fd: int) -> None:
        with os.fdopen(fd) as f:
            ready, _, _ = select.select([f], [], [], 120)
            line = f.readline() if ready else ""
        self.protections = json.loads(line) if line.strip() else {}
        confine.log_once("GPU worker", self.protections)

    def _open_views(self, policy: confine.Policy) -> None:
        """Hold the worker's private tmpfs open (they outlive a crash, for output.log)."""
        assert self.proc is not None
        if "private_tmpfs" not in self.protections.get("active", []):
            return
        for d in policy.private:
            try:
                fd = os.open(f"/proc/{self.proc.pid}/root{d}", os.O_PATH | os.O_DIRECTORY)
            except OSError as e:
                log.warning("cannot reach the worker's private %s: %s", d, e)
                continue
            self._views[d] = fd

    def _view(self, path: str) -> str | None:
        """Where `path` of the worker's private view is reachable from here (None: not in
        a private folder, the worker sees the host's copy)."""
        path = os.path.abspath(path)
        hits = [d for d in self._views if path == d or path.startswith(d + "/")]
        readable = self.policy().readable if self.config.isolate_files else ()
        if not hits or any(path.startswith(r + "/") for r in readable):
            return None
        d = max(hits, key=len)
        return f"/proc/self/fd/{self._views[d]}" + path[len(d) :]

    def _stage(self, req: dict) -> None:
        """Copy what the job names into the worker's private view, at the same paths."""
        self._staged = []
        for key in ("workdir", "lib", "ref_lib", "trace_lib", "ext_dir"):
            src = req.get(key)
            dst = self._view(src) if src else None
            if dst is None:
                continue
            if key == "workdir":
                os.makedirs(dst, exist_ok=True)
            elif os.path.isdir(src):
                shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
            elif os.path.isfile(src):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(src, dst)
            self._staged.append(src)

    def _unstage(self, req: dict) -> None:
        """Bring output.log back; remove the staged copies."""
        for src in self._staged:
            dst = self._view(src)
            if dst is None:
                continue
            try:
                if src == req.get("workdir") and os.path.isfile(dst + "/output.log"):
                    shutil.copyfile(dst + "/output.log", os.path.join(src, "output.log"))
                shutil.rmtree(dst) if os.path.isdir(dst) else os.unlink(dst)
            except OSError as e:
                log.warning("unstaging %s from the worker failed: %s", src, e)
        self._staged = []

    def _death(self) -> str:
        rc = self.child.exit_status(10)
        if rc is None:
            self.kill()
            rc = self.child.proc.returncode
        return death_message(rc, "the candidate's process", self.config.max_output_mb)

    def kill(self) -> None:
        """Kill the worker's process group (idempotent)."""
        if self.proc is None:
            return
        self.child.kill()
        self._close()

    def _close(self) -> None:
        for fd in self._views.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._views = {}
        self.proc = None

    def request(self, req: dict, timeout: float) -> dict:
        """Send one request; the reply, or a timeout/crash reply. Restarts as needed. A
        PyTorch→CUDA request naming a `baseline_cache` gets its task's records in the request
        instead (see `baseline_job`); its own reply's baseline claims are never read."""
        clean_s = self._clean_s
        if req.get("op") == "torch" and req.get("baseline_cache"):
            req = self._with_baselines(req)
        elif req.get("op") == "run" and req.get("cpu_baseline_cache"):
            req = self._with_cpu_baselines(req)
        reply = self._send(req, timeout)
        if self._clean_s > clean_s:  # this job's task had its baselines timed first
            took = round(self._clean_s - clean_s, 4)
            reply["phases"] = {**(reply.get("phases") or {}), "baseline": took}
        if self.wait_s > 0:  # waited for the GPU's other workers (in no other phase)
            reply["phases"] = {**(reply.get("phases") or {}), "wait": round(self.wait_s, 4)}
        return reply

    def _with_cpu_baselines(self, req: dict) -> dict:
        """`req` without the cache path, with its task's CPU baselines (`c.baselines`): read
        from the host file, the missing ones first timed in clean `c_baselines` requests."""
        path, task = req["cpu_baseline_cache"], req["task"]
        if self._host is None:
            self._host = c_baselines.host_id(
                self.config.gcc, req["cpu_trials"], req["cpu_budget_s"]
            )
        prefix = c_baselines.key_prefix(task, self._host)
        records = self._complete.get(prefix)
        if records is None:
            records = baseline_records.read_records(path, prefix)
            if prefix not in self._baselined and c_baselines.missing(task, records, prefix):
                self._baselined.add(prefix)  # asked once per handle, whatever the answer
                records |= self._clean_cpu_baselines(req, path, prefix)
            if not c_baselines.missing(task, records, prefix):
                self._complete[prefix] = records
        out = {k: v for k, v in req.items() if k != "cpu_baseline_cache"}
        return out | {"cpu_baselines": {k[len(prefix) :]: t for k, t in records.items()}}

    def _clean_cpu_baselines(self, req: dict, path: str, prefix: str) -> dict:
        """Draw the task's input sets (the compile pool running), then time the reference with
        the pool quiet (`gate`); the new records, also appended to the host file. A phase that
        fails adds none: the task's jobs then report no CPU baseline, never a noisy one."""
        for phase in ("draw", "time"):
            with quiet(self.gate if phase == "time" else None):
                reply = self._send_clean(
                    lambda workdir, phase=phase: c_baselines.request(req, workdir, phase, prefix)
                )
            if reply.get("status") != "ok":
                log.warning(
                    "CPU baselines of %s (%s) failed: %s",
                    req["task"]["id"],
                    phase,
                    reply.get("message"),
                )
                return {}
        got = baseline_records.accepted(reply, prefix)
        baseline_records.append_records(path, got)
        return got

    def _with_baselines(self, req: dict) -> dict:
        """`req` without the cache path, with its task's cached records and `time_baselines`
        False; first asks a clean worker process for the task's missing baselines."""
        path, task = req["baseline_cache"], req["task"]
        prefix = baseline_records.task_prefix(task["id"], task["source"])
        torch_compile = bool(req.get("torch_compile", True))
        records = self._complete.get(f"{prefix}{torch_compile}")
        if records is None:
            records = baseline_records.read_records(path, prefix)
            if prefix not in self._baselined and baseline_job.missing(
                task, records, self._device_id, torch_compile
            ):
                self._baselined.add(prefix)
                records |= self._clean_baselines(req, path, prefix, records)
            if not baseline_job.missing(task, records, self._device_id, torch_compile):
                self._complete[f"{prefix}{torch_compile}"] = records
        out = {k: v for k, v in req.items() if k != "baseline_cache"}
        return out | {"baselines": records, "time_baselines": False}

    def _clean_baselines(self, req: dict, path: str, prefix: str, records: dict) -> dict:
        """Time the missing baselines in `baselines` requests (eager, then torch.compile, so a
        slow compile cannot cost the eager ones) on a worker process that has run no candidate
        code (a tainted one is replaced first); the new records, also appended to the host
        cache. A request that fails adds none (no baseline, no verdict on the candidate)."""
        if self.tainted:
            self.kill()
            self.restarts += 1
        new: dict = {}
        for compile_ in (False, True) if req.get("torch_compile", True) else (False,):
            reply = self._send_clean(
                lambda workdir, c=compile_, known=records | new: baseline_job.request(
                    req | {"torch_compile": c}, workdir, known
                )
            )
            if reply.get("status") != "ok":
                log.warning("baselines of %s failed: %s", req["task"]["id"], reply.get("message"))
                continue
            self._device_id = str(reply.get("device_id") or "") or None
            got = baseline_records.accepted(reply, prefix)
            baseline_records.append_records(path, got)
            new |= got
        return new

    def _send_clean(self, make: Callable[[str], dict]) -> dict:
        """A request that runs no candidate (baselines of either track): `make(workdir)` in a
        folder of its own, removed after the reply, with the baselines' longer timeout."""
        workdir = tempfile.mkdtemp(prefix="cudaperf-base-")
        t = time.perf_counter()
        try:
            timeout = self.config.run_timeout_s + self.config.baseline_timeout_s
            return self._send(make(workdir), timeout)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
            self._clean_s += time.perf_counter() - t

    def _send(self, req: dict, timeout: float) -> dict:
        """One request to the worker, as it is (see `request`)."""
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
        self.tainted |= req.get("op") in ("run", "torch")  # candidate code reaches it
        prot = dict(self.protections)  # what this request's candidate ran under (every path)
        self._stage(req)
        ahead: dict = {}  # the candidate's output before its held-out configs (`held_out`)
        try:
            line = self._reply_line(req, time.monotonic() + timeout, ahead)
        except TimeoutError:
            self._unstage(req)
            self.kill()
            msg = f"no result within {timeout:.0f} s"
            return {
                "status": "timeout",
                "message": msg,
                "configs": [],
                "protections": prot,
                **ahead,
            }
        self._unstage(req)
        if line is None:
            msg = self._death()
            self._close()
            return {
                "status": "runtime_error",
                "message": msg,
                "configs": [],
                "crashed": True,
                "protections": prot,
                **ahead,
            }
        reply = json.loads(line)
        reply["protections"] = prot  # set here, never taken from the worker's own reply
        reply["sandbox"] = confine.Protections(**prot).summary() if prot else "none"
        if reply.get("restart"):
            self.kill()
        return reply

    def _reply_line(self, req: dict, deadline: float, ahead: dict) -> str | None:
        """Send `req`; the reply's line (None: the worker died). `VisibleOutput` lines before
        it are kept in `ahead` as {"output": text}. Raises TimeoutError at `deadline`, which
        moves by the time the worker said it waited for the GPU's other workers (`share`):
        while it waits, the deadline is that of a wait for each other worker's longest job."""
        if not self.child.send(req):
            return None
        self.wait_s, since = 0.0, None
        limit = deadline - time.monotonic()
        while True:
            if since is None:
                line = self.child.readline(deadline)
            else:  # the others' jobs end within their own timeouts, or their workers are killed
                line = self.child.readline(since + self.sharers * (limit + 60))
            if line is None:
                return line
            if line.startswith('{"lock_wait"') and self.sharers > 1:
                now = time.monotonic()
                if json.loads(line)["lock_wait"]:
                    since = now if since is None else since
                elif since is not None:
                    self.wait_s += now - since
                    deadline += now - since
                    since = None
                continue
            if not line.startswith('{"visible_output"'):
                return line
            ahead["output"] = VisibleOutput.model_validate_json(line).visible_output

    def close(self) -> None:
        self.kill()
