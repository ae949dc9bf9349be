"""The local backend's routing of prepared jobs to workers (`pool.Router`) and its workers per
GPU (`EvalConfig.workers_per_gpu`)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from types import SimpleNamespace

from catalog import saxpy_task

from cudaperf.execute import pool
from cudaperf.execute.evaluator import Env
from cudaperf.execute.types import Candidate, Status
from tests.execute.c.test_trusted import _prepared


def _job(task: str):
    return SimpleNamespace(task=SimpleNamespace(id=task))


def test_a_tasks_jobs_go_to_one_worker_and_new_tasks_to_the_least_busy():
    r = pool.Router(2)
    for i, t in enumerate("aabab"):
        r.put(i, _job(t))
    assert r.owner == {"a": 0, "b": 1}
    assert [r.get(0)[0] for _ in range(3)] == [0, 1, 3]
    assert [r.get(1)[0] for _ in range(2)] == [2, 4]


def test_an_idle_worker_takes_a_busy_ones_oldest_job_only_when_enough_wait():
    r = pool.Router(2, steal_at=3)
    for i in range(2):
        r.put(i, _job("a"))
    got: list = []
    t = threading.Thread(target=lambda: got.append(r.get(1)), daemon=True)
    t.start()
    time.sleep(0.2)
    assert got == []  # two waiting for worker 0: worker 1 waits
    r.put(2, _job("a"))
    t.join(5)
    assert got and got[0][0] == 0  # three: worker 1 takes the oldest
    assert r.owner == {"a": 0}  # the task stays worker 0's


def test_owners_outlive_one_batch_and_close_ends_every_wait():
    owner: dict = {}
    first = pool.Router(2, owner)
    first.put(0, _job("a"))
    first.put(1, _job("b"))
    second = pool.Router(2, owner)
    second.put(0, _job("b"))
    assert second.get(1)[0] == 0  # b's worker from the batch before
    got: list = []
    t = threading.Thread(target=lambda: got.append(second.get(0)), daemon=True)
    t.start()
    second.close()
    t.join(5)
    assert got == [None]


def test_workers_per_gpu_runs_each_gpus_jobs_on_that_many_workers(
    cpu_config, fake_libs, monkeypatch
):
    cfg = replace(cpu_config, compile_only=None, trials=3, workers_per_gpu=2, isolate_files=False)
    backend = pool.LocalBackend(cfg, Env("full", (0,), "FAKE", "sm_90", {}, 1))
    assert [(h.gpu, h.slot, h.sharers) for h in backend.handles] == [(0, 0, 2), (0, 1, 2)]
    a, b = saxpy_task(), saxpy_task().model_copy(update={"id": "test/c2cuda/saxpy_b"})

    def prepare(task, cand):  # the fake harness in place of an nvcc build
        return _prepared(task, cand.code, fake_libs["ok"], cfg)

    monkeypatch.setattr(backend.evaluator, "prepare", prepare)
    jobs = [(t, Candidate(code=f"// {t.id} {i}")) for t in (a, b) for i in range(2)]
    try:
        got = dict(backend.run(jobs))
    finally:
        backend.close()
    assert sorted(got) == [0, 1, 2, 3]
    assert all(r.status is Status.OK for r in got.values()), [r.feedback for r in got.values()]
    assert backend.owner == {a.id: 0, b.id: 1}
    assert [h.restarts + (h.jobs > 0) for h in backend.handles] == [1, 1]  # both served
