"""GPU validation of cudaperf.analyze on the known-answer kernels (tests/analyze/kernels).

1. Occupancy: for every kernel, `cudaOccupancyMaxActiveBlocksPerMultiprocessor` (the CUDA
   runtime API, called from a generated program that includes the kernel file) over a sweep
   of block sizes and dynamic shared-memory sizes, against `cudaperf.analyze.occupancy` fed
   with ptxas's numbers; plus `cudaFuncGetAttributes` registers/shared/local against ptxas.
2. Coalescing: every program with a `main()` runs under `ncu --clock-control none`; measured
   global-load/store sectors per request against the static estimate (mean over the
   kernel's load or store accesses) and the static class.
3. Bank conflicts and arithmetic intensity, measured next to the static values.

Run on a GPU machine:  python bench/analyze_gpu.py --out DIR   (writes DIR/analyze_gpu.json)
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cudaperf.analyze import AnalyzeConfig, analyze, occupancy  # noqa: E402
from cudaperf.analyze.access import find_accesses  # noqa: E402
from cudaperf.analyze.index import Scope  # noqa: E402
from cudaperf.analyze.parse import find_kernels, find_launches, parse, read_constants  # noqa: E402
from cudaperf.analyze.profile import find_ncu, ncu_features, profile_command  # noqa: E402
from cudaperf.analyze.resources import ptxas_resources  # noqa: E402

KERNELS = ROOT / "tests" / "analyze" / "kernels"
BLOCKS = [32, 64, 96, 128, 160, 192, 256, 384, 512, 640, 768, 1024]
DYN_SMEM = [0, 16384, 40960]
ARCH = "sm_90"


def sh(cmd: list[str], timeout: float = 300) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {p.stderr[-800:]}")
    return p.stdout


def kernel_names(code: str) -> list[str]:
    root = parse(code).root_node
    return [k.name for k in find_kernels(root, read_constants(root))]


def occupancy_program(code: str, names: list[str]) -> str:
    """The kernel file (its main renamed) plus a main that queries the occupancy API."""
    lines = ["#include <cstdio>", "int main() {", "  cudaFree(0);"]
    bs = ", ".join(map(str, BLOCKS))
    dyn = ", ".join(f"{d}ul" for d in DYN_SMEM)
    lines += [f"  int bs[] = {{{bs}}};", f"  size_t dyn[] = {{{dyn}}};"]
    for n in names:
        lines += [
            "  { cudaFuncAttributes a; cudaFuncGetAttributes(&a, " + n + ");",
            f'    printf("ATTR {n} %d %zu %zu %d\\n", a.numRegs, a.sharedSizeBytes,'
            " a.localSizeBytes, a.maxThreadsPerBlock);",
            f"    for (int i = 0; i < {len(BLOCKS)}; ++i) for (int j = 0; j < {len(DYN_SMEM)}; ++j)"
            " { int nb = -1;",
            f"      cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, {n}, bs[i],"
            " dyn[j]);",
            f'      printf("OCC {n} %d %zu %d %d\\n", bs[i], dyn[j], nb, (int)e); }} }}',
        ]
    lines += ["  return 0;", "}"]
    return "#define main cudaperf_original_main\n" + code + "\n#undef main\n" + "\n".join(lines)


def check_occupancy(tmp: Path, log) -> tuple[list[dict], list[dict]]:
    rows, attrs = [], []
    for f in sorted(KERNELS.glob("*.cu")):
        code = f.read_text()
        names = kernel_names(code)
        res = ptxas_resources(code, ARCH)
        src, exe = tmp / f"occ_{f.stem}.cu", tmp / f"occ_{f.stem}"
        src.write_text(occupancy_program(code, names))
        sh(["nvcc", "-O2", f"-gencode=arch=compute_90,code={ARCH}", "-o", str(exe), str(src)])
        out = sh([str(exe)], timeout=60)
        for line in out.splitlines():
            parts = line.split()
            if parts[:1] == ["ATTR"]:
                r = res[parts[1]][0]
                attrs.append(
                    {
                        "file": f.name,
                        "kernel": parts[1],
                        "ptxas_registers": r.registers,
                        "api_registers": int(parts[2]),
                        "ptxas_smem": r.smem_bytes,
                        "api_smem": int(parts[3]),
                        "ptxas_stack": r.stack_bytes,
                        "api_local": int(parts[4]),
                    }
                )
            if parts[:1] == ["OCC"]:
                name, block, dyn, api, err = (
                    parts[1],
                    int(parts[2]),
                    int(parts[3]),
                    int(parts[4]),
                    int(parts[5]),
                )
                r = res[name][0]
                ours = occupancy(ARCH, block, r.registers, r.smem_bytes, dyn)
                rows.append(
                    {
                        "kernel": name,
                        "block": block,
                        "dynamic_smem": dyn,
                        "api_blocks": api if err == 0 else None,
                        "api_error": err,
                        "ours_blocks": ours.blocks_per_sm,
                        "limiter": ours.limiter,
                        "match": err == 0 and api == ours.blocks_per_sm,
                    }
                )
        log(f"occupancy {f.name}: {sum(r['match'] for r in rows)}/{len(rows)} match so far")
    return rows, attrs


def static_expectations(code: str) -> dict[str, dict]:
    """Per kernel: static mean sectors for global loads / stores, classes, AI, conflicts."""
    out = {}
    for rep in analyze(code, config=AnalyzeConfig(arch=ARCH)):
        out[rep.name] = {"features": rep.features, "score": rep.score}
    root = parse(code).root_node
    consts = read_constants(root)
    block_x = {s.kernel: s.block_x for s in find_launches(root, consts)}
    for k in find_kernels(root, consts):
        scope = Scope.of(k.body, k.params, consts)
        acc = [
            a
            for a in find_accesses(k, scope, block_x.get(k.name))
            if a.space == "global" and a.kind != "atomic"
        ]
        for kind in ("load", "store"):
            sel = [a for a in acc if a.kind in (kind, "loadstore") and a.sectors is not None]
            out[k.name][f"static_{kind}"] = {
                "sectors_mean": sum(a.sectors for a in sel) / len(sel) if sel else None,
                "classes": sorted({a.pattern for a in sel}),
                "accesses": [f"{a.text} [{a.pattern}, {a.sectors} sectors]" for a in sel],
            }
    return out


def check_ncu(tmp: Path, log, raw: list[str]) -> list[dict]:
    rows = []
    for f in sorted(KERNELS.glob("*.cu")):
        code = f.read_text()
        if not re.search(r"\bint\s+main\s*\(", code):
            continue
        exe = tmp / f"prof_{f.stem}"
        sh(["nvcc", "-O3", f"-gencode=arch=compute_90,code={ARCH}", "-o", str(exe), str(f)])
        names = kernel_names(code)
        t0 = time.perf_counter()
        metrics = profile_command([str(exe)], names, raw=raw)
        log(f"ncu {f.name}: {time.perf_counter() - t0:.1f}s, kernels {sorted(metrics)}")
        static = static_expectations(code)
        for name in names:
            m = ncu_features(metrics.get(name, {}))
            s = static[name]
            row = {"file": f.name, "kernel": name}
            for kind, key in (
                ("load", "ncu_sectors_per_request_ld"),
                ("store", "ncu_sectors_per_request_st"),
            ):
                exp = s[f"static_{kind}"]
                meas = m.get(key)
                row[kind] = {
                    **exp,
                    "ncu_sectors_per_request": meas,
                    "agree": _agree(exp["sectors_mean"], meas),
                }
            sf = s["features"]
            row["bank_conflict_degree_static"] = sf["shared_bank_conflict_degree_max"]
            row["ncu_shared_bank_conflicts"] = m.get("ncu_shared_bank_conflicts")
            row["arithmetic_intensity_static"] = sf["arithmetic_intensity"]
            row["ncu_arithmetic_intensity"] = m.get("ncu_arithmetic_intensity")
            row["theoretical_occupancy"] = sf["theoretical_occupancy"]
            row["ncu_achieved_occupancy"] = m.get("ncu_achieved_occupancy")
            row["ncu"] = m
            rows.append(row)
    return rows


def _agree(static: float | None, measured: float | None) -> bool | None:
    """Within 25% (or 1 sector) of the static estimate; None when either is missing."""
    if static is None or measured is None:
        return None
    return abs(measured - static) <= max(1.0, 0.25 * static)


def versions() -> dict[str, str]:
    def first(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
        except OSError:
            return ""

    ncu = find_ncu()
    return {
        "nvcc": first(["nvcc", "--version"]).splitlines()[-1]
        if first(["nvcc", "--version"])
        else "",
        "ncu": first([ncu, "--version"]).splitlines()[-1] if ncu else "",
        "driver": first(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
        "python": platform.python_version(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    logf = open(args.out / "analyze_gpu_log.txt", "w")

    def log(msg: str) -> None:
        print(msg, flush=True)
        logf.write(msg + "\n")

    gpu = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()
    result: dict = {
        "gpu": gpu,
        "date": datetime.date.today().isoformat(),
        "arch": ARCH,
        "versions": versions(),
        "command": "python bench/analyze_gpu.py --out $OUT",
    }
    log(json.dumps(result))
    raw: list[str] = []
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for step in ("occupancy", "ncu"):
            try:
                if step == "occupancy":
                    occ, attrs = check_occupancy(tmp, log)
                    result["occupancy"] = {
                        "compared": len(occ),
                        "matches": sum(r["match"] for r in occ),
                        "mismatches": [r for r in occ if not r["match"]],
                        "rows": occ,
                        "attributes": attrs,
                    }
                    log(f"occupancy: {result['occupancy']['matches']}/{len(occ)} match")
                else:
                    rows = check_ncu(tmp, log, raw)
                    checks = [r[k]["agree"] for r in rows for k in ("load", "store")]
                    result["coalescing"] = {
                        "compared": sum(c is not None for c in checks),
                        "agree": sum(c is True for c in checks),
                        "rows": rows,
                    }
                    log(
                        f"coalescing: {result['coalescing']['agree']} of "
                        f"{result['coalescing']['compared']} agree"
                    )
            except Exception as e:  # keep what the other step produced
                result[f"{step}_error"] = repr(e)
                log(f"{step} failed: {e!r}")
            (args.out / "analyze_gpu.json").write_text(json.dumps(result, indent=1))
    (args.out / "analyze_gpu_ncu_raw.txt").write_text("\n=====\n".join(raw))
    log("done")


if __name__ == "__main__":
    main()
