import ctypes
import math

import numpy as np
import pytest
from catalog import rowsum_task, saxpy_task, window_dot_task

from cudaperf.execute.build import build_reference
from cudaperf.execute.c.reference import (
    compare,
    output_scale,
    reference_finite,
    run_reference,
    time_reference,
)
from cudaperf.tasks.inputs import make_inputs


def test_reference_runs_and_compare(cpu_config):
    t = saxpy_task()
    lib = ctypes.CDLL(build_reference(t, cpu_config).lib)
    x = make_inputs(t, t.configs[0], 0, 7)
    want = run_reference(t, lib, x)
    assert np.allclose(want[3], 2.5 * x[2] + x[3])
    assert compare(t, x, [a.copy() for a in want], want).correct
    assert time_reference(t, lib, x, trials=3, budget_s=1.0)
    bad = [a.copy() for a in want]
    bad[3][5] = np.nan
    cmp = compare(t, x, bad, want)
    assert not cmp.correct and math.isinf(cmp.max_abs_err) and "index 5" in cmp.message
    bad = [a.copy() for a in want]
    bad[3] *= 1.01
    cmp = compare(t, x, bad, want)
    assert not cmp.correct and 0.009 < cmp.max_rel_err < 0.011
    mutated = [a.copy() for a in want]
    mutated[2][0] += 1
    assert compare(t, x, mutated, want).inputs_modified


def _c_task(name: str, source: str, arrays: list[tuple[str, str, str]], n: int, cpu_config):
    """A C→CUDA task `name(int n, arrays...)` with one config, its reference built, and one
    input set: (task, input arrays, reference outputs)."""
    from cudaperf.tasks.model import InputConfig, Param, Role, Task

    sig = [Param(name="n", ctype="int", role=Role.SCALAR)]
    sig += [Param(name=a, ctype=ct, role=Role(r), length="n") for a, ct, r in arrays]
    t = Task(
        id=f"test/c2cuda/{name}",
        kind="c2cuda",
        family=name,
        source=source,
        entry=name,
        signature=sig,
        configs=[InputConfig(name=f"n{n}", sizes={"n": n})],
    )
    lib = ctypes.CDLL(build_reference(t, cpu_config).lib)
    x = make_inputs(t, t.configs[0], 0, 7)
    return t, x, run_reference(t, lib, x)


STRIDED_C = """
void every_other(int n, const float* x, float* y, int* k) {
  for (int i = 0; i < n; i += 2) { y[i] = x[i] / 0.0f; k[i] = (int)i; }
}
"""


def test_out_elements_the_reference_never_writes_are_not_compared(cpu_config):
    """A reference that writes only some out elements (a stride) defines nothing elsewhere: a
    candidate may leave those elements or write them; the written ones must match, equal
    infinities included."""
    arrays = [("x", "float", "in"), ("y", "float", "out"), ("k", "int", "out")]
    t, x, want = _c_task("every_other", STRIDED_C, arrays, 10, cpu_config)
    assert np.isinf(want[2][::2]).all() and list(want[3][::2]) == [0, 2, 4, 6, 8]
    assert np.ma.getmaskarray(want[3]).tolist() == [False, True] * 5
    got = [a.copy() for a in x]  # a faithful candidate: writes the even elements only
    got[2][::2], got[3][::2] = np.ma.getdata(want[2])[::2], np.ma.getdata(want[3])[::2]
    cmp = compare(t, x, got, want)
    assert cmp.correct and cmp.max_abs_err == 0
    zeroed = [a.copy() for a in got]
    zeroed[2][1::2], zeroed[3][1::2] = 0, 0  # writing what the reference leaves undefined
    assert compare(t, x, zeroed, want).correct
    wrong = [a.copy() for a in got]
    wrong[3][4] = 5  # a written element must match
    assert not compare(t, x, wrong, want).correct
    flipped = [a.copy() for a in got]
    flipped[2][0] = -flipped[2][0]  # -inf where the reference made +inf
    assert not compare(t, x, flipped, want).correct


def test_fully_written_outputs_are_not_masked(cpu_config):
    t = rowsum_task()
    lib = ctypes.CDLL(build_reference(t, cpu_config).lib)
    want = run_reference(t, lib, make_inputs(t, t.configs[0], 0, 7))
    assert not any(np.ma.isMaskedArray(w) for w in want)


