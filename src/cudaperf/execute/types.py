"""Typed results of the evaluator: one status, per-config checks, timings, feedback, and the
one `Finding` type every diagnostic about candidate code has (the static checks of
`execute.checks` and `execute.torch_static`, and the analyzer's rules, re-exported by
`cudaperf.analyze`).

Every type is a frozen pydantic model: JSON round-trips through `model_dump(mode="json")` /
`model_validate`, and no field holds an exception object. Guaranteed: `Status.OK` means every
config (held-out ones included) was run on a GPU, matched the reference within the task's
tolerance, and was timed. A compile-only run (no GPU) never reports `OK`: it reports
`COMPILED` with `mode == "compile-only"` and no timings.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SPEEDUPS",
    "SPEEDUP_FIELDS",
    "Candidate",
    "ConfigResult",
    "ExecResult",
    "Finding",
    "PHASES",
    "PhaseClock",
    "Protection",
    "Severity",
    "Status",
    "Timing",
    "geomean",
    "sum_phases",
    "speedup_over",
    "protections_line",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Status(str, Enum):
    """The one outcome of evaluating a candidate. Ordered roughly by how far it got."""

    OK = "ok"  # compiled, correct on every config, timed
    COMPILED = "compiled"  # compile-only mode (no GPU): it compiled; nothing was run or checked
    COMPILE_ERROR = "compile_error"  # nvcc rejected it (or the entry point is missing)
    RUNTIME_ERROR = "runtime_error"  # CUDA error, crash of the host code, or output limit hit
    WRONG_OUTPUT = "wrong_output"  # ran, but some config's output is outside the tolerance
    TIMEOUT = "timeout"  # compile or run exceeded its hard time limit
    REJECTED = "rejected"  # a static or dynamic anti-hacking check fired
    INFRA_ERROR = "infra_error"  # the evaluator itself failed; not the candidate's fault


class Severity(str, Enum):
    """How much a finding matters. A static check's finding is an error when it rejects the
    candidate and a warning when it only adds a note to the feedback."""

    ERROR = "error"  # likely wrong or undefined behaviour (a divergent barrier), or rejected
    WARNING = "warning"  # a problem worth fixing that does not reject the candidate
    INFO = "info"  # context; nothing to fix necessarily


class Finding(_Frozen):
    """One diagnostic the model can act on."""

    rule: str  # an analyzer rule (a key of analyze RULES) or a static check's id
    severity: Severity  # error / warning / info
    line: int  # 1-based source line in the analysed text (0 = whole kernel or not known)
    message: str  # what is wrong and how to fix it, one or two sentences


class Candidate(_Frozen):
    """A piece of code to evaluate against one task."""

    code: str  # full source in the task kind's candidate shape
    id: str = ""  # caller's label (implementation id, sample index); not part of the hash

    @property
    def hash(self) -> str:
        """sha256 of the code (first 16 hex digits); identical code shares builds and results."""
        return hashlib.sha256(self.code.encode()).hexdigest()[:16]


# Phases of one candidate's evaluation (`ExecResult.phases`, seconds): `compile` (nvcc and the
# reference's gcc; 0 when the build cache served them) on the evaluator's side; in the GPU
# worker, `draw` (input sets and their reference outputs), `start` (the candidate's process),
# the checked calls (the signed-input and after-timing ones too) in three parts: `copy` (the
# worker's host copies into and out of the call segment), `call` (the candidate process's
# call: uploads, kernels, downloads) and `compare`; `time` (warm-up and timed trials), `cpu`
# (the serial CPU baseline, where a job times it), `trace` (the traced call, whole), and `run`
# where a track does not split its job (PyTorch→CUDA); `baseline`: the task's baselines, timed
# in clean requests before its first job on a worker; `wait`: waiting for the GPU's other
# workers (`EvalConfig.workers_per_gpu` > 1; `isolation.share`), in none of the others.
PHASES = (
    "compile",
    "baseline",
    "draw",
    "start",
    "copy",
    "call",
    "compare",
    "time",
    "cpu",
    "trace",
    "run",
    "wait",
)


class PhaseClock:
    """Seconds per phase: `with clock("check"): ...` adds the block's wall time to "check"."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - t

    def rounded(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in self.seconds.items()}


