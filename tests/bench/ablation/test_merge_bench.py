"""bench/ablation/merge_bench.py on committed bench runs and device_bg.sh job archives made
here: a job that continues the runs is merged; one that would lose or change a measured
record is refused before anything is written."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest

from tests.script_helpers import load_script
from tests.trajectory_helpers import summary_line, turn_line

RUN = "ablation/train-unseen/grpo"
RUN_JSON = {"settings": {"model": "m", "samples": 4}, "tasks": {"a": {}, "b": {}, "c": {}}}


def _files(finished: list[str], partial: list[str] = (), timing: int = 1) -> dict[str, bytes]:
    """A bench_suite RUNS folder: one run with `finished` tasks and a turn of `partial` ones."""
    traj = "".join(turn_line(t) + summary_line(t) for t in finished)
    traj += "".join(turn_line(t) for t in partial)
    chunks = "".join(json.dumps({"tasks": 1, "wall_s": 10.0 * i}) + "\n" for i in range(timing))
    calls = "".join(f"call {i}\n" for i in range(timing))
    return {
        f"{RUN}/run.json": json.dumps(RUN_JSON).encode(),
        f"{RUN}/trajectories.jsonl": traj.encode(),
        f"{RUN}/timing.jsonl": chunks.encode(),
        "ablation/calls.log": calls.encode(),
        "ablation/logs/train-unseen_grpo.log": calls.encode(),
        "ablation/gpu.txt": b"NVIDIA H100 80GB HBM3, 580.159.04\n",
    }


def _committed(into, files):
    for rel, data in files.items():
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        (into / rel).write_bytes(data)


def _job(path, files, rc=b"0\n"):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for rel, data in {**{f"out/bench/{k}": v for k, v in files.items()}, "out/rc": rc}.items():
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())
    return path


def _main(*args):
    return load_script("bench/ablation/merge_bench.py").main([str(a) for a in args])


def _tree(root) -> dict:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_job_that_continues_the_runs_is_merged(tmp_path, capsys):
    into = tmp_path / "bench/abl_x_s0"
    _committed(into, _files(["a"], partial=["b"]))
    new = _files(["a", "c"], timing=2)  # b ran again from turn 1 and is unfinished yet
    new["ablation/gpu.txt"] = b"NVIDIA H200, 580.159.04\n"
    job = _job(tmp_path / "bg_grpoA.tar.gz", new)
    log = tmp_path / "bg_grpoA.log"
    log.write_text("bench_suite: 2/3 tasks finished\n")
    assert _main("--job", job, "--into", into, "--log", log, "--log-name", "bg_s32.log") == 0
    for rel, data in new.items():
        assert (into / rel).read_bytes() == data
    assert (into / "ablation/logs/bg_s32.log").read_text() == log.read_text()
    out = capsys.readouterr().out
    assert f"{RUN}: 1/3 -> 2/3 tasks finished" in out
    assert "ablation/gpu.txt: NVIDIA H100 80GB HBM3, 580.159.04 -> NVIDIA H200, 580.159.04" in out
    fresh = tmp_path / "bench/abl_y_s0"  # a checkpoint's first job: its ROOT is new
    assert _main("--job", job, "--into", fresh) == 0
    assert (fresh / RUN / "trajectories.jsonl").read_bytes() == new[f"{RUN}/trajectories.jsonl"]


def _lost(files):  # the job's trajectory lost finished task a
    files[f"{RUN}/trajectories.jsonl"] = (turn_line("c") + summary_line("c")).encode()


def _changed(files):  # task a's summary record changed
    files[f"{RUN}/trajectories.jsonl"] = (turn_line("a") + summary_line("a", total=1.0)).encode()


def _other_tasks(files):
    files[f"{RUN}/run.json"] = json.dumps({**RUN_JSON, "tasks": {"z": {}}}).encode()


def _timing_rewritten(files):
    files[f"{RUN}/timing.jsonl"] = b'{"tasks": 9}\n'


def _log_rewritten(files):
    files["ablation/logs/train-unseen_grpo.log"] = b"another run\n"


def _not_a_trajectory(files):  # read as bench report reads it: refused in one line
    files[f"{RUN}/trajectories.jsonl"] = b'{"type": "turn"}\n' + files[f"{RUN}/trajectories.jsonl"]


def _other_file_changed(files):
    files["ablation/summary.json"] = b"{}"


@pytest.mark.parametrize(
    "mutate, shown",
    [
        (_lost, "lacks committed records of finished tasks (a)"),
        (_changed, "lacks committed records of finished tasks (a record changed)"),
        (_other_tasks, "other settings or tasks than the committed"),
        (_timing_rewritten, "timing.jsonl: does not begin with the committed"),
        (_log_rewritten, "train-unseen_grpo.log: does not begin with the committed"),
        (_other_file_changed, "summary.json: differs from the committed"),
        (_not_a_trajectory, "not a trajectory written by cudaperf bench"),
    ],
)
def test_a_job_that_would_lose_a_record_is_refused(tmp_path, capsys, mutate, shown):
    into = tmp_path / "bench/abl_x_s0"
    old = _files(["a"], partial=["b"])
    if mutate is _other_file_changed:
        old["ablation/summary.json"] = b'{"x": 1}'
    _committed(into, old)
    new = _files(["a", "c"], timing=2)
    mutate(new)
    before = _tree(tmp_path / "bench")
    assert _main("--job", _job(tmp_path / "bg.tar.gz", new), "--into", into) == 2
    err = capsys.readouterr().err.strip()
    assert shown in err and "\n" not in err and err.startswith("merge_bench: "), err
    assert _tree(tmp_path / "bench") == before


def test_a_packed_run_a_taken_log_name_and_a_bad_archive_are_refused(tmp_path, capsys):
    into = tmp_path / "bench/abl_x_s0"
    files = _files(["a", "b", "c"])
    _committed(into, files)
    job = _job(tmp_path / "bg.tar.gz", files)
    log = tmp_path / "bg.log"
    log.write_text("x\n")
    assert (
        _main("--job", job, "--into", into, "--log", log, "--log-name", "train-unseen_grpo.log")
        == 2
    )
    assert "train-unseen_grpo.log exists" in capsys.readouterr().err
    traj = into / RUN / "trajectories.jsonl"
    (into / RUN / "trajectories.jsonl.gz").write_bytes(gzip.compress(traj.read_bytes()))
    traj.unlink()  # `cudaperf bench pack`ed: finished
    assert _main("--job", job, "--into", into) == 2
    assert "packed, so finished" in capsys.readouterr().err
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"not a tar")
    assert _main("--job", bad, "--into", into) == 2
    assert "not a device_bg.sh job archive" in capsys.readouterr().err


def test_a_packed_runs_same_copy_is_passed_over_and_the_other_suite_merged(tmp_path, capsys):
    """A heldout job of a ROOT whose train-unseen run was packed brings that run's files back
    as they were (bench_suite copies every run of the ROOT): it merges the heldout run."""
    into = tmp_path / "bench/abl_x_s0"
    packed = _files(["a", "b", "c"])
    traj = packed.pop(f"{RUN}/trajectories.jsonl")
    packed[f"{RUN}/trajectories.jsonl.gz"] = gzip.compress(traj, mtime=0)
    _committed(into, packed)
    other = "ablation/heldout/grpo"
    job = {**packed, "ablation/calls.log": b"call 0\ncall 1\n"}
    job[f"{other}/run.json"] = json.dumps(RUN_JSON).encode()
    job[f"{other}/trajectories.jsonl"] = (turn_line("a") + summary_line("a")).encode()
    assert _main("--job", _job(tmp_path / "bg.tar.gz", job), "--into", into) == 0
    out = capsys.readouterr().out
    assert f"{RUN}: packed (finished); the job's copy is the same" in out
    assert f"{other}: 0/3 -> 1/3 tasks finished" in out
    assert (into / other / "trajectories.jsonl").read_bytes() == job[f"{other}/trajectories.jsonl"]
    assert not (into / RUN / "trajectories.jsonl").exists()
    # the same job with a changed file of the packed run: refused, nothing written
    job[f"{RUN}/timing.jsonl"] += b'{"tasks": 1}\n'
    before = _tree(tmp_path / "bench")
    assert _main("--job", _job(tmp_path / "bg2.tar.gz", job), "--into", into) == 2
    err = capsys.readouterr().err
    assert "packed, so finished, but the job's timing.jsonl differs" in err
    assert _tree(tmp_path / "bench") == before


@pytest.mark.parametrize("name", ["pending_replies.jsonl", "scored_results.jsonl"])
def test_a_stopped_chunks_working_files_follow_the_job(tmp_path, capsys, name):
    """A run's pending replies and kept evaluator results are working files: the job's copy
    replaces the committed one, and a committed one the job's run no longer has (its chunk was
    recorded since) is removed."""
    into = tmp_path / "bench/abl_x_s0"
    pend = f"{RUN}/{name}"
    _committed(into, {**_files(["a"], partial=["b"]), pend: b'{"key": "k1"}\n'})
    new = {**_files(["a"], partial=["b"], timing=2), pend: b'{"key": "k2"}\n'}
    assert _main("--job", _job(tmp_path / "bg1.tar.gz", new), "--into", into) == 0
    assert (into / pend).read_bytes() == b'{"key": "k2"}\n'
    capsys.readouterr()
    done = _files(["a", "b", "c"], timing=3)
    assert _main("--job", _job(tmp_path / "bg2.tar.gz", done), "--into", into) == 0
    assert not (into / pend).exists()
    assert f"{name}: recorded since, removed" in capsys.readouterr().out
    for rel, data in done.items():
        assert (into / rel).read_bytes() == data


@pytest.mark.parametrize("name", ["pending_replies.jsonl", "scored_results.jsonl"])
def test_a_finished_runs_working_files_are_stale_and_not_kept(tmp_path, capsys, name):
    """`run_bench` removes both working files when its last task is recorded, so a finished
    run's copy of one was left by a copy that never deleted (session 34's job brought both back
    with 60/60 tasks finished): neither the job's copy nor a committed one is kept."""
    into = tmp_path / "bench/abl_x_s0"
    pend = f"{RUN}/{name}"
    _committed(into, {**_files(["a"], partial=["b"]), pend: b'{"key": "k1"}\n'})
    done = {**_files(["a", "b", "c"], timing=3), pend: b'{"key": "k2"}\n'}
    assert _main("--job", _job(tmp_path / "bg.tar.gz", done), "--into", into) == 0
    assert not (into / pend).exists()
    assert f"{name}: the run is finished, not kept" in capsys.readouterr().out
    for rel, data in done.items():
        if rel != pend:
            assert (into / rel).read_bytes() == data
