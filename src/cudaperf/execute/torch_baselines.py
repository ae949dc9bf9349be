"""Eager and `torch.compile` baselines of a PyTorch→CUDA task's reference, timed on the
trusted side on private inputs the same way as candidates' single calls, cached on disk per
(task content, config, GPU, torch version)."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import torch

from cudaperf.execute import torch_runtime as rt
from cudaperf.execute.protocol import TorchRequest
from cudaperf.execute.types import Timing
from cudaperf.tasks.model import Task

__all__ = ["baselines"]

log = logging.getLogger(__name__)


def _baseline_cache(req: TorchRequest) -> tuple[Path | None, dict]:
    path = Path(req.baseline_cache) if req.baseline_cache else None
    data = {}
    if path and path.is_file():
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            data[rec["key"]] = rec["timing"]
    return path, data


def baselines(task: Task, cfg, ref, inputs, req: TorchRequest, device: str):
    """Eager and torch.compile timings of the reference, cached on disk."""
    path, cache = _baseline_cache(req)
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    key_base = f"{task.id}:{hashlib.sha256(task.source.encode()).hexdigest()[:12]}:{cfg.name}:"
    key_base += f"{gpu}:{torch.__version__}"
    out = []
    for kind in ("eager", "compile"):
        key = key_base + ":" + kind
        if key not in cache:
            if kind == "compile" and not req.torch_compile:
                out.append(None)
                continue
            try:
                fn = ref if kind == "eager" else torch.compile(ref)
                ev, _ = rt.time_forward(fn, inputs, req.warmup, req.trials, req.budget_ms, device)
            except Exception as e:  # noqa: BLE001 - a failing baseline must not fail the candidate
                log.warning("%s baseline of %s/%s failed: %s", kind, task.id, cfg.name, e)
                out.append(None)
                continue
            cache[key] = Timing.of(ev).model_dump()
            if path:
                with path.open("a") as fh:
                    fh.write(json.dumps({"key": key, "timing": cache[key]}) + "\n")
        out.append(Timing.model_validate(cache[key]))
    return out[0], out[1]
