"""bench/ablation/primary.py over `cudaperf bench run` folders of the sample set, written by
run_bench with an evaluator that reports the stored H200 measurements (no GPU)."""

from __future__ import annotations

import json
import math

import pytest

from cudaperf.report.rows import BenchRow
from cudaperf.tasks.io import load_sample
from tests.report.helpers import meta, stored_bench, turn1_task_mean, views
from tests.script_helpers import load_script

TASKS = load_sample()


def _script():
    return load_script("bench/ablation/primary.py")


def _bench(out, model, preset="outcome_only", tasks=TASKS):
    return stored_bench(out, tasks, model, preset=preset)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {
        "best": _bench(root / "best", "scripted:best"),
        "naive": _bench(root / "naive", "scripted:naive"),
    }


def test_per_run_per_seed_and_pooled_effects(tmp_path, folders, capsys):
    out = tmp_path / "a.json"
    runs = [
        f"unified:0={folders['best']}",
        f"unified:1={folders['naive']}",
        f"outcome_only:0={folders['naive']}",
        f"outcome_only:1={folders['best']}",
    ]
    assert _script().main([x for r in runs for x in ("--run", r)] + ["--out", str(out)]) == 0
    res = json.loads(out.read_text())
    prim = {(r["arm"], r["seed"]): r["primary"] for r in res["runs"]}
    assert prim[("unified", 0)] == pytest.approx(turn1_task_mean(folders["best"], "reward"))
    assert prim[("outcome_only", 0)] == pytest.approx(turn1_task_mean(folders["naive"], "reward"))
    d = [p["d"] for p in res["per_seed"]]
    assert d[0] == pytest.approx(prim[("unified", 0)] - prim[("outcome_only", 0)])
    assert d[1] == pytest.approx(prim[("unified", 1)] - prim[("outcome_only", 1)])
    assert d[0] > 0 and d[1] == pytest.approx(-d[0])  # the fastest kernels earn more speed
    assert all(p["ci"][0] <= p["d"] <= p["ci"][1] for p in res["per_seed"])
    pooled = res["pooled"]
    assert pooled["d"] == pytest.approx(sum(d) / 2) and pooled["seeds"] == 2
    w = 12.706205 * abs(d[0] - d[1]) / 2  # t(0.975, 1) x sd / sqrt(2), sd = |d0 - d1| / sqrt 2
    assert pooled["t_over_seeds_ci"] == pytest.approx([pooled["d"] - w, pooled["d"] + w])
    # the mirrored seeds stack to the same task scores in both arms: no interval over families
    assert pooled["families_t_ci"] is None
    widths = [x[1] - x[0] for x in (pooled["bootstrap_ci"], pooled["t_over_seeds_ci"])]
    assert pooled["ci"][1] - pooled["ci"][0] == pytest.approx(max(widths))
    assert pooled["null"] == (pooled["ci"][0] <= 0 <= pooled["ci"][1])
    assert pooled["d"] == pytest.approx(0.0) and pooled["null"]
    assert res["noise_floor_sd"]["unified"] == pytest.approx(d[0] / math.sqrt(2))
    sec = res["runs"][0]["secondary"]
    assert sec["correct rate (turn 1)"]["value"] == 1.0
    assert set(sec) == set(_script().SECONDARY) - {"pass@4 (turn 1)"}  # 2 samples: no pass@4
    assert sec["fast_1.2 vs naive (turn 1)"]["value"] > 0.5  # the fastest kernels
    assert "pooled over 2 seed(s)" in capsys.readouterr().out


def test_one_seeds_pooled_interval_is_never_narrower_than_its_own(tmp_path, folders):
    """The family bootstrap covers less than it says at few families (issue #42): with one
    seed of the test families (5) it gave [-0.001, 0.028] where the seed's own paired t
    interval was [-0.010, 0.037]. The pooled interval over families of the stacked seeds is
    that seed's own here, and the widest interval is the one read."""
    out = tmp_path / "one.json"
    runs = [f"unified:0={folders['best']}", f"outcome_only:0={folders['naive']}"]
    assert _script().main([x for r in runs for x in ("--run", r)] + ["--out", str(out)]) == 0
    res = json.loads(out.read_text())
    (seed,), pooled = res["per_seed"], res["pooled"]
    assert pooled["t_over_seeds_ci"] is None
    assert pooled["families_t_ci"] == pytest.approx(seed["ci"])
    boot = pooled["bootstrap_ci"]
    assert boot[1] - boot[0] < seed["ci"][1] - seed["ci"][0]  # what the third interval fixes
    assert pooled["ci"] == pytest.approx(seed["ci"])
    assert pooled["null"] == (seed["ci"][0] <= 0 <= seed["ci"][1])


