"""ParEval importer on hand-written problems in ParEval's drivers/ layout."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cudaperf.execute.c.reference import run_reference
from cudaperf.tasks.importers import IMPORTERS
from cudaperf.tasks.importers.pareval import c_eval, import_pareval
from cudaperf.tasks.inputs import make_inputs
from cudaperf.tasks.model import Role

ROOT = Path(__file__).parents[2] / "fixtures" / "pareval"


@pytest.fixture(scope="module")
def report():
    return import_pareval(ROOT)


def _tasks(report):
    return {t.id.split("/")[1]: t for t in report.tasks}


def test_counts_and_skip_reasons(report):
    assert IMPORTERS["pareval"] is import_pareval
    assert [t.id for t in report.tasks] == [
        "pareval/00_dense_la_scale_shift",
        "pareval/01_reduce_max_abs",
        "pareval/02_histogram_mod_bins",
        "pareval/03_dense_la_row_sums",
    ]
    assert {k.split("/")[-1]: v for k, v in report.skipped} == {
        "04_fft_twiddle": "complex numbers (cuDoubleComplex)",
        "05_geometry_centroid": "structs (Point)",
        "06_reduce_total": "C++ standard algorithm std::reduce",
        "07_scan_unlisted": "no cuda entry in drivers/problem-sizes.json",
    }
    assert all(t.provenance["license"].startswith("MIT") for t in report.tasks)
    assert import_pareval(ROOT / "drivers").summary() == report.summary()  # drivers/ works too


def test_signature_is_the_cuda_kernels(report):
    t = _tasks(report)
    sig = {p.name: (p.role, p.ctype, p.length) for p in t["00_dense_la_scale_shift"].signature}
    assert t["00_dense_la_scale_shift"].entry == "scaleShift"
    assert sig == {
        "a": (Role.SCALAR, "double", None),
        "in": (Role.IN, "double", "N"),
        "out": (Role.OUT, "double", "N"),
        "N": (Role.SCALAR, "size_t", None),
    }
    best = {p.name: (p.role, p.length) for p in t["01_reduce_max_abs"].signature}
    assert best["best"] == (Role.OUT, "1")  # the returned value goes through the pointer
    bins = {p.name: (p.role, p.length) for p in t["02_histogram_mod_bins"].signature}
    assert bins["bins"] == (Role.INOUT, "8")
    rows = {p.name: p.length for p in t["03_dense_la_row_sums"].signature}
    assert rows == {"A": "M*N", "s": "M", "M": None, "N": None}


def test_configs_from_the_size_table(report):
    t = _tasks(report)
    rows = t["03_dense_la_row_sums"]
    assert [(c.name, c.held_out) for c in rows.configs] == [
        ("small", False),
        ("table", False),
        ("heldout", True),
    ]
    assert rows.config("small").sizes == {"M": 16, "N": 8}  # validate()'s TEST_SIZE
    assert rows.config("table").sizes == {"M": 256, "N": 128}  # (1<<8), N = size / 2
    assert rows.config("heldout").sizes == {"M": 193, "N": 96}
    assert t["00_dense_la_scale_shift"].config("table").sizes == {"a": 0.5, "N": 4096}


def test_distributions_and_tolerances_fit_the_problem(report):
    t = _tasks(report)
    hist = t["02_histogram_mod_bins"].config("table")
    assert hist.param_distributions["x"].kind == "randint"
    assert (hist.param_distributions["x"].low, hist.param_distributions["x"].high) == (0, 1000)
    assert hist.param_distributions["bins"].kind == "constant"  # fill(0)
    assert t["02_histogram_mod_bins"].tolerance.atol == 0  # counts are exact
    scale = t["00_dense_la_scale_shift"].config("small").param_distributions["in"]
    assert (scale.kind, scale.low, scale.high) == ("uniform", -4.0, 4.0)
    assert t["01_reduce_max_abs"].tolerance.rtol == 1e-6
    assert t["03_dense_la_row_sums"].tolerance.rtol == 1e-4


def test_reference_is_c(report):
    src = _tasks(report)["01_reduce_max_abs"].source.split("*/", 1)[1]  # past the header
    assert "std::" not in src and ".size()" not in src
    assert "(-DBL_MAX)" in src and "CP_MAX(" in src and "* best = (best_)" in src


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_references_compile_and_run_on_small(report, tmp_path):
    for i, t in enumerate(report.tasks):
        f, so = tmp_path / f"ref{i}.c", tmp_path / f"ref{i}.so"
        f.write_text(t.source)
        cmd = ["gcc", "-O2", "-Wall", "-shared", "-fPIC", str(f), "-o", str(so), "-lm"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0 and not r.stderr, (t.id, r.stderr)
        inputs = make_inputs(t, t.config("small"), 0, 0)
        outs = run_reference(t, ctypes.CDLL(str(so)), inputs)
        for p, a in zip(t.signature, outs, strict=True):
            if p.role in (Role.OUT, Role.INOUT):
                assert np.all(np.isfinite(a.astype(np.float64))), (t.id, p.name)
        if t.entry == "modBins":
            assert outs[2].sum() == t.config("small").sizes["N"]  # every value counted once
        if t.entry == "maxAbs":
            assert outs[2][0] == np.abs(inputs[0]).max()


def test_c_eval():
    assert c_eval("(1<<10)", {}) == 1024
    assert c_eval("ctx->N / 4", {"N": 10}) == 2
    assert c_eval("2.0", {}) == 2.0
