"""CUDA-L1 importer: its optimized KernelBench solutions → implementations of KernelBench tasks.

CUDA-L1 (deepreinforce-ai/CUDA-L1) releases, per GPU, a JSON-lines file
(`optimized_cuda_code/<gpu>.json`) whose rows carry `level_id`, `task_id`, the KernelBench
`ref_code` and the RL-generated `custom_code` (a `ModelNew` module, our PyTorch→CUDA candidate
shape). This importer attaches each `custom_code` that contains a real CUDA kernel to the
matching task of a KernelBench task file made by `cudaperf tasks import kernelbench`: the task
`kernelbench/level{level_id}/{task_id}_<Name>` (matched by level and problem number).

A real kernel means: a `__global__` function in a CUDA source string of the module, launched
with `<<<...>>>` from that source (by name, template arguments allowed), and the source
compiled by torch's extension loader (`load_inline` / `cpp_extension.load`) or cudaperf's
`load_cuda`. Many CUDA-L1 entries only rearrange PyTorch calls, or "call" a `__global__`
through `load_inline(functions=[...])` inside a try/except that falls back to PyTorch (which
never runs the kernel); those are skipped with their reason, as are empty entries and entries
whose task is not in the KernelBench file.

KernelBench reworked some problems after CUDA-L1's release (mid 2025: e.g. level1/50 became
AlexNet's first conv, level1/97 cosine-similarity loss became attention, level1/38 divides by a
mean instead of a sum) under the same level and number. So an entry whose `ref_code` defines a
`Model` is attached only when that problem is the task's: the same classes and functions
(`Model`, `get_init_inputs`, helpers) up to comments, docstrings and `device=` arguments
(`torch.tensor(0.0, device=x.device)` computes what `torch.tensor(0.0)` does). Size
constants and `get_inputs` (sizes, `randn` vs `rand`) may differ: the evaluator runs every
config anyway.

PATH is one `<gpu>.json` file or a folder of them; the implementation id is
`cudal1-<gpu>` (the file's stem). A file is either JSON lines of rows (the release's
`optimized_cuda_code/<gpu>.json`) or one JSON object `{"<level>": [rows without level_id]}`
(its `optimized_cuda_code/codes/<gpu>.json`). Guaranteed: every entry is attached or skipped
with a reason; the report's tasks are the KernelBench tasks that received at least one
implementation. Not guaranteed: that the code is correct or free of reward hacks (CUDA-L1's
README warns of both); the evaluator decides.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from cudaperf.tasks.candidate import cuda_sources_in_python
from cudaperf.tasks.importers.common import ImportReport
from cudaperf.tasks.io import load_tasks
from cudaperf.tasks.model import Implementation, Task

__all__ = ["import_cudal1", "kernel_reason", "problem_reason"]

LICENSE = "MIT (CUDA-L1, deepreinforce-ai/CUDA-L1)"
_GLOBAL = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?void\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\("
)
_COMPILERS = ("load_inline", "cpp_extension.load", "load(", "load_cuda")
_KB_ID = re.compile(r"^kernelbench/level(\d+)/(\d+)_")


def kernel_reason(code: str) -> str:
    """'' when `code` compiles and launches a `__global__` kernel, else why not."""
    sources = cuda_sources_in_python(code)
    kernels = {k for s in sources for k in _GLOBAL.findall(s)}
    if not kernels:
        return "no __global__ kernel in custom_code"
    launched = any(
        re.search(rf"\b{re.escape(k)}\s*(?:<[^<>;]*>)?\s*<<<", s) for k in kernels for s in sources
    )
    if not launched:
        return "kernel never launched with <<<...>>> (called through a binding or not at all)"
    if not any(c in code for c in _COMPILERS):
        return "CUDA source never compiled (no load_inline / cpp_extension.load / load_cuda)"
    return ""


def _definitions(src: str) -> list[str] | None:
    """The problem a KernelBench module defines: its top-level classes and functions except
    `get_inputs`, without docstrings and `device=` arguments (comments never reach the AST);
    None if not Python."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return None
    defs = [
        n
        for n in tree.body
        if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and n.name != "get_inputs"
    ]
    for node in defs:
        for n in ast.walk(node):
            body = getattr(n, "body", None)
            if (
                isinstance(body, list)
                and body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                n.body = body[1:] or [ast.Pass()]
            if isinstance(n, ast.Call):  # where a tensor lives is not what it computes
                n.keywords = [k for k in n.keywords if k.arg != "device"]
    return [ast.dump(n) for n in defs]


def problem_reason(ref_code: object, task_source: str) -> str:
    """'' unless `ref_code` (a CUDA-L1 row's KernelBench problem) defines a `Model` that is
    not the one of the task's source; then why the entry cannot be attached."""
    if not isinstance(ref_code, str):
        return ""
    ref = _definitions(ref_code)
    if ref is None or not any(d.startswith("ClassDef(name='Model'") for d in ref):
        return ""  # nothing to compare with
    if ref != _definitions(task_source):
        return (
            "ref_code is not this KernelBench task's problem (KernelBench changed it since "
            "CUDA-L1's release)"
        )
    return ""


_BAD_JSON = object()  # a JSON line that does not parse


def _rows(f: Path) -> list[tuple[str, object]]:
    """(item, row) of a release file: JSON lines, or one `{"<level>": [rows]}` object whose
    rows get `level_id` from their key. A line that is not JSON is `_BAD_JSON`."""
    text = f.read_text(encoding="utf-8")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and whole and all(str(k).isdigit() for k in whole):
        out: list[tuple[str, object]] = []
        for level, rows in whole.items():
            for i, row in enumerate(rows if isinstance(rows, list) else [rows]):
                if isinstance(row, dict) and "level_id" not in row:
                    row = {"level_id": int(level), **row}
                out.append((f"{f.name}:{level}[{i}]", row))
        return out
    if isinstance(whole, list):
        return [(f"{f.name}[{i}]", row) for i, row in enumerate(whole)]
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((f"{f.name}:{lineno}", json.loads(line)))
        except json.JSONDecodeError:
            out.append((f"{f.name}:{lineno}", _BAD_JSON))
    return out


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(p for p in path.glob("*.json") if p.is_file())
        if found:
            return found
    raise FileNotFoundError(
        f"{path}: no CUDA-L1 release file found; pass one optimized_cuda_code/<gpu>.json "
        "file or the folder holding them"
    )


def _kernelbench_index(kernelbench: str | Path | None) -> dict[tuple[int, int], Task]:
    if kernelbench is None:
        raise ValueError(
            "cudal1 attaches implementations to KernelBench tasks: pass the task file from "
            "`cudaperf tasks import kernelbench` with --kernelbench"
        )
    index = {}
    for t in load_tasks(kernelbench):
        m = _KB_ID.match(t.id)
        if m:
            index[(int(m.group(1)), int(m.group(2)))] = t
    if not index:
        raise ValueError(f"{kernelbench}: no kernelbench/levelN/<id>_<Name> tasks in this file")
    return index


def _entry_reason(row: object) -> str:
    if not isinstance(row, dict):
        return "not a JSON object"
    missing = [k for k in ("level_id", "task_id", "custom_code") if k not in row]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    if not isinstance(row["level_id"], int) or not isinstance(row["task_id"], int):
        return "level_id / task_id are not integers"
    if not row["custom_code"]:
        return "custom_code is empty (CUDA-L1 found nothing faster than the reference)"
    return kernel_reason(row["custom_code"])


def import_cudal1(
    path: str | Path, kernelbench: str | Path | None = None, **_: object
) -> ImportReport:
    """Attach CUDA-L1's kernels in `path` to the tasks of the KernelBench file `kernelbench`."""
    index = _kernelbench_index(kernelbench)
    report = ImportReport("cudal1")
    attached: dict[tuple[int, int], list[Implementation]] = {}
    for f in _files(Path(path)):
        gpu = f.stem
        for item, row in _rows(f):
            if row is _BAD_JSON:
                report.skip(item, "not valid JSON")
                continue
            reason = _entry_reason(row)
            key = (row["level_id"], row["task_id"]) if not reason else (0, 0)
            if not reason and key not in index:
                reason = "no matching KernelBench task in the --kernelbench file"
            if not reason:
                reason = problem_reason(row.get("ref_code"), index[key].source)
            if reason:
                report.skip(item, reason)
                continue
            impls = attached.setdefault(key, list(index[key].implementations))
            impl_id = f"cudal1-{gpu}"
            if any(i.id == impl_id for i in impls):
                report.skip(item, "duplicate entry for this task and GPU")
                continue
            impls.append(
                Implementation(
                    id=impl_id,
                    code=row["custom_code"],
                    provenance=f"CUDA-L1 {f.name} level {key[0]} task {key[1]} ({LICENSE})",
                )
            )
    for key, impls in attached.items():
        task = index[key]
        prov = {**task.provenance, "implementations": f"CUDA-L1 ({LICENSE})"}
        data = task.model_dump(mode="json")
        data.update(implementations=[i.model_dump(mode="json") for i in impls], provenance=prov)
        report.tasks.append(Task.model_validate(data))
    return report
