"""bench/ablation/merge_chunk.py on a run folder and watch-call folders made here: a chunk that
continues the committed run is merged whole; one that does not is refused before anything is
written."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile

import pytest

from tests.script_helpers import load_script

RUN = "abl_x_s0"


def _steps(upto: int, tasks=lambda s: [[f"t{s % 3}"]]) -> bytes:
    rows = []
    for s in range(1, upto + 1):  # the rollout of step s is logged at step s - 1
        rollout = {"kind": "rollout", "step": s - 1, "processes": 1, "rows": 32, "groups": 4}
        rollout["tasks_by_process"] = tasks(s)
        rollout |= {"generate_s": 20.0, "eval_s": 15.0, "return_mean": 0.1 * s}
        rollout |= {"status_share": {"ok": 0.5, "compile_error": 0.5}, "score_by_turn": [0.1, 0.2]}
        rows += [rollout, {"kind": "step", "step": s, "step_s": 40.0 + s}]
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _completions(upto: int) -> bytes:
    return "".join(
        json.dumps({"step": s, "code": f"k{s}"}) + "\n" for s in range(1, upto + 1)
    ).encode()


def _tar(step: int, completions: bytes, extra: dict | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (
            (f"checkpoint-{step}/adapter_config.json", b"{}"),
            ("completions.jsonl", completions),
            ("steps.jsonl", _steps(step)),
            *(extra or {}).items(),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _watch(d, upto: int, ended: bool, ckpt: int | None = None, completions: bytes | None = None):
    d.mkdir(parents=True)
    (d / "grpo_steps.jsonl").write_bytes(_steps(upto))
    (d / "grpo_stderr.txt").write_bytes(b"x" * 7000 + f"{upto} steps done\n".encode())
    (d / "stage.log").write_text(f"[{d.name}] {'ended' if ended else 'still running'}\n")
    c = d / "ckpt"
    c.mkdir()
    (c / "adapter_model.safetensors.part000").write_bytes(b"a" * 100)
    (c / "adapter_model.safetensors.part001").write_bytes(b"b" * 10)
    step = ckpt if ckpt is not None else upto
    (c / "rest.tar.gz").write_bytes(_tar(step, completions or _completions(step)))
    if ended:
        report = {"steps": upto, "seconds": 123.4, "options": {"max_steps": upto}}
        (d / "grpo_report.json").write_text(json.dumps(report))
    return d


@pytest.fixture
def repo(tmp_path):
    run = tmp_path / "repo/bench/results/ablation" / RUN
    run.mkdir(parents=True)
    (run / "steps.jsonl").write_bytes(_steps(2))
    (run / "completions.jsonl.gz").write_bytes(gzip.compress(_completions(2)))
    (run / "grpo_report_lease1.json").write_text("{}")
    return tmp_path / "repo"


def _main(repo, *args):
    return load_script("bench/ablation/merge_chunk.py").main(
        ["--root", str(repo), "--run", RUN, *map(str, args)]
    )


def test_a_chunk_that_continues_the_run_is_merged_whole(repo, tmp_path, capsys):
    w1 = _watch(tmp_path / "w1", 3, ended=False)
    w2 = _watch(tmp_path / "w2", 4, ended=True)
    env = tmp_path / "env.txt"
    env.write_text("NVIDIA H100\n")
    mask = os.umask(0o077)  # the checkpoint's files are committed readable all the same
    try:
        assert _main(repo, "--lease", 2, "--watch", w1, "--watch", w2, "--env", env) == 0
    finally:
        os.umask(mask)
    run = repo / "bench/results/ablation" / RUN
    assert (run / "steps.jsonl").read_bytes() == _steps(4)
    packed = (run / "completions.jsonl.gz").read_bytes()
    assert gzip.decompress(packed) == _completions(4)
    assert packed[4:8] == bytes(4)  # no timestamp: the same chunk packs to the same bytes
    assert json.loads((run / "grpo_report_lease2.json").read_text())["steps"] == 4
    tail = (run / "grpo_stderr_lease2_tail.txt").read_bytes()
    assert len(tail) == 6000 and tail.endswith(b"4 steps done\n")
    assert (run / "stage_bgwatch_lease2.log").read_text() == "[w1] still running\n[w2] ended\n"
    assert (run / "env.txt").read_text() == "NVIDIA H100\n"
    assert (run / "curves.png").stat().st_size > 0
    w = repo / "bench/results/ablation/weights" / f"{RUN}_ckpt4"
    sums = dict(reversed(x.split("  ")) for x in (w / "SHA256SUMS").read_text().splitlines())
    assert sorted(sums) == sorted(p.name for p in (w2 / "ckpt").iterdir())
    assert (w / "SHA256SUMS").stat().st_mode & 0o777 == 0o644
    for name, digest in sums.items():
        assert hashlib.sha256((w / name).read_bytes()).hexdigest() == digest
        assert (w / name).stat().st_mode & 0o777 == 0o644
    out = capsys.readouterr().out
    assert "steps 3-4 merged (2 steps in 123.4 s, step 3 43.0 s, steps 4-4 median 44.0 s)" in out


def test_the_logs_a_dead_process_left_past_its_checkpoint_are_merged_beside_the_run(repo, tmp_path):
    """A chunk whose first process died after checkpoint-3 and whose second resumed it: the
    archive's after-checkpoint-3/ (train.runlog.set_aside_after) lands in the run's folder,
    completions gzipped; a committed copy that the new one does not continue is refused."""
    aside = {
        "after-checkpoint-3/steps.jsonl": b'{"kind": "step", "step": 4}\n',
        "after-checkpoint-3/completions.jsonl": b'{"step": 3, "code": "dead"}\n',
    }
    w = _watch(tmp_path / "w", 4, ended=True)
    (w / "ckpt" / "rest.tar.gz").write_bytes(_tar(4, _completions(4), aside))
    run = repo / "bench/results/ablation" / RUN
    (run / "after-checkpoint-3").mkdir()
    (run / "after-checkpoint-3" / "steps.jsonl").write_bytes(b"other\n")
    assert _main(repo, "--lease", 2, "--watch", w) == 2  # refused: it does not continue it
    (run / "after-checkpoint-3" / "steps.jsonl").unlink()
    assert _main(repo, "--lease", 2, "--watch", w) == 0
    assert (run / "after-checkpoint-3" / "steps.jsonl").read_bytes() == aside[
        "after-checkpoint-3/steps.jsonl"
    ]
    packed = (run / "after-checkpoint-3" / "completions.jsonl.gz").read_bytes()
    assert gzip.decompress(packed) == aside["after-checkpoint-3/completions.jsonl"]


def test_a_chunk_of_two_processes_says_which_steps_the_reported_seconds_cover(
    repo, tmp_path, capsys
):
    """Session 39: a process trained 31-40 and died, a second resumed checkpoint-40 and
    trained 41-45; its report's seconds are its own five steps, not the chunk's."""
    w = _watch(tmp_path / "w", 5, ended=True)
    layout = b'{"kind": "layout", "processes": 1}\n'
    old, mid = _steps(2), _steps(3)
    (w / "grpo_steps.jsonl").write_bytes(
        old + layout + mid[len(old) :] + layout + _steps(5)[len(mid) :]
    )
    report = {"steps": 5, "seconds": 99.5, "resumed_from": "/root/work/r/checkpoint-3"}
    report["options"] = {"max_steps": 5}
    (w / "grpo_report.json").write_text(json.dumps(report))
    assert _main(repo, "--lease", 2, "--watch", w) == 0
    out = capsys.readouterr().out
    assert (
        "steps 3-5 merged (3 steps by 2 processes; the last trained steps 4-5 in 99.5 s, "
        "step 4 44.0 s, steps 5-5 median 45.0 s)"
    ) in out


def _committed(repo) -> dict:
    return {p: p.read_bytes() for p in sorted(repo.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "case, shown",
    [
        ("not ended", "no grpo_report.json"),
        ("other steps", "does not begin with the committed one"),
        ("other completions", "completions.jsonl: the chunk's file does not begin"),
        ("older checkpoint", "holds checkpoint-3, but the report says 4 steps"),
        ("lease merged", "grpo_report_lease1.json exists"),
        ("no new step", "the chunk adds no step"),
        ("a gap", "not 1..4"),
    ],
)
def test_a_chunk_that_does_not_continue_the_run_is_refused(repo, tmp_path, capsys, case, shown):
    lease = 2
    kw: dict = {"upto": 4, "ended": True}
    if case == "not ended":
        kw["ended"] = False
    elif case == "other completions":
        kw["completions"] = b'{"step": 1, "code": "other"}\n' + _completions(4)
    elif case == "older checkpoint":
        kw["ckpt"] = 3
    elif case == "lease merged":
        lease = 1
    elif case == "no new step":
        kw["upto"] = 2
    w = _watch(tmp_path / "w", **kw)
    if case == "other steps":
        (w / "grpo_steps.jsonl").write_bytes(b'{"kind": "layout"}\n' + _steps(4))
    elif case == "a gap":
        steps = _steps(4).decode().replace('"step": 3', '"step": 5').encode()
        (w / "grpo_steps.jsonl").write_bytes(steps)
    before = _committed(repo)
    assert _main(repo, "--lease", lease, "--watch", w) == 2
    err = capsys.readouterr().err.strip()
    assert shown in err and "\n" not in err and err.startswith("merge_chunk: "), err
    assert _committed(repo) == before  # nothing written


OTHER_TASKS = "/root/work/tree_r/data/other.jsonl.gz"


@pytest.mark.parametrize(
    "change, shown",
    [
        ({}, None),
        ({"seed": 0}, "(seed 1 -> 0)"),
        ({"tasks": OTHER_TASKS}, f"(tasks '/work/main/data/tasks.jsonl.gz' -> '{OTHER_TASKS}')"),
        # an option the earlier lease's report lacks (added later) counts as its default
        ({"sampler": "trl"}, None),
        ({"sampler": "epoch"}, "(sampler 'trl' -> 'epoch')"),
    ],
)
def test_a_chunk_must_continue_its_runs_command(repo, tmp_path, capsys, change, shown):
    """Only where it resumed, how far it trains, its budget and where the process read the
    task file (bgstart's copy of the tree, session 40) may differ from the earlier leases'
    options; a chunk started with another seed (or preset, pool, ranker) or task file is
    refused."""
    run = repo / "bench/results/ablation" / RUN
    first = {"seed": 1, "max_steps": 2, "adapter": "/w/sft/final", "resume": False}
    first |= {"wall_budget_s": 900.0, "tasks": "/work/main/data/tasks.jsonl.gz"}
    (run / "grpo_report_lease1.json").write_text(json.dumps({"options": first}))
    w = _watch(tmp_path / "w", 4, ended=True)
    now = first | {"max_steps": 4, "adapter": f"/w/{RUN}/checkpoint-2"}
    now |= {"resume": True, "wall_budget_s": 1400.0}
    now["tasks"] = f"/root/work/tree_{RUN}/data/tasks.jsonl.gz"
    now |= change
    (w / "grpo_report.json").write_text(json.dumps({"steps": 4, "seconds": 9.0, "options": now}))
    before = _committed(repo)
    assert _main(repo, "--lease", 2, "--watch", w) == (0 if shown is None else 2)
    if shown is not None:
        err = capsys.readouterr().err.strip()
        assert f"other options than grpo_report_lease1.json {shown}" in err, err
        assert _committed(repo) == before


@pytest.mark.parametrize(
    "change, shown",
    [
        ({}, None),
        (
            {"num_generations": 4},
            "abl_outcome_only_s1's grpo_report_lease1.json (num_generations 8 -> 4)",
        ),
        (
            {"seed": 2},
            "trained unified with seed 2, but the run abl_unified_s1 is unified with seed 1",
        ),
    ],
)
def test_a_runs_first_chunk_differs_from_the_other_runs_only_in_arm_and_seed(
    tmp_path, capsys, change, shown
):
    """A run's first chunk has no lease of its own to continue: its options must be the other
    main runs' first chunks' but for the reward, the seed and the folder (a pilot's are not
    compared), and its reward and seed the ones its name says."""
    root = tmp_path / "repo"
    runs = root / "bench/results/ablation"
    base = {"num_generations": 8, "max_steps": 15, "adapter": "/w/sft/final"}
    base |= {"tasks": "/work/main/data/tasks.jsonl.gz", "wall_budget_s": 900.0}
    for name, opts in (
        ("abl_outcome_only_s1", {"reward": {"name": "outcome_only"}, "seed": 1}),
        ("pilot_2026-12-04", {"reward": {"name": "unified"}, "seed": 0, "num_generations": 4}),
    ):
        (runs / name).mkdir(parents=True)
        report = {"options": base | opts | {"out": f"/w/{name}"}}
        (runs / name / "grpo_report_lease1.json").write_text(json.dumps(report))
    (runs / "abl_unified_s1").mkdir()
    w = _watch(tmp_path / "w", 2, ended=True)
    now = base | {"reward": {"name": "unified"}, "seed": 1, "out": "/w/abl_unified_s1"}
    now |= {"wall_budget_s": 1400.0, "tasks": "/root/work/tree_abl_unified_s1/data/tasks.jsonl.gz"}
    now |= change
    (w / "grpo_report.json").write_text(json.dumps({"steps": 2, "seconds": 9.0, "options": now}))
    before = _committed(root)
    rc = load_script("bench/ablation/merge_chunk.py").main(
        ["--root", str(root), "--run", "abl_unified_s1", "--lease", "1", "--watch", str(w)]
    )
    assert rc == (0 if shown is None else 2)
    if shown is not None:
        err = capsys.readouterr().err.strip()
        assert shown in err and "\n" not in err, err
        assert _committed(root) == before
    else:
        assert (runs / "abl_unified_s1" / "grpo_report_lease1.json").is_file()


@pytest.mark.parametrize(
    "run, lease, merged",
    [("abl_unified_s2", 1, True), ("abl_unified_s2", 2, False), ("unified_s2", 1, False)],
)
def test_only_a_main_runs_first_lease_starts_its_folder(tmp_path, capsys, run, lease, merged):
    """A new run has no folder until its first chunk is merged: `--lease 1` of a name
    abl_ARM_sSEED makes it; a later lease, or another name (a typo), is refused unwritten."""
    root = tmp_path / "repo"
    (root / "bench/results/ablation").mkdir(parents=True)
    w = _watch(tmp_path / "w", 2, ended=True)
    opts = {"reward": {"name": "unified"}, "seed": 2, "out": f"/w/{run}"}
    (w / "grpo_report.json").write_text(json.dumps({"steps": 2, "seconds": 9.0, "options": opts}))
    rc = load_script("bench/ablation/merge_chunk.py").main(
        ["--root", str(root), "--run", run, "--lease", str(lease), "--watch", str(w)]
    )
    folder = root / "bench/results/ablation" / run
    assert rc == (0 if merged else 2)
    assert (folder / f"grpo_report_lease{lease}.json").is_file() == merged
    if not merged:
        err = capsys.readouterr().err.strip()
        assert "no folder" in err and "\n" not in err and not folder.exists(), err


def test_the_merge_says_whether_the_other_arm_of_the_seed_drew_the_same_tasks(
    repo, tmp_path, capsys
):
    results = repo / "bench/results/ablation"
    for name, upto, tasks in (
        ("abl_y_s0", 3, lambda s: [[f"t{s % 3}"]]),  # the pair, 3 steps so far
        ("abl_z_s0", 4, lambda s: [["other"]] if s == 4 else [[f"t{s % 3}"]]),  # broke at 4
        ("abl_y_s1", 4, lambda s: [["seed 1"]]),  # another seed: never compared
        ("pilot_y_s0", 4, lambda s: [["pilot"]]),  # not a main run
    ):
        (results / name).mkdir()
        (results / name / "steps.jsonl").write_bytes(_steps(upto, tasks))
    w = _watch(tmp_path / "w", 4, ended=True)
    assert _main(repo, "--lease", 2, "--watch", w) == 0
    out, err = capsys.readouterr()
    assert "paired with abl_y_s0: 3 of 3 steps both ran drew the same tasks" in out
    assert (
        "NOT PAIRED with abl_z_s0: 3 of 4 steps both ran drew the same tasks; "
        "step 4 drew [['other']] there and [['t1']] here"
    ) in err
    assert "abl_y_s1" not in out + err and "pilot" not in out + err


def _row(step, g2, turns, ok, cand, cached, compile_s, step_s, scores, canary=None, rows=32):
    return {
        "step": step,
        "rows": rows,
        "groups": 4,
        "groups_2_correct": g2,
        "score_by_turn": turns,
        "status_share": {"ok": ok},
        "candidates": cand,
        "cached": cached,
        "eval_phases_s": {"compile": compile_s},
        "step_s": step_s,
        "generate_s": step_s / 2,
        "eval_s": step_s / 4,
        "analyse_s": 1.0,
        "score_by_task": {t: {"score": v, "rows": 8} for t, v in scores.items()},
        **(
            {"canary": [{"task": "gen/c2cuda/x/00001", "config": "small", "median_us": canary}]}
            if canary
            else {}
        ),
    }


def test_chunk_numbers_are_the_ones_a_run_readme_quotes():
    """The numbers sessions 41-44 computed by hand for each chunk's README section (one of
    them once read a rollout record as its step's): the chunk's and the run's so far."""
    mod = load_script("bench/ablation/merge_chunk.py")
    rows = [
        _row(1, 0.5, [0.5, 0.2], 0.5, 10, 0, 5.0, 100.0, {"a": 0.1, "b": 0.5}, canary=10.0),
        _row(2, 1.0, [0.3, 0.4], 0.25, 12, 2, 20.0, 60.0, {"a": 0.3}, canary=15.0),
        _row(3, 0.75, [0.6, 0.1], 0.75, 5, 5, 0.0, 40.0, {"b": 0.2}, rows=64),
    ]
    n = mod.chunk_numbers(rows, 2, 3)
    assert n["step_s_mean"] == 50.0 and n["generate_s_mean"] == 25.0 and n["eval_s_mean"] == 12.5
    # compile seconds over candidates not from the cache: 20 / (12 - 2 + 5 - 5); before 5 / 10
    assert n["nvcc_s_per_candidate"] == 2.0 and n["nvcc_s_per_candidate_before"] == 0.5
    assert n["groups_2_correct"] == (7, 8) and n["groups_2_correct_so_far"] == (9, 12)
    assert n["turn2_below_turn1"] == (1, 2) and n["turn2_below_turn1_so_far"] == (2, 3)
    assert n["ok_share"] == 0.5833  # rows-weighted: (0.25 x 32 + 0.75 x 64) / 96
    ((c,),) = n["canaries"].values()
    assert list(n["canaries"]) == [2] and c["change"] == 0.5 and c["step1_us"] == 10.0
    fl = n["first_last_by_task"]  # a: 0.1 -> 0.3, b: 0.5 -> 0.2 (its last step, 3)
    assert (fl["tasks"], fl["rose"], fl["fell"], fl["diff_mean"]) == (2, 1, 1, -0.05)
    text = "\n".join(mod.show_numbers(n))
    assert "7 of 8 (9 of 12 over steps 1-3)" in text and "1 of 2 steps (2 of 3 so far)" in text
    assert "x/00001:small 15 us (+50.0%)" in text and "ok rows 58.3%" in text
    early = mod.chunk_numbers(rows, 2, 2)  # "so far" stops at the chunk's last step
    assert early["groups_2_correct_so_far"] == (6, 8) and early["first_last_by_task"]["tasks"] == 1
    with pytest.raises(mod.Refused, match="steps 7-9"):
        mod.chunk_numbers(rows, 7, 9)
