"""Static checks on candidate source: obviously forbidden host calls and harness tampering.

Each check is a small pure function `source -> message | None` with a comment saying why it
exists. `FATAL` lists the checks whose finding rejects the candidate before it is compiled;
the others only add a note to the feedback. These checks are cheap pattern matches on the
source with comments removed: they stop the obvious, not a determined attacker (the worker's
resource limits and the dynamic checks are the next lines of defence).

`run_checks` returns each finding as a `cudaperf.execute.types.Finding` (the analyzer's type
too): `rule` is the check id, `severity` is error for a check in `FATAL` and warning for the
others, `line` is the source line the message names ("(line N)" or "at line N") or 0 when it
names none, and `message` is the check's message.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from cudaperf.execute.types import Finding, Severity

__all__ = ["CHECKS", "FATAL", "finding", "run_checks", "strip_comments"]


def strip_comments(src: str) -> str:
    """Remove // and /* */ comments (string literals are kept; good enough for these checks)."""
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def _calls(src: str, names: list[str]) -> list[str]:
    pat = r"\b(" + "|".join(names) + r")\s*\("
    return sorted(set(re.findall(pat, src)))


def process_calls(src: str) -> str | None:
    # Spawning processes escapes the sandbox's accounting and can fork-bomb the worker.
    found = _calls(
        src, ["fork", "vfork", "clone", "system", "popen", "posix_spawnp?", r"exec[lv]p?e?"]
    )
    return f"starts processes ({', '.join(found)})" if found else None


def file_io(src: str) -> str | None:
    # A kernel has no reason to touch the file system; writes could escape the temp dir.
    found = _calls(
        src,
        ["fopen", "freopen", "open", "creat", "remove", "unlink", "rename", "mkdir", "truncate"],
    )
    found += ["std::ofstream"] if re.search(r"\b(std::)?[io]?fstream\b", src) else []
    return f"uses the file system ({', '.join(found)})" if found else None


def dynamic_loading(src: str) -> str | None:
    # dlopen/dlsym could reach the reference implementation or interpose the harness.
    found = _calls(src, ["dlopen", "dlsym", "dlmopen"])
    return f"loads code dynamically ({', '.join(found)})" if found else None


def python_api(src: str) -> str | None:
    # Host code loaded into a Python process can call the interpreter's C API (PyRun_*,
    # PyImport_*, PyGILState_*) and run Python there: in the evaluator that could look for
    # the reference outputs. Candidates run in processes that hold no answer (`c_proc`,
    # `torch_trusted`); this refuses the obvious attempt before it is built.
    found = sorted(set(re.findall(r"\b(_?Py[A-Z_][A-Za-z0-9_]*)\s*\(", src)))
    return f"calls the Python interpreter's C API ({', '.join(found[:3])})" if found else None


def signals(src: str) -> str | None:
    # A kernel has no one to signal. A candidate that signals processes could stop, continue or
    # kill the evaluator's other workers (and their candidates) on the host, such as those
    # sharing its GPU (`EvalConfig.workers_per_gpu`).
    found = _calls(src, ["kill", "killpg", "tgkill", "tkill", "sigqueue", "pidfd_send_signal"])
    return f"signals processes ({', '.join(found)})" if found else None


def network(src: str) -> str | None:
    # Nothing in an evaluation needs the network; it could leak or fetch answers.
    found = _calls(src, ["socket", "connect", "gethostbyname", "getaddrinfo"])
    return f"uses the network ({', '.join(found)})" if found else None


def device_reset(src: str) -> str | None:
    # cudaDeviceReset destroys the harness's allocations and context mid-measurement.
    return "calls cudaDeviceReset" if _calls(src, ["cudaDeviceReset"]) else None


def process_exit(src: str) -> str | None:
    # exit/abort kill the shared worker instead of reporting an error.
    found = _calls(src, ["exit", "_exit", "_Exit", "abort", "quick_exit"])
    return f"ends the process ({', '.join(found)})" if found else None


@functools.lru_cache(maxsize=1)
def runtime_api_names() -> frozenset[str] | None:
    """Every `cuda[A-Z]...` name the CUDA runtime headers declare or define as a macro, read
    from the toolkit that nvcc belongs to; None when no toolkit headers are found."""
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", "")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    roots.append("/usr/local/cuda")
    for root in filter(None, roots):
        inc = Path(root) / "include"
        heads = [inc / "cuda_runtime_api.h", inc / "cuda_runtime.h", inc / "driver_types.h"]
        if heads[0].is_file():
            text = "\n".join(h.read_text(errors="replace") for h in heads if h.is_file())
            return frozenset(re.findall(r"\b(cuda[A-Z]\w*)\b", text))
    return None