ACCUMULATES_C = """
void acc(int n, const int* x, int* y) { for (int i = 0; i < n; ++i) y[i] += x[i]; }
"""


def test_an_out_array_the_reference_reads_is_still_compared(cpu_config):
    """A mis-declared `out` that the reference accumulates into is not mistaken for unwritten:
    every element stays compared."""
    t, x, want = _c_task(
        "acc", ACCUMULATES_C, [("x", "int", "in"), ("y", "int", "out")], 8, cpu_config
    )
    assert not np.ma.isMaskedArray(want[2]) or not np.ma.getmaskarray(want[2]).any()
    assert not compare(t, x, [a.copy() for a in x], want).correct  # doing nothing fails


RELU_C = """
#include <math.h>
void relu(int n, const float* x, float* y) {
  for (int i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
void sqrt_all(int n, const float* x, float* y) {
  for (int i = 0; i < n; ++i) y[i] = sqrtf(x[i]);
}
"""


def _unary_task(entry: str, dist: dict | None = None):
    from cudaperf.tasks.model import Distribution, InputConfig, Param, Role, Task

    d = Distribution(**(dist or {"kind": "uniform", "low": 0.0, "high": 1.0}))  # torch.rand
    return Task(
        id=f"test/c2cuda/{entry}",
        kind="c2cuda",
        family=entry,
        source=RELU_C,
        entry=entry,
        signature=[
            Param(name="n", ctype="int", role=Role.SCALAR),
            Param(name="x", ctype="float", role=Role.IN, length="n"),
            Param(name="y", ctype="float", role=Role.OUT, length="n"),
        ],
        configs=[InputConfig(name="n4096", sizes={"n": 4096}, distribution=d)],
    )


def test_a_copy_kernel_fails_a_relu_task_whose_own_inputs_are_non_negative(cpu_config):
    t = _unary_task("relu")
    lib = ctypes.CDLL(build_reference(t, cpu_config).lib)
    cfg = t.configs[0]

    def copy_kernel(inputs):
        out = [a.copy() for a in inputs]
        out[2] = inputs[1].copy()
        return out

    own = make_inputs(t, cfg, 0, 7)
    assert own[1].min() >= 0  # the hole: on these a copy is a ReLU
    assert compare(t, own, copy_kernel(own), run_reference(t, lib, own)).correct
    sep = make_inputs(t, cfg, 2, 7, separating=True)
    assert sep[1].shape == own[1].shape and sep[1].dtype == own[1].dtype
    assert sep[1].min() < 0 < sep[1].max() and np.abs(sep[1]).max() > 1.0  # signed, wider
    want = run_reference(t, lib, sep)
    assert reference_finite(t, want)
    assert not compare(t, sep, copy_kernel(sep), want).correct
    assert compare(t, sep, [a.copy() for a in want], want).correct  # a real ReLU passes


def test_reference_that_is_not_finite_on_the_second_set_is_not_used(cpu_config):
    t = _unary_task("sqrt_all")
    lib = ctypes.CDLL(build_reference(t, cpu_config).lib)
    sep = make_inputs(t, t.configs[0], 2, 7, separating=True)
    assert not reference_finite(t, run_reference(t, lib, sep))  # sqrt of negatives: NaN
    own = make_inputs(t, t.configs[0], 0, 7)
    assert reference_finite(t, run_reference(t, lib, own))


def test_feedback_on_a_held_out_config_gives_no_size_away(cpu_config):
    t = saxpy_task()
    lib = ctypes.CDLL(build_reference(t, cpu_config).lib)
    x = make_inputs(t, t.configs[-1], 0, 7)
    want = run_reference(t, lib, x)
    bad = [a.copy() for a in want]
    bad[3][-1] += 1.0
    shown = compare(t, x, bad, want).message
    assert str(x[3].size) in shown and f"index {x[3].size - 1}" in shown
    hidden = compare(t, x, bad, want, held_out=True)
    assert not hidden.correct and not any(ch.isdigit() for ch in hidden.message.split("(")[0])
    assert str(x[3].size) not in hidden.message and "index" not in hidden.message
    mutated = [a.copy() for a in want]
    mutated[2][-1] += 1
    assert "index" not in compare(t, x, mutated, want, held_out=True).message


