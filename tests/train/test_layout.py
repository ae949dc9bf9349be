from __future__ import annotations

import multiprocessing
import shutil
import time
from pathlib import Path

import pytest

from cudaperf.execute.session import EvalSession, training_config
from cudaperf.execute.types import Candidate
from cudaperf.train.layout import GpuLock, MeteredEvaluator, physical_gpu, plan_layout
from tests.train.helpers import sample_c_tasks


def test_one_process_times_where_told_and_knows_when_it_shares_the_training_gpu():
    apart = plan_layout((1,), [0], 0, available=[0, 1])
    assert apart.eval_gpus == (1,) and not apart.shares_train_gpu and not apart.lock_eval
    assert 0 not in apart.eval_gpus  # the training GPU is not a timing GPU
    shared = plan_layout((0,), [0], 0, available=[0])
    assert shared.eval_gpus == (0,) and shared.shares_train_gpu and not shared.lock_eval
    default = plan_layout(None, [0], 0, available=[0, 1])
    assert default.eval_gpus is None and default.shares_train_gpu
    cpu = plan_layout(None, [None], 0)
    assert cpu.processes == 1 and cpu.train_gpus == () and not cpu.shares_train_gpu
    assert plan_layout(None, [None], 0).record()["kind"] == "layout"


def test_several_processes_time_on_their_own_gpu_or_on_gpus_nobody_trains_on():
    own = plan_layout(None, [0, 1], 1, available=[0, 1])
    assert own.processes == 2 and own.eval_gpus == (1,) and own.shares_train_gpu
    assert not own.lock_eval
    apart = plan_layout((2, 3), [0, 1], 0, available=[0, 1, 2, 3])
    assert apart.eval_gpus == (2, 3) and apart.lock_eval and not apart.shares_train_gpu
    with pytest.raises(ValueError, match=r"overlaps the training GPUs: GPU 1 \(process 1\)"):
        plan_layout((1,), [0, 1], 0, available=[0, 1])
    cpus = plan_layout(None, [None, None], 1)
    assert cpus.processes == 2 and cpus.process == 1 and cpus.eval_gpus is None


def test_an_eval_gpu_the_machine_lacks_is_refused():
    with pytest.raises(ValueError, match="no GPU 1 .nvidia-smi lists: 0"):
        plan_layout((1,), [0], 0, available=[0])
    with pytest.raises(ValueError, match="lists: none"):
        plan_layout((0,), [None], 0, available=[])


def test_the_training_device_maps_through_cuda_visible_devices():
    assert physical_gpu(0, None) == 0 and physical_gpu(1, "") == 1
    assert physical_gpu(1, "2,3") == 3 and physical_gpu(0, " 1 ") == 1
    with pytest.raises(ValueError, match="not UUIDs"):
        physical_gpu(0, "GPU-5a7d1c2e")
    with pytest.raises(ValueError, match="cuda:2"):
        physical_gpu(2, "0,1")


def _hold(folder: str, gpus: tuple, log: str) -> None:
    def timing(jobs):  # stands for an evaluation batch that times on `gpus`
        t0 = time.time()
        time.sleep(0.4)
        with open(log, "a") as f:
            f.write(f"{t0} {time.time()}\n")
        return []

    MeteredEvaluator(timing, GpuLock(folder, gpus))([])


