"""Dynamic features from Nsight Compute: run the candidate's program under `ncu` and read its CSV.

`profile_program` builds a `.cu` that has a `main()` with nvcc (or takes any command), runs it
under `ncu --clock-control none --csv --page raw --print-units base`, restricted to the named
kernels, and returns per-kernel metric sums over all profiled launches. `ncu_features` turns
those into the `ncu_*` features of `types.PROFILE_FEATURES`. Results are cached by the hash
of (source, arch, metric list) in memory and, with a cache directory, on disk.

A C→CUDA or PyTorch→CUDA candidate (no `main()`) is profiled on its task's inputs by a
generated driver: see `drivers.profile_candidate` (`analyze(..., profile=True, task=...)`).
Running ncu and reading its CSV is `ncu`'s (the layer under this module and `drivers`); its
names are importable from here too.

Not guaranteed: profiling needs a GPU, ncu, and permission to read performance counters
(a missing permission raises ProfileError saying how to grant it).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tempfile
from pathlib import Path

from cudaperf.analyze.ncu import (
    ALL_METRICS,
    CORE_METRICS,
    STALL_METRIC,
    STALL_REASONS,
    ProfileError,
    explain_failure,
    find_ncu,
    ncu_args,
    parse_ncu_csv,
    profile_command,
)
from cudaperf.analyze.types import AnalyzeConfig, Finding, Severity, StructuralReport

__all__ = [
    "CORE_METRICS",
    "STALL_REASONS",
    "ProfileError",
    "add_profile",
    "explain_failure",
    "find_ncu",
    "ncu_args",
    "ncu_features",
    "parse_ncu_csv",
    "profile_command",
    "profile_program",
]


def ncu_features(m: dict[str, float]) -> dict[str, float | None]:
    """The `ncu_*` features from one kernel's summed metrics (averages for ratio metrics)."""
    n = max(1.0, m.get("launches", 1.0))

    def ratio(a: str, b: str) -> float | None:
        return m[a] / m[b] if m.get(b) and a in m else None

    def inst(op: str) -> float:
        return m.get(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum", 0.0)

    flops = sum(inst(op) for op in ("fadd", "fmul", "dadd", "dmul"))
    flops += 2 * (inst("ffma") + inst("dfma"))
    dram = m.get("dram__bytes_read.sum", 0.0) + m.get("dram__bytes_write.sum", 0.0)
    occ = m.get("sm__warps_active.avg.pct_of_peak_sustained_active")
    f: dict[str, float | None] = {
        "ncu_launches": n,
        "ncu_sectors_per_request_ld": ratio(
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
        ),
        "ncu_sectors_per_request_st": ratio(
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
        ),
        "ncu_achieved_occupancy": occ / n / 100 if occ is not None else None,
        "ncu_dram_bytes": dram,
        "ncu_flops": flops,
        "ncu_arithmetic_intensity": flops / dram if dram else None,
        "ncu_shared_bank_conflicts": m.get(
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", 0.0
        )
        + m.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", 0.0),
        "ncu_duration_ns": m.get("gpu__time_duration.sum"),
    }
    for r in STALL_REASONS:
        v = m.get(STALL_METRIC.format(r))
        f[f"ncu_stall_{r}"] = v / n if v is not None else None
    return f


def profile_program(
    code: str, kernels: list[str], cfg: AnalyzeConfig
) -> dict[str, dict[str, float]]:
    """Build a `.cu` with `main()` for `cfg.arch`, run it under ncu; cached by content."""
    if not re.search(r"\bint\s+main\s*\(", code):
        raise ProfileError(
            "--profile needs a program (a .cu file with main()) or the candidate's task: pass "
            "--task TASK_ID_OR_FILE to profile it on the task's inputs"
        )
    key = hashlib.sha256(f"{cfg.arch}\0{ALL_METRICS}\0{code}".encode()).hexdigest()
    cache = Path(cfg.cache_dir) / "ncu" / f"{key}.json" if cfg.cache_dir else None
    if cache is not None and cache.exists():
        return json.loads(cache.read_text())
    with tempfile.TemporaryDirectory(prefix="cudaperf-ncu-") as tmp:
        src, exe = Path(tmp) / "prog.cu", Path(tmp) / "prog"
        src.write_text(code)
        gpu = cfg.arch.replace("sm_", "compute_")
        b = subprocess.run(
            [cfg.nvcc, "-O3", f"-gencode=arch={gpu},code={cfg.arch}", "-o", str(exe), str(src)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if b.returncode != 0:
            raise ProfileError(f"nvcc failed: {b.stderr[-300:].strip()}")
        result = profile_command([str(exe)], kernels, ncu=find_ncu())
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(result))
    return result


def add_profile(
    reports: list[StructuralReport],
    code: str,
    cfg: AnalyzeConfig,
    task=None,
    input_config: str | None = None,
) -> list[StructuralReport]:
    """Reports with `ncu_*` features (and a top-stalls info finding) added; score unchanged.

    Without `task`, `code` must be a program with `main()`; with a `cudaperf.tasks.Task`, `code`
    is its candidate, profiled on `input_config` (default: the largest visible config).
    """
    names = [r.name for r in reports]
    if task is not None:
        from cudaperf.analyze.drivers import profile_candidate

        metrics = profile_candidate(code, task, names, cfg, input_config)
    else:
        metrics = profile_program(code, names, cfg)
    out = []
    for r in reports:
        m = metrics.get(r.name)
        if m is None:
            out.append(r)
            continue
        feats = ncu_features(m)
        stalls = sorted(
            ((k[10:], v) for k, v in feats.items() if k.startswith("ncu_stall_") and v),
            key=lambda kv: -kv[1],
        )[:3]
        findings = list(r.findings)
        if stalls:
            text = ", ".join(f"{k} {v:.1f}" for k, v in stalls)
            findings.append(
                Finding(
                    rule="warp-stalls",
                    severity=Severity.INFO,
                    line=r.line,
                    message=f"top warp stall reasons (warp cycles per issued instruction): {text}",
                )
            )
        out.append(r.model_copy(update={"features": {**r.features, **feats}, "findings": findings}))
    return out
