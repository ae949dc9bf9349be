"""The C→CUDA CPU baseline (`execute.c.baselines`): timed once per task and host in requests
that run no candidate, with the compile pool quiet, kept on disk, handed to every job."""

from __future__ import annotations

import json
import threading
from dataclasses import replace

import pytest

from cudaperf.execute.c import baselines as c_baselines
from cudaperf.execute.evaluator import Env, Evaluator
from cudaperf.execute.gate import QuietGate
from cudaperf.execute.isolation.sandbox import WorkerHandle
from cudaperf.execute.types import Status
from tests.execute.c.test_trusted import SLOW_FILL_FAKE, _fake_lib, _prepared, _slow_task


def _setup(cpu_config, tmp_path, gate=None):
    cfg = replace(
        cpu_config,
        compile_only=None,
        trials=10,
        run_timeout_s=20,
        cpu_trials=2,
        cache_dir=tmp_path / "cache",
    )
    ev = Evaluator(cfg, Env("full", (0,), "FAKE", "sm_90", {}, 1))
    lib = _fake_lib(tmp_path, "sf", SLOW_FILL_FAKE)
    return cfg, ev, _prepared(_slow_task(), "slow_fill", lib, cfg)


def _spy(h: WorkerHandle, gate: QuietGate | None = None) -> list[tuple]:
    """Record each request the handle sends: (op, phase, gate holders, the request)."""
    sent, real = [], h._send

    def send(req, timeout):
        sent.append((req["op"], req.get("phase"), gate.holders if gate else None, req))
        return real(req, timeout)

    h._send = send
    return sent


def test_cpu_baselines_are_timed_once_in_clean_requests_and_kept_on_disk(cpu_config, tmp_path):
    gate = QuietGate()
    cfg, ev, p = _setup(cpu_config, tmp_path)
    h = WorkerHandle(None, cfg, gate=gate)
    sent = _spy(h, gate)
    try:
        res = ev.finish(p, h.request(ev.request(p), 60))
    finally:
        h.close()
    assert res.status is Status.OK, res.feedback
    # the reference is drawn with the pool running, timed with it quiet, then the job runs
    assert [(op, phase, held) for op, phase, held, _ in sent] == [
        ("c_baselines", "draw", (0, False)),
        ("c_baselines", "time", (0, True)),
        ("run", None, (0, False)),
    ]
    assert all("lib" not in r for op, _, _, r in sent if op == "c_baselines")  # no candidate
    job = sent[-1][3]
    assert "cpu_baseline_cache" not in job
    assert sorted(job["cpu_baselines"]) == sorted(c.name for c in p.task.configs)
    lines = (cfg.cache_dir / c_baselines.FILE).read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(x)["v"] == 2 for x in lines)
    stored = {json.loads(x)["key"].rsplit(":", 1)[1]: json.loads(x)["timing"] for x in lines}
    for c in res.configs:  # every config's baseline is the stored one (150 ms reference)
        assert c.cpu_timing.median_us == stored[c.config]["median_us"] >= 150_000

    # a new evaluator on this host reads the file: no baseline request, the same numbers
    h2 = WorkerHandle(None, cfg, gate=gate)
    sent2 = _spy(h2)
    try:
        res2 = ev.finish(p, h2.request(ev.request(p), 60))
    finally:
        h2.close()
    assert [op for op, *_ in sent2] == ["run"]
    assert [c.cpu_timing.median_us for c in res2.configs] == [
        c.cpu_timing.median_us for c in res.configs
    ]


def test_a_job_uses_the_records_it_is_given_and_times_none_itself(cpu_config, tmp_path):
    """A planted record (an impossible 123.456 s) comes back as the job's baseline: the job
    did not time the reference; a host file with another host's key is timed again."""
    cfg, ev, p = _setup(cpu_config, tmp_path)
    h = WorkerHandle(None, cfg)
    host = c_baselines.host_id(cfg.gcc, cfg.cpu_trials, cfg.cpu_time_budget_s)
    prefix = c_baselines.key_prefix(p.task.model_dump(mode="json"), host)
    timing = {
        "median_us": 123456.0,
        "iqr_us": 0.0,
        "min_us": 123456.0,
        "max_us": 123456.0,
        "trials": 1,
    }
    (cfg.cache_dir).mkdir(parents=True, exist_ok=True)
    (cfg.cache_dir / c_baselines.FILE).write_text(
        "".join(
            json.dumps({"key": prefix + c.name, "timing": timing, "v": 2}) + "\n"
            for c in p.task.configs
        )
    )
    sent = _spy(h)
    try:
        res = ev.finish(p, h.request(ev.request(p), 60))
    finally:
        h.close()
    assert [op for op, *_ in sent] == ["run"]
    assert [c.cpu_timing.median_us for c in res.configs] == [123456.0] * 4
    assert res.speedup_vs_cpu is not None


