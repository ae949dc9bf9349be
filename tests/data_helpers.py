"""The packaged dataset as tests read it: its tasks read once per test process, and the kernel
sources the analyzer and ranker tests check."""

from __future__ import annotations

import functools
import gzip
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "tasks.jsonl.gz"


def read_tasks_once(path: str | Path) -> list:
    """`load_tasks(path)`, read once per test process for a file as it is now (7 s a read of
    the packaged dataset; its tasks are frozen models, the list is a fresh copy). Anything
    but a file goes to `load_tasks` itself, errors included."""
    from cudaperf.tasks.io import load_tasks

    p = Path(path).resolve()
    if not p.is_file():
        return load_tasks(path)
    st = p.stat()
    return list(_read(str(p), st.st_mtime_ns, st.st_size))


@functools.cache
def _read(path: str, _mtime_ns: int, _size: int) -> tuple:
    from cudaperf.tasks.io import load_tasks

    return tuple(load_tasks(path))


def implementations(every: int = 700) -> list[tuple[str, str]]:
    """(name, code) of every sample implementation and of the dataset's tasks at every
    `every`-th line (C and PyTorch families)."""
    from cudaperf.tasks.io import load_sample
    from cudaperf.tasks.model import Task

    out = [(f"{t.id}:{i.id}", i.code) for t in load_sample() for i in t.implementations]
    if DATA.exists():
        with gzip.open(DATA, "rt", encoding="utf-8") as f:
            tasks = [Task.model_validate_json(ln) for n, ln in enumerate(f) if n % every == 0]
        out += [(f"{t.id}:{i.id}", i.code) for t in tasks for i in t.implementations]
    return out
