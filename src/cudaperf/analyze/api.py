"""`analyze`: one `StructuralReport` per `__global__` kernel of a candidate.

Steps: take the CUDA text out of the candidate (`parse.extract_cuda`), parse it with
tree-sitter, find kernels, constants and launches; per kernel classify memory accesses
(`access`), barriers and warp-level operations (`structure`) and estimate arithmetic intensity
(`intensity`); compile once with ptxas for registers/shared memory/spills (`resources`, torch
host code stripped first); compute occupancy; apply the rules and the score. Optionally
profile with Nsight Compute (`profile`) and add `ncu_*` features.

Lines in reports and findings are lines of the candidate file (for a Python candidate, the
line inside the Python file where that CUDA line sits).
"""

from __future__ import annotations

import dataclasses
import logging
import subprocess

from cudaperf.analyze.access import Access, find_accesses
from cudaperf.analyze.index import Scope
from cudaperf.analyze.intensity import LoopWeights, estimate_intensity
from cudaperf.analyze.parse import (
    CudaText,
    Kernel,
    LaunchSite,
    extract_cuda,
    find_device_functions,
    find_kernels,
    find_launches,
    parse,
    read_constants,
    strip_torch_host,
)
from cudaperf.analyze.resources import PtxasError, Resources, occupancy, ptxas_resources
from cudaperf.analyze.rules import KernelFacts, run_rules
from cudaperf.analyze.structure import (
    Structure,
    contended_atomics,
    find_structure,
    register_tile_elems,
)
from cudaperf.analyze.types import (
    FEATURES,
    AnalyzeConfig,
    Finding,
    Severity,
    StructuralReport,
    score_features,
)

__all__ = ["NoKernelsError", "analyze"]

log = logging.getLogger(__name__)


class NoKernelsError(ValueError):
    """The candidate contains no `__global__` kernel with a body."""


def analyze(
    source: str,
    *,
    config: AnalyzeConfig | None = None,
    profile: bool = False,
    task=None,
    input_config: str | None = None,
) -> list[StructuralReport]:
    """Analyse every kernel of a `.cu` text or a PyTorch→CUDA Python candidate.

    Raises NoKernelsError when there is no kernel. ptxas problems (no nvcc, a compile error)
    do not raise: resource features become None and an info finding says why.
    With `profile=True` the program is built and run under Nsight Compute (see `profile`): a
    `.cu` with `main()` as it is, or, given its `task` (a `cudaperf.tasks.Task`), a candidate
    through a generated driver on the config named `input_config` (default: the largest
    visible one; see `drivers`).
    """
    cfg = config or AnalyzeConfig()
    text = extract_cuda(source)
    code = strip_torch_host(text.code) if text.from_python or "torch" in text.code else text.code
    root = parse(code).root_node
    consts = read_constants(root)
    kernels = find_kernels(root, consts)
    if not kernels:
        raise NoKernelsError("no __global__ kernel with a body found")
    helpers = find_device_functions(root)
    launches = find_launches(root, consts)
    resources, note = _resources(code, cfg)
    reports = [_report(k, text, consts, helpers, launches, resources, note, cfg) for k in kernels]
    if profile:
        from cudaperf.analyze.profile import add_profile

        if task is not None:
            reports = add_profile(reports, source, cfg, task=task, input_config=input_config)
        else:
            reports = add_profile(reports, code, cfg)
    return reports


def _resources(code: str, cfg: AnalyzeConfig) -> tuple[dict[str, list[Resources]], str | None]:
    if not cfg.resources:
        return {}, None
    try:
        return ptxas_resources(code, cfg.arch, cfg.nvcc, cfg.cache_dir, cfg.ptxas_timeout_s), None
    except FileNotFoundError:
        return {}, f"{cfg.nvcc} not found: registers, shared memory and occupancy are unknown"
    except PtxasError as e:
        return {}, f"nvcc failed, so resources are unknown: {e}"
    except (TimeoutError, subprocess.TimeoutExpired):  # subprocess.run(timeout=) raises the latter
        return {}, "nvcc timed out, so resources are unknown"


def _block(
    k: Kernel, launches: list[LaunchSite], cfg: AnalyzeConfig
) -> tuple[int, int, int | None]:
    """(threads per block, dynamic shared memory bytes, blockDim.x if known) for occupancy."""
    mine = [s for s in launches if s.kernel == k.name and s.block_threads]
    if mine:
        s = mine[0]
        return s.block_threads or cfg.block_size, s.dynamic_smem or 0, s.block_x
    if k.launch_bounds[0]:
        return min(cfg.block_size, k.launch_bounds[0]), 0, None
    return cfg.block_size, 0, None


def _map_lines(text: CudaText, accesses: list[Access], st: Structure) -> tuple[list, Structure]:
    acc = [dataclasses.replace(a, line=text.candidate_line(a.line)) for a in accesses]
    div = tuple(text.candidate_line(x) for x in st.divergent_lines)
    return acc, dataclasses.replace(st, divergent_lines=div)


