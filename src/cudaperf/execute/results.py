"""Result cache and incremental JSONL output (the feedback text is `execute.feedback`).

The result cache is one JSON file per key under `<cache_dir>/results/`; the key hashes the
candidate hash, the task id and content hash, the result-changing settings, the GPU name and
the toolchain versions. The JSONL writer appends and flushes one line per result, so an
interrupted batch keeps everything finished so far, and `done_keys` lets a rerun skip them.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from cudaperf.execute.types import ExecResult, Status
from cudaperf.jsonl import open_append

__all__ = [
    "ResultCache",
    "JsonlWriter",
    "done_keys",
    "result_key",
    "truncate",
]


def task_hash(task_json: str) -> str:
    return hashlib.sha256(task_json.encode()).hexdigest()[:16]


def result_key(cand_hash: str, task_id: str, task_json: str, settings: dict, gpu: str, versions):
    """The cache key of one evaluation (see the module docstring)."""
    blob = json.dumps(
        [cand_hash, task_id, task_hash(task_json), settings, gpu, versions], sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class ResultCache:
    """Finished results on disk, keyed by `result_key`."""

    def __init__(self, root: Path, enabled: bool = True):
        self.root = Path(root) / "results"
        self.enabled = enabled

    def get(self, key: str) -> ExecResult | None:
        p = self.root / f"{key}.json"
        if not self.enabled or not p.exists():
            return None
        try:
            return ExecResult.model_validate_json(p.read_text())
        except ValueError:
            return None  # a corrupt entry is recomputed

    def put(self, res: ExecResult) -> None:
        # INFRA_ERROR is the evaluator's fault and TIMEOUT may be load-dependent: not cached.
        if (
            not self.enabled
            or not res.cache_key
            or res.status in (Status.INFRA_ERROR, Status.TIMEOUT)
        ):
            return
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f"{res.cache_key}.json.{os.getpid()}.{threading.get_ident()}"
        tmp.write_text(res.model_dump_json())
        os.replace(tmp, self.root / f"{res.cache_key}.json")


class JsonlWriter:
    """Appends one JSON line per result and flushes it to disk immediately."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._f = open_append(self.path)  # a cut last line (an interruption) is removed first

    def write(self, res: ExecResult) -> None:
        self._f.write(res.model_dump_json() + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


def done_keys(path: Path) -> dict[str, ExecResult]:
    """Results already in a JSONL file (complete lines only), by cache key."""
    out: dict[str, ExecResult] = {}
    if not Path(path).exists():
        return out
    for line in Path(path).read_text().splitlines():
        try:
            r = ExecResult.model_validate_json(line)
        except ValueError:
            continue  # a line cut by an interruption
        if r.cache_key and r.status is not Status.INFRA_ERROR:
            out[r.cache_key] = r
    return out


def truncate(text: str, limit: int) -> str:
    """Keep the head and the tail of a long log."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"
