"""CPU check of imported C→CUDA tasks: every C reference on every config, under AddressSanitizer.

For each task the C reference is compiled twice with gcc, with a small driver (a separate
translation unit) that reads one config's inputs from a file into heap buffers of exactly the
task's array lengths and calls the entry function once:

- `-O1 -g -fsanitize=address,undefined`: an out-of-bounds access (the array lengths or the
  index values that the importer inferred are too small for what the C code touches), a crash,
  or an abort is reported with the sanitizer's first line;
- `-O2` (as the evaluator builds it): the call's wall time; a config over `--slow` seconds is
  reported (the evaluator runs the reference at least once per config and input set).

Inputs are made by `cudaperf.execute.inputs.make_inputs` (set 0, a fixed salt), out arrays
zeroed as the evaluator's reference run does. No GPU is used; the CUDA side is not checked.

    python bench/import_check.py .imports/bt.jsonl [--only ID ...] [--json out.json]

Prints one line per problem and a summary; exits 1 when any config crashes or is slow.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from cudaperf.execute.inputs import make_inputs
from cudaperf.tasks.io import load_tasks
from cudaperf.tasks.model import Role, Task

SALT = 20261130
_ENV = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "print_stacktrace=0"}
_DRIVER_HEAD = """#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static void *take(FILE *f, size_t elem) {
    long long n = 0;
    if (fread(&n, 8, 1, f) != 1) { fprintf(stderr, "short input file\\n"); exit(3); }
    void *p = malloc(n * elem ? n * elem : 1);
    if (n && fread(p, elem, n, f) != (size_t)n) { fprintf(stderr, "short input file\\n"); exit(3); }
    return p;
}
"""


def driver_source(task: Task) -> str:
    """A C main() that reads the inputs file and calls the task's entry function once."""
    decls = ", ".join(
        f"{p.ctype}{'*' if p.role is not Role.SCALAR else ''} {p.name}" for p in task.signature
    )
    lines = [_DRIVER_HEAD, f"void {task.entry}({decls});", "int main(int argc, char **argv) {"]
    lines.append('    FILE *f = fopen(argv[1], "rb");')
    for i, p in enumerate(task.signature):
        star = "*" if p.role is not Role.SCALAR else ""
        get = f"take(f, sizeof({p.ctype}))"
        val = f"({p.ctype}*){get}" if star else f"*({p.ctype}*){get}"
        lines.append(f"    {p.ctype}{star} a{i} = {val};")
    args = ", ".join(f"a{i}" for i in range(len(task.signature)))
    lines += [
        "    struct timespec t0, t1;",
        "    clock_gettime(CLOCK_MONOTONIC, &t0);",
        f"    {task.entry}({args});",
        "    clock_gettime(CLOCK_MONOTONIC, &t1);",
        '    printf("%.6f\\n", (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));',
        "    return 0;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def write_inputs(task: Task, cfg, path: Path) -> None:
    arrays = make_inputs(task, cfg, 0, SALT)
    with path.open("wb") as f:
        for p, a in zip(task.signature, arrays, strict=True):
            a = np.zeros_like(a) if p.role is Role.OUT else a
            f.write(np.array([a.size], dtype=np.int64).tobytes())
            f.write(np.ascontiguousarray(a).tobytes())


def _build(task: Task, tmp: Path, flags: list[str], exe: str) -> str:
    (tmp / "ref.c").write_text(task.source)
    (tmp / "main.c").write_text(driver_source(task))
    cmd = ["gcc", *flags, "ref.c", "main.c", "-o", exe, "-lm"]
    r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
    return "" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[0]


def _first_report(err: str) -> str:
    for line in err.splitlines():
        if "ERROR: AddressSanitizer" in line or "runtime error:" in line:
            return line.split("ERROR: ")[-1].strip()[:160]
    return (err.strip().splitlines() or [""])[-1][:160]


def _run(exe: Path, inputs: Path, timeout: float) -> tuple[str, float]:
    """('' or the problem, seconds of the call)."""
    try:
        r = subprocess.run(
            [str(exe), str(inputs)], capture_output=True, text=True, timeout=timeout, env=_ENV
        )
    except subprocess.TimeoutExpired:
        return f"no result within {timeout:.0f} s", timeout
    if r.returncode != 0 or "runtime error:" in r.stderr:
        return f"exit {r.returncode}: {_first_report(r.stderr)}", 0.0
    return "", float(r.stdout.strip() or 0)


def check_task(task: Task, timeout: float, slow: float) -> list[dict]:
    """One dict per problem config of `task` (empty: every config ran cleanly and fast)."""
    problems = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        err = _build(task, tmp, ["-O1", "-g", "-fsanitize=address,undefined"], "asan")
        err = err or _build(task, tmp, ["-O2"], "fast")
        if err:
            return [{"task": task.id, "config": "*", "problem": f"does not build: {err}"}]
        for cfg in task.configs:
            inputs = tmp / f"{cfg.name}.bin"
            try:
                write_inputs(task, cfg, inputs)
            except (ValueError, MemoryError) as e:
                problems.append({"task": task.id, "config": cfg.name, "problem": f"inputs: {e}"})
                continue
            msg, _ = _run(tmp / "asan", inputs, timeout)
            if not msg:
                fast_msg, secs = _run(tmp / "fast", inputs, timeout)
                msg = fast_msg or (f"slow: {secs:.2f} s" if secs > slow else "")
            if msg:
                problems.append({"task": task.id, "config": cfg.name, "problem": msg})
            inputs.unlink()
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", help="imported tasks (JSONL)")
    ap.add_argument("--only", nargs="*", default=[], help="task ids or id prefixes to check")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per run")
    ap.add_argument("--slow", type=float, default=1.0, help="report calls over this (s, -O2)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", help="write the problems here")
    a = ap.parse_args(argv)
    tasks = load_tasks(a.tasks)
    if a.only:
        tasks = [t for t in tasks if any(t.id == o or t.id.startswith(o) for o in a.only)]
    with ThreadPoolExecutor(a.jobs) as pool:
        results = list(pool.map(lambda t: check_task(t, a.timeout, a.slow), tasks))
    problems = [p for r in results for p in r]
    for p in problems:
        print(f"{p['task']} [{p['config']}]: {p['problem']}")
    bad = len({p["task"] for p in problems})
    print(
        f"{len(tasks)} tasks, {sum(len(t.configs) for t in tasks)} configs: {bad} tasks with problems"
    )
    if a.json:
        Path(a.json).write_text(json.dumps(problems, indent=1) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
