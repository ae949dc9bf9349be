import tempfile
import time

from catalog import saxpy_task
from torch_cpu import relu_task

from cudaperf.execute.evaluator import Env, Evaluator, Prepared
from cudaperf.execute.types import Candidate, Status


def _finish(cpu_config, reply: dict, op: str = "torch"):
    ev = Evaluator(cpu_config, Env("full", (0,), "FAKE", "sm_90", {}, 1))
    task = relu_task() if op == "torch" else saxpy_task()  # the job's kind is its task's
    p = Prepared(
        task, Candidate(code="x"), "k", "", "", "", [], [], tempfile.mkdtemp(), time.monotonic()
    )
    return ev.finish(p, reply)


def test_launched_kernels_reach_the_result_only_when_observed(cpu_config):
    base = {"status": "wrong_output", "configs": [], "message": "m"}
    res = _finish(cpu_config, base | {"launched": ["relu_kernel"]})
    assert res.status is Status.WRONG_OUTPUT and res.launched == ["relu_kernel"]
    assert _finish(cpu_config, base | {"launched": None}).launched is None
    assert _finish(cpu_config, base, op="run").launched is None  # C→CUDA: not observed


def test_torch_requests_name_the_device(cpu_config):
    ev = Evaluator(cpu_config, Env("full", (0,), "FAKE", "sm_90", {}, 1))
    p = Prepared(
        relu_task(),
        Candidate(code="x"),
        "k",
        "",
        "",
        "",
        [],
        [],
        tempfile.mkdtemp(),
        time.monotonic(),
    )
    req = ev.request(p)
    assert req["device"] == "cuda" and req["salt"] == 1 and req["op"] == "torch"


def test_the_run_s_protections_come_from_the_reply_and_isolation_keys_the_cache(cpu_config):
    from dataclasses import replace

    from torch_cpu import relu_task

    reply = {
        "status": "wrong_output",
        "configs": [],
        "message": "m",
        "protections": {"active": ["mount_ns"], "missing": {"seccomp": "EINVAL"}},
    }
    run = [p for p in _finish(cpu_config, reply).protections if p.stage == "run"]
    assert run[0].active == ("mount_ns",) and run[0].missing == ("seccomp: EINVAL",)
    env = Env("full", (0,), "FAKE", "sm_90", {}, 1)
    on = Evaluator(cpu_config, env).key(relu_task(), Candidate(code="x"))
    off = Evaluator(replace(cpu_config, isolate_files=False), env)
    # a result measured unconfined is never served as if it had been confined
    assert off.key(relu_task(), Candidate(code="x")) != on


def test_held_out_sizes_are_redacted_in_one_place_for_every_track(cpu_config):
    """A reply whose held-out message still names its size (as a track that forgot would
    send it) leaves no number of it in the result: configs, feedback, runtime log."""
    from cudaperf.execute.types import ConfigResult

    msg = "1 of 5000011 elements of y are wrong (first at index 4999999)"
    cfg = ConfigResult(config="heldout", held_out=True, correct=False, message=msg)
    seen = ConfigResult(config="base", held_out=False, correct=False, message="1 of 1000 wrong")
    for op in ("torch", "run"):
        rows = [seen.model_dump(mode="json"), cfg.model_dump(mode="json")]
        reply = {"status": "wrong_output", "message": msg, "configs": rows}
        res = _finish(cpu_config, reply, op=op)
        text = " ".join([res.runtime_log, *res.feedback, *(c.message for c in res.configs)])
        assert "5000011" not in text and "4999999" not in text, text
        assert res.configs[0].message == "1 of 1000 wrong"  # a visible config keeps its numbers