def test_the_interval_over_families_stacks_the_seeds():
    """families_t pools each family's tasks over the seeds before the t interval over
    families: seeds that disagree inside families but agree once stacked leave no interval;
    a seed given twice is that seed once; three families of differences 1, 0 and 0.5 give
    0.5 +- t(0.975, 2) x 0.5 / sqrt(3)."""
    mod = _script()

    def run(scores):  # family -> its two tasks' score; one turn-1 sample each, reward = score
        metas = [meta(f"{f}{i}", family=f) for f in scores for i in range(2)]
        rows = [
            BenchRow(
                task_id=f"{f}{i}",
                suite="s",
                family=f,
                kind="c2cuda",
                turn=1,
                sample=0,
                status="ok",
                mode="full",
                compiled=True,
                correct=True,
                reward=v,
            )
            for f, v in scores.items()
            for i in range(2)
        ]
        return views(rows, metas)

    b = run({"f": 0.0, "g": 0.0, "h": 0.0})
    seed0 = run({"f": 1.0, "g": 0.0, "h": 0.5})
    seed1 = run({"f": 0.0, "g": 1.0, "h": 0.5})
    assert mod.families_t([(seed0, b), (seed1, b)], 0.5) is None  # 0.5 in every family
    lo, hi = mod.families_t([(seed0, b)], 0.5)
    assert mod.families_t([(seed0, b), (seed0, b)], 0.5) == pytest.approx([lo, hi])
    assert (lo + hi) / 2 == pytest.approx(0.5)
    assert hi - 0.5 == pytest.approx(4.302653 * 0.5 / math.sqrt(3), rel=1e-4)
    assert mod.families_t([(seed0, b)], 0.2) == pytest.approx([lo - 0.3, hi - 0.3])  # centred


