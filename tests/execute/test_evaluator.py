import tempfile
import time

from catalog import saxpy_task
from torch_cpu import relu_task

from cudaperf.execute.evaluator import Env, Evaluator, Prepared
from cudaperf.execute.types import Candidate, Status


def _finish(cpu_config, reply: dict, op: str = "torch"):
    ev = Evaluator(cpu_config, Env("full", (0,), "FAKE", "sm_90", {}, 1))
    task = relu_task() if op == "torch" else saxpy_task()  # the job's kind is its task's
    p = Prepared(task, Candidate(code="x"), "k", "", "", "", [], [], tempfile.mkdtemp(),
                 time.monotonic())  # fmt: skip
    return ev.finish(p, reply)


def test_launched_kernels_reach_the_result_only_when_observed(cpu_config):
    base = {"status": "wrong_output", "configs": [], "message": "m"}
    res = _finish(cpu_config, base | {"launched": ["relu_kernel"]})
    assert res.status is Status.WRONG_OUTPUT and res.launched == ["relu_kernel"]
    assert _finish(cpu_config, base | {"launched": None}).launched is None
    assert _finish(cpu_config, base, op="run").launched is None  # C→CUDA: not observed


def test_torch_requests_name_the_device(cpu_config):
    ev = Evaluator(cpu_config, Env("full", (0,), "FAKE", "sm_90", {}, 1))
    p = Prepared(relu_task(), Candidate(code="x"), "k", "", "", "", [], [], tempfile.mkdtemp(),
                 time.monotonic())  # fmt: skip
    req = ev.request(p)
    assert req["device"] == "cuda" and req["salt"] == 1 and req["op"] == "torch"
