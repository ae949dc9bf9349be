"""BabelTower importer: the C→CUDA test set (JSONL, 233 rows) → C→CUDA tasks.

Reads the user's own copy of the test-set JSONL (fields `id`, `cpp_code`, `cuda_code`,
`consistent_cpp_inputs`, `consistent_cuda_inputs`, `cuda_wrapper`, `consistent_outputs`; code
is whitespace-tokenised). Each row becomes one task:

- **reference**: the C function from `cpp_code`, reformatted one statement per line, with the
  standard C headers it may need; `inline` is dropped so gcc emits the symbol.
- **signature**: parsed from the C function. Pointer parameters get roles from how the C body
  uses them (`ctok.access_modes`): read only → `in`; read and written → `inout`; written
  only → `out`, except that an array whose every write sits under an `if`/`else` becomes
  `inout` (then the elements the C code leaves alone must keep their values; as `out` they
  would be undefined, which the evaluator does not compare). Non-pointers are scalars.
- **lengths**: see `lengths` (the wrapper's allocation sizes, checked against the
  declared array sizes of the given tests, or fitted to them). Where nothing over the scalars
  fits, an array as long as a count the C code reads from element 0 of a one-element,
  read-only integer array (equal to its declared length in every test) gets a `Task.dims`
  size for it (`len_0` for `len[0]`): the count array has length 1 and every config fills it
  with that dim's value, which generated configs scale like a size scalar.
- **configs**: one per given test (`test1`, ...: its scalar values; its array values'
  range as the distribution, randint for integers, uniform for floats); the last one is held
  out when there are two or more. Two generated configs for timing, `medium` and `large`,
  scale every *size* scalar (an integer scalar that appears in a length and is >= 1 in the
  largest test) by one common factor until the longest array has about 2**16 / 2**20
  elements; other scalars and the integer arrays' value ranges (often indices) are kept.
  A config the row's launch cannot run on (`_launch_problem`: an empty grid or block, over
  1024 threads per block, or a kernel without bounds checks given more threads than array
  elements; one block's threads when that kernel ignores blockIdx) is left out.
- **implementation** `babeltower`: the row's kernel with the wrapper adapted to our
  candidate shape (`wrapper`).

- **reference check** (default when gcc's sanitizers run here; `check_references=False` or
  the CLI's `--no-validate` turns it off): every config is run through the C reference
  under AddressSanitizer + UBSan (`check`; also with integer arrays at the ends of
  their value ranges). A config that overruns an array, has
  undefined behaviour (e.g. signed overflow on a given INT_MAX), crashes or is too slow is
  dropped with its reason; a row left without a config is skipped; the last remaining given
  test is held out when two or more remain. A row whose reference overruns an array on some
  config is rebuilt with the wrapper's allocation sizes as lengths wherever they fit the tests
  (tests sometimes declare an array shorter than the C code uses, and a scalar equal to that
  declared length then wins over the wrapper's) and checked again; the rebuilt task is kept
  when more of its configs run cleanly (`summary()["reference_check"]["wrapper_lengths"]`
  counts them). A given test whose integer value does not fit
  its C type is left out when parsed. `summary()["reference_check"]` says what ran.

Guaranteed: every row is imported or skipped with a reason, and every dropped config is
reported. With the check: each config ran cleanly through the C reference on input set 0.
Not guaranteed: that generated configs keep relations between sizes that the C code assumes
but the tests do not show (without the check, nor that the C reference stays in bounds).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from cudaperf.tasks.importers.babeltower import check as refcheck
from cudaperf.tasks.importers.babeltower.inputs import ArrayArg, parse_test
from cudaperf.tasks.importers.babeltower.lengths import choose_length
from cudaperf.tasks.importers.babeltower.wrapper import Launcher, adapt_wrapper, count_name
from cudaperf.tasks.importers.common import ImportReport
from cudaperf.tasks.importers.ctok import (
    CFunction,
    access_modes,
    find_close,
    format_c,
    functions,
    loop_work,
    parse_param,
    tokenize,
)
from cudaperf.tasks.model import (
    C_TYPES,
    Distribution,
    Implementation,
    InputConfig,
    Param,
    Role,
    Task,
    Tolerance,
    eval_length,
    length_names,
)

__all__ = ["import_babeltower"]

LICENSE = "Apache-2.0 (BabelTower test set, kcxain/BabelTower)"
C_HEADERS = "#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n#include <stdint.h>\n"
C_HEADERS += "#include <float.h>\n#include <limits.h>\n#include <stdbool.h>\n\n"
TARGETS = {"medium": 2**16, "large": 2**20}
MAX_ELEMENTS = 2**26  # no array above this in a generated config
MAX_WORK = 2**26  # nor more innermost C loop iterations (ctok.loop_work): ~0.1 s at -O2
_MINMAX = {  # C++'s std::min/max, which some rows call from "C"
    "min": "#define min(a, b) ((a) < (b) ? (a) : (b))\n",
    "max": "#define max(a, b) ((a) > (b) ? (a) : (b))\n",
}
_INT_TYPES = {k for k, v in C_TYPES.items() if "int" in v}
_FIELDS = ("id", "cpp_code", "cuda_code", "consistent_cpp_inputs", "cuda_wrapper")


class _Skip(Exception):
    """A row that cannot be imported; the message is the reason."""


def _entry(row: dict, toks: list[str]) -> CFunction:
    fns = functions(toks)
    called = [
        t.split("wrapper(", 1)[1].split(",", 1)[0].strip()
        for t in row["consistent_cpp_inputs"]
        if "wrapper(" in t
    ]
    for f in fns:
        if called and f.name == called[0]:
            return f
    if not fns:
        raise _Skip("no C function definition in cpp_code")
    return fns[-1]


def _signature(fn: CFunction, toks: list[str]) -> list[tuple[str, str, bool]]:
    ret = [t for t in fn.ret if t not in ("inline", "static", "extern")]
    if ret != ["void"]:
        raise _Skip("C function returns a value (the candidate shape needs void)")
    out = []
    for p in fn.params:
        try:
            cp = parse_param(p)
        except ValueError as e:
            raise _Skip(f"unsupported parameter ({str(e).split(' is ')[-1]})") from None
        if cp.pointers > 1:
            raise _Skip("pointer-to-pointer parameter")
        if cp.ctype not in C_TYPES:
            raise _Skip("unsupported parameter type")
        out.append((cp.name, cp.ctype, cp.pointers == 1))
    return out


def _roles(params: list[tuple[str, str, bool]], body: list[str]) -> dict[str, Role]:
    arrays = [n for n, _, is_ptr in params if is_ptr]
    modes = access_modes(body, arrays)
    roles = {}
    for n, _, is_ptr in params:
        if not is_ptr:
            roles[n] = Role.SCALAR
            continue
        read, written, conditional = modes[n]
        out_ok = not read and not conditional
        roles[n] = Role.IN if not written else Role.OUT if out_ok else Role.INOUT
    return roles


def _out_of_range(args: list, params: list[tuple[str, str, bool]]) -> bool:
    """Whether a given integer value does not fit its parameter's C type (e.g. -INT_MIN)."""
    for a, (_, ctype, _) in zip(args, params, strict=True):
        if ctype not in _INT_TYPES:
            continue
        info = np.iinfo(C_TYPES[ctype])
        values = (a.values or ()) if isinstance(a, ArrayArg) else (a,)
        if any(not info.min <= v <= info.max for v in values):
            return True
    return False


