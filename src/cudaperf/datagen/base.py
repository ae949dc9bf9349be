"""The generator framework: the family registry and the helpers every family uses.

A *family* is a function `(rng, index) -> Task` registered under a name with `@family(...)`.
It draws everything that makes a task different (operators, constants, dtypes, radii, sizes,
tile and block sizes) from `rng`, a `random.Random` seeded from the build seed, the family
name and the index, so the same seed always gives byte-identical tasks.

Guaranteed by the helpers: task ids `gen/<kind>/<family>/<index>`, provenance naming the
generator version and licence, configs named and seeded in a fixed order. Not guaranteed:
that implementations are correct on a GPU (no GPU is needed to generate; see `verify`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from string import Template

from cudaperf.tasks.model import (
    Distribution,
    Implementation,
    InputConfig,
    Param,
    Role,
    Task,
    TaskKind,
    Tolerance,
)

__all__ = [
    "FAMILIES",
    "GENERATOR_VERSION",
    "Family",
    "c_task",
    "cfg",
    "close_macros",
    "family",
    "fill",
    "impl",
    "prototype",
    "torch_task",
]

GENERATOR_VERSION = "cudaperf.datagen 1"
LICENSE = "Apache-2.0"

Generator = Callable[[random.Random, int], Task]


@dataclass(frozen=True)
class Family:
    """One registered family of generated tasks."""

    name: str  # unique; also the Task.family of every task it makes (splits are by family)
    kind: TaskKind  # c2cuda or torch2cuda
    category: str  # the category, e.g. "reduction", "stencil", "fusion"
    generate: Generator  # (rng, index) -> Task


FAMILIES: dict[str, Family] = {}


def family(name: str, kind: TaskKind, category: str) -> Callable[[Generator], Generator]:
    """Register a generator function under `name`."""

    def deco(fn: Generator) -> Generator:
        if name in FAMILIES:
            raise ValueError(f"family {name!r} is registered twice")
        FAMILIES[name] = Family(name, kind, category, fn)
        return fn

    return deco


def fill(template: str, **kw: object) -> str:
    """`string.Template` substitution ($name); CUDA and C never use `$`, so braces stay as
    they are. A missing key raises KeyError naming it."""
    return Template(template).substitute({k: str(v) for k, v in kw.items()})


def impl(impl_id: str, code: str, strategies: list[str]) -> Implementation:
    """An implementation written by the generator's templates."""
    return Implementation(
        id=impl_id,
        code=code.strip() + "\n",
        strategies=strategies,
        provenance=GENERATOR_VERSION,
    )


def cfg(
    name: str,
    sizes: dict[str, int | float],
    seed: int,
    held_out: bool = False,
    dist: Distribution | None = None,
    param_dists: dict[str, Distribution] | None = None,
) -> InputConfig:
    """An input configuration; `dist` defaults to uniform [0.5, 1.5) (outputs away from 0)."""
    return InputConfig(
        name=name,
        sizes=sizes,
        seed=seed,
        held_out=held_out,
        distribution=dist or Distribution(),
        param_distributions=param_dists or {},
    )


def prototype(entry: str, signature: list[Param]) -> str:
    """The extern "C" prototype a candidate defines (same text as `Task.c_prototype`)."""
    return f'extern "C" void {entry}({", ".join(p.c_decl() for p in signature)})'


def c_signature(*items: tuple[str, ...]) -> list[Param]:
    """Params from (name, ctype, role[, length[, "partial"]]) tuples; role is
    in/out/inout/scalar; "partial" marks an input a correct kernel need not read in full."""
    out = []
    for it in items:
        name, ctype, role = it[0], it[1], Role(it[2])
        length = it[3] if len(it) > 3 else None
        partial = len(it) > 4 and it[4] == "partial"
        out.append(Param(name=name, ctype=ctype, role=role, length=length, partial_read=partial))
    return out


def _provenance(fam: str, index: int) -> dict[str, str]:
    return {
        "source": "cudaperf datagen",
        "generator": GENERATOR_VERSION,
        "family": fam,
        "index": str(index),
        "license": LICENSE,
    }


_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)


# C++ wrapper headers -> their C names (the set every implementation may include).
_C_HEADERS = {"<cstdint>": "<stdint.h>", "<climits>": "<limits.h>", "<cfloat>": "<float.h>"}


