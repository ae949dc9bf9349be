"""PolyBench-ACC importer: the CUDA suite's CPU references → C→CUDA tasks.

Reads the user's checkout of PolyBench-ACC (cavazos-lab/PolyBench-ACC; the repo root or its
`CUDA/` folder). Every kernel folder holds `<name>.cu` (the CPU reference, the CUDA version
and PolyBench's harness) and `<name>.cuh` (the dataset sizes MINI ... EXTRALARGE and
`DATA_TYPE`). Each kernel becomes one task:

- **reference**: the CPU function (the one that is neither a kernel, a GPU driver with
  `<<<`/`cuda*` calls, nor `init*`/`compare*`/`print*`/`main`), made self-contained:
  `DATA_TYPE POLYBENCH_2D(A,NI,NJ,ni,nj)` parameters become C99 variable-length array
  parameters `float A[ni][nj]` (ABI-identical to the flat `float*` the harness passes), each
  dataset size macro `NI` and loop bound `_PB_NI` is `#define`d to its size parameter `ni`,
  `DATA_TYPE` and the other constants the function names (`FLOAT_N`, `EPS`, ...) are defined
  from the suite's own `.cu`/`.cuh`.
- **signature**: arrays are `in`/`out`/`inout` from the C body (`ctok.access_modes`), with
  lengths the product of their lower-case dimensions; scalars are the size parameters and
  `DATA_TYPE` constants such as `alpha`, whose value is the one `init` assigns (`*alpha = 32412;`).
- **configs**: one per dataset size (`mini`, `small`, `standard`, `large`, `extralarge`);
  `standard` is held out and `extralarge` is the timing size. Inputs are drawn from the
  default distribution rather than PolyBench's `init` formulas.

No implementations are attached: the suite's kernels index with the fixed-size macros and would
need their own adaptation. Guaranteed: every kernel folder found is imported or skipped with a
reason. Not guaranteed: numerical stability of every kernel (e.g. `lu`) on random inputs.
"""

from __future__ import annotations

import re
from pathlib import Path

from cudaperf.tasks.importers.common import ImportReport
from cudaperf.tasks.importers.ctok import (
    CFunction,
    access_modes,
    format_c,
    functions,
    split_top,
    tokenize,
)
from cudaperf.tasks.importers.ctok import parse_param as parse_c_param
from cudaperf.tasks.model import C_TYPES, InputConfig, Param, Role, Task, Tolerance

__all__ = ["import_polybench"]

LICENSE = "BSD-3-Clause (PolyBench-ACC, University of Delaware)"
DATASETS = ("MINI", "SMALL", "STANDARD", "LARGE", "EXTRALARGE")
HELD_OUT = "standard"
_NOT_REFERENCE = re.compile(r"^(init|compare|print|main|GPU_argv_init)", re.I)
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)(\([^)]*\))?\s+(.*?)\s*$")
_ASSIGN = re.compile(r"\*\s*(\w+)\s*=\s*([-+]?[\d.]+(?:[eE][-+]?\d+)?)[fF]?\s*;")


def parse_cuh(text: str) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
    """(dataset → {size macro: value}, other `#define name → line`) of a `.cuh` file."""
    sizes: dict[str, dict[str, int]] = {}
    defines: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^\s*#\s*ifdef\s+(\w+)_DATASET", line)
        if m:
            current = m.group(1)
            continue
        if re.match(r"^\s*#\s*endif", line):
            current = None
            continue
        d = _DEFINE.match(line)
        if not d:
            continue
        if current and d.group(3).isdigit():
            sizes.setdefault(current, {})[d.group(1)] = int(d.group(3))
        elif not current and not d.group(1).startswith("_PB_"):
            defines[d.group(1)] = line.strip()
    return sizes, defines


def _reference(fns: list[CFunction], toks: list[str]) -> CFunction | None:
    for f in fns:
        body = toks[f.body[0] : f.body[1]]
        if "__global__" in f.ret or "__device__" in f.ret or _NOT_REFERENCE.match(f.name):
            continue
        if "<<<" in body or any(t.startswith("cuda") for t in body):
            continue
        if any(any(t.startswith("POLYBENCH_") for t in p) for p in f.params):
            return f
    return None


def _param(toks: list[str], dtype: str) -> tuple[str, str, list[str] | None]:
    """(name, C type, lower-case dimensions or None for a scalar)."""
    toks = [dtype if t == "DATA_TYPE" else t for t in toks]
    for i, t in enumerate(toks):
        if re.fullmatch(r"POLYBENCH_(\d)D", t):
            nd = int(t[10])
            args = [" ".join(a) for a in split_top(toks[i + 2 : -1])]
            return args[0], " ".join(toks[:i]), args[1 + nd :]
    p = parse_c_param(toks)
    if p.pointers:
        raise ValueError(f"pointer parameter {p.name!r} without POLYBENCH_nD dimensions")
    return p.name, p.ctype, None


def _defines_used(body: set[str], *tables: dict[str, str]) -> list[str]:
    out, seen = [], set()
    for table in tables:
        for name, line in table.items():
            if name in body and name not in seen and name != "DATA_TYPE":
                out.append(line)
                seen.add(name)
    return out


