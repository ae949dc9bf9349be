"""The C references of the newer families compute what their descriptions say: each one is
compiled with gcc, run on its small config, and compared with a numpy oracle (the reference
is the ground truth every implementation is judged against)."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess

import numpy as np
import pytest

from cudaperf.datagen import FAMILIES, generate_one
from cudaperf.tasks.model import Role, Task, eval_length

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")

_CT = {"int32": ctypes.c_int32, "float32": ctypes.c_float, "float64": ctypes.c_double}


def _run(task: Task, tmp_path) -> tuple[dict[str, int], dict[str, np.ndarray]]:
    """Compile and run the reference on the small config; every array by name."""
    stem = task.id.replace("/", "_")  # one library per task: dlopen caches by path
    (tmp_path / f"{stem}.c").write_text(task.source)
    so = tmp_path / f"{stem}.so"
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", "-o", str(so), str(tmp_path / f"{stem}.c"), "-lm"],
        check=True,
    )
    cfg = task.config("small")
    rng = np.random.default_rng(123)
    arrays, args = {}, []
    for p in task.signature:
        if p.role is Role.SCALAR:
            args.append(_CT[p.dtype](cfg.sizes[p.name]))
            continue
        n = eval_length(p.length, cfg.sizes)
        d = cfg.param_distributions.get(p.name, cfg.distribution)
        if p.role is Role.OUT:
            a = np.full(n, 7, p.dtype)  # poisoned: the reference must write every element
        elif d.kind == "randint":
            a = rng.integers(int(d.low), int(d.high), n).astype(p.dtype)
        elif d.kind == "normal":
            a = rng.normal(d.mean, d.std, n).astype(p.dtype)
        else:
            a = rng.uniform(d.low, d.high, n).astype(p.dtype)
        arrays[p.name] = a
        args.append(ctypes.c_void_p(a.ctypes.data))
    fn = getattr(ctypes.CDLL(str(so)), task.entry)
    fn.restype = None
    fn(*args)
    return dict(cfg.sizes), arrays


def _close(task: Task, got: np.ndarray, want: np.ndarray) -> None:
    tol = task.tolerance
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert np.all(err <= tol.atol + tol.rtol * np.abs(want.astype(np.float64))), task.id


def _reduce_rows(task, s, a):
    x = a["x"].astype(np.float64).reshape(s["rows"], s["cols"])
    d = task.description
    if "index of the maximum" in d:
        return "out", np.argmax(x, axis=1)
    if "index of the minimum" in d:
        return "out", np.argmin(x, axis=1)
    for key, fn in [
        ("the sum of squares", lambda v: (v * v).sum(1)),
        ("the sum", lambda v: v.sum(1)),
        ("the mean", lambda v: v.mean(1)),
        ("the maximum", lambda v: v.max(1)),
        ("the minimum", lambda v: v.min(1)),
    ]:
        if key in d:
            return "out", fn(x)
    raise AssertionError(d)


def _scan(task, s, a):
    x = a["x"].astype(np.float64)
    d = task.description
    if d.startswith("Inclusive prefix sum"):
        return "out", np.cumsum(x)
    if d.startswith("Exclusive prefix sum"):
        return "out", np.concatenate([[0.0], np.cumsum(x)[:-1]])
    return "out", np.maximum.accumulate(x)


def _histogram(task, s, a):
    nbins, width, lo = map(
        int,
        re.search(r"into (\d+) bins of width (\d+) starting at (-?\d+)", task.description).groups(),
    )
    x = a["x"].astype(np.int64)
    keep = (x >= lo) & (x < lo + nbins * width)
    return "hist", np.bincount((x[keep] - lo) // width, minlength=nbins)


def _segsort(task, s, a):
    seg = int(task.signature[1].length.split("*")[1])
    v = np.sort(a["x"].reshape(s["nseg"], seg), axis=1)
    return "out", (v[:, ::-1] if "descending" in task.description else v).ravel()


def _gemv(task, s, a):
    m = re.search(r"y = \((-?[\d.]+) \* A(\^T)? x( \+ bias)?\)", task.description)
    A = a["A"].astype(np.float64).reshape(s["rows"], s["cols"])
    y = float(m.group(1)) * ((A.T if m.group(2) else A) @ a["x"].astype(np.float64))
    return "y", y + (a["bias"] if m.group(3) else 0)


def _gemm(task, s, a):
    m = re.search(r"C = (-?[\d.]+) \* A (B\^T|B)", task.description)
    b, mm, n, k = s["batch"], s["M"], s["N"], s["K"]
    A = a["A"].astype(np.float64).reshape(b, mm, k)
    B = a["B"].astype(np.float64).reshape((b, n, k) if m.group(2) == "B^T" else (b, k, n))
    C = float(m.group(1)) * (A @ (B.transpose(0, 2, 1) if m.group(2) == "B^T" else B))
    return "C", (C + (a["bias"] if "bias" in a else 0)).ravel()


def _nbody(task, s, a):
    eps = float(re.search(r"softening eps = ([\d.]+)", task.description).group(1))
    g = float(re.search(r"with G = (\d+(?:\.\d+)?)", task.description).group(1))
    p = np.stack([a["x"], a["y"], a["z"]], 1).astype(np.float64)
    d = p[None, :, :] - p[:, None, :]  # d[i, j] = p[j] - p[i]
    inv = 1.0 / np.sqrt((d * d).sum(-1) + eps * eps)
    w = a["m"].astype(np.float64)[None, :]
    if "ax" in a:
        acc = (d * (w * inv**3)[..., None]).sum(1) * g / s["n"]
        return "ax", acc[:, 0]
    return "phi", -(w * inv).sum(1) * g / s["n"]


ORACLES = {
    "reduce_rows": _reduce_rows,
    "scan": _scan,
    "histogram": _histogram,
    "segmented_sort": _segsort,
    "gemv": _gemv,
    "gemm": _gemm,
    "nbody": _nbody,
}


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_reference_matches_numpy(name, tmp_path):
    for index in range(4):
        task = generate_one(FAMILIES[name], 0, index)
        sizes, arrays = _run(task, tmp_path)
        out, want = ORACLES[name](task, sizes, arrays)
        _close(task, arrays[out], want)


def test_index_arrays_stay_in_range():
    for name in ("gather_rows", "scatter_add"):
        for index in range(3):
            t = generate_one(FAMILIES[name], 0, index)
            for c in t.configs:
                d = c.param_distributions["idx"]
                assert d.kind == "randint" and d.low == 0 and d.high == c.sizes["m"]


def test_histogram_draws_values_outside_the_bins_in_some_tasks():
    outside = 0
    for index in range(12):
        t = generate_one(FAMILIES["histogram"], 0, index)
        assert t.configs[0].distribution.kind == "randint"
        outside += "about 0%" not in t.description
    assert outside >= 6


def test_box_and_sobel_references_match_numpy(tmp_path):
    seen: dict[str, int] = {}
    for index in range(60):
        task = generate_one(FAMILIES["image_filter2d"], 0, index)
        d = task.description
        kind = "box" if "box blur" in d else "sobel" if "Sobel" in d else None
        if kind is None or seen.get(kind, 0) >= 2:
            continue
        seen[kind] = seen.get(kind, 0) + 1
        s, a = _run(task, tmp_path)
        img = a["in"].astype(np.float64).reshape(s["height"], s["width"])
        if "box" in d:
            r = int(d.split("x")[0]) // 2
            pad = np.pad(img, r, mode="edge")
            h, w = img.shape
            want = (
                sum(
                    pad[r + dy : r + dy + h, r + dx : r + dx + w]
                    for dy in range(-r, r + 1)
                    for dx in range(-r, r + 1)
                )
                / (2 * r + 1) ** 2
            )
        else:
            pad = np.pad(img, 1, mode="edge")
            h, w = img.shape

            def at(dx, dy, pad=pad, h=h, w=w):
                return pad[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]

            gx = at(1, -1) - at(-1, -1) + 2 * (at(1, 0) - at(-1, 0)) + at(1, 1) - at(-1, 1)
            gy = at(-1, 1) - at(-1, -1) + 2 * (at(0, 1) - at(0, -1)) + at(1, 1) - at(1, -1)
            want = np.sqrt(gx * gx + gy * gy) if "sqrt" in d else np.abs(gx) + np.abs(gy)
        err = np.abs(a["out"].reshape(img.shape) - want)
        assert np.all(err <= 1e-4 + 1e-4 * np.abs(want)), task.id
    assert seen == {"box": 2, "sobel": 2}


# ---- the C families added for the full-size set (conv, sparse, permutation, selection) ----


def _conv1d(task, s, a):
    d = task.description
    k = int(re.search(r"with the (\d+)-tap filter", d).group(1))
    x, w = a["x"].astype(np.float64), a["w"].astype(np.float64)
    if d.startswith("Convolution"):
        w = w[::-1]
    n = s["n"]
    if "only the n -" in d:
        idx = np.arange(n - k + 1)[:, None] + np.arange(k)[None, :]
        return "y", (x[idx] * w).sum(1)
    r = (k - 1) // 2
    idx = np.arange(n)[:, None] + np.arange(k)[None, :] - r
    if "clamped" in d:
        vals = x[np.clip(idx, 0, n - 1)]
    else:
        vals = np.where((idx >= 0) & (idx < n), x[np.clip(idx, 0, n - 1)], 0.0)
    return "y", (vals * w).sum(1)


def _spmv(task, s, a):
    d = task.description
    alpha = float(re.search(r"y = (-?[\d.]+) \* A x", d).group(1))
    k = int(re.search(r"K = (\d+) slots", d).group(1))
    rows = s["rows"]
    slot = np.arange(k)[None, :]
    r = np.arange(rows)[:, None]
    pos = slot * rows + r if "slot-major" in d else r * k + slot
    live = slot < a["row_len"][:, None]
    prod = a["val"].astype(np.float64)[pos] * a["x"].astype(np.float64)[a["col"][pos]]
    return "y", alpha * np.where(live, prod, 0.0).sum(1)


def _permute(task, s, a):
    d = task.description
    x = a["x"]
    n = s["n"]
    i = np.arange(n)
    if "reverse the array" in d:
        j = n - 1 - i
    elif "rotate left" in d:
        j = (i + s["s"]) % n
    else:
        seg = int(re.search(r"every segment of (\d+)", d).group(1))
        start = i // seg * seg
        j = start + np.minimum(seg, n - start) - 1 - i % seg
    v = x[j]
    f = re.search(r"f\(v\) = (.*?)\. Pure", d).group(1)
    if x.dtype.kind == "i":
        v = v.astype(np.int64)
        c = int(re.search(r"(\d+)$", f).group(1))
        if "XOR" in f:
            return "out", v ^ c
        return "out", (3 * v - c) if f.startswith("3v") else v + c
    av, bv = re.match(r"(-?[\d.]+) \* v \+ (-?[\d.]+)", f).groups()
    return "out", float(av) * v.astype(np.float64) + float(bv)


def _interleave(task, s, a):
    d = task.description
    k = int(re.search(r"records of (\d+)", d).group(1))
    f = re.search(r"f\(v\) = (.*) to every", d).group(1)

    def fn(v):
        if "XOR" in f:
            return v ^ int(f.split()[-1])
        if f.startswith("v +"):
            return v + int(f.split()[-1])
        return float(f.split()[0]) * v.astype(np.float64)

    names = ["a", "b", "c", "d"][:k]
    if d.startswith("Deinterleave"):
        return names[1], fn(a["rec"].reshape(-1, k)[:, 1])
    return "rec", fn(np.stack([a[nm] for nm in names], 1).ravel())


def _topk(task, s, a):
    d = task.description
    k = int(re.search(r"cols >= (\d+)", d).group(1))
    x = a["x"].reshape(s["rows"], s["cols"])
    v = -np.sort(-x, axis=1) if "largest" in d else np.sort(x, axis=1)
    if "-th" in d and "(q+1)" not in d:
        return "out", v[:, k - 1]
    return "out", v[:, :k].ravel()


def _softmax(task, s, a):
    d = task.description
    invt = float(re.search(r"1/T taken as ([\d.]+)", d).group(1))
    x = a["x"].astype(np.float64).reshape(s["rows"], s["cols"])
    z = (x - x.max(1, keepdims=True)) * invt
    lse = np.log(np.exp(z).sum(1, keepdims=True))
    return "out", (z - lse if d.startswith("Log") else np.exp(z - lse)).ravel()


def _batched_dot(task, s, a):
    d = task.description
    scale = float(re.search(r"out\[b\] = (-?[\d.]+) \* the", d).group(1))
    x = a["x"].astype(np.float64).reshape(s["batch"], s["len"])
    y = a["y"].astype(np.float64).reshape(s["batch"], s["len"])
    if "cosine" in d:
        v = (x * y).sum(1) / np.sqrt((x * x).sum(1) * (y * y).sum(1))
    elif "squared Euclidean" in d:
        v = ((x - y) ** 2).sum(1)
    elif "L1 distance" in d:
        v = np.abs(x - y).sum(1)
    else:
        v = (x * y).sum(1)
    return "out", scale * v


def _conv2d(task, s, a):
    d = task.description
    nc = int(re.search(r"of a (\d+)-channel", d).group(1))
    nf, k = map(int, re.search(r"with (\d+) filters of \d+ x (\d+) x", d).groups())
    h, w, r = s["height"], s["width"], k // 2
    img = np.pad(a["in"].astype(np.float64).reshape(nc, h, w), ((0, 0), (r, r), (r, r)))
    wt = a["w"].astype(np.float64).reshape(nf, nc, k, k)
    out = np.zeros((nf, h, w)) + a["bias"].astype(np.float64)[:, None, None]
    for dy in range(k):
        for dx in range(k):
            out += np.einsum("fc,chw->fhw", wt[:, :, dy, dx], img[:, dy : dy + h, dx : dx + w])
    return "out", out.ravel()


NEW_ORACLES = {
    "conv1d": _conv1d,
    "spmv_ell": _spmv,
    "permute": _permute,
    "interleave": _interleave,
    "topk_rows": _topk,
    "softmax_rows": _softmax,
    "batched_dot": _batched_dot,
    "conv2d_channels": _conv2d,
}


@pytest.mark.parametrize("name", sorted(NEW_ORACLES))
def test_new_family_references_match_numpy(name, tmp_path):
    for index in range(6):
        task = generate_one(FAMILIES[name], 0, index)
        sizes, arrays = _run(task, tmp_path)
        out, want = NEW_ORACLES[name](task, sizes, arrays)
        _close(task, arrays[out], want)
