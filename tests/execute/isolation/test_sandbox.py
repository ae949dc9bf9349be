"""The sandboxed worker on the CPU, driven through fake harness libraries (gcc-built)."""

import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest
from catalog import saxpy_task

from cudaperf.execute.build import build_reference
from cudaperf.execute.evaluator import Env, Evaluator, Prepared
from cudaperf.execute.isolation.sandbox import WorkerHandle
from cudaperf.execute.types import Candidate, Status
from tests.execute.isolation.test_confine import needs_ns


@pytest.fixture(params=[True])
def rig(request, cpu_config, fake_libs):
    cfg = replace(
        cpu_config,
        compile_only=None,
        max_output_mb=2,
        trials=10,
        run_timeout_s=3,
        isolate_files=request.param,
    )
    ev = Evaluator(cfg, Env("full", (0,), "FAKE", "sm_90", {}, 1))
    task = saxpy_task()
    ref = build_reference(task, cfg).lib
    h = WorkerHandle(None, cfg)

    def run(name: str, t=task):
        p = Prepared(
            t,
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

    yield run, h
    h.close()


def test_correct_wrong_and_mutating(rig):
    run, _ = rig
    ok = run("ok")
    assert ok.status is Status.OK and len(ok.configs) == 3 and ok.configs[0].timing.trials == 10
    assert "hello from the candidate" in ok.runtime_log
    wrong = run("wrong")
    assert wrong.status is Status.WRONG_OUTPUT
    held = wrong.configs[-1]
    assert held.held_out and not held.correct and held.message
    assert "4096" not in held.message and "index" not in held.message  # its size stays secret
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


@pytest.mark.parametrize("rig", [True, False], indirect=True)
def test_a_call_segment_larger_than_the_output_limit_is_not_the_candidate_s_output(rig):
    """The output limit (2 MiB here, RLIMIT_FSIZE) bounds what the candidate writes, never the
    worker's own call segment: a task whose largest config needs 16 MiB of arrays evaluates
    (it ended runtime_error "wrote more than the output limit" for every candidate while the
    worker ran under the limit), and a candidate that writes past the limit, to stdout or to
    a file after trying to lift its limit, still ends runtime_error."""
    run, h = rig
    big = saxpy_task(sizes=(1000, 2_000_000), held_out=1_500_000)
    ok = run("ok", big)
    assert ok.status is Status.OK, ok.feedback
    assert [c.correct and c.timing is not None for c in ok.configs] == [True, True, True]
    for name in ("flood", "bigfile"):
        res = run(name, big)
        assert res.status is Status.RUNTIME_ERROR, (name, res.feedback)
        assert "output limit of 2 MiB" in res.feedback[0], name
    assert run("ok", big).status is Status.OK


@pytest.mark.parametrize("rig", [True, False], indirect=True)
def test_what_a_candidate_prints_on_a_held_out_config_never_reaches_a_result(rig):
    """A host function that prints its sizes and fails on any size it was not shown: the
    held-out n (4096) must reach neither the runtime log, the feedback, the config messages
    (what refine's feedback quotes); what it printed on the visible configs still does. Also
    when the held-out config comes first in the task, and when the candidate hangs there (a
    timeout kills the worker: what it printed before comes from the worker's early line).
    Its own error text on the held-out config is withheld (letters encode a size too), also
    an error reply it forges on its process's connection."""
    from cudaperf.execute.held_out import WITHHELD

    run, _ = rig
    task = saxpy_task()
    first = task.model_copy(update={"configs": [task.configs[-1], *task.configs[:-1]]})
    cases = (
        ("probe", task),
        ("probe_err", task),
        ("probe", first),
        ("probe_hang", task),
        ("probe_forge", task),
    )
    for name, t in cases:
        res = run(name, t)
        want = Status.TIMEOUT if name == "probe_hang" else Status.RUNTIME_ERROR
        assert res.status is want, (name, res.feedback)
        if name != "probe_hang":  # (a timeout has no per-config results)
            held = next(c for c in res.configs if c.held_out)
            assert not held.correct and len(res.configs) == 3  # visible configs ran first
        assert "probe stderr n=1000" in res.runtime_log and "n=100003" in res.runtime_log, name
        text = "\n".join([res.runtime_log, *res.feedback, *(c.message for c in res.configs)])
        assert "4096" not in text and "four-oh" not in text, (name, text)
        if name in ("probe_err", "probe_forge"):  # text from its process, not a death
            assert held.message == WITHHELD, name


def test_a_function_right_only_on_the_config_s_inputs_is_wrong(rig):
    """|x| instead of x is right on saxpy's positive inputs; the second, signed input set
    (tasks.inputs.separating_distribution) exposes it on every config."""
    run, _ = rig
    res = run("abs")
    assert res.status is Status.WRONG_OUTPUT
    assert "signed, wider-range inputs" in res.configs[0].message
    assert run("ok").status is Status.OK


@pytest.fixture()
def escape_targets(monkeypatch):
    """A host path outside any scratch, and another candidate's file in the host's /tmp."""
    outside = Path(tempfile.mkdtemp(prefix="sandbox-host-", dir="/var/tmp"))
    other = Path(tempfile.mkdtemp(prefix="cudaperf-cand-"))
    (other / "output.log").write_text("another candidate's answer")
    monkeypatch.setenv("CUDAPERF_TEST_WRITE", str(outside / "pwned"))
    monkeypatch.setenv("CUDAPERF_TEST_PEEK", str(other / "output.log"))
    yield outside
    shutil.rmtree(outside, ignore_errors=True)
    shutil.rmtree(other, ignore_errors=True)


@needs_ns
def test_a_confined_candidate_cannot_write_or_peek_and_still_runs(rig, escape_targets):
    run, h = rig
    res = run("escape")
    assert res.status is Status.OK  # its honest part still works, output.log came back
    assert "escape: write blocked" in res.runtime_log and "peek blocked" in res.runtime_log
    assert list(escape_targets.iterdir()) == []
    assert {"mount_ns", "readonly_root", "private_tmpfs", "seccomp"} <= set(h.protections["active"])
    assert h.limits["network_isolated"] is True


@pytest.mark.parametrize("rig", [False], indirect=True)
def test_unconfined_worker_control_escapes(rig, escape_targets):
    """Without isolate_files the same candidate writes the host: the test above can fail."""
    run, _ = rig
    res = run("escape")
    assert "escape: wrote" in res.runtime_log and "escape: peeked" in res.runtime_log
    assert (escape_targets / "pwned").exists()


@needs_ns
def test_job_files_are_staged_into_the_worker_s_private_view_and_back(cpu_config):
    cfg = replace(cpu_config, compile_only=None)
    ext = cfg.cache_dir / "torch_ext" / "stage-test"
    ext.mkdir(parents=True, exist_ok=True)
    (ext / "build.ninja").write_text("prebuilt")
    base = cfg.cache_dir / "torch_baselines-stage-test.jsonl"
    base.write_text('{"key": 1}\n')
    workdir = tempfile.mkdtemp(prefix="cudaperf-cand-")
    other = Path(tempfile.mkdtemp(prefix="cudaperf-cand-"))  # another candidate's folder
    h = WorkerHandle(None, cfg)
    try:
        h.request({"op": "hello"}, 120)  # starts the confined worker
        assert "private_tmpfs" in h.protections["active"]
        req = {"op": "hello", "workdir": workdir, "ext_dir": str(ext), "baseline_cache": str(base)}
        h._stage(req)
        assert Path(h._view(str(ext)), "build.ninja").read_text() == "prebuilt"
        seen = os.listdir(h._view("/tmp"))  # (plus the skeleton of a cache dir under /tmp)
        assert Path(workdir).name in seen and other.name not in seen
        assert not os.path.exists(h._view(str(base)))  # never staged (baseline_job says why)
        Path(h._view(workdir), "output.log").write_text("printed")
        h._unstage(req)
        assert base.read_text().splitlines() == ['{"key": 1}']
        assert Path(workdir, "output.log").read_text() == "printed"
        assert not os.path.exists(h._view(str(ext)))
    finally:
        h.close()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)


