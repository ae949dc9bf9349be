"""The analyzer's contract: findings, per-kernel reports, the configuration, and the score.

Guaranteed: every `StructuralReport.features` dict has exactly the keys of `FEATURES` (plus the
`ncu_*` keys of `PROFILE_FEATURES` when profiling ran), each value a number in the documented
unit or `None` when it could not be determined (no nvcc, a template never instantiated, ...);
`score` is in [0, 1]; findings are sorted by line.

Score formula (weights in `ScoreWeights`, renormalised over the components that are known):

    score = sum_i w_i * s_i / sum_i w_i
    s_coalescing = coalesced_fraction + 0.5 * unknown_fraction     (1 when no global access)
    s_reuse      = max(staging / (1 + log2(shared_bank_conflict_degree_weighted)),
                       min(1, log2(register_tile_elems) / 4),        (0 below 2 elements)
                       1 if warp_shuffles else 0,
                       1 if neighbour_loads >= 2 else 0)
    s_barrier    = 0 if any divergent barrier else 1
    s_spill      = 1 / (1 + spill_bytes / spill_scale_bytes)
    s_occupancy  = min(1, theoretical_occupancy * ilp / occupancy_target)
                   ilp = clamp(sqrt(register_tile_elems), 1, 4)
    s_vector     = min(1, vector_width_max / 16)                   (1 when no global access)
    s_intensity  = AI / (AI + intensity_half)                      (AI = arithmetic_intensity)
    s_atomics    = 1 / (1 + contended_atomics)

Data reuse and bank conflicts (`s_reuse`; measured on the generated dataset's H200 timings,
weights and forms chosen on the train families of data/splits.json only, see
bench/analyze_spearman.py --splits): the fast implementation of a task usually reuses data
on chip, by staging global data in shared memory (`shared_staging`: shared memory both
written and read, ordered by a barrier, so an unused or write-only `__shared__` array earns
nothing), by register blocking (`register_tile_elems`: a local array both written and read) or
by warp-level cooperation (`warp_shuffles`), or by letting L1/L2 serve loads that
neighbouring threads share (`neighbour_loads`: a stencil's `in[i - 1]`, `in[i]`, `in[i + nx]`,
each also read by the next thread, row or plane). The last is as good as staging: on the H200
a naive stencil beats the shared-memory tiled one in every stencil task (the halo costs
extra loads, a barrier and index arithmetic while the caches already catch the reuse), and
without it the tiled version scored 0.2 higher (stencil1d/2d/3d mean Spearman 0.5, now 1.0;
no held-out family changed). A bank conflict discounts the benefit of shared
memory instead of being a component of its own: a stand-alone bank term gave every kernel
without shared memory full marks, so a tiled transpose with a 2-way conflict scored below the
naive strided one it beats (the old term's mean within-task Spearman with speed was -0.44).
Kernels without shared memory are therefore neutral with respect to conflicts. The static
intensity counts global traffic only, so staging global loads once per tile raises it: it
carries reuse for compute-bound kernels (a tiled GEMM's FLOP/byte is ~16x the naive one's).

Why the other refinements (measured on the sample set's H200 timings, see
bench/analyze_spearman.py): a bank conflict on a store that runs once per tile matters far
less than one in the inner loop, so conflicts are weighted by how often each access runs, and
a conflict replays an on-chip access while an uncoalesced access multiplies DRAM sectors, so
the bank term grows with log2 of the degree (a 32-way conflicted transpose is ~2x slower than
the padded one, a strided global one ~6x);
register blocking (a 4x4 accumulator tile per thread) hides latency with independent
instructions and needs fewer resident warps (Volkov, "Better performance at lower
occupancy"), so its lower occupancy is not penalised; and colliding global atomics
(a histogram's `atomicAdd(&hist[v], 1)` from every thread) are 10-40x slower than a
privatised version although every other static feature is equal.

The score uses static features only, so the same source always scores the same; profiling
adds `ncu_*` features for inspection and for correlation studies but does not change it.
"""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

# The one finding type of the analyzer and the evaluator's static checks, re-exported here and
# by `cudaperf.analyze`; in a `StructuralReport` a finding's `rule` is a key of RULES.
from cudaperf.execute.types import Finding, Severity

__all__ = [
    "FEATURES",
    "PROFILE_FEATURES",
    "RESOURCE_FEATURES",
    "STALL_REASONS",
    "RESOURCE_RULES",
    "RULES",
    "AnalyzeConfig",
    "Finding",
    "ScoreWeights",
    "Severity",
    "StructuralReport",
    "reports_for_config",
    "reuse_component",
    "score_components",
    "score_features",
    "without_resources",
]

