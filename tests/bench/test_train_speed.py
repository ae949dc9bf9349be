"""bench/train_speed.py's summary (steady state from repeats >= 1, errors kept) and
bench/train_eval_speed.py's candidates (never a task's naive implementation)."""

from __future__ import annotations

from tests.script_helpers import load_script


def _run(mode, batch, rep, tps, secs, error=None):
    return {
        "mode": mode,
        "batch": batch,
        "repeat": rep,
        "tokens_per_s": tps,
        "seconds": secs,
        "error": error,
    }


def test_summary_reports_the_steady_state_and_the_first_run_apart():
    m = load_script("bench/train_speed.py")
    rows = [
        _run("compile", 8, 0, 10.0, 90.0),
        _run("compile", 8, 1, 400.0, 2.0),
        _run("compile", 8, 2, 600.0, 1.5),
        _run("dynamic", 8, 0, 100.0, 8.0),
    ]
    s = m.summarise(rows)
    assert s["compile@8"]["tokens_per_s"] == 500.0  # the compile run is not averaged in
    assert s["compile@8"]["first_run_s"] == 90.0
    assert s["dynamic@8"]["tokens_per_s"] == 100.0  # only repeat 0: it is what there is


def test_summary_keeps_a_failed_mode_with_its_error():
    m = load_script("bench/train_speed.py")
    s = m.summarise([_run("continuous", 16, 0, None, None, error="RuntimeError: no paged")])
    assert s["continuous@16"]["tokens_per_s"] is None
    assert s["continuous@16"]["error"] == "RuntimeError: no paged"


def test_eval_speed_candidates_are_never_the_naive_implementation():
    from cudaperf.execute.api import naive_implementation
    from cudaperf.tasks.io import load_sample

    m = load_script("bench/train_eval_speed.py")
    tasks = [t for t in load_sample() if naive_implementation(t) is not None]
    assert tasks
    for pick in (0, 1):
        got = m.candidates(tasks, pick)
        assert got and all(c != naive_implementation(t).code for t, c in got)
    a, b = dict((t.id, c) for t, c in m.candidates(tasks, 0)), m.candidates(tasks, 1)
    assert any(a[t.id] != c for t, c in b)  # batch B holds other kernels than batch A


def test_the_three_ways_an_adapter_samples_run_and_are_recorded(tmp_path, monkeypatch):
    """`--weights merged|adapter|twin` (a tiny model and adapter, the sample tasks; run in
    this process, as `python bench/train_speed.py` runs main): each run writes its tokens/s
    under its own name; `adapter` and `twin` need the adapter."""
    import json
    import sys

    import pytest

    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    from tests.train.helpers import make_tiny_model, write_task_file

    tiny = make_tiny_model(tmp_path / "tiny")
    lora = peft.get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny),
        peft.LoraConfig(r=2, target_modules="all-linear", task_type="CAUSAL_LM"),
    )
    lora.save_pretrained(tmp_path / "adapter")
    (tmp_path / "data").mkdir()
    tasks = write_task_file(tmp_path / "data")  # the dataset's 4,199 tasks took 7 s a run
    args = ["--model", str(tiny), "--adapter", str(tmp_path / "adapter"), "--modes", "dynamic"]
    args += ["--batches", "2", "--repeats", "1", "--max-new-tokens", "3", "--tasks", str(tasks)]
    speed = load_script("bench/train_speed.py")
    for weights in ("merged", "adapter", "twin"):
        out = tmp_path / f"{weights}.json"
        monkeypatch.setattr(
            sys, "argv", ["train_speed.py", *args, "--weights", weights, "--out", str(out)]
        )
        speed.main()
        doc = json.loads(out.read_text())
        assert doc["weights"] == weights
        assert weights == "merged" or f"({weights})" in doc["model"]
        (row,) = doc["summary"]
        assert row["error"] is None and row["tokens_per_s"] > 0, row
    monkeypatch.setattr(sys, "argv", ["train_speed.py", "--weights", "twin"])
    with pytest.raises(SystemExit, match="--weights twin: give the --adapter"):
        speed.main()
