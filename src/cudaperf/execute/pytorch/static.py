"""Static anti-hacking checks for PyTorch→CUDA candidates (a Python file defining ModelNew).

Each check is a small pure function `CandidateAst -> message | None` with a comment saying
why it exists. `FATAL` lists the checks that reject the candidate before it runs; the others
add a warning to the feedback (their runtime twin decides). The checks read the Python AST,
so they see through formatting and aliases (`import torch.nn.functional as F`), but not
through `getattr(torch, "mat" + "mul")`: the runtime checks (fresh inputs, mutation checks,
profiler cross-check, roofline) are the next line of defence.

The CUDA sources embedded in the candidate also go through the C→CUDA host-code checks
(`cudaperf.execute.checks`) — a native launcher runs in the evaluator's process too.

`check_torch_candidate` returns each finding as a `cudaperf.execute.types.Finding`, built as
`cudaperf.execute.checks` builds its own: `rule` is the check id (or "syntax_error"),
`severity` is error for a check in `FATAL` (and a syntax error) and warning for the others,
`line` is the source line the message names ("(line N)" or "at line N") or 0, and `message`
is the check's message.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from cudaperf.execute.checks import finding
from cudaperf.execute.checks import run_checks as run_c_checks
from cudaperf.execute.pytorch.ops import COMPUTE_OPS
from cudaperf.execute.types import Finding, Severity
from cudaperf.tasks.candidate import cuda_sources_in_python

__all__ = [
    "COMPUTE_OPS",
    "FATAL",
    "TORCH_CHECKS",
    "CandidateAst",
    "check_torch_candidate",
]

# Torch functions / tensor methods that compute (derived from torch itself: torch_ops).
# torch.nn modules whose call does the compute (self.conv(x) in forward).
NN_MODULES = frozenset(
    """Linear Bilinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d
    BatchNorm1d BatchNorm2d BatchNorm3d LayerNorm GroupNorm InstanceNorm1d InstanceNorm2d
    InstanceNorm3d RMSNorm ReLU GELU SiLU Sigmoid Tanh Softmax LogSoftmax Dropout MaxPool1d
    MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool2d MultiheadAttention
    Embedding LSTM GRU RNN Transformer TransformerEncoder TransformerEncoderLayer Mish
    Hardswish Hardtanh ELU SELU LeakyReLU Softplus Sequential""".split()
)

KERNEL_LOADERS = frozenset({"load_cuda", "load_inline", "load", "RawKernel", "RawModule"})
TIMING_NAMES = frozenset(
    {
        "Event",
        "synchronize",
        "perf_counter",
        "perf_counter_ns",
        "time",
        "monotonic",
        "elapsed_time",
        "record",
        "do_bench",
        "Timer",
    }
)
FORBIDDEN_MODULES = frozenset(
    {
        "subprocess",
        "socket",
        "threading",
        "multiprocessing",
        "concurrent",
        "asyncio",
        "gc",
        "inspect",
        "shutil",
        "sys",
        "urllib",
        "requests",
        "http",
        "pickle",
        "importlib",
        "builtins",
    }
)


@dataclass
class CandidateAst:
    """A parsed candidate, with the facts several checks share."""

    tree: ast.Module
    source: str
    reference_names: set[str] = field(default_factory=set)  # names the task module defines
    model_new: ast.ClassDef | None = None

    @classmethod
    def parse(cls, source: str, reference_names: set[str] | None = None) -> CandidateAst:
        tree = ast.parse(source)
        cls_defs = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
        return cls(
            tree, source, set(reference_names or {"Model"}), cls_defs[0] if cls_defs else None
        )


def _dotted(node: ast.AST) -> str:
    """'torch.nn.functional.relu' for an attribute chain; '' when not a plain chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _last(call: ast.Call) -> str:
    """The called name's last component: 'half' for x.contiguous().half()."""
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def no_model_new(c: CandidateAst) -> str | None:
    # The evaluator instantiates ModelNew; without it there is nothing to evaluate.
    return None if c.model_new else "defines no class ModelNew"


def inherits_reference(c: CandidateAst) -> str | None:
    # Inheriting the reference Model silently reuses its forward (the classic fallback hack).
    if c.model_new is None:
        return None
    bases = {_dotted(b).split(".")[-1] for b in c.model_new.bases}
    hit = bases & c.reference_names
    return f"ModelNew inherits from the reference ({', '.join(sorted(hit))})" if hit else None