def kernel_task(cu: Path, cuh: Path, rel: str) -> Task:
    """One PolyBench-ACC kernel folder as a task (ValueError names what is missing)."""
    text = cu.read_text(encoding="utf-8", errors="replace")
    sizes, cuh_defs = parse_cuh(cuh.read_text(encoding="utf-8", errors="replace"))
    if not sizes:
        raise ValueError("no dataset sizes (MINI ... EXTRALARGE) in the .cuh file")
    dtype = cuh_defs.get("DATA_TYPE", "float").split()[-1]
    toks = tokenize(text)
    fn = _reference(functions(toks), toks)
    if fn is None:
        raise ValueError("no CPU reference function with POLYBENCH_nD parameters")
    params = [_param(p, dtype) for p in fn.params]
    body_toks = toks[fn.body[0] : fn.body[1] + 1]
    scalars = {n for n, _, dims in params if dims is None}
    arrays = [n for n, _, dims in params if dims is not None]
    modes = access_modes(body_toks, arrays)
    sig = []
    for name, ctype, dims in params:
        if ctype not in C_TYPES:
            raise ValueError(f"parameter {name!r} has unsupported type {ctype!r}")
        if dims is None:
            sig.append(Param(name=name, ctype=ctype, role=Role.SCALAR))
            continue
        dims = [d if d in scalars else d.lower() for d in dims]  # POLYBENCH_1D(x, TMAX, TMAX)
        if not set(dims) <= scalars:
            raise ValueError(f"array {name!r} has dimensions {dims} that are not parameters")
        read, written, cond = modes[name]
        role = Role.IN if not written else Role.OUT if not read and not cond else Role.INOUT
        sig.append(Param(name=name, ctype=ctype, role=role, length="*".join(dims)))
    consts = {m.group(1): float(m.group(2)) for m in _ASSIGN.finditer(text)}
    configs = _configs(sig, sizes, consts)
    cu_defs = {d.group(1): ln.strip() for ln in text.splitlines() if (d := _DEFINE.match(ln))}
    macros = [f"#define {m} {m.lower()}" for s in sizes.values() for m in s]
    macros = sorted(set(macros)) + [m.replace("#define ", "#define _PB_", 1) for m in macros]
    src = _source(rel, fn, params, body_toks, dtype, sorted(set(macros)), cu_defs, cuh_defs)
    name = cu.stem
    return Task(
        id=f"polybench-acc/{name}",
        kind="c2cuda",
        family=f"polybench_{name.lower()}",
        source=src,
        entry=fn.name,
        signature=sig,
        configs=configs,
        tolerance=Tolerance(atol=1e-3, rtol=1e-3),  # long float sums; PolyBench allows 0.05-1%
        provenance={"source": f"PolyBench-ACC {rel}", "license": LICENSE},
        description=f"PolyBench-ACC kernel {name}: the CPU reference {fn.name} from {rel}.",
    )


def _configs(sig: list[Param], sizes: dict, consts: dict[str, float]) -> list[InputConfig]:
    configs = []
    for seed, ds in enumerate(DATASETS, 1):
        if ds not in sizes:
            continue
        values = {k.lower(): v for k, v in sizes[ds].items()}
        cfg: dict[str, int | float] = {}
        for p in sig:
            if p.role is not Role.SCALAR:
                continue
            if p.name in values:
                cfg[p.name] = values[p.name]
            elif p.name in consts or p.ctype in ("float", "double"):
                cfg[p.name] = consts.get(p.name, 1.5)
            else:
                raise ValueError(f"no dataset value for scalar parameter {p.name!r}")
        name = ds.lower()
        configs.append(InputConfig(name=name, sizes=cfg, seed=seed, held_out=name == HELD_OUT))
    return configs


def _source(rel, fn, params, body_toks, dtype, macros, cu_defs, cuh_defs) -> str:
    decls = []
    for name, ctype, dims in params:
        decls.append(f"{ctype} {name}" + "".join(f"[{d}]" for d in (dims or [])))
    used = set(body_toks)
    consts = _defines_used(used, cu_defs, cuh_defs)
    head = (
        f"/* PolyBench-ACC {rel}: {fn.name}, the suite's CPU reference, made self-contained:\n"
        "   POLYBENCH_nD parameters are C99 variable-length array parameters over the size\n"
        "   parameters; the dataset size macros and _PB_ loop bounds are those parameters. */\n"
        "#include <math.h>\n#include <stdlib.h>\n"
        f"#define DATA_TYPE {dtype}\n" + "\n".join(macros + consts) + "\n\n"
    )
    return head + format_c(tokenize(f"void {fn.name}({', '.join(decls)})") + body_toks)


def _kernel_dirs(path: Path) -> list[Path]:
    base = path / "CUDA" if (path / "CUDA").is_dir() else path
    return sorted({cu.parent for cu in base.rglob("*.cu")})


def import_polybench(path: str | Path, **_: object) -> ImportReport:
    """Import every kernel of the PolyBench-ACC checkout at `path`."""
    p = Path(path)
    dirs = _kernel_dirs(p) if p.is_dir() else []
    if not dirs:
        raise FileNotFoundError(
            f"{p}: no PolyBench-ACC kernels (folders with <name>.cu and <name>.cuh); pass the "
            "PolyBench-ACC repo root or its CUDA/ folder"
        )
    report = ImportReport("polybench-acc")
    for d in dirs:
        rel = d.relative_to(p).as_posix()
        cus = sorted(d.glob("*.cu"))
        cuh = [c.with_suffix(".cuh") for c in cus if c.with_suffix(".cuh").is_file()]
        if not cuh:
            report.skip(rel, "no <name>.cuh with the dataset sizes next to the .cu file")
            continue
        try:
            report.tasks.append(kernel_task(cuh[0].with_suffix(".cu"), cuh[0], rel))
        except ValueError as e:
            report.skip(rel, str(e))
    return report
