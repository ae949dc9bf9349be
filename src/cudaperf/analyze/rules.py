"""Diagnostic rules: each a small pure function from what the analyzer found to findings.

`RULE_FUNCTIONS` maps each rule id of `types.RULES` to its function; `run_rules` applies them
all. A rule takes the `KernelFacts` and the config and returns findings whose message says
what is wrong and what to change, in words a model can act on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cudaperf.analyze.access import Access
from cudaperf.analyze.resources import Occupancy, Resources
from cudaperf.analyze.structure import Structure
from cudaperf.analyze.types import AnalyzeConfig, Finding, Severity

__all__ = ["RULE_FUNCTIONS", "KernelFacts", "run_rules"]


@dataclass(frozen=True)
class KernelFacts:
    """Everything the rules look at for one kernel."""

    name: str  # kernel source name
    line: int  # line of the definition (candidate lines)
    accesses: list[Access]  # global and shared accesses (lines already mapped)
    structure: Structure  # barriers, atomics, shuffles (lines already mapped)
    resources: Resources | None  # ptxas report; None when not available
    occupancy: Occupancy | None  # theoretical occupancy; None without resources
    block_size: int  # threads per block used for occupancy
    contended: tuple[Access, ...] = ()  # global atomics many threads may aim at one address


Rule = Callable[[KernelFacts, AnalyzeConfig], list[Finding]]


# Why: uncoalesced global accesses multiply DRAM/L2 sectors per request (up to 8x for fp32),
# the most common reason a correct kernel is slow.
def uncoalesced_access(k: KernelFacts, cfg: AnalyzeConfig) -> list[Finding]:
    out = []
    for a in k.accesses:
        if a.space != "global" or a.pattern != "strided":
            continue
        size = f"{a.elem_bytes}-byte" if a.elem_bytes else "element"
        gap = "not contiguous" if a.stride == "mixed" else f"{a.stride} {size} elements apart"
        out.append(
            Finding(
                rule="uncoalesced-access",
                severity=Severity.WARNING,
                line=a.line,
                message=(
                    f"`{a.text}` ({a.kind}): consecutive threadIdx.x are {gap}, so a warp "
                    f"touches ~{a.sectors} sectors instead of "
                    f"{max(1, (a.elem_bytes or 4))}; map threadIdx.x to the contiguous (last) "
                    "index, or stage the tile through shared memory and read it transposed there."
                ),
            )
        )
    return out


# Why: an index the analyzer cannot follow is often data-dependent (gather/scatter); telling the
# model keeps the coalescing score honest about what it does not know.
def unknown_access(k: KernelFacts, cfg: AnalyzeConfig) -> list[Finding]:
    return [
        Finding(
            rule="unknown-access",
            severity=Severity.INFO,
            line=a.line,
            message=f"`{a.text}`: index is not affine in threadIdx.x; coalescing unknown.",
        )
        for a in k.accesses
        if a.space == "global" and a.pattern == "unknown" and a.kind != "atomic"
    ]


# Why: threads of a warp hitting one bank at different words serialise the shared-memory access
# (an n-way conflict costs n times); padding the row length by one word removes it.
def bank_conflict(k: KernelFacts, cfg: AnalyzeConfig) -> list[Finding]:
    out = []
    for a in k.accesses:
        if a.space == "shared" and (a.conflict_degree or 1) > 1:
            out.append(
                Finding(
                    rule="bank-conflict",
                    severity=Severity.WARNING,
                    line=a.line,
                    message=(
                        f"`{a.text}`: consecutive threadIdx.x are {a.stride} elements apart in "
                        f"shared array `{a.array}`, a {a.conflict_degree}-way bank conflict; pad "
                        "the inner dimension by one (e.g. [32][33]) or swap the indices."
                    ),
                )
            )
    return out


# Why: __syncthreads must be reached by every thread of the block; under a thread-dependent branch
# or after a thread-dependent return it is undefined behaviour (hangs or silent races).
def divergent_barrier(k: KernelFacts, cfg: AnalyzeConfig) -> list[Finding]:
    return [
        Finding(
            rule="divergent-barrier",
            severity=Severity.ERROR,
            line=line,
            message=(
                "barrier is not reached by all threads of the block (it sits under a branch or "
                "after a return that depends on the thread index); move it out of the branch "
                "and guard only the memory accesses."
            ),
        )
        for line in k.structure.divergent_lines
    ]


# Why: spilled registers go to local memory (L1/L2/DRAM); a spilling inner loop is often several
# times slower than a slightly lower-occupancy version that does not spill.
def register_spill(k: KernelFacts, cfg: AnalyzeConfig) -> list[Finding]:
    r = k.resources
    if r is None or r.spill_store_bytes + r.spill_load_bytes == 0:
        return []
    return [
        Finding(
            rule="register-spill",
            severity=Severity.WARNING,
            line=k.line,
            message=(
                f"ptxas spills {r.spill_store_bytes} bytes (stores) / {r.spill_load_bytes} bytes "
                f"(loads) per thread at {r.registers} registers; relax __launch_bounds__ / "
                "maxrregcount, shrink per-thread arrays, or index them with compile-time constants."
            ),
        )
    ]


# Why: with few resident warps an SM cannot hide memory latency; the limiter tells the model
# which resource to cut.
def low_occupancy(k: KernelFacts, cfg: AnalyzeConfig) -> list[Finding]:
    o = k.occupancy
    if o is None or o.occupancy >= cfg.low_occupancy:
        return []
    fixes = {
        "registers": "use fewer registers per thread (__launch_bounds__, smaller tiles)",
        "shared memory": "use less shared memory per block (smaller tiles, fewer buffers)",
        "warps": "use a larger block",
        "blocks": f"use larger blocks than {k.block_size} threads",
    }
    return [
        Finding(
            rule="low-occupancy",
            severity=Severity.WARNING,
            line=k.line,
            message=(
                f"theoretical occupancy {o.occupancy:.0%} ({o.blocks_per_sm} blocks of "
                f"{k.block_size} threads per SM on {cfg.arch}, limited by {o.limiter}); "
                f"{fixes[o.limiter]}."
            ),
        )
    ]


# Why: atomics on one address (or on a few data-dependent ones, as in a histogram) serialise in
# L2; thousands of threads colliding make a kernel 10-40x slower than a privatised version.
def contended_atomic(k: KernelFacts, cfg: AnalyzeConfig) -> list[Finding]:
    return [
        Finding(
            rule="contended-atomic",
            severity=Severity.WARNING,
            line=a.line,
            message=(
                f"`{a.text}`: every thread does a global atomic on "
                f"{'the same address' if a.pattern == 'broadcast' else 'a data-dependent address'}"
                ", so colliding atomics serialise; accumulate per block first (a private copy in "
                "shared memory, or a warp-shuffle/block reduction) and do one global atomic per "
                "block or per bin."
            ),
        )
        for a in k.contended
    ]


RULE_FUNCTIONS: dict[str, Rule] = {
    "uncoalesced-access": uncoalesced_access,
    "unknown-access": unknown_access,
    "bank-conflict": bank_conflict,
    "divergent-barrier": divergent_barrier,
    "register-spill": register_spill,
    "low-occupancy": low_occupancy,
    "contended-atomic": contended_atomic,
}


def run_rules(k: KernelFacts, cfg: AnalyzeConfig) -> list[Finding]:
    """All findings for one kernel, sorted by line."""
    out = [f for rule in RULE_FUNCTIONS.values() for f in rule(k, cfg)]
    return sorted(out, key=lambda f: (f.line, f.rule))
