"""ParEval importer: the CUDA problems' serial baselines → C→CUDA tasks.

Reads the user's checkout of ParEval (parallelcodefoundry/ParEval; the repo root or its
`drivers/` folder). Every problem folder `drivers/cpp/benchmarks/<type>/<NN_name>/` holds
`baseline.hpp` (the serial C++ reference `correct*`) and `gpu.cu` (the CUDA driver: the
kernel's prompt signature in its header comment, a `Context` filled by `init()`/`reset()`,
and the launch in `compute()`); `drivers/problem-sizes.json` gives each problem's
`DRIVER_PROBLEM_SIZE` per model. Each problem on plain arrays of numbers becomes one task:

- **signature**: the CUDA kernel's parameters, in its order (the task's `entry` is the
  kernel's name). Pointers are arrays with the length the driver `ALLOC`s for the Context field
  the launch passes (`ctx->N * ctx->N * sizeof(int)` → `N*N`); roles from what the translated
  baseline reads and writes; a pointer the baseline lacks receives its return value (`out`).
- **reference**: the baseline translated to C (`pareval_cpp`), named like the kernel.
- **configs**: `DRIVER_PROBLEM_SIZE` substituted into the driver's `init()` assignments:
  `small` (the driver's `validate()` TEST_SIZE), `table` (the CUDA column of the size table,
  the timing size) and `heldout` (3/4 of it plus one, held out: not a power of two).
- **inputs**: the driver's `reset()` — `fillRand(h, lo, hi)` is uniform (floats) or randint
  (integers, high exclusive as in `rand() % (hi - lo) + lo`); `fill(0)` is constant; the
  random graph generators are 0/1 adjacency matrices.
- **tolerance**: exact for integer outputs; for floats ParEval's 1e-6, looser (1e-4
  relative) for dense linear algebra whose sums run over whole rows.

Skipped with a reason: complex numbers, structs, bool/string arrays, std algorithms and
containers, lambdas, helper functions, scalars the driver draws at random, missing table rows.
Guaranteed: every problem folder is imported or skipped with a reason. Not guaranteed: that
every reference compiles (the tests compile all of the fixture's) or is stable on random input.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from cudaperf.tasks.importers.common import ImportReport
from cudaperf.tasks.importers.ctok import access_modes, format_c, functions, tokenize
from cudaperf.tasks.importers.ctok import parse_param as parse_c_param
from cudaperf.tasks.importers.pareval_cpp import PRELUDE, Unsupported, cpp_param, translate_body
from cudaperf.tasks.model import C_TYPES, Distribution, InputConfig, Param, Role, Task, Tolerance

__all__ = ["import_pareval", "problem_task"]

LICENSE = "MIT (ParEval, Parallel Software and Systems Group, University of Maryland)"
_KERNEL = re.compile(r"^//\s*__global__\s+void\s+(\w+)\s*\((.*?)\)\s*\{", re.M)
_ASSIGN = re.compile(r"ctx->(\w+)\s*=\s*([^;]+);")
_ALLOC = re.compile(r"ALLOC\(\s*ctx->(\w+)\s*,\s*(.*?)\)\s*;")
_FILL_RAND = re.compile(r"fillRand\(\s*ctx->(\w+)\s*,\s*([^,]+),\s*([^)]+)\)")
_FILL_CONST = re.compile(
    r"std::fill\(\s*ctx->(\w+)\.begin\(\)[^,]*,[^,]+,\s*([^)]+)\)|ctx->(\w+)\.fill\(([^)]+)\)"
)
_FILL_GRAPH = re.compile(r"fill\w*Graph\(\s*ctx->(\w+)")
_COMPLEX = {"cuDoubleComplex", "cuFloatComplex", "DOUBLE_COMPLEX_T", "hipDoubleComplex"}
_LOOSE = {"dense_la", "sparse_la"}


def _func_body(text: str, name: str) -> str:
    """The text of the driver function `name` (empty when absent)."""
    m = re.search(rf"\b{name}\s*\([^)]*\)\s*\{{", text)
    if not m:
        return ""
    depth, i = 0, m.end() - 1
    for j in range(i, len(text)):
        depth += text[j] == "{"
        depth -= text[j] == "}"
        if depth == 0:
            return text[i : j + 1]
    return text[i:]


def c_eval(expr: str, env: dict[str, int | float]) -> int | float:
    """Value of a small C arithmetic expression (`(1<<10)`, `ctx->N / 4`, `2.0`)."""
    expr = re.sub(r"ctx->", "", expr).strip()
    expr = re.sub(r"(\d+\.?\d*)[fFuUlL]+\b", r"\1", expr)
    tree = ast.parse(expr.replace("/", "//"), mode="eval")
    ops = {
        ast.Add: lambda a, b: a + b,
        ast.Sub: lambda a, b: a - b,
        ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: (
            a / b if isinstance(a, float) or isinstance(b, float) else a // b
        ),
        ast.LShift: lambda a, b: a << b,
        ast.RShift: lambda a, b: a >> b,
        ast.Mod: lambda a, b: a % b,
    }

    def ev(n: ast.AST) -> int | float:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)):
            return n.value
        if isinstance(n, ast.Name) and n.id in env:
            return env[n.id]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.left), ev(n.right))
        raise ValueError(f"cannot evaluate {expr!r} from the driver")

    return ev(tree)


def _key(field: str) -> str:
    """A Context field's name without its host/device prefix (`h_x`, `d_x`, `cpuX` → `x`)."""
    return re.sub(r"^(h_|d_|cpu|gpu|host|device)", "", field).lower()


