"""Build: determinism, uniqueness, split stability, the max-share rule."""

from __future__ import annotations

import json

import pytest

from cudaperf.datagen import (
    FAMILIES,
    BuildConfig,
    build_tasks,
    near_duplicate_rate,
    splits_document,
)
from cudaperf.tasks.stats import task_stats


def _dump(tasks) -> str:
    return "\n".join(json.dumps(t.model_dump(mode="json"), sort_keys=True) for t in tasks)


def test_same_seed_gives_identical_output():
    a = build_tasks(BuildConfig(per_family=2, seed=7)).tasks
    b = build_tasks(BuildConfig(per_family=2, seed=7)).tasks
    assert _dump(a) == _dump(b)


def test_other_seed_gives_other_tasks():
    a = build_tasks(BuildConfig(per_family=1, seed=1)).tasks
    b = build_tasks(BuildConfig(per_family=1, seed=2)).tasks
    assert sum(x.source != y.source for x, y in zip(a, b, strict=True)) >= len(a) // 2


def test_set_meets_the_issue_targets():
    tasks = build_tasks(BuildConfig(per_family=4, seed=0)).tasks
    s = task_stats(tasks)
    assert s["families"] == len(FAMILIES) >= 10
    assert s["max_family_share"] <= 0.10
    assert s["min_configs"] >= 3 and s["min_held_out_configs"] >= 1
    assert s["min_implementations"] >= 3 and s["min_distinct_strategies"] >= 2
    assert s["duplicate_implementations"] == 0
    assert s["by_kind"]["c2cuda"] > 0 and s["by_kind"]["torch2cuda"] > 0
    assert 0.0 <= near_duplicate_rate(tasks) < 0.5


def test_splits_document_puts_each_family_in_one_split():
    tasks = build_tasks(BuildConfig(per_family=1)).tasks
    doc = splits_document(tasks)
    for t in tasks:
        assert t.id in doc["tasks"][doc["families"][t.family]]


def test_max_family_share_is_enforced():
    with pytest.raises(ValueError, match="--max-family-share 1 for one family"):
        build_tasks(BuildConfig(per_family=1, families=("stencil1d", "poly_eval")))


def test_a_family_out_of_distinct_tasks_stops_instead_of_drawing_on(monkeypatch):
    """A family that draws the same code every time gives up 25 indices in a row, then stops:
    a --per-family of a million costs 25 * 20 draws, not 20 million."""
    import cudaperf.datagen.build as build

    calls = []
    real = build.generate_one

    def same_task(fam, seed, index, attempt):
        calls.append(index)
        return real(fam, seed, 0, 0)

    monkeypatch.setattr(build, "generate_one", same_task)
    cfg = BuildConfig(per_family=10**6, families=("stencil1d",), max_family_share=1.0)
    report = build_tasks(cfg)
    assert len(report.tasks) == 1  # index 0; every later index collides with it
    assert len(calls) == 1 + build.EXHAUSTED_AFTER * build.MAX_ATTEMPTS
    assert report.dropped[-1].startswith("stencil1d: 25 tasks in a row collided")
    assert report.dropped[-1].endswith(f"its last {10**6 - 26} were not drawn")


def test_bad_config_says_how_to_fix():
    with pytest.raises(ValueError, match="per_family"):
        BuildConfig(per_family=0)
    with pytest.raises(ValueError, match="registered"):
        BuildConfig(families=("no_such_family",))


def test_per_kind_totals_spread_over_each_kinds_families():
    from cudaperf.datagen.build import plan
    from cudaperf.tasks.model import TaskKind

    cfg = BuildConfig(c_tasks=60, torch_tasks=20)
    counts = plan(cfg)
    n_c = sum(f.kind is TaskKind.C2CUDA for f, _ in counts)
    n_t = len(counts) - n_c
    for f, n in counts:
        assert n == -(
            -(60 if f.kind is TaskKind.C2CUDA else 20)
            // (n_c if f.kind is TaskKind.C2CUDA else n_t)
        )
    tasks = build_tasks(BuildConfig(c_tasks=n_c, torch_tasks=n_t, seed=3)).tasks
    s = task_stats(tasks)
    assert s["by_kind"] == {"c2cuda": n_c, "torch2cuda": n_t}


def test_c_implementations_close_their_macros():
    import re

    tasks = build_tasks(BuildConfig(per_family=2, seed=0)).tasks
    for t in tasks:
        if t.kind.value != "c2cuda":
            continue
        for i in t.implementations:
            defined = set(re.findall(r"(?m)^\s*#\s*define\s+(\w+)", i.code))
            undefined = set(re.findall(r"(?m)^\s*#\s*undef\s+(\w+)", i.code))
            assert defined <= undefined, (t.id, i.id, defined - undefined)
            assert "<cstdint>" not in i.code and "<climits>" not in i.code, (t.id, i.id)


def test_the_packaged_data_is_what_the_generator_writes():
    """data/tasks.jsonl.gz is the generator's output (measurements and dropped implementations
    aside), tolerances included: a generator fix that the packaged file does not carry (as the
    spmv_csr and log-softmax tolerances were, until `cudaperf data tolerances` applied them)
    fails here."""
    from cudaperf.datagen.build import refresh_tolerances
    from cudaperf.tasks.io import load_tasks
    from tests.script_helpers import ROOT

    tasks = load_tasks(ROOT / "data" / "tasks.jsonl.gz")
    _, changed = refresh_tolerances(tasks)
    assert changed == []


def test_refresh_tolerances_changes_only_tolerances_and_refuses_other_drift():
    from cudaperf.datagen import generate_one
    from cudaperf.datagen.build import refresh_tolerances
    from cudaperf.tasks.model import Tolerance

    a, b = (generate_one(FAMILIES[f], 0, 0) for f in ("spmv_csr", "gemm"))
    loose = a.model_copy(update={"tolerance": Tolerance(atol=1.0, rtol=1.0)})
    measured = b.model_copy(update={"implementations": b.implementations[:3]})  # one dropped
    out, changed = refresh_tolerances([loose, measured])
    assert changed == [a.id] and out[0].tolerance == a.tolerance and out[1] == measured
    for drift in (
        a.model_copy(update={"description": "edited"}),
        a.model_copy(update={"provenance": {**a.provenance, "index": "9999"}}),
        a.model_copy(update={"family": "no_such_family"}),
    ):
        with pytest.raises(ValueError, match=a.id):
            refresh_tolerances([drift])