def test_a_float_sum_passes_on_signed_inputs_where_it_cancels_and_a_wrong_one_fails(cpu_config):
    """A correct kernel that sums 256 products in float (the C reference sums in double) errs
    by the rounding of partial sums; on signed inputs some outputs cancel to near zero, where a
    bound relative to the output itself is too tight. With the output's RMS as the relative
    bound's floor it passes; a kernel that drops one term still fails."""
    t = window_dot_task()
    ref = ctypes.CDLL(build_reference(t, cpu_config).lib)
    in_float = t.model_copy(update={"source": "#define double float\n" + t.source})
    flt = ctypes.CDLL(build_reference(in_float, cpu_config).lib)
    dropped = t.model_copy(update={"source": t.source.replace("k < 256", "k < 255")})
    wrong = ctypes.CDLL(build_reference(dropped, cpu_config).lib)
    cfg = t.configs[0]
    own = make_inputs(t, cfg, 0, 7)
    assert compare(t, own, run_reference(t, flt, own), run_reference(t, ref, own)).correct
    sep = make_inputs(t, cfg, 2, 7, separating=True)
    want, got = run_reference(t, ref, sep), run_reference(t, flt, sep)
    before = compare(t, sep, got, want)  # the bound relative to each output alone
    assert not before.correct and "|expected|" in before.message
    assert compare(t, sep, got, want, signed=True).correct
    cmp = compare(t, sep, run_reference(t, wrong, sep), want, signed=True)
    assert not cmp.correct and "max(|expected|, " in cmp.message
    assert output_scale(want[3]) > 1.0


def test_outputs_compared_in_slices_give_what_the_whole_comparison_gives(monkeypatch):
    """`_errors` compares a large output slice by slice (every step is per element or a max):
    the numbers and the mask of bad elements must be those of the whole comparison, with
    NaN, infinities, values at the bound and wrong elements in any slice."""
    from cudaperf.execute.c import reference

    monkeypatch.setattr(reference, "_CHUNK", 7)
    rng = np.random.default_rng(0)
    specials = [np.nan, np.inf, -np.inf, 0.0, 1e30, -1e-30]
    for case in range(300):
        n = int(rng.integers(8, 60))
        dtype = [np.float32, np.float64, np.int32][case % 3]
        w = (rng.standard_normal(n) * 10).astype(dtype)
        g = w.copy()
        if dtype is not np.int32:
            for _ in range(int(rng.integers(0, 4))):
                i, v = int(rng.integers(n)), specials[int(rng.integers(len(specials)))]
                w[i] = v
                g[i] = v if rng.random() < 0.6 else g[i]
            g = g + (rng.standard_normal(n) * 1e-6 * (rng.random() < 0.5)).astype(dtype)
        if rng.random() < 0.3:  # some wrong elements
            g[int(rng.integers(n))] += 5
        floor = float(rng.choice([0.0, 2.0]))
        got = reference._errors(g, w, 1e-5, 1e-5, floor)
        want = reference._errors_whole(g, w, 1e-5, 1e-5, floor)
        assert got[:2] == want[:2] or all(
            math.isnan(x) and math.isnan(y) for x, y in zip(got[:2], want[:2], strict=True)
        ), (case, got, want)
        assert (got[2] is None) == (want[2] is None), case
        if got[2] is not None:
            assert np.array_equal(got[2], want[2]), case


def test_a_forked_child_compares_with_a_pool_of_its_own():
    """The slices' thread pool does not survive a fork (its threads stay in the parent): a
    child forked after the parent compared must get a new pool, not hang on the old one."""
    import multiprocessing

    from cudaperf.execute.c import reference

    w = np.arange(3 << 20, dtype=np.float32)
    assert reference._errors(w, w, 1e-5, 1e-5)[2] is None  # the parent's pool exists now
    if reference._THREADS < 2:
        pytest.skip("one CPU: no pool")
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        res = pool.apply_async(reference._errors, (w, w + 1, 1e-5, 1e-5))
        a, _, bad = res.get(timeout=20)
    assert a == 1.0 and bad is not None
