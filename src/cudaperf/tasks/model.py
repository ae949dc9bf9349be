"""The task contract: what a task is, how its inputs are described, and what has been measured.

Every type here is a frozen pydantic model, so a task read from disk is validated field by
field and a bad file names the field and what was expected. All types round-trip through
JSON (`model_dump(mode="json")` / `model_validate`) without losing a field.

Guaranteed: a `Task` that validates has a signature consistent with its kind, configs that
give a value for every scalar parameter (C→CUDA), array length expressions that only name
scalar parameters and the task's `dims` (sizes that are not parameters), unique config and
implementation ids, and at least one config.
Not guaranteed: that the code compiles or that implementations are correct; that is the
evaluator's job (`cudaperf.execute`).
"""

from __future__ import annotations

import ast
import functools
import math
import re
from enum import Enum
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

__all__ = [
    "Distribution",
    "Implementation",
    "InputConfig",
    "LEGACY_PROTOCOL",
    "Measurement",
    "Param",
    "Role",
    "Task",
    "TaskKind",
    "Tolerance",
    "eval_length",
    "length_names",
]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")

# C element types an array or scalar parameter may have, with their numpy dtype names.
C_TYPES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "int": "int32",
    "unsigned int": "uint32",
    "unsigned": "uint32",
    "long": "int64",
    "long long": "int64",
    "unsigned long long": "uint64",
    "int8_t": "int8",
    "uint8_t": "uint8",
    "unsigned char": "uint8",
    "char": "int8",
    "int16_t": "int16",
    "uint16_t": "uint16",
    "short": "int16",
    "int32_t": "int32",
    "uint32_t": "uint32",
    "int64_t": "int64",
    "uint64_t": "uint64",
    "size_t": "uint64",
}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TaskKind(str, Enum):
    """Which candidate shape a task asks for."""

    C2CUDA = "c2cuda"  # a C function → an extern "C" host function launching CUDA kernels
    TORCH2CUDA = "torch2cuda"  # a KernelBench-style nn.Module → ModelNew with custom kernels


class Role(str, Enum):
    """How a C→CUDA parameter is used by the function."""

    IN = "in"  # array read only
    OUT = "out"  # array written only (poisoned before the run)
    INOUT = "inout"  # array read and written
    SCALAR = "scalar"  # a plain value passed by value


@functools.lru_cache(maxsize=8192)
def length_names(expr: str) -> frozenset[str]:
    """The identifiers an array length expression refers to (excluding min/max)."""
    tree = _parse_length(expr)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return frozenset(names - {"min", "max"})


_LEN_NODES = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.Call,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.Div,
    ast.Mod,
    ast.Pow,
    ast.USub,
    ast.UAdd,
)


@functools.lru_cache(maxsize=8192)  # a dataset repeats a few hundred expressions; not mutated
def _parse_length(expr: str) -> ast.Expression:
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"length expression {expr!r} is not valid arithmetic: {e.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _LEN_NODES):
            raise ValueError(
                f"length expression {expr!r} uses {type(node).__name__}; only integers, "
                "scalar parameter names, + - * / // % ** and min()/max() are allowed"
            )
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in ("min", "max")
        ):
            raise ValueError(f"length expression {expr!r} may only call min() or max()")
    return tree


def eval_length(expr: str, sizes: dict[str, int | float]) -> int:
    """Evaluate an array length expression over scalar values. `/` is integer division."""
    missing = length_names(expr) - set(sizes)  # parses and checks the AST (`_parse_length`)
    if missing:
        raise ValueError(f"length {expr!r} needs values for {sorted(missing)}")
    env = {k: int(v) for k, v in sizes.items()}
    code = _length_code(expr.replace("//", "/").replace("/", "//"))
    return int(eval(code, {"__builtins__": {}, "min": min, "max": max}, env))  # noqa: S307


@functools.lru_cache(maxsize=8192)  # task validation evaluates every array's length per config
def _length_code(expr: str):
    """The compiled code of a length expression already in Python's form (`//` division)."""
    return compile(_parse_length(expr), "<length>", "eval")