def _length(expr: str, field_to_param: dict[str, str]) -> str:
    expr = re.sub(r"\*?\s*sizeof\s*\([^)]*\)", "", expr).strip().rstrip("*").strip() or "1"
    out = re.sub(r"ctx->(\w+)", lambda m: field_to_param.get(m.group(1), m.group(1)), expr)
    return out.replace(" ", "")


def _distributions(reset: str, ctypes: dict[str, str]) -> dict[str, Distribution]:
    """Kernel array name → distribution, from the driver's reset() (keyed by `_key`)."""
    dist: dict[str, Distribution] = {}
    for field, lo, hi in _FILL_RAND.findall(reset):
        name = _key(field)
        lo_v, hi_v = float(c_eval(lo, {})), float(c_eval(hi, {}))
        integer = C_TYPES.get(ctypes.get(name, "double"), "float64").startswith(("int", "uint"))
        dist[name] = Distribution(kind="randint" if integer else "uniform", low=lo_v, high=hi_v)
    for m in _FILL_CONST.finditer(reset):
        field, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        dist[_key(field)] = Distribution(kind="constant", value=float(c_eval(value, {})))
    for field in _FILL_GRAPH.findall(reset):
        dist[_key(field)] = Distribution(kind="randint", low=0, high=2)
    return dist


def _kernel_params(params: str) -> list[tuple[str, str, bool]]:
    """(name, C type, is a pointer) for the kernel's prompt signature."""
    out = []
    for toks in _split(tokenize(params)):
        ptype = [t for t in toks if t not in ("const", "*")][:-1]
        if any(t in _COMPLEX for t in ptype):
            raise Unsupported("complex numbers (cuDoubleComplex)")
        p = parse_c_param(toks)
        if p.pointers > 1 or p.ctype == "char":
            raise Unsupported("strings (char ** arrays)")
        if p.ctype == "bool":
            raise Unsupported("bool arrays (no bool element type for task arrays)")
        if p.ctype not in C_TYPES:
            raise Unsupported(f"structs ({p.ctype})")
        out.append((p.name, p.ctype, p.pointers > 0))
    return out


def _split(toks: list[str]) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    depth = 0
    for t in toks:
        depth += t in "(<["
        depth -= t in ")>]"
        if t == "," and depth == 0:
            parts.append([])
        else:
            parts[-1].append(t)
    return [p for p in parts if p]


def _baseline(text: str):
    toks = tokenize(text.replace("NO_INLINE", ""))
    fns = [f for f in functions(toks) if f.name.startswith("correct")]
    if not fns:
        raise ValueError("no correct* serial baseline function in baseline.hpp")
    fn = fns[-1]
    open_paren = fn.start + len(fn.ret) + 1
    params = _split(toks[open_paren + 1 : fn.body[0] - 1])
    return fn, [cpp_param(p) for p in params], toks[fn.body[0] : fn.body[1] + 1]