def sum_phases(parts: Iterable[Mapping[str, float]], digits: int | None = 3) -> dict[str, float]:
    """Seconds per phase of several evaluations (or steps, or processes) added up, by name in
    sorted order, rounded to `digits` (None: not rounded)."""
    total: dict[str, float] = {}
    for part in parts:
        for k, v in part.items():
            total[k] = total.get(k, 0.0) + v
    return {k: v if digits is None else round(v, digits) for k, v in sorted(total.items())}


class Timing(_Frozen):
    """Distribution of trial times of one thing on one config, in microseconds."""

    median_us: float  # median over trials
    iqr_us: float  # interquartile range (75th - 25th percentile)
    min_us: float  # fastest trial
    max_us: float  # slowest trial
    trials: int  # number of timed trials

    @classmethod
    def of(cls, samples_us: list[float]) -> Timing:
        """Summarise raw trial times (at least one)."""
        xs = sorted(samples_us)
        if not xs:
            raise ValueError("Timing.of needs at least one sample")

        def q(p: float) -> float:
            pos = p * (len(xs) - 1)
            lo, hi = math.floor(pos), math.ceil(pos)
            return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

        return cls(
            median_us=q(0.5),
            iqr_us=q(0.75) - q(0.25),
            min_us=xs[0],
            max_us=xs[-1],
            trials=len(xs),
        )


class ConfigResult(_Frozen):
    """What happened on one input configuration."""

    config: str  # InputConfig.name
    held_out: bool  # the config is never shown in prompts
    correct: bool  # every output element within tolerance, inputs unmodified
    max_abs_err: float | None = None  # max |got - want| over all outputs (None: not compared)
    max_rel_err: float | None = None  # max |got - want| / |want| where |want| > atol
    timing: Timing | None = None  # candidate on the GPU (None: not timed)
    cpu_timing: Timing | None = None  # the serial C reference on the CPU
    naive_timing: Timing | None = None  # the task's naive CUDA implementation, when it has one
    eager_timing: Timing | None = None  # PyTorch→CUDA: the reference Model in eager PyTorch
    compile_timing: Timing | None = None  # PyTorch→CUDA: torch.compile(Model), default mode
    message: str = ""  # short, model-readable account of a failure on this config


class Protection(_Frozen):
    """The kernel protections (`execute.confine`) one stage of an evaluation ran under, as the
    confined process reported them (never what was merely asked for)."""

    stage: Literal["build", "run"]  # build: the compiler / load_inline import; run: the GPU
    # worker and the PyTorch→CUDA candidate process it spawns (which inherits its confinement)
    active: tuple[str, ...] = ()  # e.g. mount_ns, net_ns, private_tmpfs, readonly_root, seccomp
    missing: tuple[str, ...] = ()  # "protection: why" for each one that did not apply;
    # "all: ..." when the stage ran unconfined (isolate_files off, or not confinable)

    @classmethod
    def of(cls, stage: str, report: dict | None) -> Protection:
        """From a `confine.Protections` dict ({"active": [...], "missing": {name: why}});
        an empty or absent report means the stage was not confined at all."""
        if not report:
            return cls(stage=stage, missing=("all: the stage ran unconfined",))  # type: ignore[arg-type]
        miss = tuple(f"{k}: {v}" for k, v in dict(report.get("missing", {})).items())
        return cls(stage=stage, active=tuple(report.get("active", ())), missing=miss)  # type: ignore[arg-type]


