"""Eager and `torch.compile` baselines of a PyTorch→CUDA task's reference, timed on the
trusted side on private inputs the same way as candidates' single calls, cached on disk per
(task content, config, GPU, torch version).

Given `req["baselines"]` (records from the parent, see `baseline_job`), no file is read or
written: those records are the cache, new ones go to `req["new_baselines"]`, and with
`req["time_baselines"]` False a missing baseline is None instead of timed (a candidate's job).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch

from cudaperf.execute.protocol import BaselinesRequest, TorchRequest
from cudaperf.execute.pytorch import runtime as rt
from cudaperf.execute.pytorch.baseline_job import baseline_key
from cudaperf.execute.types import Timing
from cudaperf.jsonl import append_lines
from cudaperf.tasks.model import Task

__all__ = ["baselines", "device_id"]

log = logging.getLogger(__name__)


def device_id(device: str) -> str:
    """The device part of a baseline key: GPU name and torch version."""
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    return f"{gpu}:{torch.__version__}"


def _baseline_cache(req: TorchRequest | BaselinesRequest) -> tuple[Path | None, dict]:
    if req.baselines is not None:  # given by the parent over the request pipe: no file here
        return None, dict(req.baselines)
    path = Path(req.baseline_cache) if req.baseline_cache else None
    data = {}
    if path and path.is_file():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
                data[rec["key"]] = rec["timing"]
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by an interruption
    return path, data


def baselines(
    task: Task,
    cfg,
    ref,
    inputs,
    req: TorchRequest | BaselinesRequest,
    device: str,
    new: list[dict] | None = None,
):
    """Eager and torch.compile timings of the reference: from the records the request carries
    (or its cache file), else timed when the request allows it; new records go to `new`."""
    path, cache = _baseline_cache(req)
    dev_id = device_id(device)
    out = []
    for kind in ("eager", "compile"):
        key = baseline_key(task.id, task.source, cfg.name, dev_id, kind)
        if key not in cache:
            skip = kind == "compile" and not req.torch_compile
            if skip or not req.time_baselines:  # a candidate's job times none
                out.append(None)
                continue
            try:
                fn = ref if kind == "eager" else torch.compile(ref)
                ev, _ = rt.time_forward(fn, inputs, req.warmup, req.trials, req.budget_s, device)
            except Exception as e:  # noqa: BLE001 - a failing baseline must not fail the candidate
                log.warning("%s baseline of %s/%s failed: %s", kind, task.id, cfg.name, e)
                out.append(None)
                continue
            cache[key] = Timing.of(ev).model_dump()
            if new is not None:
                new.append({"key": key, "timing": cache[key]})
            if path:
                append_lines(path, [json.dumps({"key": key, "timing": cache[key]})], shared=True)
        out.append(Timing.model_validate(cache[key]))
    return out[0], out[1]
