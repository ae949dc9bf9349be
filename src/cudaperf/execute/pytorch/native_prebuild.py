"""The native form's prebuild in a confined process: `load_cuda` never runs in the evaluator.

`native.load_cuda` runs nvcc on the candidate's CUDA source and then loads the library with
ctypes, which runs the library's constructors (`__attribute__((constructor))`): host code of
the candidate. In the evaluator's own process that code would hold the secret salt and the
whole filesystem. So `prebuild` runs it in a fresh Python (`python -m
cudaperf.execute.pytorch.native_prebuild`, the sources on stdin, one JSON line back), confined with
`confine` unless `isolate` is False: /tmp, /dev/shm and the evaluator's cache dirs private
(other candidates' builds, results and baselines hidden), the native cache read-only (a cache
hit is loaded from there) and only a fresh scratch folder in it writable (a miss is built
there), the rest read-only, no network, seccomp; nvcc, started from there, inherits it all.
The parent then moves into the native cache only builds of this candidate's own sources (a
build folder whose `kernel.cu` is one of them, plain files, a key not taken), so a library
planted for another source (a dataset implementation's, say) never lands there. The host's
other folders stay readable (a Python process, whose installation may live anywhere; the C
track's compilers hide them too: `build_confine`). A process that cannot be confined still
builds, with the missing protections named in the report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cudaperf.execute.isolation import confine
from cudaperf.execute.isolation.build_confine import OFF

__all__ = ["Prebuilt", "prebuild"]


class Prebuilt:
    """What the confined prebuild reported."""

    def __init__(self, ok: bool, log: str, protections: dict, timed_out: bool = False):
        self.ok, self.log, self.protections, self.timed_out = ok, log, protections, timed_out


def policy(native_root: Path, scratch: Path, cache_dirs: list[str]) -> confine.Policy:
    """The prebuild's confinement: the native cache read-only, `scratch` writable (and its
    cwd), the rest hidden or read-only (see the module docstring)."""
    private = ("/tmp", "/dev/shm", tempfile.gettempdir(), *cache_dirs)
    return confine.Policy(
        private=tuple(dict.fromkeys(os.path.abspath(p) for p in private)),
        readable=(str(native_root),),
        writable=(str(scratch),),
        chdir=str(scratch),
    )


def prebuild(
    sources: list[str],
    arch: str,
    native_root: Path,
    cache_dirs: list[str],
    timeout: float,
    isolate: bool,
) -> Prebuilt:
    """Build every source into `native_root` (through a confined child's scratch folder);
    never loads anything in this process."""
    native_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".prebuild-", dir=native_root))
    try:
        b = _run(sources, arch, native_root, scratch, cache_dirs, timeout, isolate)
        if b.ok:
            _adopt(scratch, native_root, sources)
        return b
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _adopt(scratch: Path, root: Path, sources: list[str]) -> int:
    """Move the build folders of `sources` from `scratch` into `root`; how many moved."""
    moved = 0
    for d in scratch.iterdir():
        src, lib = d / "kernel.cu", d / "lib.so"
        plain = not d.is_symlink() and d.is_dir() and not src.is_symlink() and not lib.is_symlink()
        if d.name.startswith(".") or not plain or not (src.is_file() and lib.is_file()):
            continue
        if src.read_text(errors="replace") not in sources or (root / d.name).exists():
            continue
        try:
            os.rename(d, root / d.name)
            moved += 1
        except OSError:  # another builder's folder arrived first
            continue
    return moved


def _run(
    sources: list[str],
    arch: str,
    native_root: Path,
    scratch: Path,
    cache_dirs: list[str],
    timeout: float,
    isolate: bool,
) -> Prebuilt:
    rr, rw = os.pipe()
    pol = policy(native_root, scratch, cache_dirs) if isolate else None
    cmd = confine.command(pol, ["-m", "cudaperf.execute.pytorch.native_prebuild"], rw)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # nothing of the candidate's reaches a GPU
    spec = json.dumps(
        {"sources": sources, "arch": arch, "root": str(native_root), "scratch": str(scratch)}
    )
    report: dict = {}
    try:
        p = subprocess.run(
            cmd,
            input=spec,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=str(scratch),
            pass_fds=(rw,),
        )
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
        return Prebuilt(
            False, f"the native build process failed (exit {p.returncode})\n{tail}", report
        )


def main() -> int:
    """The child: build each source with `load_cuda`, print one JSON line {ok, log}."""
    from cudaperf.execute.native import NativeBuildError, load_cuda

    spec = json.loads(sys.stdin.read())
    logs = []
    for src in spec["sources"]:
        try:
            try:  # a hit loads from the cache; a miss cannot build there (read-only) ...
                load_cuda(src, arch=spec["arch"], cache_dir=spec["root"])
            except OSError:  # ... and is built in the scratch folder, for the parent to adopt
                load_cuda(src, arch=spec["arch"], cache_dir=spec["scratch"])
        except NativeBuildError as e:
            print(json.dumps({"ok": False, "log": f"{e}\n{e.log}"}))
            return 0
        logs.append(f"built {len(src)} characters of CUDA for {spec['arch']}")
    print(json.dumps({"ok": True, "log": "\n".join(logs)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
