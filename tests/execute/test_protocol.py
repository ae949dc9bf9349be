"""The typed worker protocol: what the evaluator sends parses back on the worker side, what
the worker sends parses back on the evaluator side, and a malformed reply is the evaluator's
infra error (named in one line), never a crash or the candidate's failure."""

import json
import tempfile
import time

import pytest
from catalog import saxpy_task
from torch_cpu import relu_task

from cudaperf.execute.c.trusted import Libs
from cudaperf.execute.evaluator import Env, Evaluator, Prepared
from cudaperf.execute.isolation.worker import handle
from cudaperf.execute.protocol import (
    HelloRequest,
    JobReply,
    MalformedMessage,
    RunRequest,
    TorchRequest,
    parse_reply,
    parse_request,
)
from cudaperf.execute.types import Candidate, ConfigResult, Status, Timing


def _evaluator(cpu_config) -> Evaluator:
    return Evaluator(cpu_config, Env("full", (0,), "FAKE", "sm_90", {}, 7))


def _prepared(task) -> Prepared:
    return Prepared(
        task,
        Candidate(code="x"),
        "k",
        "/lib.so",
        "/ref.so",
        "log",
        ["f"],
        ["n"],
        tempfile.mkdtemp(),
        time.monotonic(),
    )


@pytest.mark.parametrize("op", ["run", "torch"])
def test_requests_round_trip_through_json(cpu_config, op):
    task = saxpy_task() if op == "run" else relu_task()
    ev = _evaluator(cpu_config)
    typed = ev.typed_request(_prepared(task))
    assert isinstance(typed, RunRequest if op == "run" else TorchRequest)
    back = parse_request(json.loads(json.dumps(ev.request(_prepared(task)))))
    assert back.op == op and back.task == task and back.salt == 7
    assert back.model_copy(update={"workdir": typed.workdir}) == typed


def test_the_wire_keys_are_the_ones_the_sandbox_stages(cpu_config):
    """WorkerHandle copies what a request names by these keys into the confined worker."""
    ev = _evaluator(cpu_config)
    run = ev.request(_prepared(saxpy_task()))
    torch = ev.request(_prepared(relu_task()))
    assert {"workdir", "lib", "ref_lib"} <= run.keys()
    assert {"workdir", "ext_dir", "baseline_cache"} <= torch.keys()


def test_a_request_with_a_misspelt_or_missing_field_is_refused():
    good = {"op": "hello"}
    assert isinstance(parse_request(good), HelloRequest)
    with pytest.raises(MalformedMessage, match="malformed worker request: hello.pid"):
        parse_request({"op": "hello", "pid": 1})
    with pytest.raises(MalformedMessage, match="malformed worker request"):
        parse_request({"op": "nope"})
    with pytest.raises(MalformedMessage, match=r"run.task: Field required \(and 13 more\)"):
        parse_request({"op": "run"})


def test_the_worker_answers_a_malformed_request_with_an_infra_error_and_a_restart():
    reply = handle({"op": "torch", "code": "x"}, Libs())
    assert parse_reply(reply).status is Status.INFRA_ERROR and reply["restart"] is True
    assert "malformed worker request" in reply["message"]
    assert handle({"op": "hello"}, Libs())["ok"] is True


def test_replies_round_trip_and_malformed_ones_are_named():
    t = Timing.of([1.0, 2.0])
    cr = ConfigResult(config="base", held_out=False, correct=True, timing=t)
    reply = JobReply(status=Status.OK, configs=[cr], launched=["k"])
    assert parse_reply(json.loads(json.dumps(reply.wire()))) == reply
    with pytest.raises(MalformedMessage, match="reply: status"):
        parse_reply({"status": "fine", "configs": []})
    with pytest.raises(MalformedMessage, match=r"reply: configs\.0\.timing"):
        parse_reply({"status": "ok", "configs": [{**cr.model_dump(), "timing": "fast"}]})
    with pytest.raises(MalformedMessage, match="reply: surprise"):
        parse_reply({"status": "ok", "surprise": 1})
    with pytest.raises(MalformedMessage, match="reply: launched"):
        parse_reply({"status": "ok", "launched": "k"})


@pytest.mark.parametrize(
    "raw",
    [
        {"configs": []},  # no status
        {"status": "ok", "configs": [{"config": "base"}]},  # a config without its verdict
        ["ok"],  # not an object at all
    ],
)
def test_a_malformed_reply_is_an_infra_error_not_the_candidate_s_failure(cpu_config, raw):
    ev = _evaluator(cpu_config)
    p = _prepared(relu_task())
    res = ev.finish(p, raw)
    assert res.status is Status.INFRA_ERROR
    assert res.feedback[0].startswith("malformed worker reply")
    assert "not the candidate's" in res.feedback[0] and res.configs == []
    assert res.compile_log == "log" and res.findings == ["f"]


def test_a_well_formed_reply_still_becomes_its_status(cpu_config):
    ev = _evaluator(cpu_config)
    raw = {
        "status": "wrong_output",
        "message": "m",
        "configs": [
            {"config": "base", "held_out": False, "correct": False, "message": "off by one"}
        ],
    }
    res = ev.finish(_prepared(relu_task()), raw)
    assert res.status is Status.WRONG_OUTPUT and res.configs[0].message == "off by one"


def test_the_candidate_process_gets_a_typed_job_message_without_secrets(tmp_path):
    pytest.importorskip("torch")
    from torch_cpu import HONEST, request

    from cudaperf.execute.protocol import ChildJob
    from cudaperf.execute.pytorch.proc import CandidateProcess, ChildError
    from cudaperf.execute.pytorch.trusted import _job_message

    req = TorchRequest(task=relu_task(), **request(HONEST, workdir=str(tmp_path)))
    msg = _job_message(req)
    assert (
        ChildJob.model_validate(msg).code == HONEST and msg.keys() == ChildJob.model_fields.keys()
    )
    child = CandidateProcess()
    try:
        with pytest.raises(ChildError, match="salt"):  # a key the message must never carry
            child.ask("job", {**msg, "salt": req.salt})
        assert child.ask("job", msg) is None  # the candidate loads
    finally:
        child.close()
