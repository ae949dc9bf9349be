"""Result cache, incremental JSONL output, and the feedback text a model reads.

The result cache is one JSON file per key under `<cache_dir>/results/`; the key hashes the
candidate hash, the task id and content hash, the result-changing settings, the GPU name and
the toolchain versions. The JSONL writer appends and flushes one line per result, so an
interrupted batch keeps everything finished so far, and `done_keys` lets a rerun skip them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from pathlib import Path

from cudaperf.execute.types import ConfigResult, ExecResult, Status

__all__ = [
    "ResultCache", "JsonlWriter", "done_keys", "redact_held_out", "redact_sizes", "result_key",
    "timing_feedback", "truncate",
]  # fmt: skip


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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a")  # noqa: SIM115 - closed in close()

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


def timing_feedback(configs: list[ConfigResult]) -> list[str]:
    """Where the time went: per config time, speedups, and the dominant config. Held-out
    configs are left out (a time gives a size away as well as an element count does)."""
    timed = [c for c in configs if c.timing is not None and not c.held_out]
    if not timed:
        return []
    parts = []
    for c in timed:
        s = f"{c.config}: {c.timing.median_us:.1f} us"
        if c.naive_timing:
            s += f" ({c.naive_timing.median_us / c.timing.median_us:.2f}x vs naive CUDA"
            s += (
                f", {c.cpu_timing.median_us / c.timing.median_us:.1f}x vs CPU)"
                if c.cpu_timing
                else ")"
            )
        elif c.cpu_timing:
            s += f" ({c.cpu_timing.median_us / c.timing.median_us:.1f}x vs CPU)"
        parts.append(s)
    msgs = ["time per config: " + "; ".join(parts)]
    slow = [c for c in timed if c.naive_timing and c.timing.median_us > c.naive_timing.median_us]
    if slow:
        msgs.append(f"slower than the naive CUDA version on: {', '.join(c.config for c in slow)}")
    spread = [c for c in timed if c.timing.iqr_us > 0.2 * c.timing.median_us]
    if spread:
        msgs.append(
            f"timing is noisy (IQR > 20% of median) on: {', '.join(c.config for c in spread)}"
        )
    return msgs


_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d_]*(?:\.\d*)?(?:[eE][-+]?\d+)?(?![\w])")


def redact_sizes(message: str) -> str:
    """A held-out config's message without its numbers: element counts, indices, shapes and
    values all give its size away ("1 of 5000011 elements"). Names such as float32 are kept.
    Guaranteed: no run of digits outside a word is left."""
    return _NUMBER.sub("#", message)


def redact_held_out(configs: list[ConfigResult], message: str) -> tuple[list[ConfigResult], str]:
    """The one place held-out configs lose their sizes, for every track (`Evaluator.finish`):
    each held-out config's message through `redact_sizes`, and that message wherever it is
    quoted in the run's `message` (which feedback and the runtime log repeat). Guaranteed: no
    held-out config's message reaches a result with a digit outside a word."""
    out = []
    for c in configs:
        if c.held_out and c.message:
            red = redact_sizes(c.message)
            message = message.replace(c.message, red)
            c = c.model_copy(update={"message": red})
        out.append(c)
    return out, message