def _report(
    k: Kernel,
    text: CudaText,
    consts: dict,
    helpers: dict,
    launches: list[LaunchSite],
    resources: dict[str, list[Resources]],
    note: str | None,
    cfg: AnalyzeConfig,
) -> StructuralReport:
    scope = Scope.of(k.body, k.params, consts)
    block, dyn, block_x = _block(k, launches, cfg)
    accesses = find_accesses(k, scope, block_x)
    st = find_structure(k, scope, helpers)
    inten = estimate_intensity(k, scope, accesses, cfg.unknown_trip_count)
    weight = LoopWeights(k, scope, cfg.unknown_trip_count)
    bank = _weighted_conflicts(accesses, weight)
    contended = contended_atomics(k, accesses, scope)
    tile = register_tile_elems(k, scope)
    accesses, st = _map_lines(text, accesses, st)
    contended = [dataclasses.replace(a, line=text.candidate_line(a.line)) for a in contended]
    res = _worst(resources.get(k.name, []))
    occ = occupancy(cfg.arch, block, res.registers, res.smem_bytes, dyn) if res else None
    line = text.candidate_line(k.line)
    facts = KernelFacts(k.name, line, accesses, st, res, occ, block, tuple(contended))
    findings = run_rules(facts, cfg)
    if res is None and cfg.resources:
        why = note or "ptxas reported no entry for this kernel (a template never instantiated?)"
        findings.append(Finding(rule="resources", severity=Severity.INFO, line=line, message=why))
    features = _features(accesses, st, inten, res, occ, k, block, dyn)
    features.update(
        shared_bank_conflict_degree_weighted=bank,
        contended_atomics=len(contended),
        register_tile_elems=tile,
    )
    score = score_features(features, cfg)
    return StructuralReport(
        name=k.name, line=line, features=features, findings=findings, score=score
    )


def _weighted_conflicts(accesses: list[Access], weight: LoopWeights) -> float:
    """Mean bank-conflict degree of the shared accesses, each weighted by how often it runs."""
    sh = [(weight(a.node), a.conflict_degree) for a in accesses if a.space == "shared"]
    sh = [(w, d) for w, d in sh if d is not None]
    total = sum(w for w, _ in sh)
    return sum(w * d for w, d in sh) / total if total else 1.0


def _worst(rs: list[Resources]) -> Resources | None:
    """The most demanding instantiation (most registers, then most shared memory)."""
    return max(rs, key=lambda r: (r.registers, r.smem_bytes), default=None)


def _features(accesses, st, inten, res, occ, k: Kernel, block: int, dyn: int) -> dict:
    g = [a for a in accesses if a.space == "global" and a.kind != "atomic"]
    sh = [a for a in accesses if a.space == "shared"]
    n = len(g)
    good = sum(a.pattern in ("coalesced", "broadcast") for a in g)
    sectors = [a.sectors for a in g if a.sectors is not None]
    degrees = [a.conflict_degree for a in sh if a.conflict_degree is not None]
    f: dict[str, float | None] = dict.fromkeys(FEATURES)
    f.update(
        global_accesses=n,
        coalesced_fraction=good / n if n else 1.0,
        uncoalesced_accesses=sum(a.pattern == "strided" for a in g),
        unknown_accesses=sum(a.pattern == "unknown" for a in g),
        sectors_per_request_est=sum(sectors) / len(sectors) if sectors else None,
        shared_accesses=len(sh),
        shared_staging=int(
            any(a.kind != "load" for a in sh)
            and any(a.kind != "store" for a in sh)
            and st.syncthreads + st.syncwarps > 0
        ),
        shared_bank_conflict_degree_max=max(degrees, default=1),
        syncthreads=st.syncthreads,
        divergent_barriers=len(st.divergent_lines),
        syncwarps=st.syncwarps,
        atomics=st.atomics,
        warp_shuffles=st.warp_shuffles,
        warp_votes=st.warp_votes,
        cooperative_groups=st.cooperative_groups,
        vector_width_max=max((a.elem_bytes or 4 for a in g), default=0),
        unroll_pragmas=st.unroll_pragmas,
        launch_bounds_max_threads=k.launch_bounds[0] or 0,
        block_size=block,
        dynamic_smem_bytes=dyn,
        flops_per_thread=inten.flops,
        global_bytes_per_thread=inten.bytes,
        arithmetic_intensity=inten.intensity,
        intensity_exact=int(inten.exact),
        neighbour_loads=inten.neighbour_loads,
    )
    if res is not None:
        f.update(
            registers=res.registers,
            smem_bytes=res.smem_bytes,
            stack_bytes=res.stack_bytes,
            spill_bytes=res.spill_store_bytes + res.spill_load_bytes,
        )
    if occ is not None:
        f.update(blocks_per_sm=occ.blocks_per_sm, theoretical_occupancy=occ.occupancy)
    return f