def _is_int_ctype(ctype: str) -> bool:
    return C_TYPES[ctype].startswith(("int", "uint"))


# The most bytes a C→CUDA config's arrays may hold together: a config over this fits no GPU's
# memory beside the evaluator's reference copies (the generated set's largest is about 1.2 GB).
MAX_CONFIG_BYTES = 64 << 30


class Param(_Frozen):
    """One parameter of a C→CUDA task's function, in declaration order."""

    name: str  # C identifier
    ctype: str  # element type without pointer or const, e.g. "float", "int" (see C_TYPES)
    role: Role  # in / out / inout for arrays (pointers), scalar for values
    length: str | None = None  # arrays only: element count as an expression over scalar params
    # An input that a correct implementation need not read in full (a downscaling resize's
    # image, a gather's table): the roofline check (no more input bytes per second than the
    # card can move) does not count it, so an honest kernel reading a subset is not rejected.
    partial_read: bool = False

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, v: str) -> str:
        if not _IDENT.match(v):
            raise ValueError(f"{v!r} is not a C identifier (letters, digits, _; not a digit first)")
        return v

    @field_validator("ctype")
    @classmethod
    def _known_type(cls, v: str) -> str:
        v = " ".join(v.replace("const", " ").replace("*", " ").split())
        if v not in C_TYPES:
            raise ValueError(f"unknown C type {v!r}; use one of: {', '.join(sorted(C_TYPES))}")
        return v

    @model_validator(mode="after")
    def _length_matches_role(self) -> Param:
        if self.role is Role.SCALAR and self.length is not None:
            raise ValueError(f"scalar parameter {self.name!r} must not have a length")
        if self.role is not Role.SCALAR:
            if not self.length:
                raise ValueError(
                    f"array parameter {self.name!r} needs a length, an expression over the "
                    "scalar parameters such as 'n' or 'rows*cols'"
                )
            _parse_length(self.length)
        if self.partial_read and self.role not in (Role.IN, Role.INOUT):
            raise ValueError(
                f"partial_read is for input arrays; {self.name!r} is {self.role.value}"
            )
        return self

    @property
    def is_array(self) -> bool:
        return self.role is not Role.SCALAR

    @property
    def dtype(self) -> str:
        """numpy dtype name of the element type."""
        return C_TYPES[self.ctype]

    def c_decl(self) -> str:
        """The C declaration of this parameter as the candidate's host function takes it."""
        if self.role is Role.SCALAR:
            return f"{self.ctype} {self.name}"
        const = "const " if self.role is Role.IN else ""
        return f"{const}{self.ctype}* {self.name}"


class Distribution(_Frozen):
    """How input values are drawn. Floats: uniform / normal; integers: randint (high exclusive)."""

    kind: Literal["uniform", "normal", "randint", "constant", "row_ptr"] = "uniform"
    low: float = 0.5  # uniform and randint: lower bound (positive by default so outputs are not ~0)
    high: float = 1.5  # uniform and randint: upper bound
    mean: float = 0.0  # normal
    std: float = 1.0  # normal
    value: float = 0.0  # constant
    nnz: int = 0  # row_ptr: the last entry (number of stored non-zeros of the CSR matrix)
    skew: float = 0.0  # row_ptr: 0 = row lengths near uniform; > 0 = power-law (Pareto) shape

    @model_validator(mode="after")
    def _bounds(self) -> Distribution:
        if self.kind in ("uniform", "randint") and not self.low < self.high:
            raise ValueError(
                f"{self.kind} distribution needs low < high, got {self.low} >= {self.high}"
            )
        if self.kind == "normal" and self.std <= 0:
            raise ValueError(f"normal distribution needs std > 0, got {self.std}")
        if self.kind == "row_ptr" and (self.nnz < 0 or self.skew < 0):
            raise ValueError(
                f"row_ptr distribution needs nnz >= 0 and skew >= 0, got {self.nnz}, {self.skew}"
            )
        return self

    def row_ptr(self, rng, n: int):
        """A CSR row-pointer array of length n (rows + 1) for kind "row_ptr", as int64 numpy:
        starts at 0, non-decreasing, ends at `nnz`. Row lengths are proportional to weights
        drawn from `rng` (a numpy Generator): uniform in [0.5, 1.5) when `skew` is 0, else
        Pareto with shape `skew` (a few very long rows). Raises ValueError for n < 1, or n == 1
        with nnz > 0 (no row to hold the non-zeros)."""
        import numpy as np

        if n < 1 or (n == 1 and self.nnz > 0):
            raise ValueError(f"a row_ptr array of length {n} cannot hold {self.nnz} non-zeros")
        rows = n - 1
        w = rng.pareto(self.skew, rows) + 1.0 if self.skew > 0 else rng.uniform(0.5, 1.5, rows)
        c = np.cumsum(w)
        out = np.zeros(n, np.int64)
        if rows:
            out[1:] = np.floor(self.nnz * (c / c[-1])).astype(np.int64)
            out[-1] = self.nnz
            np.maximum.accumulate(out, out=out)
        return out


