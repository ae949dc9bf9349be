"""bench/train_h200.sh's `pack` (what a watch call brings back of a GRPO run), run here in
bash on a run folder made here: the newest complete checkpoint, in pieces, and the rest."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pack(work: Path, out: Path) -> subprocess.CompletedProcess:
    script = (ROOT / "bench/train_h200.sh").read_text()
    start = script.index("\npack() {") + 1
    body = script[start : script.index("\n}\n", start) + 3]
    return subprocess.run(
        ["bash", "-c", f'log() {{ echo "$*"; }}\n{body}\npack'],
        env={"PATH": "/usr/bin:/bin", "W": str(work), "RUN": "r", "OUT": str(out)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_pack_brings_the_newest_complete_checkpoint_and_the_logs_set_aside(tmp_path):
    run = tmp_path / "work" / "r"
    for step, complete in ((4, True), (6, True), (8, False)):  # 8: a save cut short
        c = run / f"checkpoint-{step}"
        c.mkdir(parents=True)
        (c / "adapter_model.safetensors").write_bytes(b"w" * 100)
        (c / "optimizer.pt").write_bytes(b"o")
        if complete:
            (c / "trainer_state.json").write_text("{}")
    for name in ("steps.jsonl", "completions.jsonl", "holdout.json", "options.json"):
        (run / name).write_text("{}\n")
    (run / "after-checkpoint-4").mkdir()
    (run / "after-checkpoint-4" / "steps.jsonl").write_text('{"kind": "step", "step": 5}\n')
    done = _pack(tmp_path / "work", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    ckpt = tmp_path / "out" / "ckpt"
    assert (ckpt / "adapter_model.safetensors.part000").read_bytes() == b"w" * 100
    with tarfile.open(ckpt / "rest.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"checkpoint-6/trainer_state.json", "steps.jsonl", "options.json"} <= names
    assert "after-checkpoint-4/steps.jsonl" in names
    assert not any(n.startswith(("checkpoint-8", "checkpoint-4")) for n in names)
    assert not any(n.endswith(("optimizer.pt", "adapter_model.safetensors")) for n in names)


def _stage(tmp_path: Path, stage: str, **env: str) -> subprocess.CompletedProcess:
    """Run train_h200.sh STAGE from a repository of its own under tmp_path (repo/, with the
    script), its work folder tmp_path/work, $OUT tmp_path/out and RUN r."""
    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True, exist_ok=True)
    (repo / "bench/train_h200.sh").write_text((ROOT / "bench/train_h200.sh").read_text())
    base = {"PATH": "/usr/bin:/bin", "W": str(tmp_path / "work"), "M": str(tmp_path / "m")}
    return subprocess.run(
        ["bash", "bench/train_h200.sh", stage],
        cwd=repo,
        env=base | {"OUT": str(tmp_path / "out"), "RUN": "r"} | env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_bgstart_runs_the_process_from_its_own_copy_of_the_tree_and_names_it(tmp_path):
    """Every device call copies the working tree onto the machine again: a background run
    that imports from the tree died once mid-copy (session 40), so `bgstart` runs it from a
    copy of its own, and bg.pid names the training process (not a subshell that ends with
    the call, which made `bgwatch` say the run had ended while it trained on)."""
    import os
    import signal
    import time

    repo, work, fake = tmp_path / "repo", tmp_path / "work", tmp_path / "bin"
    (repo / "src/cudaperf").mkdir(parents=True)
    (repo / "src/cudaperf/late.py").write_text("# imported late by the run\n")
    (work / "sft/final").mkdir(parents=True)
    fake.mkdir()
    seen = tmp_path / "seen.txt"
    (fake / "python3").write_text(  # the training process: where it runs, what it imports from
        f'#!/bin/bash\necho "$PWD $PYTHONPATH" > {seen}\nexec sleep 20\n'
    )
    (fake / "python3").chmod(0o755)
    done = _stage(tmp_path, "bgstart", PATH=f"{fake}:/usr/bin:/bin", BG_START_CHECK_S="0.5")
    assert done.returncode == 0, done.stdout + done.stderr
    pid = int((work / "r/bg.pid").read_text())
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert cmd[0] == b"timeout" and b"python3" in cmd, cmd  # the process, not a subshell
        for _ in range(100):
            if seen.exists() and seen.read_text().strip():
                break
            time.sleep(0.05)
        cwd, pythonpath = seen.read_text().split()
        tree = work / "tree_r"
        assert cwd == str(tree)
        assert f"{tree}/src" in pythonpath.split(":") and f"{repo}/src" not in pythonpath
        (repo / "src/cudaperf/late.py").unlink()  # a later call's copy, half done
        assert (tree / "src/cudaperf/late.py").exists()
    finally:
        os.killpg(pid, signal.SIGKILL)


def test_bgwatch_says_plainly_when_the_process_died_without_a_report(tmp_path):
    """Session 40: a process that died at once left an empty report, and the watch said
    'ended:' as if the run were done; it now says DIED with the stderr's last lines and brings
    back no grpo_report.json (merge_chunk then refuses the chunk as unfinished)."""
    run = tmp_path / "work" / "r"
    run.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs
    (run / "bg.pid").write_text(f"{dead.pid}\n")
    (run / "bg_report.json").write_text("")
    (run / "bg_stderr.txt").write_text("GRPO of smollm2\nerror: No module named 'x'\n")
    (run / "steps.jsonl").write_text("")
    done = _stage(tmp_path, "bgwatch", WATCH_S="0")
    assert done.returncode == 0, done.stderr
    assert "r DIED without a report" in done.stdout and "No module named 'x'" in done.stdout
    assert not (tmp_path / "out" / "grpo_report.json").exists()


def test_bgwatch_says_which_gpu_processes_outlive_an_ended_run(tmp_path):
    """A bench job started after the run shares the GPU with whatever the run left; the watch
    that brings the report names the GPU's compute processes at that moment (none: "none")."""
    run = tmp_path / "work" / "r"
    run.mkdir(parents=True)
    ended = subprocess.Popen(["true"])
    ended.wait()
    (run / "bg.pid").write_text(f"{ended.pid}\n")
    (run / "bg_report.json").write_text('{"steps": 45}\n')
    (run / "bg_stderr.txt").write_text("")
    (run / "steps.jsonl").write_text("")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    smi = bin_ / "nvidia-smi"
    smi.write_text('#!/usr/bin/env bash\necho "4242, python, 9000 MiB"\n')
    smi.chmod(0o755)
    done = _stage(tmp_path, "bgwatch", WATCH_S="0", PATH=f"{bin_}:/usr/bin:/bin")
    assert done.returncode == 0, done.stderr
    assert "GPU compute processes now: 4242, python, 9000 MiB" in done.stdout, done.stdout
    smi.write_text("#!/usr/bin/env bash\n")
    done = _stage(tmp_path, "bgwatch", WATCH_S="0", PATH=f"{bin_}:/usr/bin:/bin")
    assert "GPU compute processes now: none" in done.stdout, done.stdout
