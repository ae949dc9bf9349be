"""`EvalConfig`: every knob of the evaluator in one validated object.

Library code receives an `EvalConfig`; nothing here reads environment variables. Each field's
`metadata["help"]` is the text the CLI shows. Invalid values raise `ValueError` naming the
field, the value and how to fix it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path

from cudaperf.fields import option as _f

__all__ = ["EvalConfig"]


@dataclass(frozen=True)
class EvalConfig:
    """Settings of one evaluation run (timing, limits, toolchain, caching, secrecy)."""

    trials: int = _f(100, "timed trials per config (stops early only at time_budget_s)")
    warmup: int = _f(10, "untimed calls before timing each config")
    time_budget_s: float = _f(2.0, "max seconds of timed trials per config (>= 5 trials)")
    compile_timeout_s: float = _f(180.0, "hard limit for one nvcc invocation")
    run_timeout_s: float = _f(120.0, "hard limit for running one candidate on all configs")
    arch: str | None = _f(None, "nvcc -arch such as sm_90; default: the GPU's, or sm_90")
    compile_jobs: int | None = _f(None, "parallel nvcc jobs; default: number of CPU cores")
    gpus: tuple[int, ...] | None = _f(None, "GPU indices to use; default: all visible")
    compile_only: bool | None = _f(None, "only compile; default: true exactly when no GPU")
    cache_dir: Path = _f(Path("~/.cache/cudaperf"), "build and result cache directory")
    use_result_cache: bool = _f(True, "reuse results of identical evaluations")
    seed_salt: int | None = _f(None, "secret salt for input seeds; default: random per run")
    cpu_trials: int = _f(5, "timed runs of the C reference per config (CPU baseline)")
    cpu_time_budget_s: float = _f(2.0, "max seconds of CPU-baseline runs per config")
    check_after_timing: bool = _f(True, "re-check outputs on fresh inputs after timing")
    max_log_chars: int = _f(4000, "compile/runtime logs are truncated to this many characters")
    max_output_mb: int = _f(
        64, "file-size limit of each candidate process (files, stdout, stderr it writes), MiB"
    )
    max_open_files: int = _f(256, "open-file limit of the worker")
    max_cpu_s_per_job: int = _f(300, "CPU-seconds limit of the worker per candidate")
    isolate_network: bool = _f(True, "run workers in a new network namespace where allowed")
    isolate_files: bool = _f(
        True, "confine candidate code (builds, workers) to a read-only view with private /tmp"
    )
    worker_max_jobs: int = _f(200, "recycle a GPU worker after this many candidates")
    workers_per_gpu: int = _f(
        1,
        "C→CUDA candidates checked at once per GPU: their checks overlap, while timed trials, "
        "traces, CPU baselines and PyTorch→CUDA jobs have the GPU alone (execute.isolation."
        "share; 1 for numbers to publish)",
    )
    set_cache_gib: float | None = _f(
        8.0,
        "GiB of input sets and reference outputs each GPU worker keeps between jobs (LRU); "
        "None: half the host's available memory, shared among the workers",
    )
    max_bandwidth_gbs: float = _f(
        10000.0, "a time implying more GB/s of input reads than this is rejected (roofline)"
    )
    nvcc: str = _f("nvcc", "the nvcc executable")
    gcc: str = _f("gcc", "the C compiler for the reference")
    extra_nvcc_flags: tuple[str, ...] = _f((), "extra flags appended to every nvcc command")
    correctness_trials: int = _f(
        5, "PyTorch→CUDA: correctness trials per config, fresh inputs each (KernelBench uses 5)"
    )
    normwise_rtol: float = _f(
        1e-2, "PyTorch→CUDA: max ||got - want|| / ||want|| (so zeros fail on tiny outputs)"
    )
    min_kernel_share: float = _f(
        0.5, "PyTorch→CUDA: min share of the forward's GPU time in the candidate's own kernels"
    )
    min_device_share: float = _f(
        0.05,
        "C→CUDA: min share of a warm call (largest visible config) in which the GPU runs the "
        "candidate's kernels; below it, with over 1 ms of the call on the host, it is rejected",
    )
    baseline_timeout_s: float = _f(
        900.0, "PyTorch→CUDA: extra time the first job of a task may spend timing its baselines"
    )
    compile_baseline: bool = _f(
        True, "PyTorch→CUDA: also time torch.compile(Model) as a baseline (cached per config)"
    )

    def __post_init__(self) -> None:
        _positive_int(self, "trials", "use at least 1 (100 for reported numbers)")
        _positive_int(self, "cpu_trials", "use at least 1")
        _positive_int(self, "max_log_chars", "use e.g. 4000")
        _positive_int(self, "max_output_mb", "use e.g. 64")
        _positive_int(self, "max_open_files", "use e.g. 256 (the worker itself needs ~40)")
        _positive_int(self, "max_cpu_s_per_job", "use e.g. 300")
        _positive_int(self, "worker_max_jobs", "use e.g. 200")
        _positive_int(self, "workers_per_gpu", "use 1 (the default), or 2-4 to overlap checks")
        _positive_int(self, "correctness_trials", "use at least 1 (5 matches KernelBench)")
        if not 0 < self.normwise_rtol <= 1:
            raise ValueError(
                f"normwise_rtol={self.normwise_rtol}; use a value in (0, 1], e.g. 0.01"
            )
        for name in ("min_kernel_share", "min_device_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name}={getattr(self, name)}; use a share in [0, 1]")
        if self.warmup < 0:
            raise ValueError(f"warmup={self.warmup} is negative; use 0 or more (e.g. 10)")
        for name in (
            "time_budget_s",
            "compile_timeout_s",
            "run_timeout_s",
            "baseline_timeout_s",
            "cpu_time_budget_s",
            "max_bandwidth_gbs",
        ):
            v = getattr(self, name)
            if not v > 0:
                raise ValueError(f"{name}={v} must be > 0 seconds; e.g. {_default(name)}")
        if self.arch is not None and not re.fullmatch(r"sm_\d{2,3}[a-z]?", self.arch):
            raise ValueError(f"arch={self.arch!r} is not an nvcc arch; write it like 'sm_90'")
        if self.set_cache_gib is not None and not self.set_cache_gib > 0:
            raise ValueError(f"set_cache_gib={self.set_cache_gib}; use GiB > 0 (e.g. 8) or None")
        if self.compile_jobs is not None and self.compile_jobs < 1:
            raise ValueError(f"compile_jobs={self.compile_jobs}; use >= 1 or None for all cores")
        if self.gpus is not None and (not self.gpus or any(g < 0 for g in self.gpus)):
            raise ValueError(f"gpus={self.gpus}; give non-negative indices such as (0, 1)")
        object.__setattr__(self, "cache_dir", Path(self.cache_dir).expanduser())
        object.__setattr__(self, "extra_nvcc_flags", tuple(self.extra_nvcc_flags))
        if self.gpus is not None:
            object.__setattr__(self, "gpus", tuple(self.gpus))

    def result_settings(self) -> dict[str, object]:
        """The settings that change a result (part of the result-cache key)."""
        keep = (
            "trials",
            "warmup",
            "time_budget_s",
            "check_after_timing",
            "max_bandwidth_gbs",
            "correctness_trials",
            "normwise_rtol",
            "min_kernel_share",
            "min_device_share",
            "compile_baseline",
        )
        return {k: getattr(self, k) for k in keep} | {"nvcc_flags": list(self.extra_nvcc_flags)}

    @classmethod
    def help(cls) -> dict[str, str]:
        """Field name → help text (for the CLI)."""
        return {f.name: f.metadata.get("help", "") for f in fields(cls)}


def _default(name: str) -> object:
    return next(f.default for f in fields(EvalConfig) if f.name == name)


def _positive_int(cfg: EvalConfig, name: str, fix: str) -> None:
    v = getattr(cfg, name)
    if not isinstance(v, int) or v < 1:
        raise ValueError(f"{name}={v!r} must be a positive integer; {fix}")
