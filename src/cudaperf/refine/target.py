"""Tasks from a user's own files: a C function (`.c`) or a PyTorch module (`.py`).

C: the function's prototype is read from the file; `const T*` parameters are inputs, other
pointers are read and written (the evaluator checks both), scalars take their values from
`sizes`. Each array's length is an expression over the scalars: given in `lengths`, or, when
exactly one integer scalar exists, that scalar. One visible config (`given`) holds `sizes`;
there is no held-out config unless the caller adds one.
PyTorch: a KernelBench-style module file (`Model`, `get_inputs`, `get_init_inputs`); configs
are derived from its size constants as the KernelBench importer does.
"""

from __future__ import annotations

import re
from pathlib import Path

from cudaperf.tasks.model import InputConfig, Param, Role, Task, TaskKind

__all__ = ["parse_sizes", "task_from_c_file", "task_from_torch_file"]

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def parse_sizes(text: str) -> dict[str, int | float]:
    """'n=1048576,a=2.5' → {'n': 1048576, 'a': 2.5}."""
    out: dict[str, int | float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, value = part.partition("=")
        if not eq or not name.strip():
            raise ValueError(f"--sizes item {part!r} is not NAME=VALUE (e.g. n=1048576)")
        try:
            v = value.strip()
            out[name.strip()] = int(v) if re.fullmatch(r"-?\d+", v) else float(v)
        except ValueError:
            raise ValueError(f"--sizes item {part!r}: {value!r} is not a number") from None
    return out


def _param(text: str, function: str) -> tuple[str, str, bool, bool]:
    """(name, element type, is pointer, is const) of one C parameter declaration."""
    t = re.sub(r"\b(restrict|__restrict__|__restrict|volatile)\b", " ", text)
    ptr = "*" in t or "[" in t
    m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*$", t)
    if not m:
        raise ValueError(f"cannot read parameter {text.strip()!r} of {function}")
    name = m.group(1)
    ctype = t[: m.start()].replace("*", " ").replace("const", " ")
    return name, " ".join(ctype.split()), ptr, "const" in t


def task_from_c_file(
    path: str | Path,
    function: str,
    sizes: dict[str, int | float],
    lengths: dict[str, str] | None = None,
) -> Task:
    """A C→CUDA task for `function` in the C file at `path`."""
    p = Path(path)
    src = p.read_text(encoding="utf-8")
    m = re.search(rf"\bvoid\s+{re.escape(function)}\s*\(([^)]*)\)\s*\{{", _COMMENT.sub(" ", src))
    if not m:
        raise ValueError(f"{p}: no definition `void {function}(...) {{` found; check --function")
    decls = [d for d in m.group(1).split(",") if d.strip() and d.strip() != "void"]
    parsed = [_param(d, function) for d in decls]
    scalars = [n for n, _, ptr, _ in parsed if not ptr]
    ints = [n for n, t, ptr, _ in parsed if not ptr and "float" not in t and "double" not in t]
    lengths = lengths or {}
    params = []
    for name, ctype, ptr, const in parsed:
        if not ptr:
            params.append(Param(name=name, ctype=ctype, role=Role.SCALAR))
            continue
        length = lengths.get(name) or (ints[0] if len(ints) == 1 else None)
        if length is None:
            raise ValueError(
                f"array {name!r} needs a length over the scalars {scalars}: pass --length "
                f"{name}=EXPR (e.g. {name}=n)"
            )
        params.append(
            Param(name=name, ctype=ctype, role=Role.IN if const else Role.INOUT, length=length)
        )
    return Task(
        id=f"user/c2cuda/{p.stem}",
        kind=TaskKind.C2CUDA,
        family=p.stem,
        source=src,
        entry=function,
        signature=params,
        configs=[InputConfig(name="given", sizes=sizes)],
        provenance={"source": str(p)},
    )


def task_from_torch_file(path: str | Path, validate: bool = True) -> Task:
    """A PyTorch→CUDA task from a KernelBench-style module file."""
    from cudaperf.tasks.importers.kernelbench import derive_configs

    p = Path(path)
    src = p.read_text(encoding="utf-8")
    if "class Model" not in src or "def get_inputs" not in src:
        raise ValueError(f"{p}: a PyTorch task file defines `class Model` and `get_inputs()`")
    return Task(
        id=f"user/torch2cuda/{p.stem}",
        kind=TaskKind.TORCH2CUDA,
        family=p.stem,
        source=src,
        entry="Model",
        configs=derive_configs(src, validate=validate),
        provenance={"source": str(p)},
    )