def close_macros(code: str) -> str:
    """`code` with an `#undef` at its end for every macro it `#define`s and does not undefine,
    so that several implementations compiled into one translation unit (each in its own
    namespace) never see each other's macros; C++ wrapper headers (<cstdint>, <climits>,
    <cfloat>) become their C names."""
    for cxx, c in _C_HEADERS.items():
        code = code.replace(f"#include {cxx}", f"#include {c}")
    names = list(dict.fromkeys(_DEFINE.findall(code)))
    open_ = [n for n in names if not re.search(rf"^[ \t]*#[ \t]*undef[ \t]+{n}\b", code, re.M)]
    if not open_:
        return code
    return code.rstrip() + "\n" + "".join(f"#undef {n}\n" for n in open_)


def c_task(
    fam: str,
    index: int,
    entry: str,
    source: str,
    signature: list[Param],
    configs: list[InputConfig],
    tolerance: Tolerance,
    implementations: list[Implementation],
    description: str,
) -> Task:
    """A C→CUDA task with the generator's id scheme and provenance; every implementation's
    macros are closed (`close_macros`)."""
    implementations = [i.model_copy(update={"code": close_macros(i.code)}) for i in implementations]
    return Task(
        id=f"gen/c2cuda/{fam}/{index:05d}",
        kind=TaskKind.C2CUDA,
        family=fam,
        source=source.strip() + "\n",
        entry=entry,
        signature=signature,
        configs=configs,
        tolerance=tolerance,
        implementations=implementations,
        provenance=_provenance(fam, index),
        description=description,
    )


def torch_task(
    fam: str,
    index: int,
    source: str,
    configs: list[InputConfig],
    tolerance: Tolerance,
    implementations: list[Implementation],
    description: str,
) -> Task:
    """A PyTorch→CUDA task (module constants for sizes; `Model` is the entry)."""
    return Task(
        id=f"gen/torch2cuda/{fam}/{index:05d}",
        kind=TaskKind.TORCH2CUDA,
        family=fam,
        source=source.strip() + "\n",
        entry="Model",
        configs=configs,
        tolerance=tolerance,
        implementations=implementations,
        provenance=_provenance(fam, index),
        description=description,
    )


# ---- small shared vocabularies -------------------------------------------------------------

FLOAT_TYPES = {"float": "f", "double": ""}  # C type -> literal / libm suffix ("expf" vs "exp")


def lit(value: float, ctype: str) -> str:
    """A C floating literal of `ctype` ("1.25f" for float)."""
    text = repr(round(value, 4))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + ("f" if ctype == "float" else "")


def tolerance_for(ctype: str, terms: int = 1, exact: bool = False) -> Tolerance:
    """Tolerance for outputs of `ctype` that each combine `terms` inputs (a reduction length).

    Exact for integer results; otherwise a relative bound that grows with sqrt(terms) (the
    rounding error of a tree or sequential sum of same-sign values) on top of a few ulps for
    differences between libm and the CUDA math library.
    """
    if exact or ctype not in FLOAT_TYPES:
        return Tolerance(atol=0.0, rtol=0.0)
    eps = 1.2e-7 if ctype == "float" else 2.3e-16
    rel = eps * (16 + 4 * terms**0.5)
    return Tolerance(atol=float(f"{rel:.2g}"), rtol=float(f"{rel:.2g}"))


def pick(rng: random.Random, options: list, k: int) -> list:
    """k distinct options in a random order."""
    return rng.sample(options, k)


def vector_sizes(rng: random.Random, bytes_per_elem: int) -> dict[str, int]:
    """Lengths for a streaming task: small (CPU-checkable, odd), medium, large (at least
    ~240 MB of traffic, over 50 µs at the H200's ~4 TB/s), heldout (odd, a few million)."""
    large = max(1 << 24, int(2.4e8 / bytes_per_elem))
    large = (large + (1 << 20) - 1) >> 20 << 20
    return {
        "small": rng.randrange(1001, 9000, 2),
        "medium": (1 << 20) + rng.randrange(0, 4096),
        "large": large + rng.choice([0, 1 << 20, 3 << 20]),
        "heldout": rng.randrange(3_000_001, 9_000_000, 2),
    }


def four_configs(
    sizes: dict[str, dict[str, int | float]],
    dist: Distribution | None = None,
    held_dist: Distribution | None = None,
    param_dists: dict[str, dict[str, Distribution]] | None = None,
) -> list[InputConfig]:
    """small / medium / large / heldout (held out) configs from a name -> sizes mapping."""
    pd = param_dists or {}
    out = []
    for k, name in enumerate(("small", "medium", "large", "heldout")):
        d = held_dist if (name == "heldout" and held_dist) else dist
        out.append(cfg(name, sizes[name], k + 1, name == "heldout", d, pd.get(name)))
    return out
