"""Result rows of `cudaperf data measure`: their keys, the resume rule, the writer, progress.

A row is one `ExecResult.model_dump(mode="json")` per (task, implementation): the shape
`cudaperf eval --out` writes, so `cudaperf tasks attach RESULTS TASKS` takes it unchanged.
Its `cache_key` is `measure-<hash>` of the task's measured content (everything but its
implementations, description and provenance) and the implementation's id and code: a rerun
skips a pair whose key is already in the file with a final status (anything but
`infra_error`) in the same mode (and, for full runs, on the same GPU model), so a changed
task or implementation is measured again and nothing else is.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from cudaperf.execute.feedback import status_feedback, timing_feedback
from cudaperf.execute.results import truncate
from cudaperf.execute.types import Candidate, ConfigResult, ExecResult, Status, geomean
from cudaperf.tasks.measurements import BULK_PROTOCOL
from cudaperf.tasks.model import Implementation, Task, TaskKind

log = logging.getLogger(__name__)

__all__ = [
    "Output",
    "Progress",
    "RowContext",
    "done_pairs",
    "make_row",
    "pair_key",
    "task_content_hash",
]


# Param fields added after the first measured dataset: left out of the hashed JSON while they
# hold their default, so that adding a field does not invalidate every measurement made.
_LATER_PARAM_DEFAULTS = (',"partial_read":false',)


def task_content_hash(task: Task) -> str:
    """Hash of what a measurement depends on (not implementations, description, provenance)."""
    body = task.model_dump_json(exclude={"implementations", "description", "provenance"})
    for default in _LATER_PARAM_DEFAULTS:  # pydantic's own float format must stay: no re-dump
        body = body.replace(default, "")
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def pair_key(task: Task, impl: Implementation) -> str:
    """The `cache_key` of a (task, implementation) row."""
    blob = "\0".join([task_content_hash(task), impl.id, impl.code])
    return "measure-" + hashlib.sha256(blob.encode()).hexdigest()[:24]


class RowContext:
    """What every row of a bulk run shares (mode, GPU name, arch, versions); the evaluator's
    `Env` is the node's, with its GPUs and secret salt."""

    def __init__(self, mode: str, gpu: str, arch: str, versions: dict, max_log_chars: int = 4000):
        self.mode = mode  # "full" or "compile-only"
        self.gpu = gpu  # nvidia-smi name ("" when compile-only)
        self.arch = arch
        self.versions = versions
        self.max_log_chars = max_log_chars


def make_row(
    env: RowContext,
    task: Task,
    impl: Implementation,
    status: Status,
    *,
    configs: list[ConfigResult] | None = None,
    message: str = "",
    compile_log: str = "",
    findings: tuple[str, ...] = (),
    wall_s: float = 0.0,
) -> dict:
    """One validated ExecResult as a JSON-ready dict (the evaluator's JSON: inf is null)."""
    configs = configs or []
    kw: dict = {}
    if env.mode == "compile-only" and status is Status.COMPILED:
        fb = ["compile-only: no GPU here, so nothing was run, checked or timed"]
    elif not configs and message:
        fb = [
            message
            if message.startswith(("compile error", "link error", "rejected"))
            else f"{status.value}: {message}"
        ]
    else:
        fb = status_feedback(status, configs, message)
    if status is Status.OK:
        fb += timing_feedback(configs)
        if all(c.cpu_timing and c.timing for c in configs):
            kw["speedup_vs_cpu"] = geomean(
                [c.cpu_timing.median_us / c.timing.median_us for c in configs]
            )
    res = ExecResult(
        status=status,
        mode=env.mode,  # type: ignore[arg-type]
        task_id=task.id,
        candidate_hash=Candidate(code=impl.code).hash,
        candidate_id=impl.id,
        configs=configs,
        compile_log=truncate(compile_log, env.max_log_chars),
        runtime_log=truncate(message, env.max_log_chars) if configs else "",
        feedback=fb,
        findings=list(findings),
        gpu=env.gpu,
        arch=env.arch,
        versions=env.versions,
        wall_s=max(wall_s, 0.0),
        cache_key=pair_key(task, impl),
        protocol=BULK_PROTOCOL,
        **kw,
    )
    # through JSON text, as the evaluator writes rows: non-finite errors become null
    return json.loads(res.model_dump_json())


