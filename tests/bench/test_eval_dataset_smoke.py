"""bench/eval_dataset_smoke.py: which tasks and implementations it picks (CPU), and the smoke
itself on the dataset's largest configs (GPU)."""

from __future__ import annotations

import json
import shutil

import pytest

from cudaperf.tasks.model import Implementation, Measurement
from tests.data_helpers import read_tasks_once
from tests.script_helpers import ROOT, load_script

smoke = load_script("bench/eval_dataset_smoke.py")
DATA = ROOT / "data" / "tasks.jsonl.gz"


@pytest.fixture(scope="module")
def tasks():
    return read_tasks_once(DATA)


def test_every_family_gets_a_drawn_task_and_its_largest_one(tasks):
    chosen = smoke.pick(tasks, seed=0)
    assert len(chosen) == len({t.family for t in tasks}) == 43
    assert chosen == smoke.pick(tasks, seed=0)  # fixed by the seed
    assert chosen != smoke.pick(tasks, seed=1)
    for fam, picked in chosen.items():
        family = [t for t in tasks if t.family == fam]
        assert picked[-1].id == max(family, key=lambda t: (smoke.task_bytes(t), t.id)).id
        assert all(t.family == fam for t in picked) and 1 <= len(picked) <= 2
    # the C→CUDA task with the largest call segment of the dataset is in the smoke
    c_tasks = [t for t in tasks if t.kind.value == "c2cuda"]
    biggest = max(c_tasks, key=smoke.task_bytes)
    assert biggest.id in {t.id for ts in chosen.values() for t in ts}
    assert smoke.task_bytes(biggest) > 64 << 20  # over the old output limit


def _measured(task, impl_id: str, us: float) -> Implementation:
    ms = [
        Measurement(
            config=c.name, gpu=smoke.GPU, median_us=us, iqr_us=0.0, trials=5, date="2026-12-04"
        )
        for c in task.configs
    ]
    return Implementation(id=impl_id, code=f"// {impl_id}", strategies=["x"], measurements=ms)


def test_fastest_is_the_lowest_geomean_and_naive_falls_back_to_the_slowest(tasks):
    t = tasks[0]
    impls = [_measured(t, "slow", 30.0), _measured(t, "fast", 10.0), _measured(t, "mid", 20.0)]
    t = t.model_copy(update={"implementations": impls})
    assert smoke.fastest_implementation(t).id == "fast"
    assert smoke.naive_or_slowest(t).id == "slow"  # no naive implementation
    naive = impls[2].model_copy(update={"id": "naive", "strategies": ["naive"]})
    t2 = t.model_copy(update={"implementations": [*impls, naive]})
    assert smoke.naive_or_slowest(t2).id == "naive"
    unmeasured = impls[1].model_copy(update={"id": "fastest_unmeasured", "measurements": []})
    t3 = t.model_copy(update={"implementations": [*impls, unmeasured]})
    assert smoke.fastest_implementation(t3).id == "fast"  # only fully measured ones compete


