"""Baseline records: timings the parent keeps in a JSONL file on the host, shared by both
tracks (`pytorch.baseline_job`: eager and torch.compile; `c.baselines`: the serial C
reference on the CPU).

A record is `{"key": ..., "timing": Timing, "v": VERSION}`. Records reach the file only from
the reply of a request that ran no candidate code, and only for keys of that request's task
(`accepted`); a candidate's job gets its task's records in the request, never the file. Every
key starts with `task_prefix` (the task's id and a hash of its source), so a changed task is
timed again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cudaperf.execute.types import Timing
from cudaperf.jsonl import append_lines

__all__ = ["VERSION", "accepted", "append_records", "read_records", "task_prefix"]

VERSION = 2  # cache lines written by the parent from a clean baselines request


def task_prefix(task_id: str, source: str) -> str:
    """The part of every baseline key that names the task (id and content)."""
    return f"{task_id}:{hashlib.sha256(source.encode()).hexdigest()[:12]}:"


def read_records(path: str | Path, prefix: str = "") -> dict[str, dict]:
    """The host cache's valid version-2 records whose key starts with `prefix` (key -> Timing
    as a dict); malformed and older lines are skipped."""
    out: dict[str, dict] = {}
    p = Path(path)
    if not p.is_file():
        return out
    for line in p.read_text().splitlines():
        try:
            rec = json.loads(line)
            if rec.get("v") != VERSION or not str(rec["key"]).startswith(prefix):
                continue
            out[str(rec["key"])] = Timing.model_validate(rec["timing"]).model_dump()
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


def accepted(reply: dict, prefix: str) -> dict[str, dict]:
    """The records of a clean `baselines` reply that belong to its task (others dropped)."""
    got = reply.get("new_baselines")
    out: dict[str, dict] = {}
    for rec in got if isinstance(got, list) else []:
        try:
            if str(rec["key"]).startswith(prefix):
                out[str(rec["key"])] = Timing.model_validate(rec["timing"]).model_dump()
        except (ValueError, KeyError, TypeError):
            continue
    return out


def append_records(path: str | Path, records: dict[str, dict]) -> None:
    """Append records as version-2 lines (one write, so parallel appenders do not interleave)."""
    if not records:
        return
    append_lines(
        path,
        (json.dumps({"key": k, "timing": t, "v": VERSION}) for k, t in records.items()),
        shared=True,
    )