def _tests(
    row: dict, params: list[tuple[str, str, bool]]
) -> tuple[list[list[float | ArrayArg]], list[str]]:
    """The given tests that match the signature, and those left out (`input N: reason`)."""
    good, left_out = [], []
    for k, snippet in enumerate(row["consistent_cpp_inputs"], 1):
        try:
            args = parse_test(snippet)
        except (ValueError, SyntaxError, ZeroDivisionError):
            continue
        if len(args) != len(params):
            continue
        if all(isinstance(a, ArrayArg) == p[2] for a, p in zip(args, params, strict=True)):
            if _out_of_range(args, params):
                left_out.append(f"input {k}: a value outside its C type's range")
                continue
            good.append(args)
    if not good:
        if left_out:
            raise _Skip("every given test has a value outside its C type's range")
        raise _Skip("no given test input matches the C signature")
    return good, left_out


def _subscript_names(body: list[str], name: str) -> set[str]:
    names: set[str] = set()
    for i, t in enumerate(body):
        if t == name and body[i + 1 : i + 2] == ["["]:
            names |= {x for x in body[i + 2 : find_close(body, i + 1)] if x.isidentifier()}
    loops = [j for j, t in enumerate(body) if t == "for"]
    for j in loops:  # loop bounds of the loop variables used in the subscripts
        head = body[j + 2 : find_close(body, j + 1)]
        if head and any(v in names for v in head[:3]):
            names |= {x for x in head if x.isidentifier()}
    return names