class InputConfig(_Frozen):
    """One input configuration of a task.

    C→CUDA: `sizes` gives a value to every scalar parameter (sizes and constants alike).
    PyTorch→CUDA: `sizes` gives values to the module's module-level size constants.
    """

    name: str  # unique within the task, e.g. "small", "large", "heldout"
    sizes: dict[str, int | float]  # scalar parameter (or module constant) → value
    distribution: Distribution = Distribution()  # default distribution for input arrays
    param_distributions: dict[str, Distribution] = {}  # per-array overrides (e.g. index arrays)
    seed: int = 0  # public seed for reproducible examples; the evaluator adds a secret salt
    held_out: bool = False  # never shown in prompts; still checked by the evaluator

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError(f"config name {v!r} must be letters, digits, '_', '-' or '.'")
        return v


class Tolerance(_Frozen):
    """Output comparison: |got - want| <= atol + rtol * |want| elementwise; NaN never passes."""

    atol: float = Field(default=1e-4, ge=0)  # absolute tolerance
    rtol: float = Field(default=1e-4, ge=0)  # relative tolerance


# The measurement protocol of timings stored before `Measurement.protocol` existed: every one of
# them came from `cudaperf data measure` (data/README.md). Written out only when different, so
# files measured before the field existed load and save byte-identically.
LEGACY_PROTOCOL = "bulk-v1"


class Measurement(_Frozen):
    """One timing of one implementation on one config on one GPU."""

    gpu: str  # device name as the driver reports it, e.g. "NVIDIA H200"
    config: str  # InputConfig.name
    median_us: float = Field(gt=0)  # median kernel time in microseconds
    iqr_us: float = Field(default=0.0, ge=0)  # interquartile range of the trials, microseconds
    trials: int = Field(default=0, ge=0)  # number of timed trials
    versions: dict[str, str] = {}  # toolchain versions: nvcc, driver, torch, cudaperf
    date: str = ""  # ISO date of the measurement
    # which procedure produced it (checks, correctness and timed trials, budget): an id of
    # cudaperf.tasks.measurements.PROTOCOLS; absent in older files, read as LEGACY_PROTOCOL
    protocol: str = Field(default=LEGACY_PROTOCOL, exclude_if=lambda v: v == LEGACY_PROTOCOL)


