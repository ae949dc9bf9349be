"""The C→CUDA track's CPU baseline (the serial C reference), timed once per task, config and
host, in requests that run no candidate, with the compile pool quiet, and kept on disk.

Before this, each C→CUDA job timed the reference itself, the first time the worker met the
task: inside a candidate's job (its process alive beside the timing), while the nvcc pool
compiled other candidates on every core, and again in every new evaluator (a new salt, a new
worker). `speedup_vs_cpu` then moved with the load of the run it came from. Now the parent's
`WorkerHandle`, before a task's first job:

1. sends a `c_baselines` request of phase `draw`: the worker runs the reference on the task's
   input sets (the slow part, up to minutes for large configs; the sets stay in the worker for
   the task's jobs). The compile pool keeps running.
2. waits for the gate (`execute.gate`: running compiles end, no new one starts), then sends
   phase `time`: the serial reference timed per config (`cpu_trials` runs within
   `cpu_budget_s`), replied as records.
3. appends the records to `<cache_dir>/c_baselines.jsonl` (`baseline_records`, as the PyTorch
   baselines) and hands every job of the task its records in the request (`cpu_baselines`);
   the job times no baseline itself.

A record's key names the task (id and source hash), the host (CPU model, gcc version, trials
and budget) and the config: another machine or compiler times again; a later evaluator on the
same host reads the file. The worker never runs C→CUDA candidate code in its own process
(`c.proc`), so it needs no restart before these requests, and no candidate process is alive
while they run (a job's is closed when the job ends; the spare one has loaded nothing).
"""

from __future__ import annotations

import hashlib
import platform
from pathlib import Path

from cudaperf.execute.baseline_records import task_prefix
from cudaperf.toolchain import tool_version

__all__ = ["FILE", "host_id", "key_prefix", "missing", "request"]

FILE = "c_baselines.jsonl"  # under the evaluator's cache_dir


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_id(gcc: str, trials: int, budget_s: float) -> str:
    """What makes a CPU baseline comparable: the CPU model, the compiler of the reference,
    and how it is timed (12 hex digits)."""
    parts = (_cpu_model(), tool_version(gcc), str(trials), repr(float(budget_s)))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def key_prefix(task: dict, host: str) -> str:
    """Every CPU-baseline key of `task` (a Task as JSON) on `host`; a key adds the config."""
    return f"{task_prefix(task['id'], task['source'])}cpu:{host}:"


def missing(task: dict, records: dict, prefix: str) -> bool:
    """Whether some config of `task` has no record under `prefix`."""
    return any(prefix + c["name"] not in records for c in task["configs"])


def request(req: dict, workdir: str, phase: str, prefix: str) -> dict:
    """The `c_baselines` request of `phase` for the task of C→CUDA request `req` (no
    candidate library in it)."""
    keep = (
        "task",
        "salt",
        "trials",
        "warmup",
        "budget_s",
        "max_bandwidth_gbs",
        "cpu_limit_s",
        "output_limit_mb",
        "ref_lib",
        "cpu_trials",
        "cpu_budget_s",
        "check_after",
    )
    return {k: req[k] for k in keep} | {
        "op": "c_baselines",
        "workdir": workdir,
        "phase": phase,
        "key_prefix": prefix,
    }
