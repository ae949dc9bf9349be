"""`BulkConfig`: the settings of one bulk run (`cudaperf data measure`).

It contains the evaluator's `EvalConfig` (`eval`) for every setting the two share, so a
setting has one name and one validation: timed `trials`, `warmup`, the timed-trial budget
(`time_budget_s`, seconds; milliseconds only at the C runner's `cp_time`), `compile_only`, `arch`,
`cache_dir`, `seed_salt`, `gpus`, `check_after_timing`, `max_bandwidth_gbs`, `nvcc`, `gcc`,
`extra_nvcc_flags`. Only what the evaluator has no knob for is declared here. Bulk defaults
(`BULK_EVAL_DEFAULTS`) differ from the evaluator's: 20 trials, 3 warm-up calls, 50 ms budget.

Settings with the same word but another meaning stay separate, on purpose:
`silence_timeout_s` (seconds without any runner event, a hang; the evaluator's `run_timeout_s`
limits one candidate's whole run), `batch_timeout_s` (one nvcc call over a whole batch; the
evaluator's `compile_timeout_s` still limits the single-candidate builds of the bisection),
`runner_max_tasks` (tasks, not candidates, before the runner is replaced), `cpu_trials` (0 means
"not timed", which `EvalConfig.cpu_trials` does not allow) and `jobs` (nvcc calls and reference
processes together).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from cudaperf.execute.config import EvalConfig

__all__ = ["BULK_EVAL_DEFAULTS", "BulkConfig", "bulk_eval_config", "usable_cpus"]

# The evaluator settings a bulk run uses unless told otherwise (the CLI's defaults).
BULK_EVAL_DEFAULTS: dict[str, object] = {
    "trials": 20,
    "warmup": 3,
    "time_budget_s": 0.05,
    "compile_only": False,
}


def bulk_eval_config(**overrides) -> EvalConfig:
    """`EvalConfig` with the bulk defaults, then `overrides` (EvalConfig's own field names)."""
    return EvalConfig(**(BULK_EVAL_DEFAULTS | overrides))


@dataclass(frozen=True)
class BulkConfig:
    """Settings of one `data measure` run: `eval` (shared with the evaluator) and the bulk's."""

    out: Path  # results JSONL (appended; existing rows make a rerun skip their pairs)
    eval: EvalConfig = field(default_factory=bulk_eval_config)  # the shared settings (above)
    batch_tasks: int = 32  # tasks per nvcc invocation
    jobs: int | None = None  # CPU workers (nvcc calls, reference processes); default usable_cpus()
    scratch: Path | None = None  # folder for prepared inputs; default /dev/shm if it has room
    silence_timeout_s: float = 120.0  # max seconds without any runner event (a hang)
    batch_timeout_s: float = 900.0  # max seconds of one batch's nvcc call
    max_inflight_gb: float = 16.0  # prepared inputs held at once (all GPUs), GB
    prefetch: int | None = None  # tasks prepared ahead per GPU; default jobs // GPUs + 2
    cpu_trials: int = 0  # time the C reference this many times per config (0: not timed)
    runner_max_tasks: int = 200  # replace the GPU runner after this many tasks
    torch_watchdog_s: float = 600.0  # restart the torch2cuda child after this long silent

    def __post_init__(self) -> None:
        for name in ("batch_tasks", "runner_max_tasks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be at least 1")
        for name in ("silence_timeout_s", "batch_timeout_s", "max_inflight_gb"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)} must be > 0")
        if self.cpu_trials < 0:
            raise ValueError("cpu_trials must be >= 0")
        if self.jobs is not None and self.jobs < 1:
            raise ValueError(f"jobs={self.jobs}; use >= 1, or leave it out for all CPU cores")
        if self.out.suffix != ".jsonl":
            raise ValueError(f"--out {self.out}: use a .jsonl file name")
        if self.eval.compile_only is None:  # "auto" of the evaluator: a bulk run says which
            raise ValueError("eval.compile_only must be True or False for a bulk run")

    @property
    def compile_only(self) -> bool:
        return bool(self.eval.compile_only)

    def workers(self) -> int:
        return self.jobs or usable_cpus()


def usable_cpus(cap: int = 32) -> int:
    """CPUs this process may use: its affinity mask, limited by a cgroup CPU quota (containers
    often report the host's cores), at most `cap` (each reference worker may hold ~1 GB)."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, min(n, cap))