@needs_ns
def test_the_worker_s_protections_reach_the_result_on_every_path(rig):
    """What the confined worker reported reaches ExecResult (and its JSON line), also after a
    timeout and a crash; a worker reply that claims protections of its own is overruled."""
    run, h = rig
    for name in ("ok", "hang", "segv"):
        res = run(name)
        run_stage = [p for p in res.protections if p.stage == "run"]
        assert len(run_stage) == 1, name
        assert {"mount_ns", "readonly_root", "seccomp"} <= set(run_stage[0].active), name
        back = type(res).model_validate_json(res.model_dump_json())
        assert back.protections == res.protections
    forged = h.request({"op": "hello", "protections": {"active": ["forged"]}}, 30)
    assert "forged" not in forged["protections"].get("active", [])


@pytest.mark.parametrize("rig", [False], indirect=True)
def test_an_unconfined_worker_says_so_in_the_result(rig):
    run, _ = rig
    res = run("ok")
    (stage,) = [p for p in res.protections if p.stage == "run"]
    assert stage.missing[0] == "all: isolate_files is off"
    # the rig has no CUPTI shim: the launch check's absence is said beside it
    assert [m for m in stage.missing[1:] if not m.startswith("kernel_trace: no CUPTI")] == []


@needs_ns
def test_the_pytorch_candidate_process_runs_under_the_worker_s_protections(cpu_config):
    """The run stage's protections cover the PyTorch→CUDA candidate process too: spawned by
    the confined worker, it inherits its namespaces, read-only view and seccomp filter, so its
    module code cannot write the host while the result names those protections."""
    from torch_cpu import HONEST, relu_task, request

    outside = Path(tempfile.mkdtemp(prefix="sandbox-torch-", dir="/var/tmp"))
    code = f"import pathlib\ntry:\n    pathlib.Path({str(outside / 'pwned')!r}).write_text('x')\n"
    code += "except OSError:\n    print('write blocked')\n" + HONEST
    h = WorkerHandle(None, replace(cpu_config, compile_only=None, isolate_files=True))
    try:
        req = request(code, workdir=tempfile.mkdtemp(prefix="cudaperf-cand-"))
        reply = h.request(req | {"op": "torch", "task": relu_task().model_dump(mode="json")}, 120)
        assert reply["status"] == "ok", reply
        assert list(outside.iterdir()) == []
        assert "write blocked" in Path(req["workdir"], "output.log").read_text()
        assert {"mount_ns", "readonly_root", "seccomp"} <= set(reply["protections"]["active"])
    finally:
        h.close()
        shutil.rmtree(outside, ignore_errors=True)