def test_gpu_lock_keeps_three_processes_timing_apart(tmp_path):
    """Processes whose evaluators share timing GPUs: their batches never overlap."""
    ctx = multiprocessing.get_context("fork")
    log = str(tmp_path / "held.txt")
    procs = [
        ctx.Process(target=_hold, args=(str(tmp_path / "locks"), g, log))
        for g in ((0, 1), (1, 0), (1,))
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    spans = sorted(tuple(map(float, line.split())) for line in Path(log).read_text().splitlines())
    assert len(spans) == 3
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end  # never two holders at once


def test_metered_evaluator_counts_candidates_cache_hits_and_waiting(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("the compile-only evaluator needs nvcc")
    task = sample_c_tasks()[0]
    job = (task, Candidate(code=task.implementations[0].code))
    session = EvalSession(training_config(compile_only=True, cache_dir=tmp_path / "cache"))
    ev = MeteredEvaluator(session, GpuLock(tmp_path / "locks", (0,)))
    try:
        ev([job])
        ev([job, (task, Candidate(code="not cuda"))])
        first = session._backend is not None  # (the session is open)
        got = ev.take()
        assert got["candidates"] == 3 and got["cached"] == 1  # the repeat came from the cache
        assert got["evaluator_s"] > 0 and got["eval_wait_s"] >= 0 and first
        # where the time went: the two builds' seconds, the cached result's left out
        assert set(got["eval_phases_s"]) == {"compile"}
        assert 0 < got["eval_phases_s"]["compile"] <= got["evaluator_s"]
        again = ev([job])[0]
        assert again.cached and again.phases["compile"] > 0  # a hit keeps its run's phases ...
        assert ev.take()["eval_phases_s"] == {}  # ... but costs nothing now
        assert ev.take()["candidates"] == 0  # take() resets
    finally:
        ev.close()
    assert session._backend is None  # closing the meter closes the session


FAKE_SMI = """#!/bin/sh
case "$*" in
  *--query-gpu=index*) printf '0, NVIDIA H200, 9.0, 570.1\\n1, NVIDIA H200, 9.0, 570.1\\n' ;;
  *) echo "NVIDIA-SMI 570.1" ;;
esac
"""


def test_the_session_binds_its_worker_to_the_eval_gpu(tmp_path, monkeypatch):
    """Two GPUs as nvidia-smi reports them (a stand-in script on PATH: no GPU here): a
    session for --eval-gpus 1 starts one worker, whose CUDA_VISIBLE_DEVICES is 1."""
    from cudaperf.train.grpo import GrpoOptions, make_scorer

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text(FAKE_SMI)
    (bindir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv(
        "PATH", f"{bindir}:{Path(shutil.which('python3') or '/usr/bin').parent}:/usr/bin:/bin"
    )
    layout = plan_layout((1,), [0], 0, available=[0, 1])
    opts = GrpoOptions(out=tmp_path / "run", eval_gpus=(1,), ranker="none")
    scorer = make_scorer(opts, sample_c_tasks()[:1], layout=layout)
    session = scorer.evaluator.inner
    try:
        from cudaperf.reward.analyzers import PooledAnalyzer

        assert isinstance(scorer.analyzer, PooledAnalyzer)  # a turn's analyses in a pool
        assert session.mode == "full"
        (handle,) = session.backend.handles
        assert handle.gpu == 1
        reply = handle.request({"op": "hello"}, timeout=60)
        assert reply.get("ok") and reply["pid"] == handle.proc.pid, reply  # the worker itself
        env = Path(f"/proc/{handle.proc.pid}/environ").read_bytes().split(b"\0")
        assert b"CUDA_VISIBLE_DEVICES=1" in env
    finally:
        scorer.evaluator.close()


def _run_folder(out: Path, *names: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for n in names:
        if n.endswith("/"):
            (out / n).mkdir()
            (out / n / "x").write_text("x")
        else:
            (out / n).write_text("x")
    return out


@pytest.mark.parametrize(
    "marker", ["steps.jsonl", "completions.jsonl", "report.json", "final/", "checkpoint-3/"]
)
def test_a_folder_holding_a_run_is_refused_unless_resumed_or_overwritten(tmp_path, marker):
    from cudaperf.train.layout import check_run_folder

    out = _run_folder(tmp_path / "run", marker, "holdout.json")
    with pytest.raises(ValueError, match="holds a run") as e:
        check_run_folder(out, resume=False, overwrite=False)
    for fix in ("--resume", "--overwrite", "another --out", str(out), marker):
        assert fix in str(e.value)
    check_run_folder(out, resume=True, overwrite=False)
    check_run_folder(out, resume=False, overwrite=True)
    with pytest.raises(ValueError, match="give one"):
        check_run_folder(out, resume=True, overwrite=True)


def test_a_new_empty_or_foreign_folder_and_a_lone_holdout_are_no_run(tmp_path):
    from cudaperf.train.layout import check_run_folder

    check_run_folder(tmp_path / "new", resume=False, overwrite=False)
    check_run_folder(_run_folder(tmp_path / "a", "notes.txt", "checkpoints.md"), False, False)
    check_run_folder(_run_folder(tmp_path / "b", "holdout.json"), False, False)


def test_overwrite_removes_the_run_and_nothing_else(tmp_path):
    from cudaperf.train.layout import clear_run

    out = _run_folder(
        tmp_path / "run",
        "steps.jsonl",
        "report.json",
        "holdout.json",
        "final/",
        "checkpoint-2/",
        "checkpoint-4/",
        "notes.txt",
        "data/",
    )
    gone = clear_run(out)
    assert len(gone) == 6
    assert sorted(p.name for p in out.iterdir()) == ["data", "notes.txt"]
    assert clear_run(tmp_path / "missing") == []


def test_the_newest_complete_checkpoint_is_resumed(tmp_path):
    from cudaperf.train.layout import last_checkpoint

    for n in (3, 9, 10):
        (tmp_path / f"checkpoint-{n}").mkdir()
        (tmp_path / f"checkpoint-{n}" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-12").mkdir()  # a save cut short: no trainer state yet
    (tmp_path / "checkpoint-12" / "model.safetensors").write_text("x")
    (tmp_path / "checkpoint-old").mkdir()  # a user's copy: no step number, passed over
    (tmp_path / "checkpoint-old" / "trainer_state.json").write_text("{}")
    assert last_checkpoint(tmp_path) == str(tmp_path / "checkpoint-10")  # 10 > 9 (numbers)
    assert last_checkpoint(tmp_path / "none") is None


def test_a_resume_must_give_the_options_the_run_started_with(tmp_path):
    """options.json records what changes what a run trains; a resume may change only where,
    how long and on which machine it runs (RESUMABLE), and a path by its file name."""
    from cudaperf.train.layout import RUN_FILES, check_resume, record_options, run_files

    out = tmp_path / "run"
    opts = {
        "out": out,
        "tasks": Path("/data/tasks.jsonl.gz"),
        "lora_r": 16,
        "lr": 1e-5,
        "kinds": ("c2cuda",),
        "reward": {"name": "unified", "ranker_weight": 0.25},
        "max_steps": 15,
        "wall_budget_s": 1450.0,
        "adapter": "/root/work/sft/final",
        "eval_gpus": None,
    }
    check_resume(out, opts)  # a run older than options.json: not checked
    record_options(out, opts)
    assert "options.json" in RUN_FILES and out / "options.json" in run_files(out)
    chunk = opts | {
        "max_steps": 30,
        "wall_budget_s": 900.0,
        "adapter": "/root/work/run/checkpoint-15",
        "eval_gpus": (1,),
        "tasks": Path("/elsewhere/tasks.jsonl.gz"),  # the same file on another machine
    }
    check_resume(out, chunk)
    for change, shown in (
        ({"lora_r": 8}, "--lora-r 8 (the run: 16)"),
        ({"tasks": Path("/data/other.jsonl.gz")}, "--tasks 'other.jsonl.gz'"),
        ({"kinds": ("torch2cuda",)}, "--kinds ['torch2cuda']"),
        ({"reward": {"name": "outcome_only", "ranker_weight": 0.0}}, "--reward"),
        ({"seed": 3}, "--seed 3 (the run: None)"),
    ):
        with pytest.raises(ValueError, match="other settings") as e:
            check_resume(out, opts | change)
        msg = str(e.value)
        assert shown in msg and "\n" not in msg and "--overwrite" in msg, msg
    (out / "options.json").write_text("{oops")
    with pytest.raises(ValueError, match="options.json: not readable"):
        check_resume(out, opts)


def test_an_option_added_after_a_run_started_is_compared_with_its_default(tmp_path):
    """A run started before `sampler` existed ran with its default: resuming it with the
    default is the same run, with another value it is not; without the defaults every new
    option would refuse every older run's resume."""
    from dataclasses import asdict

    from cudaperf.train.grpo import GrpoOptions
    from cudaperf.train.layout import check_resume, option_defaults, record_options

    opts = asdict(GrpoOptions(out=tmp_path / "run"))
    record_options(tmp_path / "run", {k: v for k, v in opts.items() if k != "sampler"})
    defaults = option_defaults(GrpoOptions)
    assert defaults["sampler"] == "trl" and "out" not in defaults  # out has no default
    check_resume(tmp_path / "run", opts, defaults)
    with pytest.raises(ValueError, match=r"--sampler 'epoch' \(the run: 'trl'\)"):
        check_resume(tmp_path / "run", opts | {"sampler": "epoch"}, defaults)
    with pytest.raises(ValueError, match=r"--sampler 'trl' \(the run: None\)"):
        check_resume(tmp_path / "run", opts)
    check_resume(tmp_path / "run", GrpoOptions(out=tmp_path / "run"))  # its defaults, derived
    with pytest.raises(ValueError, match=r"--sampler 'epoch' \(the run: 'trl'\)"):
        check_resume(tmp_path / "run", GrpoOptions(out=tmp_path / "run", sampler="epoch"))