def _is_runtime_name(name: str) -> bool:
    names = runtime_api_names()
    return name in names if names is not None else True  # no headers: every cudaX is suspect


def harness_tampering(src: str) -> str | None:
    # Redefining CUDA runtime functions (timers, sync) or naming harness symbols fakes timing.
    # Only names the runtime headers declare count: a kernel of the candidate's own named
    # `cudaFoo` (natural when translating `cpuFoo`) is not tampering.
    if re.search(r"__cudaperf|cudaperf_harness", src):
        return "refers to the harness's internal symbols"
    for m in re.finditer(r"#\s*(?:define|undef)\s+(cuda\w*)", src):
        if _is_runtime_name(m.group(1)):
            return "redefines a CUDA runtime name with the preprocessor"
    for m in re.finditer(r"\b(cuda[A-Z]\w*)\s*\([^;{)]*\)\s*\{", src):
        if _is_runtime_name(m.group(1)):
            return f"defines its own {m.group(1)}()"
    return None


def proc_files(src: str) -> str | None:
    # /proc/self/mem and friends let a candidate read the harness's memory (the secret seed).
    return "reads /proc or /dev" if re.search(r"\"/(proc|dev)/", src) else None


def environment(src: str) -> str | None:
    # Reading the environment is a side channel into the harness's configuration.
    return "reads environment variables" if _calls(src, ["getenv", "secure_getenv"]) else None


def host_fallback(src: str) -> str | None:
    # Copying device data to the host inside the candidate usually means computing on the CPU.
    if "cudaMemcpyDeviceToHost" in src or "cudaMemcpyDefault" in src:
        return "copies device data to the host (computing on the CPU is not a CUDA solution)"
    return None


def side_stream(src: str) -> str | None:
    # Non-blocking streams can escape the timing events; the wall-clock cross-check decides.
    if "cudaStreamNonBlocking" in src:
        return "launches on a non-blocking stream (timed with a device-wide synchronisation)"
    return None


_INCLUDE = re.compile(r'#\s*(?:include|embed|include_next)\s*["<]\s*([^">]*)[">]')


def include_outside(src: str) -> str | None:
    # `#include "/any/file"` quotes lines of any readable file (the evaluator's results, task
    # files) into the compile log the model reads, and `.incbin` embeds a file into the library
    # to print at run time. A first line only: an include spelled through a macro passes it;
    # what stops that is the compiler's confinement (`build_confine`, with isolate_files).
    for m in _INCLUDE.finditer(src):
        path = m.group(1).strip()
        if path.startswith(("/", "~")) or ".." in path.split("/"):
            return f"includes a file outside the candidate ({path})"
    if re.search(r"\.incbin\b", src):
        return "embeds a file with .incbin"
    return None


CHECKS: dict[str, Callable[[str], str | None]] = {
    "process_calls": process_calls,
    "file_io": file_io,
    "dynamic_loading": dynamic_loading,
    "python_api": python_api,
    "network": network,
    "signals": signals,
    "device_reset": device_reset,
    "process_exit": process_exit,
    "harness_tampering": harness_tampering,
    "proc_files": proc_files,
    "environment": environment,
    "host_fallback": host_fallback,
    "side_stream": side_stream,
    "include_outside": include_outside,
}

# Checks whose finding rejects the candidate without compiling it.
FATAL: list[str] = [
    "process_calls",
    "file_io",
    "dynamic_loading",
    "python_api",
    "network",
    "signals",
    "device_reset",
    "process_exit",
    "harness_tampering",
    "proc_files",
    "environment",
    "include_outside",
]


_LINE = re.compile(r"\(line (\d+)\)|\bat line (\d+)\b")


def finding(check_id: str, message: str, fatal: bool) -> Finding:
    """The finding of a static check: an error when `fatal`, else a warning, on the first line
    `message` names ("(line N)" or "at line N"; 0 when it names none)."""
    m = _LINE.search(message)
    line = int(m.group(1) or m.group(2)) if m else 0
    severity = Severity.ERROR if fatal else Severity.WARNING
    return Finding(rule=check_id, severity=severity, line=line, message=message)


def run_checks(source: str) -> list[Finding]:
    """All findings on `source`, in CHECKS order (see the module docstring for their fields)."""
    src = strip_comments(source)
    out: list[Finding] = []
    for name, check in CHECKS.items():
        msg = check(src)
        if msg:
            out.append(finding(name, msg, name in FATAL))
    return out