def _distribution(values: tuple[float, ...] | None, ctype: str) -> Distribution | None:
    if not values:
        return None
    lo, hi = min(values), max(values)
    if ctype in _INT_TYPES:
        return Distribution(kind="randint", low=int(lo), high=int(hi) + 1)
    if lo < hi and abs(hi - lo) < 1e30:
        return Distribution(kind="uniform", low=lo, high=hi)
    return Distribution(kind="constant", value=lo) if abs(lo) < 1e30 else None


def _scalar_value(v: float, ctype: str) -> int | float:
    return int(v) if ctype in _INT_TYPES else float(v)


def _test_configs(sig: list[Param], tests: list) -> list[InputConfig]:
    configs = []
    for j, args in enumerate(tests, 1):
        pairs = list(zip(sig, args, strict=True))
        sizes = {p.name: _scalar_value(a, p.ctype) for p, a in pairs if not p.is_array}
        dists = {}
        for p, a in pairs:
            d = _distribution(a.values, p.ctype) if p.role is not Role.OUT and p.is_array else None
            if d is not None:
                dists[p.name] = d
        held = len(tests) > 1 and j == len(tests)
        cfg = InputConfig(
            name=f"test{j}", sizes=sizes, param_distributions=dists, seed=j, held_out=held
        )
        configs.append(cfg)
    return configs


def _longest(sig: list[Param], sizes: dict) -> int:
    return max(eval_length(p.length, sizes) for p in sig if p.is_array)


