"""Resumable-records primitives of bench/eval_throughput.py: the deadline of a call, the
append-only records of finished work, the candidates' selection and identity."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path


class Stop(KeyboardInterrupt):
    """The deadline came while a cudaperf pass ran (raised by SIGALRM; the evaluator's Ctrl-C
    path then stops its builds and workers)."""


class Deadline:
    """Seconds left of a call's `--deadline-s` (no deadline: `limit_s` None)."""

    def __init__(self, limit_s: float | None, clock: Callable[[], float] = time.monotonic):
        self.clock, self.limit_s, self.t0 = clock, limit_s, clock()

    def left(self) -> float:
        return float("inf") if self.limit_s is None else self.limit_s - (self.clock() - self.t0)


class Records:
    """Append-only JSONL of finished work; each line is flushed and fsynced when added, a torn
    last line (a kill mid-write) is dropped on reading, so a rerun sees exactly what finished."""

    def __init__(self, path: Path):
        self.path = path
        self.items: list[dict] = []
        data = path.read_bytes() if path.is_file() else b""
        if data and not data.endswith(b"\n"):  # a kill mid-write: drop the torn tail, so
            data = data[: data.rfind(b"\n") + 1]  # the next line starts on a line of its own
            path.write_bytes(data)
            print(f"  records: dropped a torn last line of {path}", flush=True)
        for line in data.decode().splitlines():
            self.items.append(json.loads(line))

    def add(self, rec: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(rec, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.items.append(rec)

    def merge(self, recs: Iterable[dict]) -> int:
        """Add the given records that are not here yet (e.g. from an earlier call's JSON)."""
        have = {json.dumps(r, sort_keys=True) for r in self.items}
        new = [r for r in recs if json.dumps(r, sort_keys=True) not in have]
        for r in new:
            self.add(r)
        return len(new)

    def of(self, kind: str) -> list[dict]:
        return [r for r in self.items if r.get("type") == kind]

    def last(self, kind: str, **match) -> dict | None:
        hits = [r for r in self.of(kind) if all(r.get(k) == v for k, v in match.items())]
        return hits[-1] if hits else None


def select(items: list[dict], limit: int = 0, spread: int = 0) -> list[dict]:
    """The first `limit` entries, or `spread` entries evenly spaced over the index (both
    levels), or all; the order of index.json is kept."""
    if spread:
        n = min(spread, len(items))
        return [items[(k * len(items)) // n] for k in range(n)]
    return items[:limit] if limit else items


def sha12(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def item_key(it: dict, code: str) -> str:
    """A candidate's identity in the records: level, problem and the code's hash."""
    return f"level{it['level']}/{it['problem']}@{sha12(code)}"


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
