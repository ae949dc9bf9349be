import pytest

torch = pytest.importorskip("torch")

from cudaperf.execute.pytorch.runtime import (  # noqa: E402
    _kernel_names,
    _mutated,
    compare_outputs,
    load_module,
)

REF = (
    "import torch\nN = 8\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
    "        return x * 2\ndef get_inputs():\n    return [torch.randn(N)]\n"
)


def test_load_module_overrides_constants():
    mod = load_module(REF, "cudaperf_test_ref", {"N": 33})
    assert mod.get_inputs()[0].shape == (33,)
    with pytest.raises(ValueError, match="never assigns"):
        load_module(REF, "cudaperf_test_ref2", {"M": 3})


def test_compare_accepts_within_tolerance():
    w = torch.linspace(1, 2, 100)
    ok, mabs, mrel, msg = compare_outputs(w, w + 1e-6, 1e-5, 1e-5, 1e-2)
    assert ok and mabs == pytest.approx(1e-6, rel=0.1) and msg == ""


def test_compare_reports_first_bad_element():
    w = torch.ones(10)
    g = w.clone()
    g[7] = 1.5
    ok, _, _, msg = compare_outputs(w, g, 1e-5, 1e-5, 1e-2)
    assert not ok and "flat index 7" in msg and "got 1.5" in msg


def test_signed_inputs_allow_rounding_near_cancelled_sums_but_not_a_wrong_function():
    """On signed inputs a float sum that cancels to near zero errs by the rounding of its
    partial sums: allowed with `signed` (the output's RMS floors the relative bound), not
    without; a wrong function (a ReLU's copy kernel) errs by about the RMS and still fails."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.rand(4096, 256, generator=g) * 6 - 3, torch.rand(4096, 256, generator=g) * 6 - 3
    want = (a.double() * b.double()).sum(1).float()
    got = torch.zeros(4096)
    for k in range(256):  # one term after another, in float
        got += a[:, k] * b[:, k]
    assert not compare_outputs(want, got, 1.3e-5, 1.3e-5, 1e-2)[0]
    assert compare_outputs(want, got, 1.3e-5, 1.3e-5, 1e-2, signed=True)[0]
    x = torch.rand(4096, generator=g) * 6 - 3
    ok, _, _, msg = compare_outputs(x.clamp_min(0), x.clone(), 1.3e-5, 1.3e-5, 1e-2, signed=True)
    assert not ok and "outside tolerance" in msg


def test_nan_never_passes():
    w = torch.ones(4)
    g = torch.tensor([1.0, float("nan"), 1.0, 1.0])
    ok, _, _, msg = compare_outputs(w, g, 1.0, 1.0, 1.0)
    assert not ok and "NaN" in msg


def test_zeros_fail_on_tiny_outputs():
    w = torch.randn(1000) * 1e-6
    ok, _, _, msg = compare_outputs(w, torch.zeros(1000), 1e-4, 1e-4, 1e-2)
    assert not ok and "normwise" in msg


def test_shape_dtype_and_arity():
    w = torch.ones(4)
    assert "shape" in compare_outputs(w, torch.ones(5), 1, 1, 1)[3]
    assert "dtype" in compare_outputs(w, torch.ones(4, dtype=torch.float64), 1, 1, 1)[3]
    assert "returned 2 tensors" in compare_outputs((w,), (w, w), 1, 1, 1)[3]
    assert "expected a tensor" in compare_outputs(w, 3.0, 1, 1, 1)[3]


def test_mutation_detected():
    a = [torch.ones(3), 5]
    b = [torch.ones(3), 5]
    assert not _mutated(a, b)
    b[0][1] = 2.0
    assert _mutated(a, b)


def test_kernel_names_from_embedded_sources():
    code = (
        'S = r"""\n__global__ void __launch_bounds__(256) foo_k(float* x) {}\n'
        'template <int B> __global__ void bar(const float* __restrict__ y) {}\n"""\n'
        "class ModelNew: pass\n"
    )
    assert _kernel_names(code) == {"foo_k", "bar"}


def test_infinities_must_match():
    w = torch.tensor([1.0, float("inf"), float("-inf"), 1.0])
    assert compare_outputs(w, w.clone(), 1e-5, 1e-5, 1e-2)[0]
    for bad in (float("nan"), float("-inf"), 3.0):
        g = w.clone()
        g[1] = bad
        ok, _, _, msg = compare_outputs(w, g, 1e-5, 1e-5, 1e-2)
        assert not ok, bad


def _case(g: "torch.Generator", kind: int):
    w = torch.randn(1000, generator=g) * 3
    got = w + torch.randn(1000, generator=g) * 1e-6
    if kind == 1:
        got[[17, 500, 999]] += 0.5  # a few elements outside, the first one in slice 2 of 7s
    elif kind == 2:
        got[400] = float("nan")
    elif kind == 3:
        w[3], got[3] = float("inf"), float("inf")  # the same infinity is fine
    elif kind == 4:
        w, got = w * 1e-7, torch.zeros(1000)  # small outputs: only the normwise bound fails
    elif kind == 5:
        w[40], got[40] = float("nan"), float("nan")  # a NaN in the reference: max_rel ignores it
    return w.reshape(10, 100), got.reshape(10, 100)


@pytest.mark.parametrize("kind", range(6))
@pytest.mark.parametrize("signed", [False, True])
def test_sliced_comparison_gives_the_whole_comparisons_answer(kind, signed):
    """Slices of 7 elements (every statistic crosses slice borders) and one slice of all of
    them give the same verdict, errors and message, on two outputs at once."""
    g = torch.Generator().manual_seed(kind)
    w, got = _case(g, kind)
    w2 = torch.rand(33, generator=g)
    args = ([w2, w], [w2.clone(), got], 1e-5, 1e-5, 1e-2, signed)
    whole = compare_outputs(*args, chunk=1 << 30)
    sliced = compare_outputs(*args, chunk=7)
    assert sliced[0] == whole[0] and sliced[3] == whole[3]
    for a, b in zip(sliced[1:3], whole[1:3], strict=True):
        assert a == b if b is None else a == pytest.approx(b, rel=1e-12)
    assert whole[0] == (kind in (0, 3, 5))
    if kind == 1:
        assert "3 of 1000 elements" in whole[3] and "flat index 17" in whole[3]


def test_comparison_never_converts_a_whole_output_to_float64(monkeypatch):
    """The float64 copies a comparison makes stay within one slice: at KernelBench's level-1
    sizes (1.6e9 floats), whole-output float64 temporaries ran the H200 out of memory."""
    sizes: list[int] = []
    double = torch.Tensor.double

    def spy(self, *a, **k):
        sizes.append(self.numel())
        return double(self, *a, **k)

    monkeypatch.setattr(torch.Tensor, "double", spy)
    w = torch.randn(4096)
    ok, *_ = compare_outputs(w, w.clone(), 1e-5, 1e-5, 1e-2, signed=True, chunk=256)
    assert ok and sizes and max(sizes) <= 256


def test_time_forward_stops_at_its_budget_in_seconds():
    """A 20 ms call with a 0.2 s budget and 50 trials allowed: timing stops after the budget
    is spent (at least 5 trials), not after all 50 (a unit slip of 1,000x would run them all,
    or stop at 5 whatever the budget)."""
    import time

    from cudaperf.execute.pytorch.runtime import time_forward

    def slow():
        time.sleep(0.02)

    ev, wall = time_forward(slow, [], warmup=0, trials=50, budget_s=0.2, device="cpu")
    assert 7 <= len(ev) <= 14 and len(ev) == len(wall)  # ~10 (sleep overshoot included)
