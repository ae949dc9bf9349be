"""Every family makes valid tasks of the required shape; C references compile and run;
PyTorch references run on the CPU and implementations pass the static checks."""

from __future__ import annotations

import shutil

import pytest

from cudaperf.datagen import FAMILIES, generate_one
from cudaperf.datagen.verify import check_reference, smallest_config
from cudaperf.tasks.model import Task, TaskKind
from cudaperf.tasks.stats import normalize_code

FAMS = sorted(FAMILIES)


@pytest.mark.parametrize("name", FAMS)
def test_family_shape(name):
    for index in range(3):
        t = generate_one(FAMILIES[name], 0, index)
        assert Task.model_validate(t.model_dump(mode="json")) == t
        assert t.family == name and t.kind is FAMILIES[name].kind
        assert len(t.configs) >= 3 and any(c.held_out for c in t.configs)
        assert len(t.implementations) >= 3
        assert len({s for i in t.implementations for s in i.strategies}) >= 2
        assert len({normalize_code(i.code) for i in t.implementations}) == len(t.implementations)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
@pytest.mark.parametrize("name", [f for f in FAMS if FAMILIES[f].kind is TaskKind.C2CUDA])
def test_c_reference_compiles_and_runs(name):
    for index in range(2):
        r = check_reference(generate_one(FAMILIES[name], 0, index))
        assert r.ok, r.message


@pytest.mark.parametrize("name", [f for f in FAMS if FAMILIES[f].kind is TaskKind.TORCH2CUDA])
def test_torch_reference_runs_and_candidates_pass_static_checks(name):
    torch = pytest.importorskip("torch")
    from cudaperf.execute.pytorch.static import check_torch_candidate
    from cudaperf.execute.types import Severity
    from cudaperf.tasks.pymodule import exec_with_sizes

    t = generate_one(FAMILIES[name], 0, 0)
    cfg = smallest_config(t)
    mod = exec_with_sizes(t.source, cfg.sizes, "cudaperf_datagen_test_ref")
    torch.manual_seed(0)
    y = mod.Model(*mod.get_init_inputs())(*mod.get_inputs())
    assert torch.isfinite(y).all() and y.abs().max() > 1e-6
    for i in t.implementations:
        fatal = [
            f
            for f in check_torch_candidate(i.code, {"Model", "get_inputs", "get_init_inputs"})
            if f.severity is Severity.ERROR
        ]
        assert not fatal, (i.id, fatal)