def read_rows(path: Path) -> list[dict]:
    """Rows of a results file; a line cut by an interruption (or not JSON) is skipped."""
    if not path.exists():
        return []
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            log.warning("%s:%d is not valid JSON (cut by an interruption?); ignored", path, n)
    return rows


def done_pairs(rows: list[dict], tasks: list[Task], mode: str, gpu: str) -> set[tuple[str, str]]:
    """(task id, implementation id) pairs that need no new measurement (see module doc).
    PyTorch→CUDA rows written by another module are matched by their candidate hash."""
    final: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if r.get("mode") != mode or r.get("status") in (None, Status.INFRA_ERROR.value):
            continue
        if mode == "full" and r.get("gpu") != gpu:
            continue
        final.setdefault((r.get("task_id"), r.get("candidate_id")), []).append(r)
    done = set()
    for t in tasks:
        for impl in t.implementations:
            got = final.get((t.id, impl.id), [])
            key, h = pair_key(t, impl), Candidate(code=impl.code).hash
            for r in got:
                foreign = t.kind is TaskKind.TORCH2CUDA and not str(
                    r.get("cache_key", "")
                ).startswith("measure-")
                if r.get("cache_key") == key or (foreign and r.get("candidate_hash") == h):
                    done.add((t.id, impl.id))
                    break
    return done


class Output:
    """Appends rows from any thread; one writer thread writes, flushes and fsyncs each line,
    so the GPU threads never wait for the disk."""

    def __init__(self, path: Path, on_row: Callable[[dict], None] | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._q: queue.Queue = queue.Queue()
        self._on_row = on_row
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if self.path.stat().st_size and not self.path.read_bytes()[-1:] == b"\n":
            os.write(self._fd, b"\n")  # the last line was cut: start a fresh one
        self._thread = threading.Thread(target=self._loop, name="measure-writer", daemon=True)
        self._thread.start()

    def put(self, row: dict) -> None:
        self._q.put(row)

    def _loop(self) -> None:
        while True:
            row = self._q.get()
            if row is None:
                return
            data = (json.dumps(row) + "\n").encode()
            while data:
                data = data[os.write(self._fd, data) :]
            os.fsync(self._fd)
            if self._on_row:
                self._on_row(row)

    def close(self) -> None:
        self._q.put(None)
        self._thread.join()
        os.close(self._fd)


class Progress:
    """Counts by status, rate and ETA; `snapshot()` is what the CLI prints."""

    def __init__(self, total_impls: int, total_tasks: int):
        self.total_impls, self.total_tasks = total_impls, total_tasks
        self.statuses: Counter[str] = Counter()
        self.tasks_done = 0
        self.t0 = time.monotonic()
        self._lock = threading.Lock()

    listener: Callable[[dict], None] | None = None  # called with a snapshot after each change

    def row(self, row: dict) -> None:
        with self._lock:
            self.statuses[row.get("status", "?")] += 1
        self._tell()

    def task(self) -> None:
        with self._lock:
            self.tasks_done += 1
        self._tell()

    def _tell(self) -> None:
        if self.listener is not None:
            self.listener(self.snapshot())

    def snapshot(self) -> dict:
        with self._lock:
            done = sum(self.statuses.values())
            el = time.monotonic() - self.t0
            rate = done / el * 60 if el > 0 else 0.0
            left = max(self.total_impls - done, 0)
            return {
                "impls_done": done,
                "impls_total": self.total_impls,
                "tasks_done": self.tasks_done,
                "tasks_total": self.total_tasks,
                "statuses": dict(self.statuses),
                "elapsed_s": el,
                "impls_per_min": rate,
                "eta_s": left / rate * 60 if rate > 0 else None,
            }
