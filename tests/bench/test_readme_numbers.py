"""The README's measured numbers are the committed results' numbers: each one quoted below is
recomputed from the file a run wrote and looked up in the README, so a rerun that changes a
result, or an edit that changes a quote, fails here until both agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SFT = ROOT / "bench/results/ablation/bench/sft_pairs_s0/ablation"
ARM_A = ROOT / "bench/results/ablation/abl_unified_s0"


def _metric(summary: dict, name: str) -> dict:
    return next(m for m in summary["metrics"] if m["metric"] == name)


def _pct(m: dict) -> str:
    lo, hi = m["ci"]
    return f"{100 * m['value']:.1f}% [{100 * lo:.1f}%, {100 * hi:.1f}%]"


def _row(label: str) -> str:
    rows = [line for line in README.splitlines() if line.startswith(f"| {label}")]
    assert len(rows) == 1, f"README has {len(rows)} table rows starting with {label!r}"
    return rows[0]


COMPARE = ROOT / "bench/results/ablation/bench/compare"


def _against_start(cmp: Path) -> dict:
    """A `compare/sft_vs_ARM_sSEED/SUBSET` folder's `primary.json` as the README quotes it:
    the trained run's folder (`run`), its primary metric (`point`, 3 decimals), the start's
    (`start`), the paired difference (`d`) and its quote with the start's point (`diff`:
    "Y: +d [lo, hi]"), and the run's turn-1 correct rate from its bench summary (`correct`)."""
    doc = json.loads((cmp / "primary.json").read_text())
    runs = {r["arm"]: r for r in doc["runs"]}
    (arm,) = set(runs) - {"sft"}
    (d,) = doc["per_seed"]
    lo, hi = d["ci"]
    run = next(p for p in doc["command"].split() if p.startswith(f"{arm}:")).split("=", 1)[1]
    summary = json.loads((ROOT / run / "summary.json").read_text())
    return {
        "run": ROOT / run,
        "point": f"{runs[arm]['primary']:.3f}",
        "start": runs["sft"]["primary"],
        "d": d,
        "diff": f"{runs['sft']['primary']:.3f}: {d['d']:+.3f} [{lo:.3f}, {hi:.3f}]",
        "correct": f"correct {_pct(_metric(summary, 'correct rate (turn 1)'))} against",
    }


@pytest.mark.parametrize(
    "label, run",
    [("primary: unseen tasks of training families", "train-unseen"), ("test families", "heldout")],
)
def test_the_sft_start_table_quotes_its_bench_runs(label, run):
    summary = json.loads((SFT / run / "sft/summary.json").read_text())
    row = _row(label)
    assert f"| {summary['tasks']['finished']} ({summary['tasks']['families']}) |" in row
    assert _pct(_metric(summary, "correct rate (turn 1)")) in row
    assert _pct(_metric(summary, "correct, best of 4x1")) in row
    geo = _metric(summary, "geomean speedup vs naive, correct turn-1 samples")
    assert f"{geo['value']:.2f}x" in row


def test_the_test_family_compile_rate_is_the_runs():
    summary = json.loads((SFT / "heldout/sft/summary.json").read_text())
    rate = _metric(summary, "compile rate (turn 1)")["value"]
    assert f"On the test families {100 * rate:.1f}% of its replies compile" in README


def test_the_first_main_run_paragraph_quotes_its_reports_and_log():
    from cudaperf.train.curves import summary

    start = README.index("**The first main run is done**")
    para = README[start : README.index("\n\n", start)]
    seconds = [
        json.loads((ARM_A / f"grpo_report_lease{k}.json").read_text())["seconds"]
        for k in (1, 2, 3, 4)
    ]
    quoted = ", ".join(f"{s:g} s" for s in seconds[:3]) + f" and {seconds[3]:g} s"
    assert quoted in para, quoted
    mean = summary([ARM_A / "steps.jsonl"])[str(ARM_A / "steps.jsonl")]["step_s_mean"]
    assert f"mean step over the 60, {mean:.1f} s" in para


