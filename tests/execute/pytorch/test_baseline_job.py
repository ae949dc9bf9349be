"""Baseline-cache records come only from clean `baselines` requests (`baseline_job`): a
candidate that forges lines into every cache file it can reach changes no baseline, on the
CPU through a real confined worker, and on the GPU through the whole evaluator."""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import needs_gpu
from torch_cpu import HONEST, relu_task, request

from cudaperf.execute import baseline_records
from cudaperf.execute.isolation.sandbox import WorkerHandle
from tests.execute.isolation.test_confine import needs_ns

FORGED_US = 1e9

# Module code of a candidate that appends a slow baseline for each of `keys` to `path` (the
# host cache, or the copy a worker would have staged at the same path), then computes ReLU.
FORGER = """
import contextlib, json, pathlib
for _path in {paths!r}:
    with contextlib.suppress(OSError):
        with pathlib.Path(_path).open("a") as _f:
            for _k in {keys!r}:
                _t = dict(median_us={us}, iqr_us=0.0, min_us={us}, max_us={us}, trials=20)
                _f.write(json.dumps(dict(key=_k, timing=_t, v=2)) + "\\n")
"""


def _forger(paths: list[str], keys: list[str], honest: str) -> str:
    return FORGER.format(paths=paths, keys=keys, us=FORGED_US) + honest


def _keys(task, device: str) -> list[str]:
    """The eager keys the forger targets, computed as a candidate could (the prompt has the
    task's source; the key format is public)."""
    import torch

    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    src = hashlib.sha256(task.source.encode()).hexdigest()[:12]
    return [f"{task.id}:{src}:{c.name}:{gpu}:{torch.__version__}:eager" for c in task.configs]


def test_only_version_2_records_of_the_task_are_read_or_accepted(tmp_path):
    path = tmp_path / "b.jsonl"
    t = {"median_us": 1.0, "iqr_us": 0.0, "min_us": 1.0, "max_us": 1.0, "trials": 3}
    path.write_text(
        "\n".join(
            [
                json.dumps(
                    {"key": "t:abc:x", "timing": t}
                ),  # an old line: maybe from the old merge
                json.dumps({"key": "t:abc:y", "timing": t, "v": 2}),
                json.dumps({"key": "u:abc:y", "timing": t, "v": 2}),  # another task
                json.dumps({"key": "t:abc:z", "timing": {"median_us": "slow"}, "v": 2}),
                "not json",
            ]
        )
    )
    assert list(baseline_records.read_records(path, "t:abc:")) == ["t:abc:y"]
    reply = {"new_baselines": [{"key": "t:abc:q", "timing": t}, {"key": "u:1:q", "timing": t}]}
    assert list(baseline_records.accepted(reply, "t:abc:")) == ["t:abc:q"]


@pytest.fixture()
def handle(cpu_config):
    h = WorkerHandle(None, replace(cpu_config, compile_only=None, isolate_files=True))
    yield h
    h.close()


def _torch_req(code: str, base: Path) -> dict:
    req = request(code, workdir=tempfile.mkdtemp(prefix="cudaperf-cand-"))
    return req | {
        "op": "torch",
        "task": relu_task().model_dump(mode="json"),
        "baseline_cache": str(base),
    }


@needs_ns
def test_a_forging_candidate_changes_no_baseline_on_a_real_worker(handle, cpu_config):
    """CPU, confined worker, real spawned candidate process: forged lines written at the
    cache's path (where the old design staged the copy it merged back) reach neither this
    job's baselines nor the host cache."""
    base = cpu_config.cache_dir / "torch_baselines-forge.jsonl"
    forger = _forger([str(base)], _keys(relu_task(), "cpu"), HONEST)
    for _ in range(2):  # the first also times the baselines (a clean request), then cached
        reply = handle.request(_torch_req(forger, base), 120)
        assert reply["status"] == "ok", reply
        eager = [c["eager_timing"]["median_us"] for c in reply["configs"]]
        assert len(eager) == 2 and max(eager) < FORGED_US
    lines = [json.loads(ln) for ln in base.read_text().splitlines()]
    assert len(lines) == 2 and all(r["timing"]["median_us"] < FORGED_US for r in lines)


@needs_ns
def test_baselines_are_timed_on_a_process_that_served_no_candidate(handle, cpu_config):
    base = cpu_config.cache_dir / "torch_baselines-taint.jsonl"
    handle.request(_torch_req(HONEST, base), 120)  # baselines (clean), then the candidate
    assert handle.tainted
    served = handle.request({"op": "hello"}, 30)["pid"]
    other = relu_task(RELU_OTHER)  # a new task: its baselines are missing
    req = _torch_req(HONEST, base) | {"task": other.model_dump(mode="json")}
    assert handle.request(req, 120)["status"] == "ok"
    lines = base.read_text().splitlines()
    assert len(lines) == 4  # two per task, the second task's from a fresh process
    assert handle.request({"op": "hello"}, 30)["pid"] != served


def test_a_tasks_complete_records_are_read_once_per_handle(handle, cpu_config, monkeypatch):
    """As the C track's CPU baselines: once none of a task's baselines is missing, its later
    jobs read no file."""
    from cudaperf.execute import baseline_records

    base = cpu_config.cache_dir / "torch_baselines-once.jsonl"
    reads, real = [], baseline_records.read_records
    monkeypatch.setattr(baseline_records, "read_records", lambda *a: reads.append(a) or real(*a))
    replies = [handle.request(_torch_req(HONEST, base), 120) for _ in range(3)]
    assert all(r["status"] == "ok" for r in replies), replies
    assert len(reads) == 1


RELU_OTHER = """import torch
N = 1000
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 0.0
def get_inputs():
    return [torch.rand(N)]
def get_init_inputs():
    return []
"""


@pytest.mark.gpu
@needs_gpu
@needs_ns
def test_a_forging_candidate_changes_no_baseline_on_the_gpu(tmp_path):
    """The whole evaluator on the GPU: an honest candidate, then one that forges slow
    baselines into the host cache file and its staged path, then an honest one again: the
    eager speedups of the honest two agree, and the cache holds no forged time."""
    from cudaperf.execute import Candidate, Status, evaluate
    from tests.execute.isolation.test_gpu import CORPUS, _config, _task

    task, cfg = _task("affine_relu"), _config(tmp_path)
    honest = (CORPUS / "honest.py").read_text()
    base = cfg.cache_dir / "torch_baselines.jsonl"
    first = evaluate(task, Candidate(code=honest), cfg)
    assert first.status is Status.OK and first.speedup_vs_eager, first.feedback
    forger = _forger([str(base)], _keys(task, "cuda"), honest)
    forged = evaluate(task, Candidate(code=forger), cfg)
    assert forged.status is Status.OK, (forged.feedback, forged.runtime_log[-800:])
    assert forged.speedup_vs_eager < 1e3 * first.speedup_vs_eager
    again = evaluate(task, Candidate(code=honest + "\n# again\n"), cfg)
    e1 = [c.eager_timing.median_us for c in first.configs]
    assert [c.eager_timing.median_us for c in again.configs] == e1
    times = [json.loads(ln)["timing"]["median_us"] for ln in base.read_text().splitlines()]
    assert times and max(times) < FORGED_US
