"""`Evaluator`: the per-node steps around the worker — environment, checks, builds, results.

`prepare` runs the static checks and both compilations and returns either a finished
`ExecResult` (rejected, compile error, compile-only) or a `Prepared` job for a GPU worker;
`finish` turns the worker's reply into an `ExecResult` with speedups and feedback. Backends
(local process pool, Ray) only move `Prepared` jobs to workers and replies back.
"""

from __future__ import annotations

import ast
import logging
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field

from cudaperf.execute import checks
from cudaperf.execute.build import (
    build_candidate,
    build_reference,
    detect_gpus,
    first_error,
    toolchain_versions,
)
from cudaperf.execute.c import baselines as c_baselines
from cudaperf.execute.c.trace import build_trace
from cudaperf.execute.config import EvalConfig
from cudaperf.execute.feedback import redact_held_out, status_feedback, timing_feedback
from cudaperf.execute.held_out import WITHHELD_OUTPUT
from cudaperf.execute.isolation.child_proc import read_log
from cudaperf.execute.protocol import (
    JobReply,
    MalformedMessage,
    RunRequest,
    TorchRequest,
    parse_reply,
)
from cudaperf.execute.pytorch import build as torch_build
from cudaperf.execute.pytorch import static as torch_static
from cudaperf.execute.results import ResultCache, result_key, truncate
from cudaperf.execute.types import (
    SPEEDUPS,
    Candidate,
    ConfigResult,
    ExecResult,
    Protection,
    Severity,
    Status,
    geomean,
    speedup_over,
)
from cudaperf.tasks.measurements import EVALUATOR_PROTOCOL
from cudaperf.tasks.model import Task, TaskKind

log = logging.getLogger(__name__)

__all__ = [
    "Env",
    "Evaluator",
    "Prepared",
    "detect_env",
    "reference_names",
    "torch_speedups",
]


@dataclass(frozen=True)
class Env:
    """What this node offers: mode, GPUs, target arch, versions, the secret salt."""

    mode: str  # "full" or "compile-only"
    gpus: tuple[int, ...]  # GPU indices workers bind to (empty when compile-only)
    gpu_name: str  # name of the first GPU ("" when compile-only)
    arch: str  # nvcc -arch
    versions: dict[str, str]  # toolchain versions (part of the cache key)
    salt: int = field(repr=False)  # secret input-seed salt; never leaves the evaluator


def detect_env(config: EvalConfig) -> Env:
    """Detect GPUs (nvidia-smi) unless compile-only is forced; pick arch and salt."""
    found = [] if config.compile_only else detect_gpus()
    if config.gpus is not None:
        found = [g for g in found if g.index in config.gpus]
    if config.compile_only is False and not found:
        raise RuntimeError("compile_only=False but no GPU is visible (nvidia-smi found none)")
    arch = config.arch or (found[0].arch if found else "sm_90")
    salt = config.seed_salt if config.seed_salt is not None else secrets.randbits(62)
    return Env(
        mode="full" if found else "compile-only",
        gpus=tuple(g.index for g in found),
        gpu_name=found[0].name if found else "",
        arch=arch,
        versions=toolchain_versions(config, found[0].driver if found else ""),
        salt=salt,
    )


@dataclass
class Prepared:
    """A compiled candidate waiting for a GPU worker."""

    task: Task
    cand: Candidate
    key: str  # result-cache key
    lib: str  # candidate + harness shared library
    ref_lib: str  # the C reference's shared library
    compile_log: str
    findings: list[str]  # non-fatal check ids
    notes: list[str]  # non-fatal check messages
    workdir: str  # the candidate's own temp dir (worker cwd)
    t0: float  # monotonic start time
    ext_dir: str = ""  # TORCH_EXTENSIONS_DIR of a prebuilt load_inline candidate
    form: str = ""  # PyTorch→CUDA candidate form
    protections: list[Protection] = field(default_factory=list)  # the build's (run's: finish)
    trace_lib: str | None = None  # C→CUDA: the CUPTI shim (`c.trace`); None: none here
    compile_s: float = 0.0  # the builds' seconds (0 when the build cache served them)

    @property
    def is_torch(self) -> bool:
        """A PyTorch→CUDA job (run by `torch_trusted`), else C→CUDA (the native harness)."""
        return self.task.kind is TaskKind.TORCH2CUDA