def test_a_failed_baseline_request_leaves_the_job_without_a_cpu_baseline(cpu_config, tmp_path):
    cfg, ev, p = _setup(cpu_config, tmp_path)
    h = WorkerHandle(None, cfg)
    real = h._send
    h._send = lambda req, t: (
        {"status": "timeout", "message": "x"} if req["op"] == "c_baselines" else real(req, t)
    )
    try:
        res = ev.finish(p, h.request(ev.request(p), 60))
        again = h.request(ev.request(p), 60)  # asked once per handle: not again
    finally:
        h.close()
    assert res.status is Status.OK and all(c.cpu_timing is None for c in res.configs)
    assert res.speedup_vs_cpu is None and again["status"] == "ok"
    assert not (cfg.cache_dir / c_baselines.FILE).exists()


def test_the_key_names_task_host_and_config():
    task = {"id": "t", "source": "void f(){}", "configs": [{"name": "a"}, {"name": "b"}]}
    p1 = c_baselines.key_prefix(task, "h1")
    assert p1 != c_baselines.key_prefix(task, "h2")
    assert p1 != c_baselines.key_prefix({**task, "source": "void f(){;}"}, "h1")
    assert c_baselines.missing(task, {p1 + "a": {}}, p1)
    assert not c_baselines.missing(task, {p1 + "a": {}, p1 + "b": {}}, p1)
    assert c_baselines.host_id("gcc", 3, 1.0) != c_baselines.host_id("gcc", 5, 1.0)


def test_the_gate_quiets_compiles_and_a_waiting_quiet_goes_first():
    gate = QuietGate()
    order: list[str] = []
    in_busy, release = threading.Event(), threading.Event()

    def compile_(name: str, hold: threading.Event | None = None) -> None:
        with gate.busy():
            order.append(f"{name} start")
            if hold is not None:
                in_busy.set()
                hold.wait(10)
            order.append(f"{name} end")

    first = threading.Thread(target=compile_, args=("c1", release))
    first.start()
    assert in_busy.wait(10)

    def time_() -> None:
        with gate.quiet():
            order.append("time")

    timer = threading.Thread(target=time_)
    timer.start()
    while gate._waiting == 0:  # the timing waits for c1
        threading.Event().wait(0.01)
    second = threading.Thread(target=compile_, args=("c2",))
    second.start()  # arrives while the timing waits: must not start before it
    threading.Event().wait(0.2)
    assert order == ["c1 start"]
    release.set()
    for t in (first, timer, second):
        t.join(10)
    assert order == ["c1 start", "c1 end", "time", "c2 start", "c2 end"]
    assert gate.holders == (0, False)


def test_the_local_backend_compiles_inside_the_gate_its_workers_time_in(cpu_config, monkeypatch):
    from cudaperf.execute import pool

    cfg = replace(cpu_config, compile_only=True)
    backend = pool.LocalBackend(cfg, Env("compile-only", (), "", "sm_90", {}, 1))
    seen = []
    ev = backend.evaluator
    monkeypatch.setattr(
        ev, "prepare", lambda t, c: seen.append(backend.gate.holders) or pytest.fail("stop here")
    )
    with pytest.raises(pytest.fail.Exception):
        pool.prepare_cached(ev, _slow_task(), p_cand(), None, backend.gate)
    assert seen == [(1, False)]
    assert all(h.gate is backend.gate for h in backend.handles)
    backend.close()


def p_cand():
    from cudaperf.execute.types import Candidate

    return Candidate(code="// nothing")


def test_a_tasks_complete_records_are_read_from_the_file_once_per_handle(
    cpu_config, tmp_path, monkeypatch
):
    """The host file holds every task's lines (64 k at the dataset's size): a handle keeps a
    task's records once none is missing instead of reading the file before every job."""
    from cudaperf.execute import baseline_records

    cfg, ev, p = _setup(cpu_config, tmp_path)
    reads, real = [], baseline_records.read_records
    monkeypatch.setattr(baseline_records, "read_records", lambda *a: reads.append(a) or real(*a))
    h = WorkerHandle(None, cfg)
    try:
        jobs = [h.request(ev.request(p), 60) for _ in range(3)]
    finally:
        h.close()
    assert all(j["status"] == "ok" for j in jobs)
    assert len(reads) == 1
    assert jobs[0]["configs"][0]["cpu_timing"] == jobs[2]["configs"][0]["cpu_timing"]