def _description(text: str, fn_name: str) -> str:
    head = text[: text.find(fn_name)]
    comments = re.findall(r"/\*(.*?)\*/", head, re.S)
    doc = comments[-1] if comments else ""
    return " ".join(doc.split())


def problem_task(folder: Path, size: str, rel: str) -> Task:
    """One ParEval problem folder as a task (Unsupported / ValueError say why not)."""
    driver = (folder / "gpu.cu").read_text(encoding="utf-8", errors="replace")
    base_text = (folder / "baseline.hpp").read_text(encoding="utf-8", errors="replace")
    prompt = folder.parents[4] / "prompts" / "raw" / folder.parent.name / folder.name / "cuda"
    m = _KERNEL.search(driver) or (
        _KERNEL.search("// " + prompt.read_text(encoding="utf-8").splitlines()[-1])
        if prompt.is_file()
        else None
    )
    if not m:
        raise ValueError("no CUDA prompt signature (gpu.cu header or prompts/raw/.../cuda)")
    entry, kparams = m.group(1), _kernel_params(m.group(2))
    launch = re.search(rf"\b{entry}\s*<<<.*?>>>\s*\((.*?)\)\s*;", _func_body(driver, "compute"))
    if not launch:
        raise ValueError(f"no launch of {entry} in the driver's compute()")
    args = [a.strip() for a in launch.group(1).split(",")]
    if len(args) != len(kparams) or not all(re.fullmatch(r"ctx->\w+", a) for a in args):
        raise ValueError("the driver's launch does not pass one Context field per parameter")
    fields = [a[5:] for a in args]
    field_to_param = {f: p[0] for f, p in zip(fields, kparams, strict=True) if not p[2]}
    allocs = dict(_ALLOC.findall(driver))
    fn, bparams, body = _baseline(base_text)
    kinds = {p[0]: p for p in kparams}
    lengths: dict[str, str] = {}
    for (name, _, is_ptr), field in zip(kparams, fields, strict=True):
        if is_ptr:
            if field not in allocs:
                raise ValueError(f"no ALLOC of ctx->{field} ({name}) in the driver")
            lengths[name] = _length(allocs[field], field_to_param)
    for name, ctype, _container, _ in bparams:
        if name not in kinds:
            raise ValueError(f"baseline parameter {name!r} is not a kernel parameter")
        if C_TYPES.get(ctype) != C_TYPES.get(kinds[name][1]):
            raise Unsupported(f"baseline type {ctype} of {name} differs from the kernel's")
    returns = fn.ret[0] if fn.ret else "void"
    extra = [p[0] for p in kparams if p[2] and p[0] not in {b[0] for b in bparams}]
    out = None
    if returns != "void":
        if len(extra) != 1:
            raise ValueError("baseline returns a value but the kernel has no single output pointer")
        out = extra[0]
    elif extra:
        raise ValueError(f"kernel pointer(s) {extra} not in the baseline")
    if out is not None and out in body:  # a local that shadows the output pointer's name
        body = [t + "_" if t == out else t for t in body]
    cont = {b[0]: lengths[b[0]] for b in bparams if b[2]}
    c_body = translate_body(body, cont, out, {p[0] for p in kparams})
    sig = _signature(kparams, lengths, c_body)
    decls = ", ".join(p.c_decl().replace("* ", " *") for p in sig)
    src = (
        f"/* ParEval {rel}: the serial baseline {fn.name}, translated from C++ to C:\n"
        "   vectors are pointers with the CUDA kernel's sizes, .size() is that size, a\n"
        "   returned value is stored through the kernel's output pointer. */\n"
        + PRELUDE
        + "\n"
        + format_c(tokenize(f"void {entry}({decls})") + c_body)
    )
    name = folder.name
    return Task(
        id=f"pareval/{name}",
        kind="c2cuda",
        family="pareval_" + re.sub(r"^\d+_", "", name).replace("-", "_"),
        source=src,
        entry=entry,
        signature=sig,
        configs=_configs(driver, size, sig, field_to_param),
        tolerance=_tolerance(folder.parent.name, sig),
        provenance={"source": f"ParEval {rel}", "license": LICENSE},
        description=f"ParEval {name}: " + _description(base_text, fn.name),
    )