class Evaluator:
    """Per-node evaluation steps; thread-safe (files, plus one lock-guarded set)."""

    def __init__(self, config: EvalConfig, env: Env | None = None):
        self.config = config
        self.env = env or detect_env(config)
        self.cache = ResultCache(config.cache_dir, config.use_result_cache)
        self._lock = threading.Lock()
        self._baselined: set[str] = set()  # tasks whose baselines a job has had time to time

    def key(self, task: Task, cand: Candidate) -> str:
        settings = self.config.result_settings() | {"mode": self.env.mode, "arch": self.env.arch}
        settings["isolate_files"] = self.config.isolate_files  # a hit's protections stay true
        return result_key(
            cand.hash,
            task.id,
            task.model_dump_json(),
            settings,
            self.env.gpu_name,
            self.env.versions,
        )

    def result(self, task: Task, cand: Candidate, status: Status, t0: float, **kw) -> ExecResult:
        return ExecResult(
            status=status,
            mode=self.env.mode,  # type: ignore[arg-type]
            task_id=task.id,
            candidate_hash=cand.hash,
            candidate_id=cand.id,
            gpu=self.env.gpu_name,
            arch=self.env.arch,
            versions=self.env.versions,
            wall_s=time.monotonic() - t0,
            cache_key=self.key(task, cand),
            protocol=EVALUATOR_PROTOCOL,
            **kw,
        )

    def prepare(self, task: Task, cand: Candidate) -> ExecResult | Prepared:
        """Static checks and compilation; an ExecResult when nothing is left to run."""
        t0 = time.monotonic()
        if task.kind is TaskKind.TORCH2CUDA:
            return self._prepare_torch(task, cand, t0)
        found = checks.run_checks(cand.code)
        fatal = [f.message for f in found if f.severity is Severity.ERROR]
        ids = [f.rule for f in found]
        if fatal:
            fb = [f"rejected: the candidate {m}" for m in fatal]
            return self.result(task, cand, Status.REJECTED, t0, feedback=fb, findings=ids)
        notes = [
            f"note: the candidate {f.message}" for f in found if f.severity is not Severity.ERROR
        ]
        ref = build_reference(task, self.config)
        if not ref.ok:
            fb = ["the task's C reference does not compile; this is not the candidate's fault"]
            log_ = truncate(ref.log, self.config.max_log_chars)
            return self.result(task, cand, Status.INFRA_ERROR, t0, feedback=fb, compile_log=log_)
        b = build_candidate(task, cand.code, self.env.arch, self.config)
        clog = truncate(b.log, self.config.max_log_chars)
        prot = [Protection.of("build", b.protections)]
        compile_s = ref.seconds + b.seconds
        kw = {"compile_log": clog, "findings": ids, "protections": prot}
        kw["phases"] = {"compile": round(compile_s, 4)}
        done = self._built(task, cand, t0, b, notes, kw)
        if done is not None:
            return done
        workdir = tempfile.mkdtemp(prefix="cudaperf-cand-")
        return Prepared(
            task,
            cand,
            self.key(task, cand),
            b.lib,
            ref.lib,
            clog,
            ids,
            notes,
            workdir,
            t0,
            protections=prot,
            trace_lib=build_trace(self.config)[0],
            compile_s=compile_s,
        )

    def _built(self, task, cand, t0: float, b, notes: list[str], kw: dict) -> ExecResult | None:
        """The final result when a build (C or PyTorch track) leaves nothing to run, else None:
        a compile timeout, a compile error, or compile-only mode."""
        if b.timed_out:
            fb = [f"compilation took longer than {self.config.compile_timeout_s:.0f} s"]
            return self.result(task, cand, Status.TIMEOUT, t0, feedback=fb, **kw)
        if not b.ok:
            return self.result(
                task, cand, Status.COMPILE_ERROR, t0, feedback=[first_error(b.log)], **kw
            )
        if self.env.mode == "compile-only":
            fb = ["compile-only: no GPU here, so nothing was run, checked or timed", *notes]
            return self.result(task, cand, Status.COMPILED, t0, feedback=fb, **kw)
        return None

    def _prepare_torch(self, task: Task, cand: Candidate, t0: float) -> ExecResult | Prepared:
        """PyTorch→CUDA: static anti-hacking checks, then the kernels' build (see torch_build)."""
        ref_names = reference_names(task.source)
        found = torch_static.check_torch_candidate(cand.code, ref_names)
        ids = [f.rule for f in found]
        syntax = [f.message for f in found if f.rule == "syntax_error"]
        if syntax:  # a mistake, not a hack: it ranks with the compile errors
            fb = [f"{syntax[0]}: fix it and reply with the complete file"]
            return self.result(task, cand, Status.COMPILE_ERROR, t0, feedback=fb, findings=ids)
        fatal = [f.message for f in found if f.severity is Severity.ERROR]
        if fatal:
            fb = [f"rejected: the candidate {m}" for m in fatal]
            return self.result(task, cand, Status.REJECTED, t0, feedback=fb, findings=ids)
        notes = [
            f"note: the candidate {f.message}" for f in found if f.severity is not Severity.ERROR
        ]
        form = torch_build.candidate_form(cand.code)
        if form == "load_inline" and self.env.mode == "compile-only" and not _torch_has_cuda():
            fb = [
                "load_inline candidates need a CUDA build of torch to compile; this machine's "
                "torch has none (use the native form, or run where a GPU is present)"
            ]
            return self.result(task, cand, Status.INFRA_ERROR, t0, feedback=fb, findings=ids)
        tb = time.monotonic()
        b = torch_build.prebuild_torch_candidate(
            cand.code,
            self.env.arch,
            self.config.cache_dir.expanduser(),
            self.config.compile_timeout_s,
            isolate=self.config.isolate_files,
        )
        clog = truncate(b.log, self.config.max_log_chars)
        prot = [Protection.of("build", b.protections)]
        kw = {"compile_log": clog, "findings": ids, "form": b.form, "protections": prot}
        compile_s = time.monotonic() - tb  # (a cached build: the cache's lookup)
        kw["phases"] = {"compile": round(compile_s, 4)}
        done = self._built(task, cand, t0, b, notes, kw)
        if done is not None:
            return done
        workdir = tempfile.mkdtemp(prefix="cudaperf-cand-")
        return Prepared(
            task,
            cand,
            self.key(task, cand),
            "",
            "",
            clog,
            ids,
            notes,
            workdir,
            t0,
            ext_dir=b.ext_dir,
            form=b.form,
            protections=prot,
            compile_s=compile_s,
        )

    def timeout(self, p: Prepared) -> float:
        """Hard limit for one worker request. The first PyTorch→CUDA job of a task on this
        evaluator also times the task's eager and torch.compile baselines (then cached on
        disk), so it gets `baseline_timeout_s` more."""
        extra = 0.0
        if p.is_torch:
            with self._lock:
                if p.task.id not in self._baselined:
                    self._baselined.add(p.task.id)
                    extra = self.config.baseline_timeout_s
                    if not self.config.compile_baseline:  # eager alone times like a candidate
                        extra = min(extra, self.config.run_timeout_s)
        return self.config.run_timeout_s + extra

    def typed_request(self, p: Prepared) -> RunRequest | TorchRequest:
        """The worker request for a prepared job (see `protocol`)."""
        c = self.config
        common = {
            "task": p.task,
            "workdir": p.workdir,
            "salt": self.env.salt,
            "trials": c.trials,
            "warmup": c.warmup,
            "budget_s": c.time_budget_s,
            "max_bandwidth_gbs": c.max_bandwidth_gbs,
            "cpu_limit_s": c.max_cpu_s_per_job,
            "output_limit_mb": c.max_output_mb,
        }
        if p.is_torch:
            return TorchRequest(
                **common,
                code=p.cand.code,
                ext_dir=p.ext_dir,
                correctness_trials=c.correctness_trials,
                normwise_rtol=c.normwise_rtol,
                min_kernel_share=c.min_kernel_share,
                torch_compile=c.compile_baseline,
                baseline_cache=str(c.cache_dir.expanduser() / "torch_baselines.jsonl"),
                device="cuda",
            )
        return RunRequest(
            **common,
            lib=p.lib,
            ref_lib=p.ref_lib,
            cpu_trials=c.cpu_trials,
            cpu_budget_s=c.cpu_time_budget_s,
            check_after=c.check_after_timing,
            cpu_baseline_cache=str(c.cache_dir.expanduser() / c_baselines.FILE),
            trace_lib=p.trace_lib,
            min_device_share=c.min_device_share,
        )

    def request(self, p: Prepared) -> dict:
        """The worker request for a prepared job, as it goes on the pipe (JSON-ready)."""
        return self.typed_request(p).wire()

    def finish(self, p: Prepared, raw: dict | JobReply) -> ExecResult:
        """Build the ExecResult from a worker reply. A reply that does not follow
        `protocol.JobReply` is an INFRA_ERROR naming the bad field. The naive baseline's
        timings and speedup are `api.finalize`'s (it has the naive job's result)."""
        try:
            reply = parse_reply(raw)
        except MalformedMessage as e:
            shutil.rmtree(p.workdir, ignore_errors=True)
            log.error("%s: %s", p.task.id, e)
            fb = [f"{e}; this is the evaluator's fault, not the candidate's"]
            return self.result(  # no runtime log: it may hold what held-out configs printed
                p.task,
                p.cand,
                Status.INFRA_ERROR,
                p.t0,
                compile_log=p.compile_log,
                feedback=fb,
                findings=p.findings,
                form=p.form,
            )
        if reply.output is not None:  # held-out configs ran: only what came before them
            out = truncate(reply.output, self.config.max_log_chars) + "\n" + WITHHELD_OUTPUT
        else:
            out = read_log(p.workdir, self.config.max_log_chars)
        shutil.rmtree(p.workdir, ignore_errors=True)
        status, configs = reply.status, reply.configs
        configs, runtime = redact_held_out(configs, reply.message)  # every track, here only
        fb = status_feedback(status, configs, runtime)
        kw: dict = {}
        if status is Status.OK:
            fb += timing_feedback(configs)
            kw["speedup_vs_cpu"] = geomean(
                [c.cpu_timing.median_us / c.timing.median_us for c in configs if c.cpu_timing]
            )
            kw |= torch_speedups(configs) if p.is_torch else {}
        rlog = truncate((runtime + "\n" + out).strip(), self.config.max_log_chars)
        if reply.launched is not None:  # seen by the profiler or the kernel trace
            kw["launched"] = reply.launched
        kw["device_share"] = reply.device_share
        kw["protections"] = [*p.protections, _run_protection(reply, p)]
        kw["phases"] = {"compile": round(p.compile_s, 4), **reply.phases}
        return self.result(
            p.task,
            p.cand,
            status,
            p.t0,
            configs=configs,
            compile_log=p.compile_log,
            runtime_log=rlog,
            feedback=fb + p.notes,
            findings=p.findings,
            form=p.form,
            **kw,
        )


def _run_protection(reply: JobReply, p: Prepared) -> Protection:
    """The run stage's protections as the worker reported them, plus the C→CUDA kernel trace
    (`c.trace`): active when the job's call was traced, missing (with why) when it could not
    be, and absent when the job ended before the trace (a failed config) or has none."""
    prot = Protection.of("run", reply.protections)
    if p.is_torch or reply.trace_note is None:
        return prot
    if reply.trace_note == "":
        return prot.model_copy(update={"active": (*prot.active, "kernel_trace")})
    why = f"kernel_trace: {reply.trace_note}"[:200]
    return prot.model_copy(update={"missing": (*prot.missing, why)})


def torch_speedups(configs: list[ConfigResult]) -> dict:
    """Geomean speedups against eager PyTorch and torch.compile (when every config has one)."""
    out = {}
    for key, field_ in (SPEEDUPS["eager"], SPEEDUPS["compile"]):
        if (v := speedup_over(configs, field_)) is not None:
            out[key] = v
    return out


def reference_names(source: str) -> set[str]:
    """Classes and functions the task module defines (the candidate must not use them)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {"Model"}
    return {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)} | {"Model"}


def _torch_has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.version.cuda is not None
