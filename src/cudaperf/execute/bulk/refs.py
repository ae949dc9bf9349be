"""Inputs and C reference outputs for `cudaperf data measure`, made by CPU worker processes.

`prepare_task` (run in a worker process) compiles the task's C reference with gcc -O2 (the
evaluator's `build_reference`, cached), and for every config draws input set 0 with the
evaluator's secret-seeded `make_inputs(task, cfg, 0, salt)`, runs the reference on it
(`run_reference`) and writes the in/inout arrays and the expected out/inout arrays as `.npy`
files into a scratch folder (on /dev/shm when it has room), which the GPU runner reads and
deletes. Scalars travel in the returned manifest. A failure comes back as `{"ok": False,
"message": ...}`; a reference that crashes the worker process is handled by `RefPool`.
"""

from __future__ import annotations

import concurrent.futures as cf
import ctypes
import logging
import multiprocessing
import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np

from cudaperf.execute.build import build_reference
from cudaperf.execute.c.reference import run_reference, time_reference
from cudaperf.execute.config import EvalConfig
from cudaperf.procpool import worker_init
from cudaperf.tasks.inputs import make_inputs
from cudaperf.tasks.model import Role, Task, eval_length

log = logging.getLogger(__name__)

__all__ = ["RefPool", "pick_scratch", "prepare_task", "task_bytes"]


def task_bytes(task: Task) -> int:
    """Scratch bytes a task's prepared configs take (inputs + expected outputs, all configs)."""
    total = 0
    for cfg in task.configs:
        for p in task.signature:
            if p.is_array:
                n = eval_length(p.length or "0", cfg.sizes) * np.dtype(p.dtype).itemsize
                total += n * (2 if p.role is Role.INOUT else 1)
    return total


def pick_scratch(want_bytes: int, explicit: Path | None = None) -> Path:
    """Folder for prepared arrays: `explicit`, else /dev/shm when it has `want_bytes` free,
    else the system temp folder (disk: slower, but never fails for lack of shared memory)."""
    import tempfile

    if explicit is not None:
        return Path(explicit)
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > want_bytes:
        return shm
    return Path(tempfile.gettempdir())


def _save(folder: Path, name: str, arr: np.ndarray) -> str:
    path = folder / f"{name}.npy"
    np.save(path, np.ascontiguousarray(arr), allow_pickle=False)
    return str(path)


def prepare_task(
    task_json: str, salt: int, folder: str, eval_fields: dict, cpu_trials: int
) -> dict:
    """Build the reference, make every config's inputs and expected outputs (see module doc)."""
    t0 = time.monotonic()
    try:
        task = Task.model_validate_json(task_json)
        config = EvalConfig(**eval_fields)
        ref = build_reference(task, config)
        if not ref.ok:
            msg = "the task's C reference does not compile"
            return {"ok": False, "message": msg, "log": ref.log}
        lib = ctypes.CDLL(ref.lib)
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        configs = [
            _one_config(task, cfg, lib, salt, out, ci, cpu_trials)
            for ci, cfg in enumerate(task.configs)
        ]
        return {"ok": True, "dir": folder, "configs": configs, "seconds": time.monotonic() - t0}
    except Exception as e:  # noqa: BLE001 - reported to the orchestrator as infra_error
        shutil.rmtree(folder, ignore_errors=True)
        return {"ok": False, "message": f"preparing inputs failed: {type(e).__name__}: {e}"}


def _one_config(task: Task, cfg, lib, salt: int, out: Path, ci: int, cpu_trials: int) -> dict:
    inputs = make_inputs(task, cfg, 0, salt)
    t0 = time.monotonic()
    want = run_reference(task, lib, inputs)
    ref_s = time.monotonic() - t0
    cpu_us = time_reference(task, lib, inputs, cpu_trials, 2.0) if cpu_trials > 0 else []
    arrays = []
    for i, (p, x, w) in enumerate(zip(task.signature, inputs, want, strict=True)):
        entry: dict = {
            "name": p.name,
            "role": p.role.value,
            "dtype": p.dtype,
            "n": int(x.size),
            "partial": p.partial_read,
        }
        if p.role is Role.SCALAR:
            entry["value"] = x.item()
        if p.role in (Role.IN, Role.INOUT):
            entry["input"] = _save(out, f"c{ci}_in{i}", x)
        if p.role in (Role.OUT, Role.INOUT):
            # generated tasks write every out element: nothing is masked (`run_reference`)
            entry["want"] = _save(out, f"c{ci}_want{i}", np.ma.getdata(w))
        arrays.append(entry)
    return {
        "name": cfg.name,
        "held_out": cfg.held_out,
        "arrays": arrays,
        "ref_s": ref_s,
        "cpu_us": cpu_us,
    }


class RefPool:
    """A process pool for `prepare_task` that survives a worker crash (a reference that
    segfaults): the pool is rebuilt and the job retried once; a second crash is reported as a
    failed preparation (`{"ok": False}`), never as an exception."""

    def __init__(self, workers: int):
        self.workers = workers
        self._lock = threading.Lock()
        self._gen = 0
        self._pool = self._new()

    def _new(self) -> cf.ProcessPoolExecutor:
        ctx = multiprocessing.get_context("spawn")  # the orchestrator has threads: no fork
        # niced like the nvcc threads: the GPU runner's timing loop comes first
        return cf.ProcessPoolExecutor(
            self.workers, mp_context=ctx, initializer=worker_init, initargs=(5,)
        )

    def submit(self, *args) -> _Job:
        return _Job(self, args)

    def _submit(self, args) -> tuple[int, cf.Future]:
        with self._lock:
            return self._gen, self._pool.submit(prepare_task, *args)

    def _rebuild(self, gen: int) -> None:
        with self._lock:
            if gen == self._gen:  # nobody rebuilt it since this job was submitted
                log.warning("a reference worker process died; restarting the pool")
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new()
                self._gen += 1

    def shutdown(self) -> None:
        with self._lock:
            self._pool.shutdown(wait=True, cancel_futures=True)


class _Job:
    def __init__(self, pool: RefPool, args: tuple):
        self.pool, self.args = pool, args
        self.gen, self.fut = pool._submit(args)
        self.tries = 1

    def result(self) -> dict:
        while True:
            try:
                return self.fut.result()
            except (cf.process.BrokenProcessPool, cf.CancelledError) as e:
                self.pool._rebuild(self.gen)
                if self.tries >= 2:
                    return {"ok": False, "message": f"the reference crashed its worker ({e})"}
                self.tries += 1
                self.gen, self.fut = self.pool._submit(self.args)