def _signature(kparams, lengths: dict[str, str], c_body: list[str]) -> list[Param]:
    arrays = [n for n, _, ptr in kparams if ptr]
    modes = access_modes(c_body, arrays)
    sig = []
    for name, ctype, ptr in kparams:
        if not ptr:
            sig.append(Param(name=name, ctype=ctype, role=Role.SCALAR))
            continue
        read, written, cond = modes[name]
        role = Role.IN if not written else Role.OUT if not read and not cond else Role.INOUT
        sig.append(Param(name=name, ctype=ctype, role=role, length=lengths[name]))
    return sig


def _configs(driver: str, size: str, sig: list[Param], field_to_param) -> list[InputConfig]:
    table = int(c_eval(size, {}))
    test = re.search(r"TEST_SIZE\s*=\s*(\d+)", _func_body(driver, "validate"))
    small = max(4, min(int(test.group(1)) if test else table // 64, table // 4))
    assigns = _ASSIGN.findall(_func_body(driver, "init"))
    param_of = {f: p for f, p in field_to_param.items()}
    dists = _distributions(_func_body(driver, "reset"), {p.name.lower(): p.ctype for p in sig})
    per_param = {
        p.name: dists[p.name.lower()] for p in sig if p.is_array and p.name.lower() in dists
    }
    configs = []
    for seed, (cname, value) in enumerate(
        [("small", small), ("table", table), ("heldout", 3 * table // 4 + 1)], 1
    ):
        env: dict[str, int | float] = {"DRIVER_PROBLEM_SIZE": value}
        for field, expr in assigns:
            try:
                env[field] = c_eval(expr, env)
            except (ValueError, SyntaxError, ZeroDivisionError):
                continue
        sizes = {}
        for field, pname in param_of.items():
            if field not in env:
                raise Unsupported(f"scalar {pname} is not set from the problem size (random?)")
            ctype = next(p.ctype for p in sig if p.name == pname)
            v = env[field]
            sizes[pname] = float(v) if ctype in ("float", "double") else int(v)
        configs.append(
            InputConfig(
                name=cname,
                sizes=sizes,
                param_distributions=per_param,
                seed=seed,
                held_out=cname == "heldout",
            )
        )
    return configs


def _tolerance(ptype: str, sig: list[Param]) -> Tolerance:
    outs = [p for p in sig if p.role in (Role.OUT, Role.INOUT)]
    if all(not p.dtype.startswith("float") for p in outs):
        return Tolerance(atol=0.0, rtol=0.0)  # counts, indices, integer images: exact
    if ptype in _LOOSE:
        return Tolerance(atol=1e-6, rtol=1e-4)  # row-long sums and eliminations
    return Tolerance(atol=1e-6, rtol=1e-6)  # ParEval's own fequal threshold


def _root(path: Path) -> Path:
    for base in (path, path / ".."):
        if (base / "drivers" / "problem-sizes.json").is_file():
            return base.resolve()
    if (path / "problem-sizes.json").is_file():
        return path.parent.resolve()
    raise FileNotFoundError(
        f"{path}: no drivers/problem-sizes.json; pass the ParEval repo root or its drivers/ folder"
    )


def import_pareval(path: str | Path, **_: object) -> ImportReport:
    """Import every CUDA problem of the ParEval checkout at `path`."""
    root = _root(Path(path))
    table = json.loads((root / "drivers" / "problem-sizes.json").read_text(encoding="utf-8"))
    bench = root / "drivers" / "cpp" / "benchmarks"
    folders = sorted(bench.glob("*/*/"), key=lambda d: d.name)
    if not folders:
        raise FileNotFoundError(f"{bench}: no problem folders <type>/<NN_name>/")
    report = ImportReport("pareval")
    for d in folders:
        rel = d.relative_to(root).as_posix()
        if not (d / "baseline.hpp").is_file() or not (d / "gpu.cu").is_file():
            report.skip(rel, "no baseline.hpp and gpu.cu (serial baseline and CUDA driver)")
            continue
        size = table.get(d.name, {}).get("cuda")
        if size is None:
            report.skip(rel, "no cuda entry in drivers/problem-sizes.json")
            continue
        try:
            report.tasks.append(problem_task(d, size, rel))
        except ValueError as e:  # Unsupported is a ValueError
            report.skip(rel, str(e))
    return report
