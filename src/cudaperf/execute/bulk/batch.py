"""Batched compilation for `cudaperf data measure`: one nvcc call for many implementations.

`build_batch(pairs, ...)` compiles every (task, implementation) of a batch into one shared
library (see `source`). Builds are cached by content under `<cache_dir>/build/` like the
evaluator's, so a rerun (resume) of the same batch does not compile again. When a batch fails,
the units the log blames are taken out and compiled alone, and the rest is compiled again as
one library; when the log blames nobody (or everybody) the batch is split in halves. So one
bad implementation costs a few extra nvcc calls and only itself is lost. An implementation
that fails alone is compiled once more by the evaluator's own path (`build_candidate`): its
log and first error are then exactly what `cudaperf eval` reports; if that build succeeds, the
failure was the batch wrapper's, which is reported as `infra_error`, never blamed on the code.

Guaranteed: every pair given ends up in `BatchBuild.units` (library path, index) or in
`BatchBuild.failures` (a status and message), never both.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from cudaperf.execute import checks
from cudaperf.execute.build import build_candidate, cache_key, compile_cached, first_error
from cudaperf.execute.bulk.source import (
    RUNTIME_FILE,
    BatchUnit,
    attribute_failures,
    batch_source,
    unit_log,
)
from cudaperf.execute.config import EvalConfig
from cudaperf.execute.types import Severity, Status
from cudaperf.tasks.model import Implementation, Task
from cudaperf.toolchain import tool_version

__all__ = ["BatchBuild", "Failure", "build_batch", "build_runtime", "nvcc_command", "static_reject"]

Pair = tuple[Task, Implementation]


@dataclass(frozen=True)
class Failure:
    """Why an implementation will not be run."""

    status: Status  # COMPILE_ERROR, TIMEOUT, REJECTED (static check) or INFRA_ERROR
    message: str  # one model-readable line
    log: str = ""  # compiler output
    findings: tuple[str, ...] = ()  # static check ids


@dataclass
class BatchBuild:
    """Outcome of compiling one batch."""

    units: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)  # pair -> (lib, k)
    logs: dict[tuple[str, str], str] = field(default_factory=dict)  # pair -> its warnings
    failures: dict[tuple[str, str], Failure] = field(default_factory=dict)
    nvcc_calls: int = 0  # compiler invocations (0 when every library came from the cache)
    seconds: float = 0.0  # wall time of this batch's compilation
    compile_seconds: float = 0.0  # sum of nvcc wall times (excludes cache hits)


def nvcc_command(arch: str, config: EvalConfig) -> list[str]:
    """nvcc flags of batch libraries: -O3, the target arch, no -lineinfo; the last item goes
    after the source file (see `cudaperf.execute.build.compile_cached`)."""
    cmd = [config.nvcc, "-O3", "-shared", "-Xcompiler", "-fPIC", f"-arch={arch}"]
    return [*cmd, *config.extra_nvcc_flags, "--linker-options=-z,defs"]


def _build(src: str, arch: str, config: EvalConfig, timeout: float, lib: str):
    cmd = nvcc_command(arch, config)
    key = cache_key("measure", lib, src, " ".join(cmd), tool_version(config.nvcc))
    return compile_cached(cmd, "src.cu", src, config.cache_dir / "build" / key, lib, timeout)


def build_runtime(arch: str, config: EvalConfig) -> str:
    """Compile the runner's runtime library (cached); raises RuntimeError with the log."""
    from cudaperf.execute.bulk.runtime import RUNTIME_SOURCE

    b = _build(RUNTIME_SOURCE, arch, config, config.compile_timeout_s, RUNTIME_FILE)
    if not b.ok:
        raise RuntimeError(f"the measure runtime library does not compile with nvcc:\n{b.log}")
    return b.lib


def static_reject(impl: Implementation) -> Failure | None:
    """The evaluator's fatal static checks (`cudaperf.execute.checks`), before any compile."""
    found = checks.run_checks(impl.code)
    fatal = [f.message for f in found if f.severity is Severity.ERROR]
    if not fatal:
        return None
    msg = "; ".join(f"rejected: the candidate {m}" for m in fatal)
    return Failure(Status.REJECTED, msg, findings=tuple(f.rule for f in found))


def build_batch(pairs: list[Pair], arch: str, config: EvalConfig, timeout: float) -> BatchBuild:
    """Compile `pairs` into as few libraries as their errors allow (see the module doc)."""
    out = BatchBuild()
    t0 = time.monotonic()
    if pairs:
        _group(pairs, arch, config, timeout, out)
    out.seconds = time.monotonic() - t0
    return out


def _key_of(pair: Pair) -> tuple[str, str]:
    return pair[0].id, pair[1].id


def _group(pairs: list[Pair], arch: str, config: EvalConfig, timeout: float, out: BatchBuild):
    units = [BatchUnit(k, t, i.id, i.code) for k, (t, i) in enumerate(pairs)]
    try:
        src = batch_source(units)
    except ValueError as e:  # e.g. unbalanced braces after extern "C" {
        if len(pairs) > 1:
            return _split(pairs, arch, config, timeout, out)
        return _alone_failed(pairs[0], arch, config, f"cannot wrap: {e}", out)
    b = _build(src, arch, config, timeout, "batch.so")
    if not b.cached:
        out.nvcc_calls += 1
        out.compile_seconds += b.seconds
    if b.ok:
        for u, p in zip(units, pairs, strict=True):
            out.units[_key_of(p)] = (b.lib, u.k)
            out.logs[_key_of(p)] = unit_log(b.log, u.k)
        return None
    if len(pairs) == 1:
        return _alone_failed(pairs[0], arch, config, b.log, out)
    blamed = sorted(k for k in attribute_failures(b.log) if k < len(pairs))
    if b.timed_out or not blamed or len(blamed) == len(pairs):
        return _split(pairs, arch, config, timeout, out)
    rest = [p for k, p in enumerate(pairs) if k not in blamed]
    _group(rest, arch, config, timeout, out)
    for k in blamed:
        _group([pairs[k]], arch, config, timeout, out)
    return None


def _split(pairs: list[Pair], arch: str, config: EvalConfig, timeout: float, out: BatchBuild):
    mid = len(pairs) // 2
    _group(pairs[:mid], arch, config, timeout, out)
    _group(pairs[mid:], arch, config, timeout, out)


def _alone_failed(pair: Pair, arch: str, config: EvalConfig, wrapper_log: str, out: BatchBuild):
    """An implementation that does not compile alone in the batch form: ask the evaluator."""
    task, impl = pair
    b = build_candidate(task, impl.code, arch, config)
    if not b.cached:
        out.nvcc_calls += 1
        out.compile_seconds += b.seconds
    if b.timed_out:
        msg = f"compilation took longer than {config.compile_timeout_s:.0f} s"
        out.failures[_key_of(pair)] = Failure(Status.TIMEOUT, msg, b.log)
    elif not b.ok:
        out.failures[_key_of(pair)] = Failure(Status.COMPILE_ERROR, first_error(b.log), b.log)
    else:
        msg = (
            "cudaperf data measure could not compile this implementation in its batch form "
            "(namespaced, includes hoisted), although the evaluator's harness compiles it; "
            "measure it with `cudaperf eval TASKS --implementations` instead"
        )
        out.failures[_key_of(pair)] = Failure(Status.INFRA_ERROR, msg, wrapper_log)
