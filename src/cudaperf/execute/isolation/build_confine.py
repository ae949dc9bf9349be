"""Compilers (nvcc, gcc) run under `confine`, so a candidate's source cannot read host files.

A candidate's source reaches the compiler, and the compiler reads whatever the source names:
`#include HOSTFILE` with `#define HOSTFILE "/path"` passes `checks.include_outside` (a
pattern check on include lines) and quotes the file's lines into the compile log the model
reads; `.incbin` built the same way embeds it into the library. So the compiler runs
confined (`confine.command(..., ["--exec", *argv])`):

- its build folder is the one writable host path; /tmp and /dev/shm are private and empty;
- the evaluator's cache dirs (other candidates' builds, results, baselines) are hidden;
- every top-level folder of / except the system's own (`SYSTEM`: /usr, /lib*, /bin, /sbin,
  /etc, /proc, /dev, /sys) is hidden too: the evaluator's checkout, data and task files
  (held-out configs), home folders, /var, /opt, /srv, /mnt. The toolkit and the compilers stay
  readable wherever they are installed (their folders are bound back read-only);
- everything left is read-only, there is no network, and the seccomp filter applies.

When namespaces are refused the compiler still runs, with what could be applied, exactly as
the worker degrades, and the missing protections are named in the returned report. With
`EvalConfig.isolate_files` off it runs unconfined and the report says so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from cudaperf.execute.isolation import confine

__all__ = ["OFF", "SYSTEM", "build_policy", "run_compiler"]

SYSTEM = frozenset(
    {"usr", "lib", "lib32", "lib64", "libx32", "bin", "sbin", "etc", "proc", "dev", "sys"}
)
OFF = {"active": [], "missing": {"all": "isolate_files is off"}}


def _tool_roots(tools: Iterable[str]) -> list[str]:
    """The installation folder of each compiler (two levels above its real executable: the
    CUDA toolkit for nvcc), and CUDA_HOME, when not under a system folder."""
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", "")]
    for t in tools:
        exe = shutil.which(t)
        if exe:
            roots += [str(Path(exe).parent.parent), str(Path(exe).resolve().parent.parent)]
    return [r for r in dict.fromkeys(roots) if r and os.path.isdir(r)]


def build_policy(workdir: str, cache_dirs: Iterable[str], tools: Iterable[str]) -> confine.Policy:
    """The compiler's confinement (see the module docstring): `workdir` writable and its cwd;
    `cache_dirs` and every non-system top-level folder hidden; the `tools`' folders readable."""
    tops = [
        f"/{n}"
        for n in sorted(os.listdir("/"))
        if n not in SYSTEM and os.path.isdir(f"/{n}") and not os.path.islink(f"/{n}")
    ]
    private = ["/tmp", "/dev/shm", tempfile.gettempdir(), *map(str, cache_dirs), *tops]
    readable = [r for r in _tool_roots(tools) if r.split("/")[1] not in SYSTEM]
    return confine.Policy(
        private=tuple(dict.fromkeys(os.path.abspath(p) for p in private)),
        writable=(os.path.abspath(workdir),),
        readable=tuple(readable),
        chdir=os.path.abspath(workdir),
        python=False,
    )


def run_compiler(
    cmd: list[str], workdir: str, timeout: float, isolate: bool, cache_dirs: Iterable[str]
) -> tuple[subprocess.CompletedProcess, dict]:
    """Run `cmd` in `workdir` (its own session), confined unless `isolate` is False; the
    completed process and the `confine.Protections` it ran under (as a dict). Raises
    FileNotFoundError when the compiler is not on PATH, subprocess.TimeoutExpired (the
    process group killed) past `timeout`."""
    if shutil.which(cmd[0]) is None:
        raise FileNotFoundError(cmd[0])
    if not isolate:
        p = subprocess.run(
            cmd,
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
        )
        return p, dict(OFF)
    rr, rw = os.pipe()
    policy = build_policy(workdir, cache_dirs, [cmd[0]])
    argv = confine.command(policy, ["--exec", *cmd], rw)
    try:
        p = subprocess.run(
            argv,
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
            pass_fds=(rw,),
        )
    finally:
        os.close(rw)
        with os.fdopen(rr) as f:
            line = f.read().strip()
    report = json.loads(line) if line else {}
    confine.log_once("compiler", report)
    return p, report
