"""bench/grpo_learning.py over `cudaperf bench run` folders of the sample set, written by
run_bench with an evaluator that reports the stored H200 measurements (no GPU): a "before"
whose second sample is broken on 8 of the 12 tasks, an "after" that is always right."""

from __future__ import annotations

import json
import shutil

import pytest

from cudaperf.report.run import make_bench_backend
from cudaperf.tasks.io import load_sample
from tests.report.helpers import stored_bench, turn1_task_mean
from tests.script_helpers import load_script

TASKS = load_sample()
BROKEN = {t.id for t in TASKS[:8]}  # their second sample is broken in the "before" run


def _script():
    return load_script("bench/grpo_learning.py")


class SecondSampleBroken:
    """scripted:best, but the second sample of a task in BROKEN is code nvcc cannot build."""

    def __init__(self, tasks):
        from cudaperf.refine.prompts import task_prompt

        self.inner = make_bench_backend("scripted:best", tasks)
        self.broken_prompts = {task_prompt(t) for t in tasks if t.id in BROKEN}
        self.name = "scripted:second-broken"

    def generate_batch(self, conversations, n):
        out = self.inner.generate_batch(conversations, n)
        for conv, replies in zip(conversations, out, strict=True):
            if any(m["content"] in self.broken_prompts for m in conv if m["role"] == "user"):
                replies[1] = "```cuda\n__global__ void k() { this does not compile }\n```"
        return out


def _bench(out, backend=None, preset="outcome_only", turns=1, tasks=TASKS):
    return stored_bench(out, tasks, backend=backend, preset=preset, turns=turns)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {
        "before": _bench(root / "before", SecondSampleBroken(TASKS)),
        "after": _bench(root / "after"),
    }


def _steps(path):
    """A two-step training log in the shape `cudaperf train grpo` writes."""
    recs = []
    for s, (ret, ok) in enumerate([(0.2, 0.25), (0.9, 0.75)]):
        recs.append(
            {
                "kind": "rollout",
                "step": s,
                "processes": 1,
                "rows": 32,
                "return_mean": ret,
                "score_mean": ret - 0.1,
                "outcome_mean": ok,
                "groups_2_correct": ok,
                "status_share": {"ok": ok, "compile_error": 1 - ok},
                "score_by_task": {"t1": {"score": ret, "rows": 16}},
            }
        )
        recs.append({"kind": "step", "step": s + 1, "step_s": 40.0})
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_before_and_after_with_paired_differences_and_a_verdict(tmp_path, folders, capsys):
    out, png = tmp_path / "l.json", tmp_path / "l.png"
    args = [
        "--subset",
        f"train_unseen={folders['before']},{folders['after']}",
        "--subset",
        f"reversed={folders['after']},{folders['before']}",
        "--steps",
        str(_steps(tmp_path / "steps.jsonl")),
        "--out",
        str(out),
        "--plot",
        str(png),
    ]
    assert _script().main(args) == 0
    res = json.loads(out.read_text())
    s = res["subsets"]["train_unseen"]
    assert (s["tasks"], s["families"], s["samples"], s["turns"]) == (12, 12, 2, 1)
    before, after = (
        turn1_task_mean(folders["before"], "correct"),
        turn1_task_mean(folders["after"], "correct"),
    )
    assert before == pytest.approx(1 - 0.5 * len(BROKEN) / len(TASKS)) and after == 1.0
    assert s["sft"]["correct_rate"]["value"] == pytest.approx(before)
    assert s["grpo"]["correct_rate"]["value"] == pytest.approx(after)
    assert s["sft"]["sampling"] is None  # a scripted replay records none
    d = s["diff"]["correct_rate"]
    assert d["value"] == pytest.approx(after - before) and d["kind"] == "difference"
    assert 0 < d["ci"][0] < d["value"] < d["ci"][1]  # 8 of 12 families differ: not a zero width
    assert s["verdict"] == "improved"
    assert s["sft"]["pass_at_k"]["value"] == pytest.approx(1.0)  # one of 2 samples is right
    assert s["diff"]["pass_at_k"]["value"] == pytest.approx(0.0)
    assert s["diff"]["geomean_naive"]["kind"] == "ratio"
    assert s["metrics"]["fast_1.2_naive"] == "fast_1.2 vs naive (best of 2x1)"
    assert "primary" in s["diff"] and s["diff"]["primary"]["value"] > 0  # outcome_only runs
    r = res["subsets"]["reversed"]
    assert r["diff"]["correct_rate"]["value"] == pytest.approx(-d["value"])
    assert r["verdict"] == "worse"
    cur = res["curves"]
    assert [p["step"] for p in cur["per_step"]] == [1, 2]
    assert [p["return_mean"] for p in cur["per_step"]] == [0.2, 0.9]
    assert cur["per_step"][1]["status_share"] == {"ok": 0.75, "compile_error": 0.25}
    assert cur["pool_first_vs_last"]["rose"] == 1
    assert png.stat().st_size > 10_000
    text = capsys.readouterr().out
    assert "verdict (correct rate): improved" in text and "verdict (correct rate): worse" in text


def test_no_change_is_a_null_result(tmp_path, folders, capsys):
    out = tmp_path / "l.json"
    args = ["--subset", f"same={folders['after']},{folders['after']}", "--out", str(out)]
    assert _script().main(args) == 0
    s = json.loads(out.read_text())["subsets"]["same"]
    assert s["diff"]["correct_rate"]["value"] == 0.0
    assert s["verdict"].startswith(("null", "no interval"))
    assert "curves" not in json.loads(out.read_text())


def test_runs_that_do_not_pair_are_refused_with_one_line(tmp_path, folders, capsys):
    few = _bench(tmp_path / "few", tasks=TASKS[:4])
    two_turns = _bench(tmp_path / "t2", turns=2)
    unified = _bench(tmp_path / "u", preset="unified")
    other_gpu = tmp_path / "gpu"
    shutil.copytree(folders["after"], other_gpu)
    run = json.loads((other_gpu / "run.json").read_text())
    run["gpu"] = "NVIDIA H100 80GB HBM3"  # the "before" run's card: none recorded
    (other_gpu / "run.json").write_text(json.dumps(run))
    cases = [
        (f"x={folders['before']},{few}", "other finished tasks"),
        (f"x={folders['before']},{two_turns}", "2 turns, but"),
        (f"x={folders['before']},{other_gpu}", "another setup"),
        (f"x={folders['before']},{tmp_path / 'none'}", "no such folder"),
        (f"x={folders['before']}", "NAME=BEFORE_RUN,AFTER_RUN"),
    ]
    for spec, why in cases:
        assert _script().main(["--subset", spec, "--out", str(tmp_path / "x.json")]) == 2, spec
        err = capsys.readouterr().err.strip()
        assert why in err and "\n" not in err and err.startswith("grpo_learning: "), err
    assert not (tmp_path / "x.json").exists()
    ok = ["--subset", f"x={folders['before']},{unified}", "--out", str(tmp_path / "y.json")]
    assert _script().main(ok) == 0  # another preset: the same correctness, no primary metric
    s = json.loads((tmp_path / "y.json").read_text())["subsets"]["x"]
    assert "primary" not in s["diff"] and s["verdict"] == "improved"
