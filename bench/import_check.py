"""CPU check of imported C→CUDA tasks: every C reference on every config, under AddressSanitizer.

For each task the C reference is compiled twice with gcc, with a small driver (a separate
translation unit) that reads one config's inputs from a file into heap buffers of exactly the
task's array lengths and calls the entry function once:

- `-O1 -g -fsanitize=address,undefined`: an out-of-bounds access (the array lengths or the
  index values that the importer inferred are too small for what the C code touches), a crash,
  or an abort is reported with the sanitizer's first line;
- `-O2` (as the evaluator builds it): the call's CPU time; a config over `--slow` seconds is
  reported (the evaluator runs the reference at least once per config and input set).

Inputs are made by `cudaperf.tasks.inputs.make_inputs` (set 0, a fixed salt), out arrays
zeroed as the evaluator's reference run does; the driver and inputs are those of the BabelTower
importer's own reference check (`cudaperf.tasks.importers.babeltower.check`), which drops failing
configs at import time; this script is the independent re-check of an imported file (it times
every config at -O2, not only the slow ones). No GPU is used; the CUDA side is not checked.

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

from cudaperf.tasks.importers.babeltower.check import driver_source, write_inputs
from cudaperf.tasks.io import load_tasks
from cudaperf.tasks.model import Task

_ENV = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "print_stacktrace=0"}


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
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
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
    n_cfg = sum(len(t.configs) for t in tasks)
    print(f"{len(tasks)} tasks, {n_cfg} configs: {bad} tasks with problems")
    if a.json:
        Path(a.json).write_text(json.dumps(problems, indent=1) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