# Feature name → (unit, meaning). Names are stable: consumers (reward, ranker) key on them.
FEATURES: dict[str, tuple[str, str]] = {
    "global_accesses": ("count", "global-memory loads/stores/atomics' operands in the source"),
    "coalesced_fraction": ("0-1", "share of global accesses classified coalesced or broadcast"),
    "uncoalesced_accesses": ("count", "global accesses whose threadIdx.x stride is > 1 element"),
    "unknown_accesses": ("count", "global accesses whose index is not affine in threadIdx.x"),
    "sectors_per_request_est": ("sectors", "mean static 32-byte sectors per warp request"),
    "shared_accesses": ("count", "__shared__ array accesses in the source"),
    "shared_bank_conflict_degree_max": ("ways", "worst static bank-conflict degree; 1 = none"),
    "shared_bank_conflict_degree_weighted": (
        "ways",
        "mean static bank-conflict degree over shared accesses, weighted by loop trip counts",
    ),
    "syncthreads": ("count", "block barriers in the source (__syncthreads*, block.sync())"),
    "divergent_barriers": ("count", "barriers under a thread-dependent branch or early return"),
    "syncwarps": ("count", "__syncwarp calls"),
    "atomics": ("count", "atomic* calls"),
    "contended_atomics": (
        "count",
        "global atomics at a shared or data-dependent address, not limited to one thread",
    ),
    "warp_shuffles": ("count", "__shfl*_sync and cooperative-groups shfl calls"),
    "warp_votes": ("count", "__ballot/__any/__all/__match/__reduce_*_sync calls"),
    "cooperative_groups": ("count", "cooperative_groups API uses"),
    "vector_width_max": ("bytes", "widest global access per thread (4 = float, 16 = float4)"),
    "unroll_pragmas": ("count", "#pragma unroll directives in the kernel"),
    "launch_bounds_max_threads": ("threads", "__launch_bounds__ max threads; 0 = none"),
    "block_size": ("threads", "block size used for occupancy (launch config or --block-size)"),
    "registers": ("registers", "registers per thread (ptxas)"),
    "smem_bytes": ("bytes", "static shared memory per block (ptxas)"),
    "dynamic_smem_bytes": ("bytes", "dynamic shared memory per block from the launch config"),
    "stack_bytes": ("bytes", "stack frame per thread (ptxas)"),
    "spill_bytes": ("bytes", "spill stores + spill loads per thread (ptxas)"),
    "blocks_per_sm": ("blocks", "resident blocks per SM (theoretical)"),
    "theoretical_occupancy": ("0-1", "resident warps / max warps per SM"),
    "flops_per_thread": ("FLOP", "static floating-point operations per thread"),
    "global_bytes_per_thread": ("bytes", "static global bytes moved per thread"),
    "arithmetic_intensity": ("FLOP/byte", "flops_per_thread / global_bytes_per_thread"),
    "intensity_exact": ("0/1", "1 when every loop trip count was known statically"),
    "register_tile_elems": (
        "elements",
        "largest per-thread local array both written and read (register blocking)",
    ),
    "shared_staging": (
        "0/1",
        "1 when __shared__ memory is both written and read and a barrier orders the two",
    ),
    "neighbour_loads": (
        "count",
        "largest set of global loads of one array at distinct addresses a few elements, rows "
        "or planes apart in one loop body that neighbouring threads, blocks or iterations "
        "also read, or positions one load reads over small window loops that overlap the "
        "next thread's (reuse the L1/L2 caches serve, as in a stencil or a 3x3 filter; "
        "clamped coordinates count as unclamped; 0 below 2)",
    ),
}

# Added when profiling with Nsight Compute ran (sums over the kernel's profiled launches).
PROFILE_FEATURES: dict[str, tuple[str, str]] = {
    "ncu_launches": ("count", "profiled launches of this kernel"),
    "ncu_sectors_per_request_ld": ("sectors", "global load sectors / global load requests"),
    "ncu_sectors_per_request_st": ("sectors", "global store sectors / global store requests"),
    "ncu_achieved_occupancy": ("0-1", "achieved active warps / max warps"),
    "ncu_dram_bytes": ("bytes", "DRAM bytes read + written"),
    "ncu_flops": ("FLOP", "fp32+fp64 adds + muls + 2*fmas executed"),
    "ncu_arithmetic_intensity": ("FLOP/byte", "ncu_flops / ncu_dram_bytes"),
    "ncu_shared_bank_conflicts": ("count", "shared-memory load+store bank conflicts"),
    "ncu_duration_ns": ("ns", "kernel duration (sum over launches)"),
}
# the warp stall reasons Nsight Compute reports (`ncu.STALL_METRIC` names each metric)
STALL_REASONS = [
    "long_scoreboard",
    "short_scoreboard",
    "barrier",
    "membar",
    "mio_throttle",
    "lg_throttle",
    "math_pipe_throttle",
    "wait",
    "not_selected",
    "selected",
    "no_instruction",
    "dispatch_stall",
    "drain",
    "imc_miss",
    "branch_resolving",
    "sleeping",
    "tex_throttle",
]
PROFILE_FEATURES.update(
    {
        f"ncu_stall_{r}": ("cycles/instruction", f"warp cycles stalled on {r} per issued instr.")
        for r in STALL_REASONS
    }
)