def _tolerance(sig: list[Param], body: list[str], configs: list[InputConfig]) -> Tolerance:
    """1e-4, or wider for long float reductions: eps * (16 + 4 sqrt(terms)) as datagen's
    `tolerance_for`, with terms = the C loop work per written element on the largest config
    (a different summation order on the GPU rounds differently)."""
    floats = [
        p for p in sig if p.is_array and p.role is not Role.IN and p.ctype in ("float", "double")
    ]
    if not floats:
        return Tolerance(atol=1e-4, rtol=1e-4)
    cfg = max(configs, key=lambda c: _longest(sig, c.sizes))
    written = sum(eval_length(p.length, cfg.sizes) for p in floats) or 1
    terms = max(1, loop_work(body, _value(cfg.sizes)) // written)
    eps = 1.2e-7 if any(p.ctype == "float" for p in floats) else 2.3e-16
    rel = max(1e-4, float(f"{eps * (16 + 4 * terms**0.5):.2g}"))
    return Tolerance(atol=rel, rtol=rel)


def _same_constant(configs: list[InputConfig]) -> set[str]:
    """Arrays that every given test fills with one and the same constant."""
    seen = [
        {n: d.value for n, d in c.param_distributions.items() if d.kind == "constant"}
        for c in configs
    ]
    return {n for n, v in seen[0].items() if all(s.get(n) == v for s in seen)}


def _value(sizes: dict) -> Callable[[str], int | None]:
    def value(text: str) -> int | None:
        try:
            return eval_length(text, sizes)
        except (ValueError, SyntaxError, ZeroDivisionError, OverflowError, TypeError):
            return None

    return value


def _generated(
    sig: list[Param],
    base: InputConfig,
    fits: Callable[[dict], bool],
    launchable: Callable[[dict], bool],
    constants: set[str],
    dims: set[str] = frozenset(),
) -> list[InputConfig]:
    """`medium` and `large`: the largest test's size scalars times a common power of two.

    The factor doubles until the longest array reaches the target, or the next doubling
    would not `fit` (array size, the C reference's loop work); the largest factor on which
    the launcher is `launchable` is taken. A config equal to one already made is dropped.
    Integer arrays keep their value range (often indices) and arrays that every test starts
    at one constant (often accumulators the C code expects zeroed) keep that constant.
    """
    size_names = {
        n for p in sig if p.is_array for n in _names(p.length) if int(base.sizes[n]) >= 1
    } & ({p.name for p in sig if p.ctype in _INT_TYPES} | dims)
    if not size_names:
        return []
    dists = {
        k: v
        for k, v in base.param_distributions.items()
        if v.kind == "randint" or (v.kind == "constant" and k in constants)
    }
    out: list[InputConfig] = []
    for seed, (name, target) in enumerate(TARGETS.items(), 100):
        k, ok, sizes = 1, [], dict(base.sizes)
        while _longest(sig, sizes) < target and k < 2**20:
            k, sizes = (
                2 * k,
                {n: (v * 2 * k if n in size_names else v) for n, v in base.sizes.items()},
            )
            if not fits(sizes):
                break
            if launchable(sizes):
                ok.append(sizes)
        if not ok or any(c.sizes == ok[-1] for c in out):
            continue
        out.append(InputConfig(name=name, sizes=ok[-1], param_distributions=dists, seed=seed))
    return out


def _launch_problem(launch: Launcher, sig: list[Param], sizes: dict) -> str:
    """Why the row's launcher cannot run on `sizes` ('' when it can, as far as we can tell).

    CUDA rejects a launch with a zero grid or block dimension, more than 1024 threads per
    block, or a grid y/z above 65535 (cudaErrorInvalidValue / InvalidConfiguration); a
    kernel without any condition (no bounds check) must not launch more threads than the
    shortest array it is given has elements; when no such kernel reads blockIdx, every block
    touches the same elements and only one block's threads count.
    """
    lengths = [eval_length(p.length, sizes) for p in sig if p.is_array]
    if min(lengths) == 0:
        return "an empty array (CUDA cannot launch an empty grid)"
    for grid, block in launch.shapes:
        try:
            g = [eval_length(e, sizes) if e else None for e in grid]
            b = [eval_length(e, sizes) if e else None for e in block]
        except (ValueError, ZeroDivisionError, OverflowError, TypeError):
            continue
        if any(v is not None and v <= 0 for v in g + b):
            return "a launch with an empty grid or block"
        if None not in b and (b[0] * b[1] * b[2] > 1024 or b[2] > 64):
            return "a launch with more than 1024 threads per block"
        if any(v is not None and v > 65535 for v in g[1:]) or (g[0] or 0) >= 2**31:
            return "a launch with a grid dimension over CUDA's limit"
        if launch.unguarded and None not in g + b:
            threads = (1 if launch.same_blocks else g[0] * g[1] * g[2]) * b[0] * b[1] * b[2]
            if threads > min(lengths):
                return "more threads than array elements for a kernel without bounds checks"
    return ""


def _defined(toks: list[str]) -> set[str]:
    macros = {t.split()[1] for t in toks if t.startswith("#define")}
    return {f.name for f in functions(toks)} | macros


def _names(expr: str) -> frozenset[str]:
    return length_names(expr)


def _shell(entry: str, params: list, roles: dict[str, Role], scalars: list[str]) -> Task:
    """The task's signature with placeholder lengths, for adapting the wrapper."""
    return Task(
        id="shell",
        kind="c2cuda",
        family="shell",
        source="-",
        entry=entry,
        signature=[
            Param(name=n, ctype=c, role=roles[n], length="1" if ptr else None)
            for n, c, ptr in params
        ],
        configs=[InputConfig(name="shell", sizes={n: 1 for n in scalars})],
    )


def _count_dim(shell: Task, tests: list, body: list[str], index: int) -> tuple[str, str] | None:
    """(count array, dim name) when the array at `index` is as long as a count the C code
    reads from element 0 of another array: a read-only integer array of one element (`n[0]`
    in the C body) whose value equals this array's declared length in every test."""
    lengths = [t[index].length for t in tests]
    for i, p in enumerate(shell.signature):
        if i == index or p.role is not Role.IN or p.ctype not in _INT_TYPES:
            continue
        if not any(body[k : k + 4] == [p.name, "[", "0", "]"] for k in range(len(body))):
            continue
        held = zip([t[i] for t in tests], lengths, strict=True)
        if all(a.length == 1 and a.values and a.values[0] == n for a, n in held):
            dim = count_name(p.name)
            while dim in {q.name for q in shell.signature}:
                dim += "_"
            return p.name, dim
    return None


def _with_lengths(
    shell: Task, tests: list, sizes: dict[str, str], body: list[str], prefer_wrapper: bool
) -> tuple[list[Param], dict[str, str]]:
    """The signature with lengths, and {count array: dim} for lengths that are a count read
    from an array (`_count_dim`; only where no expression over the scalars fits)."""
    scalar_at = {i: p.name for i, p in enumerate(shell.signature) if not p.is_array}
    ints = [p.name for p in shell.signature if not p.is_array and p.ctype in _INT_TYPES]
    sig, counts = [], {}
    for i, p in enumerate(shell.signature):
        if p.is_array:
            length = choose_length(
                i,
                tests,
                scalar_at,
                ints,
                sizes.get(p.name, ""),
                _subscript_names(body, p.name),
                prefer_wrapper,
            )
            found = _count_dim(shell, tests, body, i) if length is None else None
            if found is not None:
                counts[found[0]] = length = counts.get(found[0], found[1])
            if length is None:
                raise _Skip("cannot infer an array length from the wrapper or the tests")
            update: dict = {"length": length}
            if p.role is Role.OUT and not re.fullmatch(
                r"[A-Za-z_]\w*(\s*\*\s*[A-Za-z_]\w*)*", length
            ):
                update["role"] = Role.INOUT  # maybe longer than what the C code writes: rest kept
            p = p.model_copy(update=update)
        sig.append(p)
    sig = [p.model_copy(update={"length": "1"}) if p.name in counts else p for p in sig]
    return sig, counts


def _with_counts(
    given: list[InputConfig], tests: list, sig: list[Param], counts: dict[str, str]
) -> list[InputConfig]:
    """The given configs (in the order of `tests`) with each count dim set to its test's
    count."""
    at = {p.name: i for i, p in enumerate(sig)}
    return [
        c.model_copy(
            update={"sizes": c.sizes | {d: int(t[at[a]].values[0]) for a, d in counts.items()}}
        )
        for c, t in zip(given, tests, strict=True)
    ]


def _fill_counts(configs: list[InputConfig], counts: dict[str, str]) -> list[InputConfig]:
    """Every config's count arrays filled with its dim's value."""
    out = []
    for c in configs:
        fill = {a: Distribution(kind="constant", value=c.sizes[d]) for a, d in counts.items()}
        out.append(c.model_copy(update={"param_distributions": c.param_distributions | fill}))
    return out


def _reference_source(toks: list[str]) -> str:
    src_toks = [t for t in toks if t != "inline"]
    defined = _defined(src_toks)
    helpers = "".join(_MINMAX[f] for f in ("min", "max") if f in src_toks and f not in defined)
    return C_HEADERS + helpers + format_c(src_toks)


def row_task(row: dict) -> Task:
    """One BabelTower row as a task (raises _Skip with the reason)."""
    return _row_task(row)[0]


def _row_task(row: dict, prefer_wrapper: bool = False) -> tuple[Task, list[str], list[str]]:
    """The task, the given tests left out (each as `testN: reason`), the C body's tokens.

    `prefer_wrapper`: array lengths from the wrapper wherever they fit the tests at all
    (`lengths.choose_length`)."""
    toks = tokenize(row["cpp_code"])
    fn = _entry(row, toks)
    params = _signature(fn, toks)
    body = toks[fn.body[0] : fn.body[1] + 1]
    roles = _roles(params, body)
    tests, out_of_range = _tests(row, params)
    if all(r in (Role.IN, Role.SCALAR) for r in roles.values()):
        raise _Skip("the C function writes no array (no output to compare)")
    scalars = [n for n, _, ptr in params if not ptr]
    launch = adapt_wrapper(
        row["cuda_wrapper"], row["cuda_code"], _shell(fn.name, params, roles, scalars)
    )
    if launch.reason:
        raise _Skip(launch.reason)
    if any(roles[n] is Role.IN for n in launch.written):  # the kernel writes it: not read-only
        roles |= {n: Role.INOUT for n in launch.written if roles[n] is Role.IN}
        launch = adapt_wrapper(
            row["cuda_wrapper"], row["cuda_code"], _shell(fn.name, params, roles, scalars)
        )
    shell = _shell(fn.name, params, roles, scalars)
    sig, counts = _with_lengths(shell, tests, launch.sizes, body, prefer_wrapper)
    given = _with_counts(_test_configs(sig, tests), tests, sig, counts)
    configs = [c for c in given if not _launch_problem(launch, sig, c.sizes)]
    dropped = out_of_range + [
        f"{c.name}: {_launch_problem(launch, sig, c.sizes)}" for c in given if c not in configs
    ]
    configs = _hold_out(configs)

    def fits(sizes: dict) -> bool:
        return _longest(sig, sizes) <= MAX_ELEMENTS and loop_work(body, _value(sizes)) <= MAX_WORK

    def launchable(sizes: dict) -> bool:
        return not _launch_problem(launch, sig, sizes)

    base = max(given, key=lambda c: _longest(sig, c.sizes))
    configs += _generated(sig, base, fits, launchable, _same_constant(given), set(counts.values()))
    configs = _fill_counts(configs, counts)
    if not configs:
        why = dropped[0].split(": ", 1)[1] if dropped else "no size to scale"
        raise _Skip(f"no config the row's kernel can be launched on (given tests: {why})")
    impl = Implementation(
        id="babeltower",
        code=launch.code,
        strategies=["naive"],
        provenance=f"BabelTower test row {row['id']} (cuda_code, launched as cuda_wrapper does)",
    )
    task = Task(
        id=f"babeltower/{row['id']}_{fn.name}",
        kind="c2cuda",
        family=f"babeltower_{fn.name.lower()}",
        source=_reference_source(toks),
        entry=fn.name,
        signature=sig,
        dims=sorted(counts.values()),
        configs=configs,
        tolerance=_tolerance(sig, body, configs),
        implementations=[impl],
        provenance={"source": f"BabelTower test set row {row['id']}", "license": LICENSE},
        description=f"BabelTower C→CUDA pair {row['id']}: translate the C function "
        f"{fn.name} to CUDA.",
    )
    return task, dropped, body


def _hold_out(configs: list[InputConfig]) -> list[InputConfig]:
    """The last given test held out when two or more remain; no other config held out."""
    given = [c.name for c in configs if c.name not in TARGETS]
    held = given[-1] if len(given) > 1 else None
    return [c.model_copy(update={"held_out": c.name == held}) for c in configs]


_CHECK_WHY = {
    "overrun": "C reference overruns {what} (AddressSanitizer)",
    "ub": "C reference has undefined behaviour (UBSan: {detail})",
    "slow": f"C reference too slow (over {refcheck.SLOW_S:g} s at -O2 or "
    f"{refcheck.LIMIT_S:g} s under the sanitizers)",
    "crash": "C reference crashes",
    "inputs": "its inputs cannot be made",
}


def _check_reason(cfg: str, prob: refcheck.Problem) -> str:
    generated = cfg in TARGETS
    what = "an inferred array length" if generated else "an array"
    why = _CHECK_WHY[prob.kind].format(what=what, detail=prob.detail)
    return f"generated config dropped: {why}" if generated else f"given test left out: {why}"


def _apply_check(
    task: Task, body: list[str], problems: dict[str, refcheck.Problem]
) -> tuple[Task, list[tuple[str, str]]]:
    """`task` without the configs that failed the reference check, and (config, reason) for
    each dropped; raises _Skip when no config is left."""
    if not problems:
        return task, []
    if any(p.kind == "build" for p in problems.values()):
        raise _Skip("C reference does not build with gcc")
    dropped = [
        (c.name, _check_reason(c.name, problems[c.name]))
        for c in task.configs
        if c.name in problems
    ]
    configs = [c for c in task.configs if c.name not in problems]
    if not configs:
        why = dropped[0][1].split(": ", 1)[1]
        raise _Skip(f"no config the C reference runs cleanly on (first: {why})")
    configs = _hold_out(configs)
    sig = task.signature
    update = {"configs": configs, "tolerance": _tolerance(sig, body, configs)}
    return task.model_copy(update=update), dropped


def _clean(task: Task, problems: dict[str, refcheck.Problem]) -> int:
    return sum(c.name not in problems for c in task.configs)


def _retry_with_wrapper_lengths(
    rows: list[tuple[int, Task, list[str], list[str]]],
    raw: list[dict],
    found: list[dict[str, refcheck.Problem]],
    jobs: int | None,
) -> int:
    """Rows whose C reference overran on some config, rebuilt with the wrapper's array
    lengths wherever they fit the tests (`_row_task(prefer_wrapper=True)`) and checked
    again; a rebuilt task replaces the row's (in `rows` and `found`) when more of its
    configs run cleanly. Returns how many were replaced."""
    alts: list[tuple[int, tuple[Task, list[str], list[str]]]] = []
    for k, problems in enumerate(found):
        if not any(p.kind == "overrun" for p in problems.values()):
            continue
        try:
            alt = _row_task(raw[k], prefer_wrapper=True)
        except _Skip:
            continue
        if [p.length for p in alt[0].signature] != [p.length for p in rows[k][1].signature]:
            alts.append((k, alt))
    checked = refcheck.check_tasks([a[0] for _, a in alts], jobs=jobs)
    replaced = 0
    for (k, (task, dropped, body)), problems in zip(alts, checked, strict=True):
        if _clean(task, problems) > _clean(rows[k][1], found[k]):
            rows[k] = (rows[k][0], task, dropped, body)
            found[k] = problems
            replaced += 1
    return replaced


def _check_mode(check_references: bool | None, validate: bool) -> tuple[bool, str]:
    """(run the check, what to report)."""
    wanted = validate if check_references is None else check_references
    if not wanted:
        return False, "skipped (turned off)"
    why = refcheck.sanitizer_available()
    if why:
        return False, f"skipped ({why})"
    return True, "gcc " + " ".join(refcheck.SAN_FLAGS)


def import_babeltower(
    path: str | Path,
    *,
    check_references: bool | None = None,
    validate: bool = True,
    jobs: int | None = None,
    **_: object,
) -> ImportReport:
    """Import every row of the BabelTower test-set JSONL at `path`.

    With the reference check (`check_references`; default: `validate`, which the CLI's
    `--no-validate` turns off; skipped when gcc's sanitizers are unavailable) every config
    is run through the C reference under AddressSanitizer and UBSan (`check`) over
    `jobs` processes: a failing config is dropped with its reason, a row left without one is
    skipped. `summary()["reference_check"]` says what ran.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"{p}: no such file; pass your copy of the BabelTower test set as JSONL "
            "(fields id, cpp_code, cuda_code, consistent_cpp_inputs, cuda_wrapper, ...)"
        )
    report = ImportReport("babeltower")
    rows: list[tuple[int, Task, list[str], list[str]]] = []
    raw: list[dict] = []
    for lineno, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        item = f"line {lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            report.skip(item, "not a JSON object")
            continue
        missing = [f for f in _FIELDS if f not in row] if isinstance(row, dict) else _FIELDS
        if missing:
            report.skip(item, f"missing field(s) {', '.join(missing)}")
            continue
        try:
            task, dropped, body = _row_task(row)
        except _Skip as e:
            report.skip(f"row {row['id']}", str(e))
            continue
        rows.append((row["id"], task, dropped, body))
        raw.append(row)
    check, mode = _check_mode(check_references, validate)
    t0 = time.monotonic()
    found = refcheck.check_tasks([t for _, t, _, _ in rows], jobs=jobs) if check else []
    retried = _retry_with_wrapper_lengths(rows, raw, found, jobs) if check else 0
    for k, (rid, task, dropped, body) in enumerate(rows):
        for d in dropped:  # the row is imported without these given tests
            name, why = d.split(": ", 1)
            report.skip(f"row {rid} {name}", f"given test left out: {why}")
        try:
            task, failed = _apply_check(task, body, found[k] if check else {})
        except _Skip as e:
            report.skip(f"row {rid}", str(e))
            continue
        for name, why in failed:
            report.skip(f"row {rid} {name}", why)
        report.tasks.append(task)
    report.notes["reference_check"] = {
        "mode": mode,
        "configs_checked": sum(len(t.configs) for _, t, _, _ in rows) if check else 0,
        "wrapper_lengths": retried,
        "seconds": round(time.monotonic() - t0, 1),
    }
    report.notes["configs"] = sum(len(t.configs) for t in report.tasks)
    return report