class Implementation(_Frozen):
    """A known CUDA implementation of a task (correct unless the evaluator says otherwise)."""

    id: str  # unique within the task, e.g. "naive", "smem_tiled"
    code: str  # full candidate source in the task kind's candidate shape
    strategies: list[str] = []  # optimisation tags: naive, coalesced, smem_tiling, ...
    measurements: list[Measurement] = []  # timings per GPU and config
    provenance: str = ""  # who wrote it / where it came from

    @field_validator("id")
    @classmethod
    def _id_ok(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError(f"implementation id {v!r} must be letters, digits, '_', '-' or '.'")
        return v

    @field_validator("code")
    @classmethod
    def _code_nonempty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("implementation code is empty")
        return v

    def measured_on(self, gpu: str, configs: list[str]) -> bool:
        """True when there is a measurement on `gpu` for every config name given."""
        have = {m.config for m in self.measurements if m.gpu == gpu}
        return set(configs) <= have


class Task(_Frozen):
    """One program to turn into CUDA, with its inputs and known implementations."""

    id: str  # globally unique, e.g. "sample/c2cuda/saxpy"
    kind: TaskKind  # c2cuda | torch2cuda
    family: str  # e.g. "saxpy", "stencil2d", "softmax"; splits are by family
    source: str  # the C function (c2cuda) or the PyTorch module file (torch2cuda)
    entry: str  # C function name (c2cuda) or the module class name, "Model" (torch2cuda)
    signature: list[Param] = []  # c2cuda: the function's parameters; torch2cuda: empty
    configs: list[InputConfig]  # at least one; some marked held_out
    tolerance: Tolerance = Tolerance()
    implementations: list[Implementation] = []
    provenance: dict[str, str] = {}  # e.g. {"source": "cudaperf sample set", "license": "..."}
    description: str = ""  # one paragraph for prompts
    # c2cuda: sizes that are not parameters. Array lengths may name them beside the scalar
    # parameters and every config gives each a value in `sizes`; the function learns one only
    # from array contents (e.g. a count stored in `n[0]`, which the config's distribution for
    # `n` then fills with that value). Left out of dumps while empty, so tasks without them
    # serialise (and hash) as before the field existed.
    dims: list[str] = []

    @field_validator("id")
    @classmethod
    def _id_ok(cls, v: str) -> str:
        if not re.match(r"^[A-Za-z0-9_][A-Za-z0-9_./\-]*$", v):
            raise ValueError(f"task id {v!r} must be letters, digits and _ . / -")
        return v

    @field_validator("configs")
    @classmethod
    def _some_configs(cls, v: list[InputConfig]) -> list[InputConfig]:
        if not v:
            raise ValueError("a task needs at least one input configuration")
        _unique([c.name for c in v], "config name")
        return v

    @field_validator("implementations")
    @classmethod
    def _unique_impls(cls, v: list[Implementation]) -> list[Implementation]:
        _unique([i.id for i in v], "implementation id")
        return v

    @field_validator("dims")
    @classmethod
    def _dims_ok(cls, v: list[str]) -> list[str]:
        for d in v:
            if not _IDENT.match(d):
                raise ValueError(f"dim {d!r} is not an identifier")
        _unique(v, "dim")
        return v

    @model_serializer(mode="wrap")
    def _drop_empty_dims(self, handler: SerializerFunctionWrapHandler) -> dict:
        out = handler(self)
        if isinstance(out, dict) and not out.get("dims", True):
            del out["dims"]
        return out

    @model_validator(mode="after")
    def _consistent(self) -> Task:
        if self.kind is TaskKind.C2CUDA:
            self._check_c_signature()
        elif self.signature or self.dims:
            raise ValueError(
                "torch2cuda tasks take no signature nor dims; sizes are module constants"
            )
        return self

    def _check_c_signature(self) -> None:
        if not _IDENT.match(self.entry):
            raise ValueError(f"entry {self.entry!r} must be the C function's name")
        if not self.signature:
            raise ValueError("c2cuda tasks need a signature: one entry per function parameter")
        _unique([p.name for p in self.signature], "parameter name")
        scalars = {p.name for p in self.signature if p.role is Role.SCALAR}
        clash = set(self.dims) & {p.name for p in self.signature}
        if clash:
            raise ValueError(f"dims {sorted(clash)} are parameter names; a dim is not a parameter")
        for p in self.signature:
            if p.length is None:
                continue
            unknown = length_names(p.length) - scalars - set(self.dims)
            if unknown:
                raise ValueError(
                    f"length of array {p.name!r} ({p.length!r}) names {sorted(unknown)}, which "
                    f"are not scalar parameters nor dims; scalars are {sorted(scalars)}"
                )
        for c in self.configs:
            missing = scalars - set(c.sizes)
            if missing:
                raise ValueError(
                    f"config {c.name!r} gives no value for scalar parameter(s) {sorted(missing)}; "
                    "add them to its sizes"
                )
            missing = set(self.dims) - set(c.sizes)
            if missing:
                raise ValueError(f"config {c.name!r} gives no value for dim(s) {sorted(missing)}")
            extra = set(c.sizes) - scalars - set(self.dims)
            if extra:
                raise ValueError(
                    f"config {c.name!r} sets {sorted(extra)}, not scalar parameters nor dims"
                )
            arrays = {p.name for p in self.signature if p.is_array}
            bad = set(c.param_distributions) - arrays
            if bad:
                raise ValueError(
                    f"config {c.name!r} has distributions for non-arrays {sorted(bad)}"
                )
            self._check_c_values(c)

    def _check_c_values(self, c: InputConfig) -> None:
        """Every value finite; integer parameters whole and within their C type; dims whole;
        every array a length >= 0, and all of them together at most MAX_CONFIG_BYTES."""
        import numpy as np

        for name, v in sorted(c.sizes.items()):
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"config {c.name!r} gives {name!r} the value {v}; use a number")
        scalars = {p.name: p for p in self.signature if p.role is Role.SCALAR}
        ints = {n for n, p in scalars.items() if _is_int_ctype(p.ctype)}
        for name in sorted(ints | set(self.dims)):
            v = c.sizes[name]
            what = "dim" if name in self.dims else "integer parameter"
            if isinstance(v, float) and not v.is_integer():
                raise ValueError(
                    f"config {c.name!r} gives {what} {name!r} the value {v}; use a whole number"
                )
            if name in ints:
                info = np.iinfo(scalars[name].dtype)
                if not info.min <= v <= info.max:
                    raise ValueError(
                        f"config {c.name!r} gives {name!r} the value {v}, outside its C type "
                        f"{scalars[name].ctype} ({info.min} to {info.max}); use a value in that "
                        "range"
                    )
        total = 0
        for p in self.signature:
            if p.length is None:
                continue
            try:
                n = eval_length(p.length, c.sizes)
            except (ArithmeticError, ValueError) as e:
                raise ValueError(
                    f"config {c.name!r}: the length of array {p.name!r} ({p.length!r}) cannot "
                    f"be computed ({e}); fix its sizes"
                ) from None
            if n < 0:
                raise ValueError(
                    f"config {c.name!r}: array {p.name!r} would have {n} elements "
                    f"({p.length!r}); give its sizes values that make it >= 0"
                )
            total += n * np.dtype(p.dtype).itemsize
        if total > MAX_CONFIG_BYTES:
            raise ValueError(
                f"config {c.name!r}: its arrays would hold {total} bytes together, over the "
                f"{MAX_CONFIG_BYTES >> 30} GiB any GPU can take; give it smaller sizes"
            )

    # ---- convenience -------------------------------------------------------------------

    def config(self, name: str) -> InputConfig:
        for c in self.configs:
            if c.name == name:
                return c
        raise KeyError(
            f"task {self.id} has no config {name!r}; it has {[c.name for c in self.configs]}"
        )

    def implementation(self, impl_id: str) -> Implementation:
        for i in self.implementations:
            if i.id == impl_id:
                return i
        raise KeyError(f"task {self.id} has no implementation {impl_id!r}")

    @property
    def visible_configs(self) -> list[InputConfig]:
        """Configs that may be shown in prompts (not held out)."""
        return [c for c in self.configs if not c.held_out]

    def c_prototype(self) -> str:
        """The extern "C" prototype a C→CUDA candidate must define."""
        args = ", ".join(p.c_decl() for p in self.signature)
        return f'extern "C" void {self.entry}({args})'


def _unique(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ValueError(f"duplicate {what} {n!r}")
        seen.add(n)