# Rule id → what it flags. Each is implemented by one function in rules.py.
RULES: dict[str, str] = {
    "uncoalesced-access": "consecutive threads touch global addresses more than one element apart",
    "unknown-access": "a global index could not be expressed affinely in threadIdx.x",
    "bank-conflict": "consecutive threads hit the same shared-memory bank",
    "divergent-barrier": "a barrier that not every thread of the block reaches",
    "register-spill": "ptxas spilled registers to local memory",
    "low-occupancy": "few warps resident per SM",
    "contended-atomic": "many threads do global atomics on one address or data-dependent ones",
    "resources": "ptxas resource usage could not be determined (info only)",
    "warp-stalls": "the top warp stall reasons measured by Nsight Compute (info only)",
}


# What ptxas adds to an analysis (`AnalyzeConfig.resources`), read from api.py: these features
# (None without it), the findings of these rules (none without it: the two rules read only
# ptxas's report and occupancy, the info finding says why it is missing), and through them the
# score's `spills` and `occupancy` components. Nothing else in a report depends on ptxas.
RESOURCE_FEATURES = (
    "registers",
    "smem_bytes",
    "stack_bytes",
    "spill_bytes",
    "blocks_per_sm",
    "theoretical_occupancy",
)
RESOURCE_RULES = ("register-spill", "low-occupancy", "resources")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StructuralReport(_Frozen):
    """The structural analysis of one `__global__` kernel."""

    name: str  # the kernel's source (unmangled) name
    line: int  # 1-based line of the kernel's definition
    features: dict[str, float | None]  # FEATURES (+ PROFILE_FEATURES); None = not determined
    findings: list[Finding]  # sorted by line
    score: float = Field(ge=0.0, le=1.0)  # structural quality, see the module docstring


class ScoreWeights(_Frozen):
    """Weights of the score's components; they need not sum to 1 (they are renormalised)."""

    coalescing: float = Field(default=0.30, ge=0)  # global access coalescing
    reuse: float = Field(default=0.20, ge=0)  # on-chip data reuse (discounted by conflicts)
    barriers: float = Field(default=0.10, ge=0)  # divergent barriers
    spills: float = Field(default=0.10, ge=0)  # register spills
    occupancy: float = Field(default=0.10, ge=0)  # theoretical occupancy
    vector: float = Field(default=0.05, ge=0)  # vector width of global accesses
    intensity: float = Field(default=0.20, ge=0)  # static arithmetic intensity
    atomics: float = Field(default=0.15, ge=0)  # contended global atomics


_ARCH = re.compile(r"^sm_(\d{2,3})a?$")


class AnalyzeConfig(_Frozen):
    """Configuration of `cudaperf.analyze.analyze`."""

    arch: str = "sm_90"  # target architecture for ptxas and the occupancy limits
    block_size: int = 256  # threads per block for occupancy when no launch config is found
    resources: bool = True  # run nvcc/ptxas for registers, shared memory and spills
    nvcc: str = "nvcc"  # the nvcc executable
    cache_dir: str | None = None  # where ptxas/ncu results are cached; None = in-memory only
    ptxas_timeout_s: float = Field(default=60.0, gt=0)  # limit for one nvcc --cubin run
    unknown_trip_count: int = Field(default=64, ge=1)  # assumed iterations of unknown loops
    low_occupancy: float = Field(default=0.25, ge=0, le=1)  # below this, low-occupancy fires
    occupancy_target: float = Field(default=0.5, gt=0, le=1)  # occupancy scoring full marks
    spill_scale_bytes: float = Field(default=64.0, gt=0)  # spill bytes that halve s_spill
    intensity_half: float = Field(default=4.0, gt=0)  # FLOP/byte that gives s_intensity 0.5
    weights: ScoreWeights = ScoreWeights()  # score component weights

    @field_validator("arch")
    @classmethod
    def _arch_known(cls, v: str) -> str:
        from cudaperf.analyze.resources import ARCHS

        if v not in ARCHS:
            raise ValueError(
                f"unknown --arch {v!r}; use one of {', '.join(sorted(ARCHS))} (e.g. sm_90 for H100/"
                "H200, sm_80 for A100, sm_86/sm_89 for RTX 30/40 cards)"
            )
        return v

    @field_validator("block_size")
    @classmethod
    def _block_ok(cls, v: int) -> int:
        if not 1 <= v <= 1024:
            raise ValueError(
                f"block size {v} is outside CUDA's 1..1024 threads per block; pass e.g. 256"
            )
        return v


