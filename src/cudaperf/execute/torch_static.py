"""Static anti-hacking checks for PyTorch→CUDA candidates (a Python file defining ModelNew).

Each check is a small pure function `CandidateAst -> message | None` with a comment saying
why it exists. `FATAL` lists the checks that reject the candidate before it runs; the others
add a warning to the feedback (their runtime twin decides). The checks read the Python AST,
so they see through formatting and aliases (`import torch.nn.functional as F`), but not
through `getattr(torch, "mat" + "mul")`: the runtime checks (fresh inputs, mutation checks,
profiler cross-check, roofline) are the next line of defence.

The CUDA sources embedded in the candidate also go through the C→CUDA host-code checks
(`cudaperf.execute.checks`) — a native launcher runs in the evaluator's process too.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from cudaperf.execute.checks import FATAL as C_FATAL
from cudaperf.execute.checks import run_checks as run_c_checks
from cudaperf.tasks.candidate import cuda_sources_in_python

__all__ = ["FATAL", "TORCH_CHECKS", "CandidateAst", "check_torch_candidate"]

# Torch functions / tensor methods that compute: calling them in the candidate does the
# task's work in PyTorch instead of in a custom kernel. Allocation, views, reshapes,
# dtype/device queries and copies into preallocated outputs are allowed.
COMPUTE_OPS = frozenset(
    """matmul mm bmm addmm addmv addbmm baddbmm einsum tensordot outer dot mv kron linear
    bilinear conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d unfold fold
    softmax log_softmax softmin layer_norm batch_norm group_norm instance_norm rms_norm
    normalize relu relu_ relu6 leaky_relu gelu silu mish elu selu celu sigmoid hardsigmoid
    hardswish hardtanh softplus softsign tanh tanhshrink logsigmoid glu exp exp2 expm1 log
    log2 log10 log1p sqrt rsqrt sin cos tan erf erfc reciprocal abs neg pow square sum mean
    prod max min amax amin argmax argmin var std norm logsumexp cumsum cumprod cummax cummin
    sort argsort topk kthvalue median mode gather scatter scatter_add scatter_reduce
    index_select index_add take masked_select where clamp clip lerp addcmul addcdiv mul add
    sub div true_divide floor_divide remainder fmod maximum minimum dropout max_pool1d
    max_pool2d max_pool3d avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d
    adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool2d interpolate
    scaled_dot_product_attention cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss
    huber_loss kl_div binary_cross_entropy cosine_similarity pairwise_distance cdist
    triplet_margin_loss hinge_embedding_loss margin_ranking_loss diag triu tril trace
    histc bincount cross frobenius_norm nan_to_num""".split()
)

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


def torch_compute_ops(c: CandidateAst) -> str | None:
    # The task's compute must happen in the candidate's own kernels, not in PyTorch ops.
    libs = _loader_names(c)
    hits = []
    for call in _calls(c.tree):
        name = _dotted(call.func)
        last = _last(call).rstrip("_")
        if last not in COMPUTE_OPS or not isinstance(call.func, ast.Attribute):
            continue  # builtins such as max(a, b) are plain Python
        if (libs and name.startswith(libs)) or name.startswith(("math.", "self.lib.")):
            continue  # the candidate's own kernels, or host-side scalar math
        hits.append(f"{name or last} (line {call.lineno})")
    hits += [
        f"@ (line {n.lineno})"
        for n in ast.walk(c.tree)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult)
    ]
    return f"computes with PyTorch ops: {', '.join(hits[:4])}" if hits else None


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


def pointer_cache(c: CandidateAst) -> str | None:
    # Caching outputs keyed on data_ptr()/id() returns stale results for new inputs with
    # recycled memory; the runtime repeated-call check decides.
    for node in ast.walk(c.tree):
        if isinstance(node, ast.Subscript):
            key = node.slice
            for call in _calls(key):
                if _dotted(call.func).split(".")[-1] in ("data_ptr", "id"):
                    return f"indexes a cache by {_dotted(call.func)}() (line {node.lineno})"
    return None


def embedded_host_code(c: CandidateAst) -> str | None:
    # The CUDA launcher runs in the evaluator's process: the C host-code checks apply.
    for text in cuda_sources_in_python(c.source):
        found = [f"{cid}: {msg}" for cid, msg in run_c_checks(text) if cid in C_FATAL]
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


def check_torch_candidate(
    source: str, reference_names: set[str] | None = None
) -> list[tuple[str, str, bool]]:
    """All findings as (check id, message, fatal). A syntax error is one fatal finding."""
    try:
        cand = CandidateAst.parse(source, reference_names)
    except SyntaxError as e:
        return [("syntax_error", f"Python syntax error at line {e.lineno}: {e.msg}", True)]
    out = []
    for name, check in TORCH_CHECKS.items():
        msg = check(cand)
        if msg:
            out.append((name, msg, name in FATAL))
    return out
