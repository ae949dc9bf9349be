"""The native form's prebuild in a confined process: `load_cuda` never runs in the evaluator.

`native.load_cuda` runs nvcc on the candidate's CUDA source and then loads the library with
ctypes, which runs the library's constructors (`__attribute__((constructor))`): host code of
the candidate. In the evaluator's own process that code would hold the secret salt and the
whole filesystem. So `prebuild` runs it in a fresh Python (`python -m
cudaperf.execute.native_prebuild`, the sources on stdin, one JSON line back), confined with
`confine` unless `isolate` is False: /tmp, /dev/shm and the evaluator's cache dirs private
(other candidates' builds, results and baselines hidden), only the native cache writable, the
rest read-only, no network, seccomp; nvcc, started from there, inherits all of it. The host's
other folders stay readable (this is a Python process, whose installation may live anywhere;
the compilers of the C track hide them too: `build_confine`). A process that cannot be
confined still builds, with the missing protections named in the report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from cudaperf.execute import confine
from cudaperf.execute.build_confine import OFF

__all__ = ["Prebuilt", "prebuild"]


class Prebuilt:
    """What the confined prebuild reported."""

    def __init__(self, ok: bool, log: str, protections: dict, timed_out: bool = False):
        self.ok, self.log, self.protections, self.timed_out = ok, log, protections, timed_out


def policy(native_root: Path, cache_dirs: list[str]) -> confine.Policy:
    """The prebuild's confinement: the native cache writable (and its cwd), the rest hidden or
    read-only (see the module docstring)."""
    private = ("/tmp", "/dev/shm", tempfile.gettempdir(), *cache_dirs)
    return confine.Policy(
        private=tuple(dict.fromkeys(os.path.abspath(p) for p in private)),
        writable=(str(native_root),), chdir=str(native_root),
    )  # fmt: skip


def prebuild(
    sources: list[str], arch: str, native_root: Path, cache_dirs: list[str], timeout: float,
    isolate: bool,
) -> Prebuilt:  # fmt: skip
    """Build every source into `native_root` in a confined child; never loads anything here."""
    native_root.mkdir(parents=True, exist_ok=True)
    rr, rw = os.pipe()
    pol = policy(native_root, cache_dirs) if isolate else None
    cmd = confine.command(pol, ["-m", "cudaperf.execute.native_prebuild"], rw)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # nothing of the candidate's reaches a GPU
    spec = json.dumps({"sources": sources, "arch": arch, "root": str(native_root)})
    report: dict = {}
    try:
        p = subprocess.run(cmd, input=spec, capture_output=True, text=True, timeout=timeout,
                           env=env, cwd=str(native_root), pass_fds=(rw,))  # fmt: skip
    except subprocess.TimeoutExpired:
        return Prebuilt(False, f"the native build took longer than {timeout:.0f} s", {}, True)
    finally:
        os.close(rw)
        with os.fdopen(rr) as f:
            line = f.read().strip()
        report = json.loads(line) if line and isolate else dict(OFF)
        if isolate and report:
            confine.log_once("native build", report)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    try:
        got = json.loads(last)
        return Prebuilt(bool(got["ok"]), str(got["log"]), report)
    except (ValueError, KeyError, TypeError):
        tail = (p.stdout + p.stderr).strip()[-4000:]
        return Prebuilt(False, f"the native build process failed (exit {p.returncode})\n{tail}",
                        report)  # fmt: skip


def main() -> int:
    """The child: build each source with `load_cuda`, print one JSON line {ok, log}."""
    from cudaperf.execute.native import NativeBuildError, load_cuda

    spec = json.loads(sys.stdin.read())
    logs = []
    for src in spec["sources"]:
        try:
            load_cuda(src, arch=spec["arch"], cache_dir=spec["root"])
        except NativeBuildError as e:
            print(json.dumps({"ok": False, "log": f"{e}\n{e.log}"}))
            return 0
        logs.append(f"built {len(src)} characters of CUDA for {spec['arch']}")
    print(json.dumps({"ok": True, "log": "\n".join(logs)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
