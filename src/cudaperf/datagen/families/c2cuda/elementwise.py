"""Element-wise families: generated expression trees, polynomial / series evaluation, bit
manipulation. Every task is y[i] = f(inputs[i], scalars) with f drawn per task."""

from __future__ import annotations

import random

from cudaperf.datagen.base import (
    c_signature,
    c_task,
    family,
    four_configs,
    lit,
    prototype,
    vector_sizes,
)
from cudaperf.datagen.exprs import expr_tree, horner
from cudaperf.datagen.maps import MapSpec, map_impls
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

# parameter names that never collide with the kernels' locals (i, t, u, v, n, block, grid)
_NAMES = [["x", "y", "z"], ["lhs", "rhs", "aux"], ["p", "q", "s"], ["in0", "in1", "in2"]]
_OUTS = ["out", "res", "dst", "result"]


def _map_task(
    fam, index, rng, entry, types, ins, out, scalars, body, text, dists, helpers=("", "")
):
    """A C→CUDA map task from the per-element body (a C expression over ins and scalars).

    `types` is (input type, output type, tolerance); `helpers` is (C, CUDA) source placed
    before the element function in the reference and in every implementation."""
    t_in, t_out, tol = types
    sig = c_signature(
        ("n", "int", "scalar"),
        *[(n, t, "scalar") for n, t, _ in scalars],
        *[(n, t_in, "in", "n") for n in ins],
        (out, t_out, "out", "n"),
    )
    decl = ", ".join([*(f"{t_in} {v}" for v in ins), *(f"{t} {n}" for n, t, _ in scalars)])
    call = ", ".join([*(f"{v}[i]" for v in ins), *(n for n, _, _ in scalars)])
    src = (
        f"#include <math.h>\n{helpers[0]}\n"
        f"static inline {t_out} elem({decl}) {{\n    return {body};\n}}\n\n"
        f"void {entry}({', '.join(p.c_decl() for p in sig)}) {{\n"
        f"    for (int i = 0; i < n; ++i) {out}[i] = elem({call});\n}}\n"
    )
    elem = (
        f"{helpers[1].strip()}\n__device__ __forceinline__ {t_out} elem({decl}) {{\n"
        f"    return {body};\n}}"
    ).strip()
    spec = MapSpec(
        entry, prototype(entry, sig), t_in, t_out, ins, out, [(n, t) for n, t, _ in scalars], elem
    )
    per = len(ins) * (8 if t_in == "double" else 4) + (8 if t_out == "double" else 4)
    ns = vector_sizes(rng, per)
    sizes = {k: {"n": v, **{n: val for n, _, val in scalars}} for k, v in ns.items()}
    configs = four_configs(sizes, dists[0], dists[1])
    return c_task(fam, index, entry, src, sig, configs, tol, map_impls(rng, spec), text)