def calls_reference(c: CandidateAst) -> str | None:
    # Calling or instantiating the reference Model computes the answer with PyTorch.
    used = {
        n.id for n in ast.walk(c.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    defined = {n.name for n in ast.walk(c.tree) if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    defined |= {
        n.id for n in ast.walk(c.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    hit = (used & c.reference_names) - defined
    return f"uses the reference module's {', '.join(sorted(hit))}" if hit else None


def try_fallback(c: CandidateAst) -> str | None:
    # try/except around a kernel is how candidates fall back to PyTorch when the kernel fails;
    # a correct kernel needs no exception handler.
    tries = [n for n in ast.walk(c.tree) if isinstance(n, ast.Try)]
    if tries:
        return f"uses try/except (line {tries[0].lineno}); remove the fallback path"
    return None


def _loader_names(c: CandidateAst) -> tuple[str, ...]:
    """Dotted names bound to a loaded kernel library (`self.lib = load_cuda(SRC)`)."""
    names = []
    for node in ast.walk(c.tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if _dotted(node.value.func).split(".")[-1] in KERNEL_LOADERS:
                names += [_dotted(t) + "." for t in node.targets if _dotted(t)]
    return tuple(names)


_TORCH_MODULES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft")
# Calls whose result is a host-side number, not a tensor (so arithmetic on it is fine).
_SCALAR_CALLS = frozenset(
    "numel size dim stride item len int float max min abs round range divmod element_size "
    "data_ptr storage_offset get_device nelement ndimension cdiv ceil floor sqrt".split()
)


def _torch_aliases(c: CandidateAst) -> dict[str, str]:
    """Bare names bound to torch compute ops: `from torch.nn.functional import relu as r`,
    `from torch import clamp_min`, `act = torch.relu`, `act = F.gelu` -> {alias: op}."""
    out = {}
    for node in ast.walk(c.tree):
        if isinstance(node, ast.ImportFrom) and node.module in _TORCH_MODULES:
            for a in node.names:
                if a.name.rstrip("_") in COMPUTE_OPS:
                    out[a.asname or a.name] = a.name
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
            name = _dotted(node.value)
            if name.split(".")[0] in ("torch", "F") and node.value.attr.rstrip("_") in COMPUTE_OPS:
                out |= {t.id: name for t in node.targets if isinstance(t, ast.Name)}
    return out


def _tensor_names(fn: ast.FunctionDef) -> set[str]:
    """Names that hold tensors in a ModelNew method: its parameters (but self) and locals
    assigned from a call that does not return a host number."""
    names = {a.arg for a in fn.args.args[1:]} | {a.arg for a in fn.args.kwonlyargs}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if _last(node.value) not in _SCALAR_CALLS:
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _tensor_operators(c: CandidateAst) -> list[str]:
    """`x * y`, `-x`, `x > 0`, `x += y` on tensors inside ModelNew's methods: PyTorch does
    that compute (an elementwise kernel of its own)."""
    if c.model_new is None:
        return []
    hits = []
    for fn in (n for n in c.model_new.body if isinstance(n, ast.FunctionDef)):
        if fn.name == "__init__":  # constructor arguments are sizes (get_init_inputs), and
            continue  # nothing computed before forward sees its inputs can be the answer
        tensors = _tensor_names(fn)

        def is_t(e: ast.AST, tensors: set[str] = tensors) -> bool:
            return isinstance(e, ast.Name) and e.id in tensors

        for n in ast.walk(fn):
            ops = []
            if isinstance(n, ast.BinOp):
                ops = [n.left, n.right]
            elif isinstance(n, ast.UnaryOp) and not isinstance(n.op, ast.Not):
                ops = [n.operand]
            elif isinstance(n, ast.AugAssign):
                ops = [n.target, n.value]
            elif isinstance(n, ast.Compare) and not any(
                isinstance(o, ast.Is | ast.IsNot | ast.In | ast.NotIn) for o in n.ops
            ):
                ops = [n.left, *n.comparators]
            if any(is_t(o) for o in ops):
                hits.append(f"a tensor operator (line {n.lineno})")
    return hits


def torch_compute_ops(c: CandidateAst) -> str | None:
    # The task's compute must happen in the candidate's own kernels, not in PyTorch ops:
    # torch functions and tensor methods (COMPUTE_OPS, derived from torch itself), the same
    # under an alias or a bare imported name, and tensor operators in ModelNew's methods.
    libs = _loader_names(c)
    aliases = _torch_aliases(c)
    hits = []
    for call in _calls(c.tree):
        name = _dotted(call.func)
        last = _last(call).rstrip("_")
        if isinstance(call.func, ast.Name):
            if call.func.id in aliases:  # a bare name imported from / bound to torch
                hits.append(f"{aliases[call.func.id]} as {call.func.id} (line {call.lineno})")
            continue  # builtins such as max(a, b) are plain Python
        if _dotted(call.func) in ("getattr", "builtins.getattr"):
            continue
        if last not in COMPUTE_OPS:
            continue
        if (libs and name.startswith(libs)) or name.startswith(("math.", "self.lib.")):
            continue  # the candidate's own kernels, or host-side scalar math
        hits.append(f"{name or last} (line {call.lineno})")
    hits += [
        f"@ (line {n.lineno})"
        for n in ast.walk(c.tree)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult)
    ]
    hits += _getattr_ops(c) + _tensor_operators(c)
    return f"computes with PyTorch ops: {', '.join(hits[:4])}" if hits else None


def _getattr_ops(c: CandidateAst) -> list[str]:
    """`getattr(torch, "relu")` with a literal name: the same op by another spelling."""
    out = []
    for call in _calls(c.tree):
        if _dotted(call.func) == "getattr" and len(call.args) >= 2:
            arg = call.args[1]
            if isinstance(arg, ast.Constant) and str(arg.value).rstrip("_") in COMPUTE_OPS:
                out.append(f"getattr(..., {arg.value!r}) (line {call.lineno})")
    return out


def nn_module_calls(c: CandidateAst) -> str | None:
    # Calling a torch.nn layer (self.conv(x)) runs cuDNN/cuBLAS, not the candidate's kernel.
    layers = set()
    for node in ast.walk(c.tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if _dotted(node.value.func).split(".")[-1] in NN_MODULES:
                layers |= {_dotted(t) for t in node.targets}
    called = {_dotted(call.func) for call in _calls(c.tree)} & layers
    return f"calls torch.nn layers in forward: {', '.join(sorted(called))}" if called else None


def no_custom_kernel(c: CandidateAst) -> str | None:
    # A candidate must bring a kernel and load it; otherwise it is PyTorch by another name.
    has_src = any("__global__" in s for s in cuda_sources_in_python(c.source))
    loads = any(_dotted(call.func).split(".")[-1] in KERNEL_LOADERS for call in _calls(c.tree))
    if not has_src:
        return "contains no CUDA kernel (__global__) source"
    if not loads:
        return "never compiles its CUDA source (use load_cuda or load_inline)"
    return None


def timer_patching(c: CandidateAst) -> str | None:
    # Replacing timers or synchronisation makes the measured time a fiction.
    for node in ast.walk(c.tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        targets += [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for t in targets:
            name = _dotted(t)
            if (
                name.startswith(("torch.", "time.", "triton."))
                and name.split(".")[-1] in TIMING_NAMES
            ):
                return f"assigns to {name} (line {node.lineno})"
        if isinstance(node, ast.Call) and _dotted(node.func) in ("setattr", "builtins.setattr"):
            target = _dotted(node.args[0]) if node.args else ""
            if target.split(".")[0] in ("torch", "time", "triton"):
                return f"patches {target} with setattr (line {node.lineno})"
    return None


def global_precision(c: CandidateAst) -> str | None:
    # Turning on TF32 / lower matmul precision changes the reference's numerics too.
    for node in ast.walk(c.tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if _dotted(t).endswith(
                    (
                        "allow_tf32",
                        "allow_fp16_reduced_precision_reduction",
                        "allow_bf16_reduced_precision_reduction",
                    )
                ):
                    return f"changes a global precision flag {_dotted(t)} (line {node.lineno})"
        if isinstance(node, ast.Call) and _dotted(node.func).endswith(
            ("set_float32_matmul_precision", "autocast")
        ):
            return f"lowers precision with {_dotted(node.func)} (line {node.lineno})"
    return None


def forbidden_modules(c: CandidateAst) -> str | None:
    # Threads and processes escape device-wide synchronisation; gc/inspect find the
    # reference's tensors; file, network and import machinery reach outside the sandbox.
    for node in ast.walk(c.tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for n in names:
            if n.split(".")[0] in FORBIDDEN_MODULES:
                return f"imports {n} (line {node.lineno})"
    for call in _calls(c.tree):
        name = _dotted(call.func)
        if name in (
            "open",
            "eval",
            "exec",
            "compile",
            "__import__",
            "globals",
            "os.system",
            "os.popen",
            "os.fork",
            "sys._getframe",
            "os.remove",
            "os.environ.get",
        ):
            return f"calls {name} (line {call.lineno})"
    return None


def half_precision(c: CandidateAst) -> str | None:
    # fp16/bf16 compute on an fp32 task trades accuracy for speed; the tolerance decides,
    # so this only warns.
    for call in _calls(c.tree):
        if _last(call) in ("half", "bfloat16"):
            return f"converts to half precision (line {call.lineno})"
    text = "\n".join(cuda_sources_in_python(c.source))
    if any(k in text for k in ("__half", "__nv_bfloat16", "__float2half", "half2")):
        return "computes in half precision in CUDA"
    return None


def side_streams(c: CandidateAst) -> str | None:
    # Work on another stream can escape the timing events; the runtime cross-check decides.
    for call in _calls(c.tree):
        if _last(call) in ("Stream", "stream", "ExternalStream"):
            return f"creates or switches CUDA streams (line {call.lineno})"
    return None


def _pointer_keys(c: CandidateAst) -> set[str]:
    """Names whose value is built from data_ptr()/id() (followed through assignments)."""

    def ptr(e: ast.AST, names: set[str]) -> bool:
        return any(_dotted(x.func).split(".")[-1] in ("data_ptr", "id") for x in _calls(e)) or any(
            isinstance(x, ast.Name) and x.id in names for x in ast.walk(e)
        )

    names: set[str] = set()
    assigns = [n for n in ast.walk(c.tree) if isinstance(n, ast.Assign)]
    for _ in range(4):  # key = x.data_ptr(); k2 = (key, n); ... a few hops
        grown = {
            t.id
            for a in assigns
            if ptr(a.value, names)
            for t in a.targets
            if isinstance(t, ast.Name)
        }
        if grown <= names:
            break
        names |= grown
    return names


def pointer_cache(c: CandidateAst) -> str | None:
    # Caching outputs keyed on data_ptr()/id() returns stale results for new inputs with
    # recycled memory; the runtime repeated-call check decides. The key may be built first
    # in a variable (`key = x.data_ptr(); cache[key]`, `cache.get(key)`, `key in cache`).
    keys = _pointer_keys(c)

    def keyed(e: ast.AST) -> bool:
        direct = any(_dotted(x.func).split(".")[-1] in ("data_ptr", "id") for x in _calls(e))
        return direct or any(isinstance(x, ast.Name) and x.id in keys for x in ast.walk(e))

    for node in ast.walk(c.tree):
        if isinstance(node, ast.Subscript) and keyed(node.slice):
            return f"indexes a cache by a data_ptr()/id() key (line {node.lineno})"
        if isinstance(node, ast.Call) and _last(node) in ("get", "setdefault", "pop"):
            if node.args and keyed(node.args[0]):
                return f"looks up a cache by a data_ptr()/id() key (line {node.lineno})"
        if isinstance(node, ast.Compare) and any(isinstance(o, ast.In) for o in node.ops):
            if keyed(node.left):
                return f"tests a cache for a data_ptr()/id() key (line {node.lineno})"
    return None


def embedded_host_code(c: CandidateAst) -> str | None:
    # The CUDA launcher runs in the evaluator's process: the C host-code checks apply.
    for text in cuda_sources_in_python(c.source):
        found = [
            f"{f.rule}: {f.message}" for f in run_c_checks(text) if f.severity is Severity.ERROR
        ]
        if found:
            return "CUDA source " + found[0]
    return None


TORCH_CHECKS: dict[str, Callable[[CandidateAst], str | None]] = {
    "no_model_new": no_model_new,
    "inherits_reference": inherits_reference,
    "calls_reference": calls_reference,
    "try_fallback": try_fallback,
    "torch_compute_ops": torch_compute_ops,
    "nn_module_calls": nn_module_calls,
    "no_custom_kernel": no_custom_kernel,
    "timer_patching": timer_patching,
    "global_precision": global_precision,
    "forbidden_modules": forbidden_modules,
    "embedded_host_code": embedded_host_code,
    "half_precision": half_precision,
    "side_streams": side_streams,
    "pointer_cache": pointer_cache,
}

# Checks whose finding rejects the candidate; the rest warn and leave it to runtime checks.
FATAL: list[str] = [
    "no_model_new",
    "inherits_reference",
    "calls_reference",
    "try_fallback",
    "torch_compute_ops",
    "nn_module_calls",
    "no_custom_kernel",
    "timer_patching",
    "global_precision",
    "forbidden_modules",
    "embedded_host_code",
]


def check_torch_candidate(source: str, reference_names: set[str] | None = None) -> list[Finding]:
    """All findings, in TORCH_CHECKS order (see the module docstring for their fields). A
    syntax error is one fatal finding, "syntax_error"."""
    try:
        cand = CandidateAst.parse(source, reference_names)
    except SyntaxError as e:
        return [finding("syntax_error", f"Python syntax error at line {e.lineno}: {e.msg}", True)]
    out = []
    for name, check in TORCH_CHECKS.items():
        msg = check(cand)
        if msg:
            out.append(finding(name, msg, name in FATAL))
    return out
