"""The toolchain's versions, for cache keys and result records (standard library only, so the
candidate-side loader `cudaperf.execute.native` can use it without heavy imports)."""

from __future__ import annotations

import platform
import re
import subprocess
from pathlib import Path

__all__ = ["host_cpu", "tool_version"]


_KNOWN: dict[str, str] = {}  # exe -> its version, for the process's lifetime


def tool_version(exe: str) -> str:
    """`exe --version` reduced to its version: nvcc's `V13.0.88` as "13.0.88", else the first
    line of the output; "missing" when it cannot run, "unknown" when it prints nothing.
    Answers are cached per process, except "missing": a probe that failed once (a timeout
    under load, a test that stubbed subprocess) is asked again, never remembered as absent."""
    if exe in _KNOWN:
        return _KNOWN[exe]
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "missing"
    text = out.stdout.strip()
    m = re.search(r"release ([\d.]+), V([\d.]+)", text)
    version = m.group(2) if m else (text.splitlines()[0] if text else "unknown")
    _KNOWN[exe] = version
    return version


def host_cpu() -> str:
    """This host's CPU model (`/proc/cpuinfo`'s first "model name"; elsewhere what `platform`
    says): the serial C reference runs on it, so speedups against it are this host's.
    `execute.c.baselines._cpu_model` reads the same for its cache key; it is to call this once
    the ablation no longer pins the evaluator's code (bench/ablation/PROTOCOL.md)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"
