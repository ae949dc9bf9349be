"""bench/bench_suite.sh's ablation mode and TURNS, with `python -m cudaperf` replaced by a
recorder (no run is made; every other python call is real)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _suite(tmp_path, *args, repo=ROOT, **env):
    """bench_suite.sh of `repo` run there, with ROOT and BG_RUNS under tmp_path unless `env`
    names them; (the process, the `cudaperf` command lines it ran)."""
    log = tmp_path / "calls.txt"
    log.unlink(missing_ok=True)  # this call's bench runs only
    fake = tmp_path / "py"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "$1" = -m ] && [ "$2" = cudaperf ]; then echo "$*" >> {log}; '
        "exit ${FAKE_RC:-0}; fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    fake.chmod(0o755)
    full = {**os.environ, "PY": str(fake), "ROOT": str(tmp_path / "runs")}
    full.pop("OUT", None)  # a device call's return folder only where `env` gives one
    full |= {"BG_RUNS": str(tmp_path / "safe"), **env}
    res = subprocess.run(
        ["bash", str(repo / "bench/bench_suite.sh"), *args],
        cwd=repo,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )
    calls = log.read_text().splitlines() if log.is_file() else []
    return res, calls


def _subset(name):
    doc = json.loads((ROOT / "bench/ablation/subsets.json").read_text())
    return doc["subsets"][name]["bench_args"]


def test_ablation_mode_runs_the_fixed_subsets_with_the_outcome_only_preset(tmp_path):
    res, calls = _suite(tmp_path, "ablation", "heldout/naive", "train-unseen/naive")
    assert len(calls) == 2, res.stdout + res.stderr
    for call, name in zip(calls, ("test_families", "train_unseen"), strict=True):
        assert _subset(name) in call
        assert "--preset outcome_only" in call and "--turns 1" in call
        assert "--samples 4" in call and "--tasks-per-family" not in call
    assert "/runs/ablation" in calls[0]  # ROOT/MODE (-compile-only without a GPU)


def test_turns_go_to_their_own_folder_and_bad_values_are_one_line(tmp_path):
    res, calls = _suite(tmp_path, "ablation", "heldout/naive", TURNS="4")
    assert len(calls) == 1 and "--turns 4" in calls[0]
    assert "/runs/ablation-t4" in calls[0], res.stdout
    res, calls = _suite(tmp_path, "full", "heldout/naive", TURNS="x")
    assert res.returncode == 2 and not calls
    assert res.stderr.strip().startswith("bench_suite: TURNS=x")


def test_batch_tasks_sets_the_chunk_size(tmp_path):
    _, calls = _suite(tmp_path, "ablation", "heldout/naive", TURNS="4")
    assert "--batch-tasks 16" in calls[0]
    _, calls = _suite(tmp_path, "ablation", "heldout/naive", TURNS="4", BATCH_TASKS="2")
    assert "--batch-tasks 2" in calls[0]
    res, calls = _suite(tmp_path, "ablation", "heldout/naive", BATCH_TASKS="0")
    assert res.returncode == 2 and not calls
    assert res.stderr.strip().startswith("bench_suite: BATCH_TASKS=0")


def test_model_runs_sample_as_the_protocol_fixes_and_max_batch_sets_the_call_size(tmp_path):
    """SmolLM2 runs: at most 1,024 tokens, generation dynamic (PROTOCOL.md, session 30 (5)),
    and MAX_BATCH sequences per generate call; scripted runs get none of these."""
    res, calls = _suite(tmp_path, "ablation", "heldout/smollm2", "heldout/naive")
    assert len(calls) == 2, res.stdout + res.stderr
    assert "--max-tokens 1024 --generation dynamic --max-batch 64" in calls[0]
    assert "--max-tokens" not in calls[1] and "--max-batch" not in calls[1]
    _, calls = _suite(tmp_path, "ablation", "heldout/smollm2", MAX_BATCH="128")
    assert "--max-batch 128" in calls[0]
    res, calls = _suite(tmp_path, "ablation", "heldout/smollm2", MAX_BATCH="lots")
    assert res.returncode == 2 and not calls
    assert res.stderr.strip().startswith("bench_suite: MAX_BATCH=lots")


def test_a_deadline_caps_the_budget_of_chained_calls(tmp_path):
    """Two calls in one job once each took the whole BUDGET_S and the job's own limit killed
    the second mid-chunk; a DEADLINE already past starts no step."""
    import time

    res, calls = _suite(tmp_path, "ablation", "heldout/naive", DEADLINE=str(int(time.time()) - 5))
    assert not calls and "not started: 0s of BUDGET_S=0 left" in res.stdout, res.stdout
    res, calls = _suite(tmp_path, "ablation", "heldout/naive", DEADLINE=str(int(time.time()) + 90))
    budget = int(res.stdout.split("; budget ")[1].split("s;")[0])
    assert len(calls) == 1 and 80 <= budget <= 90, res.stdout
    wall = int(calls[0].split("--wall-budget ")[1].split()[0])  # the run's own stop, in time
    assert budget - 16 <= wall <= budget - 15, (budget, calls[0])
    res, calls = _suite(tmp_path, "ablation", "heldout/naive", DEADLINE="soon")
    assert res.returncode == 2 and res.stderr.startswith("bench_suite: DEADLINE=soon")


def test_workers_per_gpu_go_to_their_own_folder_and_bad_values_are_one_line(tmp_path):
    res, calls = _suite(tmp_path, "ablation", "heldout/naive", TURNS="4", WORKERS="2")
    assert len(calls) == 1 and "--workers-per-gpu 2" in calls[0], res.stdout + res.stderr
    assert "/runs/ablation-t4-w2" in calls[0]  # ablation-t4-w2-compile-only without a GPU
    res, calls = _suite(tmp_path, "ablation", "heldout/naive")
    folder = calls[0].split("/runs/")[1].split("/")[0]  # ablation (-compile-only without a GPU)
    assert (
        "--workers-per-gpu" not in calls[0] and folder.removesuffix("-compile-only") == "ablation"
    )
    res, calls = _suite(tmp_path, "full", "heldout/naive", WORKERS="0")
    assert res.returncode == 2 and not calls
    assert res.stderr.strip().startswith("bench_suite: WORKERS=0")


@pytest.mark.parametrize("mode", ["full", "quick"])
def test_other_modes_keep_their_subsets_and_default_preset(tmp_path, mode):
    res, calls = _suite(tmp_path, mode, "heldout/naive")
    assert len(calls) == 1 and "--tasks-per-family" in calls[0], res.stdout
    assert "--preset" not in calls[0] and "--turns 1" in calls[0]


def test_ablation_mode_refuses_suites_outside_its_subsets(tmp_path):
    res, calls = _suite(tmp_path, "ablation", "kernelbench/smollm2", KB=str(tmp_path))
    assert res.returncode == 2 and not calls
    assert "subsets.json" in res.stderr


def test_list_counts_the_finished_tasks_of_a_packed_run(tmp_path):
    import gzip

    res, _ = _suite(tmp_path, "ablation", "list")
    mode = "ablation-compile-only" if "NO GPU" in res.stdout else "ablation"
    run = tmp_path / "runs" / mode / "heldout/naive"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"tasks": {"a": {}, "b": {}}}))
    lines = '{"type":"turn"}\n{"type":"summary"}\n{"type":"summary"}\n'
    (run / "trajectories.jsonl.gz").write_bytes(gzip.compress(lines.encode()))
    res, _ = _suite(tmp_path, "ablation", "list")
    assert ["heldout/naive", "2/2"] in [x.split() for x in res.stdout.splitlines()], res.stdout


def _repo_copy(tmp_path):
    """A git repository holding bench_suite.sh and subsets.json, with `ignored/` git-ignored:
    where a device call's copy of the tree would drop a background job's files."""
    repo = tmp_path / "repo"
    (repo / "bench" / "ablation").mkdir(parents=True)
    for rel in ("bench/bench_suite.sh", "bench/ablation/subsets.json"):
        (repo / rel).write_bytes((ROOT / rel).read_bytes())
    (repo / ".gitignore").write_text("/ignored/\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def test_a_background_job_keeps_runs_inside_the_tree_on_a_seeded_copy_outside_it(tmp_path):
    """Each device call copies the working tree anew and drops what is not in it (session 31
    lost a job's log so): a device_bg job's runs under a folder git does not ignore go to a copy
    outside the tree, seeded from what the repository holds; elsewhere nothing moves."""
    repo = _repo_copy(tmp_path)
    res, _ = _suite(tmp_path, "ablation", "list", ROOT="results", repo=repo)
    tag = "ablation-compile-only" if "NO GPU" in res.stdout else "ablation"
    held = repo / "results" / tag / "heldout" / "naive"
    held.mkdir(parents=True)
    (held / "run.json").write_text(json.dumps({"tasks": {"a": {}, "b": {}}}))
    (held / "trajectories.jsonl").write_text('{"type":"summary"}\n')

    res, calls = _suite(
        tmp_path, "ablation", "heldout/naive", ROOT="results", BG_JOB="j", repo=repo
    )
    safe = tmp_path / "safe" / "results" / tag
    assert len(calls) == 1 and f"--out {safe}/heldout/naive" in calls[0], res.stdout
    assert (safe / "heldout/naive/trajectories.jsonl").read_text() == '{"type":"summary"}\n'
    assert (safe / "calls.log").is_file() and not (repo / "results" / tag / "calls.log").exists()
    assert f"device_bg job j: runs in {safe}" in res.stdout
    # a later job of the same machine resumes the copy, not the repository's older runs
    (safe / "heldout/naive/trajectories.jsonl").write_text('{"type":"summary"}\n' * 2)
    res, _ = _suite(tmp_path, "ablation", "list", ROOT="results", BG_JOB="j", repo=repo)
    assert ["heldout/naive", "2/2"] in [x.split() for x in res.stdout.splitlines()], res.stdout

    # not a background job, or a git-ignored ROOT: the runs stay where ROOT says
    for env in ({"ROOT": "results"}, {"ROOT": "ignored/runs", "BG_JOB": "j"}):
        res, calls = _suite(tmp_path, "ablation", "heldout/naive", **env, repo=repo)
        out = f"--out {env['ROOT']}/{tag}/heldout/naive"
        assert len(calls) == 1 and out in calls[0], res.stdout
        assert "device_bg job" not in res.stdout


def test_the_copy_in_out_loses_what_the_runs_removed(tmp_path):
    """Session 34: the copy into $OUT was made over the last one, so a finished run came back
    with the pending_replies.jsonl and scored_results.jsonl its runner had removed."""
    res, _ = _suite(tmp_path, "ablation", "list")
    tag = "ablation-compile-only" if "NO GPU" in res.stdout else "ablation"
    run = tmp_path / "runs" / tag / "heldout" / "naive"
    run.mkdir(parents=True)
    (run / "trajectories.jsonl").write_text('{"type":"summary"}\n')
    back = tmp_path / "out" / "bench" / tag / "heldout" / "naive"
    back.mkdir(parents=True)
    (back / "pending_replies.jsonl").write_text("{}\n")  # an earlier copy's, removed since
    (back / "trajectories.jsonl").write_text("")
    res, calls = _suite(tmp_path, "ablation", "heldout/naive", OUT=str(tmp_path / "out"))
    assert len(calls) == 1, res.stdout + res.stderr
    assert (back / "trajectories.jsonl").read_text() == '{"type":"summary"}\n'
    assert not (back / "pending_replies.jsonl").exists()
    assert (back.parent.parent / "calls.log").is_file()


def test_turns_from_begins_a_run_of_more_turns_from_the_finished_one_turn_run(tmp_path):
    res, _ = _suite(tmp_path, "ablation", "list")
    tag = "ablation-compile-only" if "NO GPU" in res.stdout else "ablation"
    one = tmp_path / "runs" / tag / "heldout" / "naive"
    one.mkdir(parents=True)
    (one / "run.json").write_text(json.dumps({"tasks": {"a": {}, "b": {}}}))
    (one / "trajectories.jsonl").write_text('{"type":"summary"}\n')  # 1 of 2 finished
    res, calls = _suite(tmp_path, "ablation", "heldout/naive", TURNS="4", TURNS_FROM="1")
    assert not calls and "SKIP heldout/naive: TURNS_FROM=1" in res.stdout, res.stdout
    assert "(1/2 tasks)" in res.stdout and res.returncode == 3
    (one / "trajectories.jsonl").write_text('{"type":"summary"}\n' * 2)
    res, calls = _suite(tmp_path, "ablation", "heldout/naive", TURNS="4", TURNS_FROM="1")
    assert len(calls) == 1 and f"--turns-from {one}" in calls[0], res.stdout
    assert "--turns 4" in calls[0] and f"/{tag.replace('ablation', 'ablation-t4')}/" in calls[0]
    for env in ({"TURNS": "4"}, {"TURNS_FROM": "1"}):  # off, or a 1-turn run: never
        _, calls = _suite(tmp_path, "ablation", "heldout/best", **env)
        assert len(calls) == 1 and "bench run" in calls[0] and "--turns-from" not in calls[0]


def test_a_run_stopped_by_its_wall_budget_is_partial_and_says_so(tmp_path):
    """`bench run` exits 75 when it stops before a chunk that would not end inside
    --wall-budget: the step is partial (rerun to resume), not a failure."""
    res, calls = _suite(tmp_path, "ablation", "heldout/naive", FAKE_RC="75")
    wall = int(calls[0].split("--wall-budget ")[1].split()[0])  # BUDGET_S's 540, 15 s kept
    assert len(calls) == 1 and 515 <= wall <= 525, calls
    assert "stopped before a chunk that would not end inside the call's budget" in res.stdout
    assert "failed" not in res.stdout and "NOT done (partial)" in res.stdout, res.stdout
    res, _ = _suite(tmp_path, "ablation", "heldout/naive", FAKE_RC="3")
    assert "heldout/naive failed (rc=3" in res.stdout, res.stdout


def test_each_step_logs_the_hosts_load_and_the_other_gpu_processes(tmp_path):
    """A bench chunk's generation time may depend on what else holds the GPU and the host's
    CPUs (session 44: 100 s a chunk whatever its size); each step's log says both as it
    starts, read from nvidia-smi's compute processes, /proc/loadavg and ps, with the speed of
    the host's Python (bench/hoststat.py), and how the CPUs spent the step as it ends."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    smi = bin_ / "nvidia-smi"
    smi.write_text(
        "#!/usr/bin/env bash\n"
        'case "$1" in -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)" ;;\n'
        '  --query-compute-apps=*) printf "4242, python, 9000 MiB\\n77, nvcc, 1 MiB\\n" ;;\n'
        "  *) ;; esac\n"
    )
    smi.chmod(0o755)
    path = f"{bin_}:{os.environ['PATH']}"
    res, calls = _suite(tmp_path, "ablation", "heldout/naive", PATH=path)
    assert len(calls) == 1, res.stdout + res.stderr
    text = (tmp_path / "runs/ablation/logs/heldout_naive.log").read_text()
    host = next(line for line in text.splitlines() if line.startswith("host: load "))
    assert "GPU compute processes: 4242, python, 9000 MiB;77, nvcc, 1 MiB" in host
    cpus = os.cpu_count()  # the machine's, not nproc's (which OMP_NUM_THREADS=1 makes 1)
    pattern = rf"host: load \d+\.\d+ \d+\.\d+ \d+\.\d+ on {cpus} CPUs; python loop [\d.]+ ms; GPU"
    assert re.match(pattern, host), host
    # and the processes using the most CPU (a leftover pool would slow launch-bound decoding)
    busiest = host.split("; busiest: ")[1].split("; ")
    assert 1 <= len(busiest) <= 5 and all(re.match(r"\d+ [\d.]+% \S+ \S", b) for b in busiest)
    # and how the CPUs spent the step (busy, waiting on I/O, stolen by the hypervisor)
    over = next(line for line in text.splitlines() if line.startswith("host over the step: "))
    assert re.fullmatch(
        rf"host over the step: (busy [\d.]+%, iowait [\d.]+%, steal [\d.]+% of {cpus} CPUs"
        r"|no CPU time passed)",
        over,
    ), over
