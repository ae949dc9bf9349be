"""The sandboxed worker on the CPU, driven through fake harness libraries (gcc-built)."""

import tempfile
import time
from dataclasses import replace

import pytest
from catalog import saxpy_task

from cudaperf.execute.build import build_reference
from cudaperf.execute.evaluator import Env, Evaluator, Prepared
from cudaperf.execute.sandbox import WorkerHandle
from cudaperf.execute.types import Candidate, Status


@pytest.fixture()
def rig(cpu_config, fake_libs):
    cfg = replace(cpu_config, compile_only=None, max_output_mb=2, trials=10, run_timeout_s=3)
    ev = Evaluator(cfg, Env("full", (0,), "FAKE", "sm_90", {}, 1))
    task = saxpy_task()
    ref = build_reference(task, cfg).lib
    h = WorkerHandle(None, cfg)

    def run(name: str):
        p = Prepared(task, Candidate(code=name), "k", fake_libs[name], ref, "", [], [],
                     tempfile.mkdtemp(), time.monotonic())  # fmt: skip
        return ev.finish(p, h.request(ev.request(p), cfg.run_timeout_s))

    yield run, h
    h.close()


def test_correct_wrong_and_mutating(rig):
    run, _ = rig
    ok = run("ok")
    assert ok.status is Status.OK and len(ok.configs) == 3 and ok.configs[0].timing.trials == 10
    assert "hello from the candidate" in ok.runtime_log
    assert run("wrong").status is Status.WRONG_OUTPUT
    assert run("mutate").status is Status.REJECTED


def test_faults_are_recorded_and_the_worker_recovers(rig):
    run, h = rig
    hang = run("hang")
    assert hang.status is Status.TIMEOUT and "hang" in hang.feedback[0]
    segv = run("segv")
    assert segv.status is Status.RUNTIME_ERROR and "segmentation fault" in segv.feedback[0]
    flood = run("flood")
    assert flood.status is Status.RUNTIME_ERROR and "output limit" in flood.feedback[0]
    cuda = run("cuda_error")
    assert cuda.status is Status.RUNTIME_ERROR and "IllegalAddress" in cuda.feedback[0]
    assert run("ok").status is Status.OK
    assert h.limits["fsize_mb"] == 2 and h.limits["nofile"] == 256