def test_without_a_gpu_it_says_so_in_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "smoke.json"
    assert smoke.main(["--families", "gemm", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no GPU" in err[0] and not out.exists()
    assert smoke.main(["--families", "no_such_family", "--out", str(out)]) == 2
    assert "unknown families" in capsys.readouterr().err


def test_families_stream_through_one_batch_and_each_row_is_written_when_its_last_job_ends(tasks):
    """All families' jobs go to the evaluator at once; results come back in any order (here
    the reverse, with a task whose naive and fastest are the same code), and a family's row
    is handed on as soon as its last result is in, built from its own results."""
    from cudaperf.execute.types import ConfigResult, ExecResult, Status, Timing

    chosen = smoke.pick(tasks, seed=0)
    todo = ["gemm", "histogram"]
    one = chosen["gemm"][0]
    chosen["gemm"] = [one.model_copy(update={"implementations": one.implementations[:1]})]
    sent, rows = [], []

    def evaluate(jobs):
        sent.extend(jobs)
        for t, c in reversed(jobs):
            st = (
                Status.OK
                if t.family == "gemm" or c.id != smoke.naive_or_slowest(t).id
                else Status.WRONG_OUTPUT
            )
            cfgs = [
                ConfigResult(
                    config=x.name, held_out=x.held_out, correct=True, timing=Timing.of([1.0])
                )
                for x in t.configs
            ]
            yield ExecResult(
                status=st,
                mode="full",
                task_id=t.id,
                candidate_hash=c.hash,
                candidate_id=c.id,
                configs=cfgs,
                device_share=0.5,
            )

    smoke.stream_rows(chosen, todo, evaluate, lambda fam, row: rows.append((fam, row)))
    assert len(sent) == 2 + 2 * len(chosen["histogram"])  # one batch for both families
    assert [f for f, _ in rows] == ["histogram", "gemm"]  # the reverse order finished it first
    gemm, hist = rows[1][1], rows[0][1]
    assert gemm["jobs"] == 2 and gemm["naive"] == gemm["fastest"] == "ok" and gemm["passed"]
    assert hist["naive"] == "wrong_output" and hist["fastest"] == "ok" and not hist["passed"]
    assert hist["min_device_share"] == 0.5


def _stand_in(monkeypatch) -> list[list[str]]:
    """An evaluator stand-in (this machine has no GPU): every job ok and timed on every config;
    returns the list of batches it was sent (each a sorted list of families)."""
    from cudaperf.execute.types import ConfigResult, ExecResult, Status, Timing

    class Session:
        mode, backend = "full", None

        def __init__(self, cfg):
            pass

        def close(self):
            pass

    batches = []

    def evaluate(jobs, cfg, backend=None):
        batches.append(sorted({t.family for t, _ in jobs}))
        for t, c in jobs:
            cfgs = [
                ConfigResult(
                    config=x.name, held_out=x.held_out, correct=True, timing=Timing.of([1.0])
                )
                for x in t.configs
            ]
            yield ExecResult(
                status=Status.OK,
                mode="full",
                task_id=t.id,
                candidate_hash=c.hash,
                configs=cfgs,
                phases={"call": 1.0, "compare": 0.25},
            )

    monkeypatch.setattr(smoke, "EvalSession", Session)
    monkeypatch.setattr(smoke, "evaluate_batch", evaluate)
    monkeypatch.setattr(smoke, "load_tasks", read_tasks_once)
    return batches


def test_main_sends_families_in_batches_and_writes_each_row(tmp_path, monkeypatch, capsys):
    """`--batch-families 1`: one evaluator batch per family, the JSON holding each row as it
    ends."""
    batches = _stand_in(monkeypatch)
    out = tmp_path / "s.json"
    rc = smoke.main(["--families", "gemm,histogram", "--batch-families", "1", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert rc == 0 and doc["passed"]  # (--families: the two chosen are the whole run)
    assert batches == [["gemm"], ["histogram"]]
    assert set(doc["families"]) == {"gemm", "histogram"} and doc["families_passed"] == 2
    printed = capsys.readouterr().out
    assert "[2/2] histogram" in printed and "; call " in printed and "compare" in printed
    # where the time went: each family's jobs' phases summed, and the run's per kind of task
    rows = doc["families"].values()
    assert all(r["phases_s"] == {"call": r["jobs"], "compare": r["jobs"] / 4} for r in rows)
    jobs = sum(r["jobs"] for r in rows)
    assert doc["phases_s"] == {"c2cuda": {"call": jobs, "compare": jobs / 4}}


def test_seed_from_keeps_families_measured_at_this_evaluator_only(tmp_path, monkeypatch, capsys):
    """`--seed-from`: a new --out starts from the seed file's families when that file was
    measured at this evaluator with the same seed (those are not run again); a file of another
    evaluator or seed, or one that cannot be read, is said in a line and ignored. The seed file
    itself is never written."""
    batches = _stand_in(monkeypatch)
    version = smoke.header(smoke._config("training", None))["versions"]["cudaperf"]
    row = {"passed": True, "naive": "ok", "fastest": "ok"}
    seed = tmp_path / "committed.json"
    cases = [
        ({"families": {"gemm": row}, "versions": {"cudaperf": version}, "seed": 0}, ["histogram"]),
        ({"families": {"gemm": row}, "versions": {"cudaperf": "0.1.0+0"}, "seed": 0}, None),
        ({"families": {"gemm": row}, "versions": {"cudaperf": version}, "seed": 7}, None),
        ("{not json", None),
    ]
    for k, (doc, want) in enumerate(cases):
        seed.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        before = seed.read_text()
        batches.clear()
        out = tmp_path / f"s{k}.json"
        argv = ["--families", "gemm,histogram", "--out", str(out), "--seed-from", str(seed)]
        assert smoke.main(argv) == 0
        said = capsys.readouterr().out
        assert [f for b in batches for f in b] == (want or ["gemm", "histogram"]), k
        assert ("1 families measured" in said) == (want is not None), said
        got = json.loads(out.read_text())
        assert set(got["families"]) == {"gemm", "histogram"} and got["passed"]
        assert seed.read_text() == before
    # an --out that already holds families resumes itself; the seed file is not read
    batches.clear()
    seed.write_text(json.dumps(cases[0][0]))
    assert (
        smoke.main(["--families", "gemm,histogram", "--out", str(out), "--seed-from", str(seed)])
        == 0
    )
    assert batches == [] and "--seed-from" not in capsys.readouterr().out


def test_a_file_measured_by_another_evaluator_is_not_resumed(tmp_path, capsys):
    """Families measured at another evaluator fingerprint are not mixed with new ones: the
    rerun refuses in one line and leaves the file as it was (--fresh starts over)."""
    out = tmp_path / "smoke.json"
    old = {"families": {"gemm": {"passed": True}}, "versions": {"cudaperf": "0.1.0+000000000000"}}
    out.write_text(json.dumps(old))
    assert smoke.main(["--families", "gemm", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "0.1.0+000000000000" in err[0] and "--fresh" in err[0]
    assert json.loads(out.read_text()) == old
    assert smoke.main(["--families", "gemm", "--out", str(out), "--fresh"]) == 2  # no GPU here
    assert "no GPU" in capsys.readouterr().err


# The families with the largest call segments (C→CUDA, 0.6-1.2 GB) and two PyTorch ones: the
# sizes that a 64 MiB limit on the worker broke. The whole dataset: the script itself.
BIG = "resize2d,stencil3d,permute,elementwise_expr,torch_cross_entropy,torch_masked_softmax"


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU visible")
def test_the_largest_tasks_naive_and_fastest_evaluate_ok_on_every_config(tmp_path):
    out = tmp_path / "smoke.json"
    rc = smoke.main(["--families", BIG, "--out", str(out)])
    doc = json.loads(out.read_text())
    bad = {f: r["failures"] for f, r in doc["families"].items() if not r["passed"]}
    assert rc == 0 and doc["passed"], bad
    assert all(r["configs_ok"] == r["configs"] for r in doc["families"].values())
    # every C→CUDA family's implementations were traced, and the GPU did their work
    c_rows = [r for r in doc["families"].values() if r["kind"] == "c2cuda"]
    assert all(r["min_device_share"] is not None and r["min_device_share"] >= 0.05 for r in c_rows)


RELU = """# A problem file in KernelBench's format, written for cudaperf's tests.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


n = 4096


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
"""


def test_kernelbench_problems_are_paired_with_their_hand_written_candidates(tmp_path):
    """A level-1 problem whose file name has a native candidate in bench/kernelbench_candidates
    is evaluated with it; a problem without one is not; a failure fails the suite."""
    from cudaperf.execute.types import ConfigResult, ExecResult, Status, Timing

    lvl = tmp_path / "KernelBench" / "level1"
    lvl.mkdir(parents=True)
    (lvl / "19_ReLU.py").write_text(RELU)
    (lvl / "9999_Unknown.py").write_text(RELU)

    def session(status):
        def run(jobs):
            return [
                ExecResult(
                    status=status,
                    mode="full",
                    task_id=t.id,
                    candidate_hash=c.hash,
                    configs=[
                        ConfigResult(
                            config=k.name,
                            held_out=k.held_out,
                            correct=True,
                            timing=Timing.of([1.0]),
                        )
                        for k in t.configs
                    ],
                )
                for t, c in jobs
            ]

        return run

    good = smoke.kernelbench_rows(str(tmp_path), session(Status.OK))
    assert good == {"tasks": 1, "ok": 1, "failures": [], "passed": True}
    bad = smoke.kernelbench_rows(str(tmp_path), session(Status.WRONG_OUTPUT))
    assert bad["passed"] is False and bad["failures"][0]["status"] == "wrong_output"


def test_a_family_whose_tasks_changed_or_named_in_redo_runs_again(tmp_path, monkeypatch, capsys):
    """A resumed --out keeps a family's row only while its digest matches the data (a task's
    tolerance regenerated makes it stale; a new stored measurement does not); `--redo` runs a
    named family again; a row from before digests were kept is trusted as it is."""
    batches = _stand_in(monkeypatch)
    out = tmp_path / "s.json"
    argv = ["--families", "gemm,histogram", "--out", str(out)]
    assert smoke.main(argv) == 0
    doc = json.loads(out.read_text())
    chosen = smoke.pick(read_tasks_once(DATA), seed=0)
    assert doc["families"]["gemm"]["tasks_digest"] == smoke.family_digest(chosen["gemm"])
    batches.clear()
    assert smoke.main(argv) == 0 and batches == []  # nothing changed: nothing runs

    t = chosen["gemm"][0]
    tol = t.tolerance.model_copy(update={"rtol": t.tolerance.rtol * 2})
    looser = t.model_copy(update={"tolerance": tol})
    assert (
        smoke.family_digest([looser, *chosen["gemm"][1:]])
        != doc["families"]["gemm"]["tasks_digest"]
    )

    def remeasured(scale_of):  # every implementation measured again, medians scaled
        impls = [
            i.model_copy(
                update={
                    "measurements": [
                        m.model_copy(
                            update={"date": "2027-01-01", "median_us": m.median_us * scale_of(i)}
                        )
                        for m in i.measurements
                    ]
                }
            )
            for i in t.implementations
        ]
        return [t.model_copy(update={"implementations": impls}), *chosen["gemm"][1:]]

    was = doc["families"]["gemm"]["tasks_digest"]
    assert smoke.family_digest(remeasured(lambda i: 1.0)) == was  # same candidates
    slowest = smoke._ranked(t, smoke.GPU)[-1].id  # now made the fastest: another candidate
    assert smoke.family_digest(remeasured(lambda i: 1e-6 if i.id == slowest else 1.0)) != was

    doc["families"]["gemm"]["tasks_digest"] = "0" * 16  # measured on other tasks
    del doc["families"]["histogram"]["tasks_digest"]  # a row from before digests
    out.write_text(json.dumps(doc))
    assert smoke.main(argv) == 0
    assert batches == [["gemm"]] and "gemm: run again (its tasks changed" in capsys.readouterr().out
    batches.clear()
    assert smoke.main([*argv, "--redo", "histogram"]) == 0 and batches == [["histogram"]]
    assert "histogram: run again (named in --redo)" in capsys.readouterr().out
    assert smoke.main([*argv, "--redo", "conv1d"]) == 2
    assert "--redo ['conv1d']" in capsys.readouterr().err
