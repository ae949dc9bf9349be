"""PyTorch→CUDA baselines (eager, torch.compile) timed only in requests that run no candidate.

Why: a baseline is cached for every later candidate of its task, and a slow one inflates
every speedup. Before this, the worker appended baseline lines to a copy of the cache file in
its private view and the parent merged new lines back; the candidate's process shares that
view (same mount namespace and user), so its module code could append a forged line with a
huge time, which the trusted side read back in the same job and the parent kept for good.
Signing lines (an HMAC) would not help against a candidate that runs where the lines are made
(C→CUDA host code runs inside the worker; a PyTorch candidate can keep a thread hogging the GPU
while the reference is timed, or plant files in the shared /tmp that the worker then loads),
so the rule is about provenance instead:

- Records reach the cache only through the reply pipe of a `baselines` request, which runs
  the task's reference and nothing else, sent to a worker process that has served no
  candidate since it started (`WorkerHandle` restarts a worker that has); the parent writes
  them to the host file itself, only for keys of that request's task.
- A candidate request gets its task's cached records in the request (never a file) and
  `time_baselines: False`, so nothing a candidate does during its job reaches any baseline;
  whatever it writes is not read back. The worker never sees the host cache file.
- Lines of the host file are used only when they carry `"v": 2` (written this way); older
  lines may have come from a candidate through the old merge and are timed again.

The parent-side half (`missing`, `request`, and the record file of `baseline_records`, which the
C→CUDA track's CPU baselines share) imports no torch;
The worker's op is `torch_trusted.time_baselines` (it draws the inputs the trusted side draws).
"""

from __future__ import annotations

import logging

from cudaperf.execute.baseline_records import task_prefix

__all__ = ["KINDS", "baseline_key", "missing", "request"]

log = logging.getLogger(__name__)

KINDS = ("eager", "compile")


def baseline_key(task_id: str, source: str, config: str, device_id: str, kind: str) -> str:
    """One baseline's cache key: task, content, config, device (GPU name and torch version)."""
    return f"{task_prefix(task_id, source)}{config}:{device_id}:{kind}"


def missing(task: dict, records: dict, device_id: str | None, torch_compile: bool) -> bool:
    """Whether some baseline of `task` (a Task as JSON) is not in `records` (True when the
    device id is not known yet: only a baselines reply tells it)."""
    if not device_id:
        return True
    kinds = KINDS if torch_compile else KINDS[:1]
    return any(
        baseline_key(task["id"], task["source"], c["name"], device_id, k) not in records
        for c in task["configs"]
        for k in kinds
    )


def request(req: dict, workdir: str, records: dict) -> dict:
    """The `baselines` request for the task of candidate request `req` (no candidate code)."""
    keep = (
        "task",
        "salt",
        "warmup",
        "trials",
        "budget_s",
        "max_bandwidth_gbs",
        "torch_compile",
        "cpu_limit_s",
        "output_limit_mb",
        "device",
    )
    return {k: req[k] for k in keep if k in req} | {
        "op": "baselines",
        "workdir": workdir,
        "baselines": records,
        "time_baselines": True,
    }
