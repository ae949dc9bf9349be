"""Reference check for imported C→CUDA tasks: every C reference on every config, sanitized.

Each task's C reference is compiled once with gcc (`-O1 -g -fsanitize=address,undefined
-fno-sanitize-recover=all`) together with a small driver (`driver_source`, a separate
translation unit) that reads one config's inputs from a file into heap buffers of exactly the
task's array lengths, calls the entry function once and prints the call's CPU time (not wall
time: other work on the machine does not make a config look slow). Inputs are `make_inputs`
(set 0, a fixed salt), out arrays zeroed (the check looks for memory errors and undefined
behaviour, not values); a config that runs cleanly is run once more with its integer arrays
at the ends of their value ranges (`extreme_inputs`: a possible draw that a random one rarely
is, e.g. the largest index).

`check_tasks` runs every config of every task (tasks spread over processes) and returns, per
task, the configs that failed and why (`Problem`): an out-of-bounds access (`overrun`),
undefined behaviour that UBSan reports (`ub`, e.g. signed integer overflow), a crash, no
result within `limit` seconds under the sanitizers, or a call over `slow` seconds when the
reference is built `-O2` as the evaluator builds it (`slow`; the -O2 build is made only for
configs whose sanitized call took longer than `slow`). Compiled references are cached in a
temp folder keyed by the source, driver and flags. No GPU is used; the CUDA side is unchecked.

Guaranteed: a config not reported ran to completion cleanly under both sanitizers, within the
limits, on set 0 and on its extremes. Not guaranteed: clean on other input sets.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cudaperf.procpool import pool_map
from cudaperf.tasks.inputs import make_inputs
from cudaperf.tasks.model import InputConfig, Role, Task

__all__ = [
    "SAN_FLAGS",
    "Problem",
    "check_task",
    "check_tasks",
    "driver_source",
    "sanitizer_available",
    "write_inputs",
]

SALT = 20261130
SAN_FLAGS = ("-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all")
FAST_FLAGS = ("-O2",)
LIMIT_S = 5.0  # per config, the sanitized run
SLOW_S = 0.8  # CPU seconds per call at -O2 (import_check reports over 1 s: a margin)
_ENV = {
    **os.environ,
    "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1",
    "UBSAN_OPTIONS": "print_stacktrace=0",
}
_DRIVER_HEAD = """#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static void *take(FILE *f, size_t elem) {
    long long n = 0;
    if (fread(&n, 8, 1, f) != 1) { fprintf(stderr, "short input file\\n"); exit(3); }
    void *p = malloc(n * elem ? n * elem : 1);
    if (!p) { fprintf(stderr, "out of memory\\n"); exit(4); }
    if (n && fread(p, elem, n, f) != (size_t)n) { fprintf(stderr, "short input file\\n"); exit(3); }
    return p;
}
"""


@dataclass(frozen=True)
class Problem:
    """Why a config failed the check: `kind` is overrun, ub, crash, slow, inputs or build."""

    kind: str
    detail: str  # a short category (e.g. "signed integer overflow"), or the first error line


def driver_source(task: Task) -> str:
    """A C main() that reads the inputs file and calls the task's entry function once."""
    decls = ", ".join(
        f"{p.ctype}{'*' if p.role is not Role.SCALAR else ''} {p.name}" for p in task.signature
    )
    lines = [_DRIVER_HEAD, f"void {task.entry}({decls});", "int main(int argc, char **argv) {"]
    lines.append('    FILE *f = fopen(argv[1], "rb");')
    lines.append('    if (!f) { fprintf(stderr, "cannot open inputs\\n"); return 3; }')
    for i, p in enumerate(task.signature):
        star = "*" if p.role is not Role.SCALAR else ""
        get = f"take(f, sizeof({p.ctype}))"
        val = f"({p.ctype}*){get}" if star else f"*({p.ctype}*){get}"
        lines.append(f"    {p.ctype}{star} a{i} = {val};")
    args = ", ".join(f"a{i}" for i in range(len(task.signature)))
    lines += [
        "    struct timespec t0, t1;",
        "    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);",
        f"    {task.entry}({args});",
        "    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);",
        '    printf("%.6f\\n", (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));',
        "    return 0;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def extreme_inputs(task: Task, cfg: InputConfig, arrays: list[np.ndarray]) -> bool:
    """Put the extremes of each integer randint input array's range into it (in place):
    the largest value at even positions, the smallest at odd ones. Each element is drawn
    independently from that range, so this is a possible draw, and one that reaches the
    ends an index computed from the values can reach (a histogram's bin `a[i] / 100`, a
    gather's `t[idx[i]]`). False when no array has such a range (nothing changed)."""
    changed = False
    for p, a in zip(task.signature, arrays, strict=True):
        d = cfg.param_distributions.get(p.name, cfg.distribution)
        if p.role in (Role.IN, Role.INOUT) and d.kind == "randint" and a.dtype.kind in "iu":
            if int(d.high) - 1 > int(d.low) and a.size:
                a[0::2], a[1::2] = int(d.high) - 1, int(d.low)
                changed = True
    return changed


def write_inputs(task: Task, cfg: InputConfig, path: Path, extremes: bool = False) -> bool:
    """Config `cfg`'s inputs (set 0), out arrays zeroed, as the driver reads them; with
    `extremes`, integer arrays at the ends of their ranges (`extreme_inputs`). False when
    `extremes` changed nothing (no file written)."""
    arrays = make_inputs(task, cfg, 0, SALT)
    if extremes and not extreme_inputs(task, cfg, arrays):
        return False
    with path.open("wb") as f:
        for p, a in zip(task.signature, arrays, strict=True):
            a = np.zeros_like(a) if p.role is Role.OUT else a
            f.write(np.array([a.size], dtype=np.int64).tobytes())
            f.write(np.ascontiguousarray(a).tobytes())
    return True


def cache_dir() -> Path:
    d = Path(tempfile.gettempdir()) / f"cudaperf-refcheck-{os.getuid()}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def build(task: Task, flags: tuple[str, ...], cache: Path) -> tuple[Path | None, str]:
    """(the executable, '') or (None, the first error line); cached by source and flags."""
    driver = driver_source(task)
    key = hashlib.sha256("\0".join([*flags, task.source, driver]).encode()).hexdigest()[:24]
    exe = cache / f"ref-{key}"
    if exe.exists():
        return exe, ""
    with tempfile.TemporaryDirectory(dir=cache) as d:
        tmp = Path(d)
        (tmp / "ref.c").write_text(task.source)
        (tmp / "main.c").write_text(driver)
        cmd = ["gcc", *flags, "ref.c", "main.c", "-o", "exe", "-lm"]
        try:
            r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return None, "gcc took over 120 s"
        if r.returncode != 0:
            return None, (r.stderr.strip().splitlines() or ["?"])[0][:160]
        os.replace(tmp / "exe", exe)  # atomic: other processes see all or nothing
    return exe, ""


def _ub_kind(line: str) -> str:
    text = line.split("runtime error:", 1)[1].strip()
    for words, kind in (
        ("signed integer overflow", "signed integer overflow"),
        ("division by zero", "division by zero"),
        ("shift", "shift out of range"),
        ("misaligned", "misaligned access"),
        ("out of bounds", "index out of bounds"),
        ("null pointer", "null pointer"),
        ("negation of", "signed integer overflow"),
    ):
        if words in text:
            return kind
    return "undefined behaviour"


def classify(returncode: int, stderr: str) -> Problem:
    """The problem a failed sanitized run reports (its first sanitizer line)."""
    for line in stderr.splitlines():
        if "runtime error:" in line:
            return Problem("ub", _ub_kind(line))
        if "ERROR: AddressSanitizer" in line:
            what = line.split("AddressSanitizer:", 1)[1].split()[0]
            if "overflow" in what or "after" in what or what == "wild-addr":
                return Problem("overrun", what)
            return Problem("crash", f"AddressSanitizer: {what}")
    if "out of memory" in stderr:
        return Problem("inputs", "out of memory")
    return Problem("crash", f"exit {returncode}")


def _run(exe: Path, inputs: Path, timeout: float) -> tuple[Problem | None, float]:
    try:
        r = subprocess.run(
            [str(exe), str(inputs)], capture_output=True, text=True, timeout=timeout, env=_ENV
        )
    except subprocess.TimeoutExpired:
        return Problem("slow", f"no result within {timeout:g} s"), timeout
    if r.returncode != 0 or "runtime error:" in r.stderr:
        return classify(r.returncode, r.stderr), 0.0
    try:
        return None, float(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, 0.0


def check_task(
    task: Task, limit: float = LIMIT_S, slow: float = SLOW_S, cache: Path | None = None
) -> dict[str, Problem]:
    """The configs of `task` that fail the check, with the problem (empty: all clean)."""
    cache = cache or cache_dir()
    exe, err = build(task, SAN_FLAGS, cache)
    if exe is None:
        return {c.name: Problem("build", err) for c in task.configs}
    problems: dict[str, Problem] = {}
    with tempfile.TemporaryDirectory(dir=cache) as d:
        for cfg in task.configs:
            inputs = Path(d) / "inputs.bin"
            try:
                write_inputs(task, cfg, inputs)
            except (ValueError, MemoryError, OverflowError) as e:
                problems[cfg.name] = Problem("inputs", str(e)[:160])
                continue
            prob, secs = _run(exe, inputs, limit)
            if prob is None and secs > slow:  # maybe only the sanitizers: time it as built
                fast, _ = build(task, FAST_FLAGS, cache)
                if fast is None:  # cannot tell: the sanitized time stands
                    prob = Problem("slow", f"{secs:.2f} s under the sanitizers")
                else:
                    prob, secs = _run(fast, inputs, limit)
                    if prob is None and secs > slow:
                        prob = Problem("slow", f"{secs:.2f} s at -O2")
            if prob is None and write_inputs(task, cfg, inputs, extremes=True):
                prob, _ = _run(exe, inputs, limit)  # only memory errors and UB: not timed
                prob = None if prob is not None and prob.kind == "slow" else prob
            if prob is not None:
                problems[cfg.name] = prob
            inputs.unlink(missing_ok=True)
    return problems


def _check_json(args: tuple[str, float, float, str]) -> dict[str, tuple[str, str]]:
    text, limit, slow, cache = args
    found = check_task(Task.model_validate_json(text), limit, slow, Path(cache))
    return {k: (v.kind, v.detail) for k, v in found.items()}


def check_tasks(
    tasks: list[Task], limit: float = LIMIT_S, slow: float = SLOW_S, jobs: int | None = None
) -> list[dict[str, Problem]]:
    """`check_task` for every task, over `jobs` processes (default: os.cpu_count())."""
    if not tasks:
        return []
    cache = str(cache_dir())
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(tasks)))
    work = [(t.model_dump_json(), limit, slow, cache) for t in tasks]
    if jobs == 1:
        results = [_check_json(w) for w in work]
    else:
        results = list(pool_map(_check_json, work, jobs))
    return [{k: Problem(*v) for k, v in r.items()} for r in results]


def sanitizer_available() -> str:
    """'' when gcc can build and run a program with the sanitizers, else why not."""
    if shutil.which("gcc") is None:
        return "gcc not found"
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "t.c"
        src.write_text("int main(void) { return 0; }\n")
        try:
            r = subprocess.run(
                ["gcc", *SAN_FLAGS, str(src), "-o", str(Path(d) / "t")],
                capture_output=True,
                timeout=60,
            )
            if r.returncode != 0:
                return "gcc cannot build with -fsanitize=address,undefined"
            r = subprocess.run([str(Path(d) / "t")], capture_output=True, timeout=60, env=_ENV)
        except (OSError, subprocess.TimeoutExpired):
            return "gcc's sanitizers do not run here"
        return "" if r.returncode == 0 else "gcc's sanitizers do not run here"