@family("elementwise_expr", TaskKind.C2CUDA, "elementwise")
def elementwise_expr(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double"])
    k = rng.choice([1, 2, 2, 3])
    names = rng.choice(_NAMES)[:k]
    out = rng.choice(_OUTS)
    scalars = []
    if rng.random() < 0.5:
        scalars.append(("alpha", t, round(rng.uniform(0.5, 2.5), 3)))
    body = expr_tree(rng, names + [s[0] for s in scalars], rng.choice([2, 3, 3, 4]), t)
    entry = rng.choice(["pointwise", "map_expr", "ew_transform", "apply_expr", "fused_map"])
    tol = Tolerance(atol=2e-5, rtol=2e-4) if t == "float" else Tolerance(atol=1e-11, rtol=1e-10)
    normal = Distribution(kind="normal", mean=0.0, std=1.0)
    desc = (
        f"Element-wise map over {k} {t} input array(s) of length n: {out}[i] = f(...) where f is "
        f"the expression in the reference ({body.count('(')} parenthesised terms). Every element "
        "is independent, so the task is memory-bound unless f is expensive; sizes are not "
        "multiples of the block or vector width."
    )
    dists = (None, normal)
    return _map_task(
        "elementwise_expr", index, rng, entry, (t, t, tol), names, out, scalars, body, desc, dists
    )


@family("poly_eval", TaskKind.C2CUDA, "polynomial")
def poly_eval(rng: random.Random, index: int):
    t = rng.choice(["float", "double"])
    form = rng.choice(["horner", "horner", "chebyshev", "rational"])
    deg = rng.randint(3, 12)
    coeffs = [round(rng.uniform(-1, 1) / (1 + 0.3 * k), 4) for k in range(deg + 1)]
    coeffs[0] = round(abs(coeffs[0]) + 2.0, 4)  # a constant term keeps p(x) away from 0
    s = "f" if t == "float" else ""
    if form == "horner":
        body = horner(coeffs, "x", t)
        what = f"the degree-{deg} polynomial sum c_k x^k (Horner form in the reference)"
    elif form == "rational":
        den = [1.0] + [round(rng.uniform(0, 0.5), 3) for _ in range(rng.randint(1, 3))]
        body = f"({horner(coeffs, 'x', t)}) / ({horner(den, f'fabs{s}(x)', t)})"
        what = f"a rational function (degree {deg} over degree {len(den) - 1})"
    else:
        terms = " + ".join(
            f"{lit(c, t)} * cos{s}({k}.0{s} * acos{s}(x))" for k, c in enumerate(coeffs)
        )
        body = f"{terms}"
        what = f"a Chebyshev series of {deg + 1} terms, sum c_k cos(k acos x)"
    entry = rng.choice(["poly_eval", "eval_series", "polyval", "approx_fn"])
    lo, hi = (-0.95, 0.95) if form == "chebyshev" else (-1.5, 1.5)
    dist = Distribution(kind="uniform", low=lo, high=hi)
    held = Distribution(kind="uniform", low=lo / 2, high=hi)
    tol = Tolerance(atol=1e-4, rtol=2e-4) if t == "float" else Tolerance(atol=1e-11, rtol=1e-10)
    desc = (
        f"Evaluate {what} at every element of a {t} array x of length n, writing y. The "
        "coefficients are compile-time constants of the task. Compute grows with the degree, "
        "memory traffic does not: low degrees are bandwidth-bound, high ones compute-bound."
    )
    return _map_task(
        "poly_eval", index, rng, entry, (t, t, tol), ["x"], "y", [], body, desc, (dist, held)
    )


_BIT_OPS = {
    "popcount_mix": "(unsigned int)POPC($v ^ ($v >> $a)) * $b + ($v & $m)",
    "bit_reverse_xor": "BREV($v) ^ ($v * $b)",
    "xorshift": "XS($v ^ $m)",
    "gray_rotate": "($v ^ ($v >> 1)) + ROTL($v, $a)",
    "mask_blend": "($v & $m) | (ROTL($v, $a) & ~$m)",
    "hash_mul": "(($v ^ ($v >> 16)) * $b) ^ ((($v ^ ($v >> 16)) * $b) >> 13)",
}
_COMMON = """
static unsigned int ROTL(unsigned int v, int s) { return (v << s) | (v >> ((32 - s) & 31)); }
static unsigned int XS(unsigned int v) { v ^= v << 13; v ^= v >> 17; v ^= v << 5; return v; }
"""
_HELPERS_C = (
    _COMMON
    + """
static unsigned int POPC(unsigned int v) { return (unsigned int)__builtin_popcount(v); }
static unsigned int BREV(unsigned int v) { unsigned int r = 0; \
for (int k = 0; k < 32; ++k) { r = (r << 1) | (v & 1u); v >>= 1; } return r; }
"""
)
_HELPERS_CUDA = (
    _COMMON.replace("static", "__device__ __forceinline__")
    + """
__device__ __forceinline__ unsigned int POPC(unsigned int v) { return __popc(v); }
__device__ __forceinline__ unsigned int BREV(unsigned int v) { return __brev(v); }
"""
)


@family("bit_manip", TaskKind.C2CUDA, "bits")
def bit_manip(rng: random.Random, index: int):
    ops = rng.sample(sorted(_BIT_OPS), rng.choice([1, 2]))
    ins = ["x", "y"][: len(ops)]
    a = rng.randint(1, 31)
    b = rng.choice([2654435761, 2246822519, 3266489917, 668265263, 374761393])
    m = rng.getrandbits(32)
    exprs = [
        _BIT_OPS[o]
        .replace("$a", str(a))
        .replace("$b", f"{b}u")
        .replace("$m", f"{m:#010x}u")
        .replace("$v", v)
        for o, v in zip(ops, ins, strict=True)
    ]
    body = exprs[0] if len(exprs) == 1 else f"({exprs[0]}) ^ ({exprs[1]})"
    entry = rng.choice(["bit_mix", "scramble", "bits_transform", "hash_words"])
    desc = (
        f"Bit manipulation on {len(ins)} unsigned 32-bit array(s): out[i] combines "
        f"{' and '.join(ops)} as written in the reference (unsigned wrap-around arithmetic). "
        "Results must match exactly; CUDA has intrinsics (__popc, __brev, __funnelshift_l) for "
        "several of the operations."
    )
    t = "unsigned int"
    dist = Distribution(kind="randint", low=0, high=2**31 - 1)
    types = (t, t, Tolerance(atol=0.0, rtol=0.0))
    helpers = tuple(_used(h, body) for h in (_HELPERS_C, _HELPERS_CUDA))
    return _map_task(
        "bit_manip", index, rng, entry, types, ins, "out", [], body, desc, (dist, dist), helpers
    )


def _used(helpers: str, body: str) -> str:
    """The one-line helper definitions whose function name the body calls."""
    keep = [
        ln
        for ln in helpers.strip().split("\n")
        if any(f" {f}(" in ln and f"{f}(" in body for f in ("ROTL", "XS", "POPC", "BREV"))
    ]
    return "\n".join(keep)
