"""Nsight Compute itself: the metric list, finding ncu, its command line, running it, and
reading its raw CSV into metric sums per kernel.

The layer under `profile` (features of a profile) and `drivers` (programs that run a candidate
on its task's inputs); it knows nothing of tasks or candidates. Not guaranteed: profiling
needs a GPU, ncu, and permission to read performance counters (a missing permission raises
ProfileError saying how to grant it).
"""

from __future__ import annotations

import csv
import io
import logging
import re
import shutil
import subprocess
from pathlib import Path

from cudaperf.analyze.types import STALL_REASONS

__all__ = [
    "ALL_METRICS",
    "CORE_METRICS",
    "STALL_METRIC",
    "STALL_REASONS",
    "ProfileError",
    "explain_failure",
    "find_ncu",
    "ncu_args",
    "parse_ncu_csv",
    "profile_command",
]

log = logging.getLogger(__name__)

# Metrics named in DESIGN.md and seen on an H200; a run falls back to these alone.
CORE_METRICS = [
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "gpu__time_duration.sum",
]
_FP64 = [
    "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
]
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
ALL_METRICS = CORE_METRICS + _FP64 + [STALL_METRIC.format(r) for r in STALL_REASONS]


class ProfileError(RuntimeError):
    """Profiling could not run (no ncu, no GPU, build failure); the message says which."""


def find_ncu() -> str | None:
    """The ncu executable: on PATH or in the usual CUDA install locations."""
    found = shutil.which("ncu")
    if found:
        return found
    for p in sorted(Path("/usr/local").glob("cuda*/bin/ncu")) + sorted(
        Path("/opt/nvidia").glob("nsight-compute/*/ncu")
    ):
        return str(p)
    return None


def parse_ncu_csv(text: str) -> dict[str, dict[str, float]]:
    """Metric sums per kernel (source name) over all launches, plus `launches`, from raw CSV."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return {}
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, body = rows[0], rows[2:] if len(rows) > 1 and not rows[1][0].isdigit() else rows[1:]
    out: dict[str, dict[str, float]] = {}
    for row in body:
        if len(row) != len(header) or not row[0].isdigit():
            continue
        rec = dict(zip(header, row, strict=True))
        name = _kernel_base(rec.get("Kernel Name", ""))
        agg = out.setdefault(name, {"launches": 0.0})
        agg["launches"] += 1
        for k, v in rec.items():
            if "__" in k:
                try:
                    agg[k] = agg.get(k, 0.0) + float(v.replace(",", ""))
                except ValueError:
                    continue
    return out


def _kernel_base(name: str) -> str:
    """`void ns::k<16>(float *, int)` → `k`."""
    name = name.split("(")[0].strip()
    depth, base = 0, ""
    for ch in name:  # drop template arguments
        depth += ch == "<"
        if depth == 0:
            base += ch
        depth -= ch == ">"
    return base.split()[-1].split("::")[-1] if base.split() else name


def ncu_args(
    ncu: str, kernels: list[str], metrics: list[str], cmd: list[str], extra: list[str] = ()
) -> list[str]:
    """The ncu command line that profiles only `kernels` of `cmd` and prints raw CSV.

    A kernel matches by its function name, with or without template arguments (`k` or `k<4>`).
    `extra` goes before the metrics (e.g. `--profile-from-start off`).
    """
    pattern = "regex:^(" + "|".join(re.escape(k) for k in kernels) + ")(<.*)?$"
    return [
        ncu,
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--kernel-name-base",
        "function",
        "-k",
        pattern,
        *extra,
        "--metrics",
        ",".join(metrics),
        *cmd,
    ]


def explain_failure(stdout: str, stderr: str, kernels: list[str]) -> str:
    """Why ncu produced no rows, in words that say what to do."""
    text = stdout + "\n" + stderr
    if "ERR_NVGPUCTRPERM" in text:
        return (
            "this user may not read the GPU performance counters (ERR_NVGPUCTRPERM); run as "
            "root or load the nvidia driver with NVreg_RestrictProfilingToAdminUsers=0 "
            "(https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
        )
    if "No kernels were profiled" in text:
        return (
            f"no launch of {', '.join(kernels)} was profiled: the candidate did not launch "
            "these kernels, or failed before it did: " + _tail(stdout + stderr)
        )
    return f"ncu produced no results: {_tail(stderr or stdout)}"


def _tail(text: str, n: int = 400) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and not ln.startswith('"')]
    return " / ".join(lines)[-n:]


def profile_command(
    cmd: list[str],
    kernels: list[str],
    ncu: str | None = None,
    timeout_s: float = 600,
    raw: list[str] | None = None,
    extra: list[str] = (),
) -> dict[str, dict[str, float]]:
    """Run `cmd` under ncu, profiling only `kernels`; metric sums per kernel name.

    Tries every metric first and falls back to `CORE_METRICS` if ncu rejects one. When `raw`
    is a list, ncu's stdout of each attempt is appended to it.
    """
    ncu = ncu or find_ncu()
    if ncu is None:
        raise ProfileError("ncu not found; install Nsight Compute or put ncu on PATH")
    for metrics in (ALL_METRICS, CORE_METRICS):
        args = ncu_args(ncu, kernels, metrics, cmd, list(extra))
        log.info("profiling: %s", " ".join(args))
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
        if raw is not None:
            raw.append(p.stdout + "\n--- stderr ---\n" + p.stderr[-2000:])
        parsed = parse_ncu_csv(p.stdout)
        if parsed:
            return parsed
        why = explain_failure(p.stdout, p.stderr, kernels)
        if "ERR_NVGPUCTRPERM" in why or "No kernels were profiled" in p.stdout + p.stderr:
            raise ProfileError(why)  # fewer metrics would not help
        log.warning("ncu gave no rows with %d metrics: %s", len(metrics), p.stderr[-500:])
    raise ProfileError(why)