class ExecResult(_Frozen):
    """Everything the evaluator learned about one candidate on one task."""

    status: Status  # the one outcome
    mode: Literal["full", "compile-only"]  # compile-only: no GPU, nothing was run
    task_id: str  # Task.id
    candidate_hash: str  # Candidate.hash
    candidate_id: str = ""  # Candidate.id (caller's label)
    configs: list[ConfigResult] = []  # one per config that was run, in task order
    speedup_vs_cpu: float | None = None  # geomean over configs of cpu median / gpu median
    speedup_vs_naive: float | None = None  # geomean over configs of naive median / gpu median
    speedup_vs_eager: float | None = None  # PyTorch→CUDA: geomean of eager median / candidate's
    speedup_vs_compile: float | None = None  # PyTorch→CUDA: geomean of torch.compile / candidate's
    form: str = ""  # PyTorch→CUDA candidate form: "native" or "load_inline"
    compile_log: str = ""  # nvcc output, truncated
    runtime_log: str = ""  # the candidate's stdout/stderr and harness errors, truncated
    feedback: list[str] = []  # short messages written for a model to act on
    findings: list[str] = []  # anti-hacking check ids that fired (fatal or not)
    launched: list[str] | None = None  # kernel names seen launching during the run (profiler or
    # kernel trace); None when the run did not observe launches (compile-only, or not measured)
    device_share: float | None = None  # C→CUDA: share of one warm call (largest visible config)
    # in which the GPU ran the candidate's kernels, memsets and device copies (`c.trace`)
    gpu: str = ""  # device name as the driver reports it ("" when compile-only)
    arch: str = ""  # the -arch nvcc compiled for, e.g. "sm_90"
    versions: dict[str, str] = {}  # nvcc, gcc, driver, cudaperf
    cached: bool = False  # served from the result cache
    wall_s: float = Field(default=0.0, ge=0)  # wall seconds spent on this candidate
    cache_key: str = ""  # the result-cache key (candidate, task, settings, GPU, toolchain)
    # the measurement protocol (cudaperf.tasks.measurements.PROTOCOLS); "" in rows written
    # before the field existed, which tasks.measurements.protocol_of reads as bulk-v1
    protocol: str = ""
    # seconds of this candidate's evaluation per phase (`PHASES`): where evaluation time goes;
    # a cached result keeps the phases of the run that produced it
    phases: dict[str, float] = {}
    protections: list[Protection] = []  # per stage that ran (build, run), what confined it;
    # [] when nothing was compiled or run (a static rejection). A cached result keeps the
    # protections of the run that produced it (isolate_files is part of the cache key).

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


def protections_line(results: list[ExecResult]) -> str:
    """One short line when some results ran with a protection missing ("" when none did):
    how many, and the first missing protection named."""
    bad = [(r, p) for r in results for p in r.protections if p.missing]
    if not bad:
        return ""
    n = len({id(r) for r, _ in bad})
    r, p = bad[0]
    first = f"{p.stage}: {p.missing[0]}"[:120]
    return f"sandbox: {n} of {len(results)} results ran with protections missing ({first})"


def geomean(xs: list[float]) -> float | None:
    """Geometric mean of positive numbers; None for an empty list."""
    xs = [x for x in xs if x > 0]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def speedup_over(configs: list[ConfigResult], baseline: str) -> float | None:
    """Geomean over `configs` of baseline time / candidate time, `baseline` a ConfigResult
    timing field (`SPEEDUPS`' second item); None unless every config has both timings."""
    pairs = [(getattr(c, baseline), c.timing) for c in configs]
    if not pairs or any(b is None or t is None for b, t in pairs):
        return None
    return geomean([b.median_us / t.median_us for b, t in pairs])


# The speedups an ExecResult reports, the one list of them: baseline name -> (the ExecResult
# field with the geomean speedup, the ConfigResult field with that baseline's timing).
SPEEDUPS: dict[str, tuple[str, str]] = {
    "cpu": ("speedup_vs_cpu", "cpu_timing"),  # the serial C reference (gcc -O2) on the CPU
    "naive": ("speedup_vs_naive", "naive_timing"),  # the task's naive CUDA implementation
    "eager": ("speedup_vs_eager", "eager_timing"),  # PyTorch→CUDA: the reference, eager
    "compile": ("speedup_vs_compile", "compile_timing"),  # PyTorch→CUDA: torch.compile(Model)
}
SPEEDUP_FIELDS: tuple[str, ...] = tuple(f for f, _ in SPEEDUPS.values())