def test_the_re_run_pilot_paragraph_and_row_quote_its_summary():
    summary = json.loads((ROOT / "bench/results/ablation/pilot_rerun_summary.json").read_text())
    runs = {r["arm"]: r for r in summary["runs"]}
    a, b = (runs[arm]["groups_2_correct"] for arm in ("unified", "outcome_only"))
    floor = summary["detectable_effect"]["by_assumed_seed_sd"][0]
    sd = summary["detectable_effect"]["within_task_sd"]
    arm_b = ROOT / "bench/results/ablation/abl_outcome_only_s0"
    leases = sorted(arm_b.glob("grpo_report_lease*.json"), key=lambda f: int(f.stem[17:]))
    reports = [json.loads(f.read_text()) for f in leases]
    start = README.index(
        f"**Arm B (`outcome_only`), seed 0, has run steps 1-{reports[-1]['steps']}**"
    )
    para = README[start : README.index("\n\n", start)]
    row = _row("ablation re-run pilot")
    for text in (para, row):
        assert f"{a['with_2_correct']} of {a['groups']} groups (" in text.replace("\n", " ")
        assert f"{b['with_2_correct']} of {b['groups']}" in text
        assert f"**{floor['mde_normal']:.3f}**" in text
        assert f"{floor['mde_t2']:.3f}" in text
    assert f"within-task SD {sd:.3f}" in para
    seconds = [f"{r['seconds']:g} s" for r in reports]
    quoted = "15-step chunk, " + ", ".join(seconds[:-1]) + " and " + seconds[-1]
    assert quoted in para.replace("\n", " "), quoted


def test_arm_a_seed_0_against_the_start_is_quoted_from_its_primary_file_and_bench():
    """The paragraph and the table row quote `primary.py`'s file and the bench run's summary;
    the run they read is finished (the paragraph quoted a count while it was not)."""
    from tests.script_helpers import load_script

    status = load_script("bench/ablation/status.py")
    run = ROOT / "bench/results/ablation/bench/abl_unified_s0/ablation/train-unseen/grpo"
    done, total = status.bench_progress(run).split("/")
    assert done == total, f"arm A's bench is at {done}/{total}: quote a count, not metrics"
    q = _against_start(COMPARE / "sft_vs_unified_s0/train-unseen")
    assert q["run"] == run
    d, (lo, hi) = q["d"], q["d"]["ci"]
    quoted = f"{q['point']} vs {q['start']:.3f}, {d['d']:+.3f} [{lo:.3f}, {hi:.3f}]"
    assert quoted in _row("arm A (`unified`) seed 0 after 60 steps"), quoted
    para = README[README.index("**Arm B (`outcome_only`), seed 0, has run steps") :]
    para = para[: para.index("\n\n")].replace("\n", " ")
    assert f"{q['point']} against the SFT start's" in para
    assert q["diff"] in para and q["correct"] in para


LATER_SEEDS = sorted((ROOT / "bench/results/ablation").glob("abl_*_s[1-9]"))


@pytest.mark.parametrize("folder", LATER_SEEDS, ids=lambda f: f.name)
def test_the_later_seeds_progress_is_quoted_from_their_committed_runs(folder):
    """Each committed run of seed 1 or 2 has its "Arm X, seed N, has run steps 1-K" sentence,
    quoting that run's lease reports and its steps file: K steps trained, each lease's last
    process's seconds, the groups with 2 correct."""
    from tests.script_helpers import load_script

    summarise = load_script("bench/ablation/summarise.py")
    para = README.replace("\n", " ")
    preset, seed = folder.name[4:].rsplit("_s", 1)
    arm = {"unified": "A", "outcome_only": "B"}[preset]
    leases = sorted(folder.glob("grpo_report_lease*.json"), key=lambda f: int(f.stem[17:]))
    reports = [json.loads(f.read_text()) for f in leases]
    start = para.index(f"**Arm {arm}, seed {seed}, has run steps 1-{reports[-1]['steps']}**")
    said = para[start : para.index(f"`bench/results/ablation/{folder.name}/`", start)]
    seconds = ", ".join(f"{r['seconds']:g} s" for r in reports)
    assert f"last process from the SFT start on: {seconds};" in said, seconds
    g = summarise.run_summary(preset, folder)["groups_2_correct"]
    assert f"{g['with_2_correct']} of {g['groups']} groups with at least 2" in said


AGAINST_START = sorted(COMPARE.glob("sft_vs_*/train-unseen"))


@pytest.mark.parametrize("cmp", AGAINST_START, ids=lambda f: f.parent.name)
def test_each_checkpoint_against_the_start_is_quoted_from_its_primary_file(cmp):
    """Every committed primary-subset comparison of a trained checkpoint with the SFT start has
    its "X against the (SFT) start's Y: d [lo, hi]" quote in the README, read from its
    `primary.json`, and the checkpoint's turn-1 correct rate from its bench run's summary."""
    q = _against_start(cmp)
    para = README.replace("\n", " ")
    assert f"{q['point']} against the" in para
    assert q["diff"] in para and q["correct"] in para