def test_a_run_scored_with_another_preset_is_refused(tmp_path, folders, capsys):
    unified = _bench(tmp_path / "u", "scripted:best", preset="unified")
    args = ["--run", f"unified:0={unified}", "--run", f"outcome_only:0={folders['naive']}"]
    assert _script().main([*args, "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--preset outcome_only" in err and "\n" not in err


def test_runs_on_other_tasks_or_a_missing_arm_are_refused(tmp_path, folders, capsys):
    few = _bench(tmp_path / "few", "scripted:naive", tasks=TASKS[:4])
    args = ["--run", f"unified:0={folders['best']}", "--run", f"outcome_only:0={few}"]
    assert _script().main([*args, "--out", str(tmp_path / "x.json")]) == 2
    assert "other finished tasks" in capsys.readouterr().err
    args = ["--run", f"unified:0={folders['best']}", "--out", str(tmp_path / "x.json")]
    assert _script().main(args) == 2
    assert "need runs of both" in capsys.readouterr().err
    for bad in ("unified=x", f"unified:0={tmp_path / 'none'}"):
        assert _script().main(["--run", bad, "--out", str(tmp_path / "x.json")]) == 2
        assert capsys.readouterr().err.startswith("primary: --run")


def test_runs_measured_on_another_card_or_evaluator_are_refused(tmp_path, folders, capsys):
    import shutil

    setup = {"gpu": "NVIDIA H100 80GB HBM3", "versions": {"cudaperf": "0.1.0+017329b2e51f"}}
    copies = {}
    for name, info in (
        ("best", setup),
        ("naive", setup),
        ("h200", {**setup, "gpu": "NVIDIA H200"}),
        ("code", {**setup, "versions": {"cudaperf": "0.1.0+aaaaaaaaaaaa"}}),
    ):
        src = folders["naive" if name != "best" else "best"]
        copies[name] = shutil.copytree(src, tmp_path / name)
        doc = json.loads((copies[name] / "run.json").read_text())
        (copies[name] / "run.json").write_text(json.dumps(doc | info))
    out = tmp_path / "x.json"
    args = ["--run", f"unified:0={copies['best']}", "--out", str(out)]
    assert _script().main([*args, "--run", f"outcome_only:0={copies['naive']}"]) == 0
    assert json.loads(out.read_text())["setup"]["gpu"] == "NVIDIA H100 80GB HBM3"
    for name, shown in (("h200", "gpu 'NVIDIA H200' there"), ("code", "versions cudaperf")):
        assert _script().main([*args, "--run", f"outcome_only:0={copies[name]}"]) == 2
        err = capsys.readouterr().err.strip()
        assert "another setup" in err and shown in err and "\n" not in err


def test_runs_sampled_otherwise_are_refused(tmp_path, folders, capsys):
    import shutil

    sampling = {"temperature": 0.8, "max_tokens": 1024, "generation": "dynamic"}
    copies = {}
    for name, doc_sampling in (
        ("best", sampling),
        ("naive", sampling),
        ("long", {**sampling, "max_tokens": 2048}),
    ):
        src = folders["naive" if name != "best" else "best"]
        copies[name] = shutil.copytree(src, tmp_path / name)
        doc = json.loads((copies[name] / "run.json").read_text())
        (copies[name] / "run.json").write_text(json.dumps(doc | {"sampling": doc_sampling}))
    out = tmp_path / "x.json"
    args = ["--run", f"unified:0={copies['best']}", "--out", str(out)]
    assert _script().main([*args, "--run", f"outcome_only:0={copies['naive']}"]) == 0
    assert json.loads(out.read_text())["setup"]["sampling"] == sampling
    assert _script().main([*args, "--run", f"outcome_only:0={copies['long']}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "sampled otherwise" in err and "max_tokens 2048 there, 1024" in err and "\n" not in err


def test_infra_errors_and_unscored_samples_take_no_part():
    mod = _script()
    rows = [
        BenchRow(task_id="t", suite="s", family="f", kind="c2cuda", turn=1, sample=i, **kw)
        for i, kw in enumerate(
            [
                {"status": "ok", "correct": True, "reward": 1.0},
                {"status": "infra_error", "reward": -1.0},  # the harness's failure
                {"status": "compile_error", "reward": -0.5},
                {"status": "screened", "reward": None},  # never evaluated
            ]
        )
    ]
    (view,) = views(rows, [meta("t")])
    assert mod._task_score(view) == [0.25]  # (1.0 - 0.5) / 2


def test_the_bootstrap_and_the_t_interval_by_hand():
    mod = _script()
    same = [({"f": {"a": 1.0}, "g": {"b": 2.0}}, {"f": {"a": 0.5}, "g": {"b": 1.5}})] * 3
    assert mod.bootstrap(same, resamples=200) == pytest.approx([0.5, 0.5])
    lo, hi = mod.t_over_seeds([1.0, 2.0, 3.0])
    assert (lo + hi) / 2 == pytest.approx(2.0)
    assert hi - 2.0 == pytest.approx(4.302653 * 1.0 / math.sqrt(3), rel=1e-5)
    assert mod.t_over_seeds([1.0]) is None
    # families, not tasks, are resampled: one family of opposite tasks never moves the mean
    fam = [({"f": {"a": 1.0, "b": -1.0}}, {"f": {"a": 0.0, "b": 0.0}})]
    assert mod.bootstrap(fam, resamples=200) == pytest.approx([0.0, 0.0])
    # ... and they are resampled within a seed: two families of differences 1 and 0 give
    # draws of 0, 0.5 and 1
    two = [({"f": {"a": 1.0}, "g": {"b": 0.0}}, {"f": {"a": 0.0}, "g": {"b": 0.0}})]
    assert mod.bootstrap(two, resamples=400) == pytest.approx([0.0, 1.0])


def _training(folder, preset, seed, steps, leases=1, ranker="r.json"):
    folder.mkdir(parents=True)
    rows = [{"kind": "rollout", "step": 0}] + [{"kind": "step", "step": i} for i in steps]
    (folder / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for k in range(1, leases + 1):
        opts = {"reward": {"name": preset}, "seed": seed, "ranker": ranker, "num_generations": 8}
        (folder / f"grpo_report_lease{k}.json").write_text(json.dumps({"options": opts}))
    return folder


def test_training_runs_ranker_and_detectable_effect_are_recorded_and_checked(
    tmp_path, folders, capsys
):
    ranker = tmp_path / "ranker.json"
    ranker.write_text('{"w": 1}')
    summary = tmp_path / "pilot.json"
    de = {"within_task_sd": 0.8, "by_assumed_seed_sd": [{"mde_normal": 0.12, "mde_t2": 0.24}]}
    summary.write_text(json.dumps({"detectable_effect": de}))
    a = _training(tmp_path / "a", "unified", 0, [1, 2, 3], leases=2)
    b = _training(tmp_path / "b", "outcome_only", 0, [1, 2, 3])
    out = tmp_path / "x.json"
    base = ["--run", f"unified:0={folders['best']}", "--run", f"outcome_only:0={folders['naive']}"]
    base += ["--out", str(out)]
    png = tmp_path / "plots/result.png"  # its folder is made
    extra = ["--ranker", str(ranker), "--detectable", str(summary), "--plot", str(png)]
    train = ["--training", f"unified:0={a}", "--training", f"outcome_only:0={b}"]
    assert _script().main([*base, *extra, *train]) == 0
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    res = json.loads(out.read_text())
    leases = {t["arm"]: t["leases"] for t in res["training"]}
    assert res["steps"] == 3 and leases == {"unified": 2, "outcome_only": 1}
    assert res["ranker"]["sha256"] == __import__("hashlib").sha256(b'{"w": 1}').hexdigest()
    assert res["detectable_effect"]["within_task_sd"] == 0.8
    assert "detectable effect fixed before the runs: 0.120 (t(2): 0.240)" in capsys.readouterr().out
    short = _training(tmp_path / "short", "outcome_only", 0, [1, 2])
    wrong = _training(tmp_path / "wrong", "unified", 0, [1, 2, 3])
    gap = _training(tmp_path / "gap", "outcome_only", 0, [1, 3, 4])
    odd = _training(tmp_path / "odd", "outcome_only", 0, [1, 2, 3], leases=2)
    (odd / "grpo_report_lease2.json").write_text('{"seconds": 3}')  # no options
    for bad, shown in (
        (["--training", f"unified:0={a}", "--training", f"outcome_only:0={short}"], "unequal"),
        (["--training", f"unified:0={a}", "--training", f"outcome_only:0={wrong}"], "trained "),
        (["--training", f"unified:0={a}", "--training", f"outcome_only:0={gap}"], "steps 1..N"),
        (["--training", f"unified:0={a}"], "no training run given for outcome_only:0"),
        (
            ["--training", f"unified:0={a}", "--training", f"outcome_only:0={odd}"],
            "grpo_report_lease2.json is not a report of cudaperf train grpo (no key 'options')",
        ),
        ([*train, "--detectable", str(ranker)], "not a summarise.py JSON"),
    ):
        assert _script().main([*base, *bad]) == 2
        err = capsys.readouterr().err.strip()
        assert shown in err and "\n" not in err, err


@pytest.mark.parametrize("seeds", [1, 3])
def test_every_row_of_the_forest_plot_is_inside_its_axis(seeds):
    """With one seed the pooled t interval cannot be given: its row is labelled "n/a" and
    nothing is drawn on it, and its label fell below the axis, over the other panel."""
    runs = [
        {"arm": arm, "seed": s, "primary": 0.5, "ci": [0.3, 0.7], "suite": "test-families"}
        for arm in ("unified", "outcome_only")
        for s in range(seeds)
    ]
    per_seed = [{"seed": s, "d": 0.01, "ci": [-0.1, 0.1]} for s in range(seeds)]
    t_ci = [-0.2, 0.2] if seeds > 1 else None
    pooled = {"d": 0.01, "bootstrap_ci": [-0.1, 0.1], "t_over_seeds_ci": t_ci, "null": True}
    pooled |= {"families_t_ci": [-0.15, 0.17], "ci": t_ci or [-0.15, 0.17]}
    res = {"a": "unified", "b": "outcome_only", "runs": runs, "per_seed": per_seed}
    fig = _script().figure({**res, "pooled": pooled})
    left, right = fig.axes
    assert "Ablation, test-families:" in fig.get_suptitle()  # not "primary subset" for every one
    assert len(right.get_yticks()) == seeds + 3
    for ax in (left, right):
        lo, hi = sorted(ax.get_ylim())
        ticks = list(ax.get_yticks())
        assert all(lo < t < hi for t in ticks), (ax.get_title(), ticks, (lo, hi))
        assert ax.get_ylim()[0] > ax.get_ylim()[1]  # the first row on top


def test_the_bootstrap_leaves_out_a_seed_without_paired_tasks():
    """A seed whose pair has no task scored in both runs takes no part (it raised an empty
    concatenate's ValueError), as it takes none in the mean and the other intervals."""
    mod = _script()
    pairs = [({"f": {"a": 1.0}, "g": {"b": 0.0}}, {"f": {"a": 0.0}, "g": {"b": 0.0}}), ({}, {})]
    lo, hi = mod.bootstrap(pairs, resamples=50)
    assert 0.0 <= lo <= hi <= 1.0
    assert mod.bootstrap(pairs[:1], resamples=50) == [lo, hi]  # the same draws without it
    with pytest.raises(ValueError, match="no seed has a task scored in both runs"):
        mod.bootstrap([({}, {})], resamples=5)
