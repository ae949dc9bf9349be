"""The diversified C→CUDA families (gather_rows, scatter_add, stencils, nbody, gemv, spmv_csr):
each C reference, compiled with gcc and run on its small config, matches a numpy oracle
built from the task's description, and the families draw structurally different code."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from cudaperf.datagen import FAMILIES, generate_one
from cudaperf.datagen.build import _skeleton
from tests.datagen.test_reference_oracles import _run

gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")

_FUNCS = {
    "sqrt": "np.sqrt",
    "fabs": "np.abs",
    "exp": "np.exp",
    "tanh": "np.tanh",
    "sin": "np.sin",
    "cos": "np.cos",
    "log": "np.log",
    "fmax": "np.maximum",
    "fmin": "np.minimum",
    "atan": "np.arctan",
}


def c_expr(expr: str, **env) -> np.ndarray:
    """Evaluate a C expression of the generator's vocabularies with numpy (float64)."""
    py = re.sub(r"\b(\d+\.\d*(?:[eE][-+]?\d+)?)f\b", r"\1", expr)
    py = re.sub(r"\b(" + "|".join(_FUNCS) + r")f?\(", lambda m: _FUNCS[m.group(1)] + "(", py)
    py = re.sub(r"\(([^()?]+) \? ([^()?:]+) : ([^()?:]+)\)", r"np.where(\1, \2, \3)", py)
    return eval(py, {"np": np}, env)  # noqa: S307 - generator text, not user input


def _close(got, want, tol=1e-4):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert np.all(np.abs(got - want) <= tol + tol * np.abs(want)), np.abs(got - want).max()


def _xf(task, a, name):
    expr = re.search(r"f\(v\) = (.*?)\. Ind", task.description).group(1)
    v = a[name]
    return c_expr(expr, v=v if v.dtype.kind == "i" else v.astype(np.float64))


def _gather_oracle(task, s, a):
    ws = [
        float(w)
        for w in re.search(r"weights w = \[([^\]]*)\]", task.description).group(1).split(",")
    ]
    d = len(a["out"]) // s["n"]
    fv = _xf(task, a, "src").reshape(s["m"], d)
    idx = a["idx"].reshape(s["n"], len(ws))
    if "perm" in a:
        idx = a["perm"][idx]
    return sum(w * fv[idx[:, j]] for j, w in enumerate(ws)).ravel()


def _scatter_oracle(task, s, a):
    desc = task.description
    op = re.search(r"Scatter-(\w+)", desc).group(1)
    scale = float(re.search(r"\], (-?[\d.]+) \* ", desc).group(1))
    d = len(a["out"]) // s["m"]
    fv = _xf(task, a, "vals").reshape(s["n"], d) * scale
    if "w" in a:
        fv = fv * a["w"][:, None]
    if op == "add":
        out = np.zeros((s["m"], d))
        np.add.at(out, a["idx"], fv)
    elif op == "max":
        out = np.full((s["m"], d), np.iinfo(np.int32).min, np.int64)
        np.maximum.at(out, a["idx"], fv)
    else:
        out = np.full((s["m"], d), np.iinfo(np.int32).max, np.int64)
        np.minimum.at(out, a["idx"], fv)
    return out.ravel()


def _spmv_oracle(task, s, a):
    desc = task.description
    rp, col = a["row_ptr"], a["col_idx"]
    assert rp[0] == 0 and rp[-1] == s["nnz"] and np.all(np.diff(rp) >= 0)
    assert col.min() >= 0 and col.max() < s["cols"]
    code = re.search(r"s \+= (.*);", task.source).group(1)
    fin = re.search(r"\n\s+y\[r\] = (.*);", task.source).group(1)
    terms = c_expr(code, v=a["val"].astype(np.float64), xv=a["x"].astype(np.float64)[col])
    rows = np.repeat(np.arange(s["rows"]), np.diff(rp))
    sums = np.bincount(rows, weights=terms, minlength=s["rows"])
    b = a.get("b", np.zeros(s["rows"])).astype(np.float64)
    assert "CSR" in desc
    return c_expr(fin.replace("b[r]", "b"), s=sums, b=b)


def _run_inputs(task, tmp_path):
    """Reference on the small config with inputs from `make_inputs` (every distribution
    kind, row_ptr included)."""
    import ctypes
    import subprocess

    from cudaperf.tasks.inputs import make_inputs

    stem = task.id.replace("/", "_")
    (tmp_path / f"{stem}.c").write_text(task.source)
    so = tmp_path / f"{stem}.so"
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", "-o", str(so), str(tmp_path / f"{stem}.c"), "-lm"],
        check=True,
    )
    cfg = task.config("small")
    arrays = make_inputs(task, cfg, 0, 1)
    args = [
        ctypes.c_int(int(x)) if p.role.value == "scalar" else ctypes.c_void_p(x.ctypes.data)
        for p, x in zip(task.signature, arrays, strict=True)
    ]
    fn = getattr(ctypes.CDLL(str(so)), task.entry)
    fn.restype = None
    fn(*args)
    named = {
        p.name: x for p, x in zip(task.signature, arrays, strict=True) if p.role.value != "scalar"
    }
    return dict(cfg.sizes), named


ORACLES = {"gather_rows": _gather_oracle, "scatter_add": _scatter_oracle, "spmv_csr": _spmv_oracle}


@gcc
@pytest.mark.parametrize("name", sorted(ORACLES))
def test_reference_matches_numpy_oracle(name, tmp_path):
    for index in range(10):
        task = generate_one(FAMILIES[name], 0, index)
        sizes, arrays = (_run_inputs if name == "spmv_csr" else _run)(task, tmp_path)
        out = "y" if "y" in arrays else "out"
        _close(arrays[out], ORACLES[name](task, sizes, arrays))


@pytest.mark.parametrize(
    "name", ["gather_rows", "scatter_add", "spmv_csr", "stencil1d", "stencil2d", "stencil3d"]
)
def test_family_draws_distinct_skeletons(name):
    tasks = [generate_one(FAMILIES[name], 0, i) for i in range(40)]
    skeletons = {_skeleton(i.code) for t in tasks for i in t.implementations}
    assert len(skeletons) >= 0.75 * sum(len(t.implementations) for t in tasks)
