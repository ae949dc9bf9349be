"""Fault recovery in the GPU worker, on the CPU: a candidate's sticky CUDA error, crash,
flood or hang ends that candidate with its status, and the next candidate is evaluated on a
fresh candidate process (both tracks); the worker stays unless a PyTorch→CUDA child died
holding its buffers."""

import tempfile
import time
from dataclasses import replace

import pytest
from catalog import saxpy_task
from torch_cpu import HONEST, relu_task, request

from cudaperf.execute.build import build_reference
from cudaperf.execute.c.trusted import Libs
from cudaperf.execute.evaluator import Env, Evaluator, Prepared
from cudaperf.execute.isolation.sandbox import WorkerHandle
from cudaperf.execute.isolation.worker import handle
from cudaperf.execute.types import Candidate, Status

pytest.importorskip("torch")

STICKY = """import torch
torch._cudaperf_poisoned = True  # state a broken process would carry into the next job
class ModelNew(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
"""

SEGFAULT = """import ctypes, torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        ctypes.string_at(0)
        return x
"""

FLOOD = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        for i in range(10**7):
            print("flood flood flood flood flood flood", i)
        return torch.relu(x)
"""

HANG = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        while True:
            pass
"""

COPY = """import torch
torch._cudaperf_poisoned = True
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x.clone()
"""

FRESH_ONLY = HONEST.replace(
    "        return torch.clamp(x, min=0.0)",
    "        if getattr(torch, '_cudaperf_poisoned', False):\n"
    "            raise RuntimeError('ran in the process of an earlier candidate')\n"
    "        return torch.clamp(x, min=0.0)",
)


def test_an_error_of_the_worker_itself_asks_for_a_restart():
    reply = handle({"op": "run"}, Libs())  # no workdir: fails before touching this process
    assert reply["status"] == "infra_error" and reply["restart"] is True


@pytest.fixture()
def torch_worker(cpu_config):
    cfg = replace(cpu_config, compile_only=None, max_output_mb=2, run_timeout_s=20)
    h = WorkerHandle(None, cfg)
    task = relu_task()

    def ask(code: str, timeout: float = 60.0) -> dict:
        req = {
            "op": "torch",
            "task": task.model_dump(mode="json"),
            **request(code, output_limit_mb=cfg.max_output_mb),
        }
        return h.request(req, timeout)

    yield ask, h
    h.close()


def test_torch_faults_end_with_their_status_and_the_next_candidate_runs_fresh(torch_worker):
    ask, h = torch_worker
    sticky = ask(STICKY)
    assert sticky["status"] == "runtime_error" and "illegal memory access" in sticky["message"]
    assert h.proc is None  # replaced: the dead child may never release the buffers it mapped
    fresh = ask(FRESH_ONLY)
    assert fresh["status"] == "ok"  # a fresh candidate process (and worker)
    assert set(fresh["phases"]) == {"run"} and fresh["phases"]["run"] > 0  # (types.PHASES)
    pid = h.proc.pid
    assert ask(COPY)["status"] == "wrong_output" and h.proc.pid == pid  # kept: nothing broke
    assert ask(FRESH_ONLY)["status"] == "ok"
    segv = ask(SEGFAULT)
    assert segv["status"] == "runtime_error" and "segmentation fault" in segv["message"]
    flood = ask(FLOOD)
    assert flood["status"] == "runtime_error" and "output limit" in flood["message"]
    assert ask(FRESH_ONLY)["status"] == "ok"


def test_torch_hang_times_out_and_the_next_candidate_is_served(torch_worker):
    ask, h = torch_worker
    t0 = time.monotonic()
    hang = ask(HANG, timeout=6)  # a torch import (~2 s) and then the hang
    assert hang["status"] == "timeout" and time.monotonic() - t0 < 40
    assert ask(FRESH_ONLY)["status"] == "ok"


def test_c_faults_end_only_the_candidates_process_and_the_worker_stays(cpu_config, fake_libs):
    """A C→CUDA candidate's sticky CUDA error, host crash or output flood ends its own process
    with its status; the worker (which holds the reference sets) is the same one after each,
    and the next candidate is served."""
    cfg = replace(cpu_config, compile_only=None, trials=5, run_timeout_s=10, max_output_mb=2)
    ev = Evaluator(cfg, Env("full", (0,), "FAKE", "sm_90", {}, 1))
    task = saxpy_task()
    ref = build_reference(task, cfg).lib
    h = WorkerHandle(None, cfg)
    try:

        def run(name: str):
            p = Prepared(
                task,
                Candidate(code=name),
                "k",
                fake_libs[name],
                ref,
                "",
                [],
                [],
                tempfile.mkdtemp(),
                time.monotonic(),
            )
            return ev.finish(p, h.request(ev.request(p), cfg.run_timeout_s))

        pid = h.request({"op": "hello"}, 30)["pid"]
        bad = run("cuda_error")
        assert bad.status is Status.RUNTIME_ERROR and "IllegalAddress" in bad.feedback[0]
        segv = run("segv")
        assert segv.status is Status.RUNTIME_ERROR and "segmentation fault" in segv.feedback[0]
        flood = run("flood")
        assert flood.status is Status.RUNTIME_ERROR and "output limit" in flood.feedback[0]
        assert run("ok").status is Status.OK
        assert h.request({"op": "hello"}, 30)["pid"] == pid and h.restarts == 0
    finally:
        h.close()