def _environ_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        items = f.read().decode(errors="replace").split("\0")
    return dict(i.split("=", 1) for i in items if "=" in i)


@pytest.mark.parametrize(
    ("arch", "environ_list", "expected"),
    [("sm_90", None, "9.0"), ("sm_80", None, "8.0"), ("sm_90", "7.5+PTX", "7.5+PTX")],
)
def test_the_prebuild_and_the_worker_get_the_same_arch_list(
    cpu_config, monkeypatch, arch, environ_list, expected
):
    """For one EvalConfig's arch, the load_inline prebuild and the worker process that loads
    its extension run with the same TORCH_CUDA_ARCH_LIST (torch_arch_list(arch), or the
    environment's), else torch rebuilds the extension inside the worker. Both real call
    sites: the prebuild's module code prints what it got, the started worker's environment is
    read from /proc."""
    from cudaperf.execute.build import torch_arch_list
    from cudaperf.execute.pytorch.build import prebuild_torch_candidate
    from tests.execute.pytorch.test_build import ARCH_PROBE

    if environ_list is None:
        monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    else:
        monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", environ_list)
    cfg = replace(cpu_config, compile_only=None, isolate_files=False, arch=arch)
    assert torch_arch_list(arch, os.environ) == expected
    b = prebuild_torch_candidate(ARCH_PROBE, cfg.arch, cfg.cache_dir, timeout_s=60)
    assert b.ok, b.log
    built = [ln for ln in b.log.splitlines() if ln.startswith("TORCH_CUDA_ARCH_LIST=")]
    assert built == [f"TORCH_CUDA_ARCH_LIST={expected}"], b.log
    for h in (WorkerHandle(None, cfg), WorkerHandle(None, replace(cfg, arch=None), arch=arch)):
        try:
            assert h.request({"op": "hello"}, 120).get("pid") == h.proc.pid  # the worker itself
            assert _environ_of(h.proc.pid).get("TORCH_CUDA_ARCH_LIST") == expected
        finally:
            h.close()