def score_components(f: dict[str, float | None], cfg: AnalyzeConfig) -> dict[str, float]:
    """Each known component s_i in [0, 1], keyed by its `ScoreWeights` field name."""
    s: dict[str, float] = {}
    n = f.get("global_accesses") or 0
    unknown = (f.get("unknown_accesses") or 0) / n if n else 0.0
    s["coalescing"] = min(1.0, (f.get("coalesced_fraction") or 0) + 0.5 * unknown) if n else 1.0
    s["vector"] = min(1.0, (f.get("vector_width_max") or 4) / 16) if n else 1.0
    s["reuse"] = reuse_component(f)
    s["barriers"] = 0.0 if f.get("divergent_barriers") else 1.0
    if f.get("spill_bytes") is not None:
        s["spills"] = 1.0 / (1.0 + f["spill_bytes"] / cfg.spill_scale_bytes)
    if f.get("theoretical_occupancy") is not None:
        ilp = min(4.0, max(1.0, math.sqrt(f.get("register_tile_elems") or 1)))
        s["occupancy"] = min(1.0, f["theoretical_occupancy"] * ilp / cfg.occupancy_target)
    s["atomics"] = 1.0 / (1.0 + (f.get("contended_atomics") or 0))
    ai = f.get("arithmetic_intensity")
    if ai is not None:
        s["intensity"] = ai / (ai + cfg.intensity_half)
    return s


def reuse_component(f: dict[str, float | None]) -> float:
    """s_reuse: the best of shared-memory staging (discounted by bank conflicts), register
    blocking, warp shuffles and neighbouring loads the caches serve; 0 for a kernel that
    reuses nothing on chip."""
    bank = f.get("shared_bank_conflict_degree_weighted")
    bank = f.get("shared_bank_conflict_degree_max") if bank is None else bank
    staging = 1.0 / (1.0 + math.log2(max(1.0, bank or 1))) if f.get("shared_staging") else 0.0
    tile = f.get("register_tile_elems") or 0
    registers = min(1.0, math.log2(tile) / 4) if tile >= 2 else 0.0
    shuffles = 1.0 if f.get("warp_shuffles") else 0.0
    cached = 1.0 if (f.get("neighbour_loads") or 0) >= 2 else 0.0
    return max(staging, registers, shuffles, cached)


def score_features(f: dict[str, float | None], cfg: AnalyzeConfig) -> float:
    """Combine features into a score in [0, 1]; see the module docstring for the formula."""
    w = cfg.weights.model_dump()
    parts = [(w[k], v) for k, v in score_components(f, cfg).items()]
    total = sum(wi for wi, _ in parts)
    if total <= 0:
        return 1.0
    return max(0.0, min(1.0, sum(wi * si for wi, si in parts) / total))


def without_resources(
    reports: list[StructuralReport] | tuple[StructuralReport, ...], config: AnalyzeConfig
) -> list[StructuralReport]:
    """The reports `analyze(code, config=config)` would give with `resources=False`, from the
    reports it gave with ptxas: the `RESOURCE_FEATURES` set to None, the findings of
    `RESOURCE_RULES` dropped and the score computed again (`config`'s weights; its `resources`
    flag plays no part in the score). Nothing is parsed or compiled again.

    Guaranteed (tests/analyze/test_types.py compares it with a second analysis on the sample
    set and the dataset): equal to the analysis without ptxas, since ptxas only adds to a
    report what these names list. Reports already without resources come back equal."""
    out = []
    for r in reports:
        feats = {k: None if k in RESOURCE_FEATURES else v for k, v in r.features.items()}
        kept = [f for f in r.findings if f.rule not in RESOURCE_RULES]
        score = score_features(feats, config)
        out.append(
            StructuralReport(name=r.name, line=r.line, features=feats, findings=kept, score=score)
        )
    return out


def reports_for_config(
    reports: list[StructuralReport] | tuple[StructuralReport, ...],
    analysed_with: AnalyzeConfig,
    config: AnalyzeConfig,
) -> list[StructuralReport] | None:
    """What `analyze(code, config=config)` gives, read from `reports`, the result of
    `analyze(code, config=analysed_with)` (`[]` for a candidate without kernels, never a failed
    analysis's stand-in): the same reports when the configs are equal, `without_resources`
    when `config` differs from `analysed_with` only by turning ptxas off; None when `config`'s
    reports cannot be read from these (another arch or block size, weights, ptxas wanted but
    not run), so the caller analyses again."""
    if config.model_dump() == analysed_with.model_dump():
        return list(reports)
    if config.resources or not analysed_with.resources:
        return None
    if analysed_with.model_copy(update={"resources": False}).model_dump() != config.model_dump():
        return None
    return without_resources(reports, config)
