"""nvcc compiles a sample of the generated implementations (one per family, rotating)."""

from __future__ import annotations

import shutil

import pytest

from cudaperf.datagen import FAMILIES, generate_one
from cudaperf.datagen.verify import cuda_units, nvcc_compile
from cudaperf.tasks.model import TaskKind

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def test_sampled_implementations_compile():
    units = []
    for k, name in enumerate(sorted(FAMILIES)):
        t = generate_one(FAMILIES[name], 0, k % 3)
        all_units = cuda_units(t)
        units.append(all_units[k % len(all_units)])
    results = nvcc_compile(units, jobs=2)
    bad = [(r.name, r.message[:800]) for r in results if not r.ok]
    assert not bad


def test_c_implementation_compiles_inside_the_evaluator_harness():
    from cudaperf.execute.c.harness import harness_source

    name = next(f for f in sorted(FAMILIES) if FAMILIES[f].kind is TaskKind.C2CUDA)
    t = generate_one(FAMILIES[name], 0, 0)
    impl = t.implementations[-1]
    [r] = nvcc_compile([(impl.id, harness_source(t, impl.code))], jobs=1)
    assert r.ok, r.message
