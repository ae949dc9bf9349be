"""Every implementation of every sample task, on every config, is correct on the GPU.

C→CUDA: the gcc -O2 reference on numpy arrays vs the implementation built with `load_cuda`
and called on CUDA tensors (outputs poisoned first, inputs checked for mutation afterwards).
PyTorch→CUDA: `Model` vs `ModelNew` built from the same seed, on `get_inputs()` with the
config's module constants, both on the GPU with TF32 disabled.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from cudaperf.tasks.model import Role, Task, TaskKind

from .test_sample import (
    build_c_reference,
    cuda_source,
    make_c_inputs,
    run_c_reference,
    sample_tasks,
    scalar_args,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs an NVIDIA GPU"),
]

CASES = [
    (t, c, i)
    for t in sample_tasks()
    for c in t.configs
    for i in t.implementations  # config-major, so one reference output serves every impl
]


@pytest.fixture(scope="module")
def torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


@pytest.fixture(scope="module")
def libs(torch_cuda) -> dict[tuple[str, str], object]:
    """Every implementation built once, in parallel, into the default cache (ModelNew's too)."""
    from cudaperf.execute.native import NativeBuildError, load_cuda

    def build(task, impl):
        try:
            return load_cuda(cuda_source(task, impl.code))
        except NativeBuildError as e:
            return e  # reported by that implementation's tests only

    jobs = [(t, i) for t in sample_tasks() for i in t.implementations]
    with ThreadPoolExecutor(max_workers=16) as pool:
        built = pool.map(lambda ti: build(*ti), jobs)
        return {(t.id, i.id): lib for (t, i), lib in zip(jobs, built, strict=True)}


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """(task id, config name) → (inputs, reference outputs); keeps only the latest config."""
    memo: dict = {}
    fns: dict = {}

    def get(task: Task, config):
        key = (task.id, config.name)
        if key not in memo:
            memo.clear()
            if task.id not in fns:
                workdir = Path(tmp_path_factory.mktemp("ref"))
                fns[task.id] = build_c_reference(task, workdir)
            inputs = make_c_inputs(task, config, config.seed)
            want = {k: v.copy() for k, v in inputs.items()}
            run_c_reference(fns[task.id], task, config, want)
            memo[key] = (inputs, want)
        return memo[key]

    return get


def _check_close(task: Task, name: str, got: np.ndarray, want: np.ndarray) -> None:
    tol = task.tolerance
    g, w = got.astype(np.float64), want.astype(np.float64)
    bad = ~(np.abs(g - w) <= tol.atol + tol.rtol * np.abs(w))  # NaN never passes
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise AssertionError(
            f"{name}: {int(bad.sum())} of {bad.size} elements out of tolerance "
            f"(atol {tol.atol}, rtol {tol.rtol}); first at {k}: got {g[k]!r}, want {w[k]!r}"
        )


def _run_c(torch, task: Task, config, impl, lib, references) -> None:
    inputs, want = references(task, config)
    tensors = {}
    for p in task.signature:
        if not p.is_array:
            continue
        t = torch.from_numpy(inputs[p.name]).cuda()
        if p.role is Role.OUT:
            t.fill_(float("nan") if t.is_floating_point() else -777)  # poison
        tensors[p.name] = t
    scalars = scalar_args(task, config)
    args = [tensors[p.name] if p.is_array else scalars[p.name] for p in task.signature]
    getattr(lib, task.entry)(*args)
    torch.cuda.synchronize()
    for p in task.signature:
        got = tensors[p.name].cpu().numpy() if p.is_array else None
        if p.role is Role.IN:
            assert np.array_equal(got, inputs[p.name]), f"{impl.id} modified input {p.name}"
        elif p.is_array:
            _check_close(task, f"{impl.id}/{config.name}/{p.name}", got, want[p.name])


def _run_torch(torch, task: Task, config, impl) -> None:
    ns: dict = {"__name__": "reference"}
    exec(compile(task.source, "reference.py", "exec"), ns)
    ns.update(config.sizes)
    init = ns["get_init_inputs"]()
    impl_ns: dict = {"__name__": impl.id}
    exec(compile(impl.code, f"{impl.id}.py", "exec"), impl_ns)
    torch.manual_seed(config.seed)
    model = ns["Model"](*init).cuda()
    torch.manual_seed(config.seed)
    model_new = impl_ns["ModelNew"](*init).cuda()
    torch.manual_seed(config.seed + 1000)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
    with torch.no_grad():
        want = model(*inputs)
        got = model_new(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    torch.cuda.synchronize()
    assert got.shape == want.shape, f"{impl.id}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert got.dtype == want.dtype
    name = f"{impl.id}/{config.name}"
    _check_close(task, name, got.cpu().numpy().ravel(), want.cpu().numpy().ravel())


@pytest.mark.parametrize(
    ("task", "config", "impl"), CASES, ids=[f"{t.id}:{c.name}:{i.id}" for t, c, i in CASES]
)
def test_implementation_is_correct_on_gpu(task, config, impl, torch_cuda, libs, references):
    if isinstance(libs[(task.id, impl.id)], Exception):
        raise libs[(task.id, impl.id)]
    if task.kind is TaskKind.C2CUDA:
        _run_c(torch_cuda, task, config, impl, libs[(task.id, impl.id)], references)
    else:
        _run_torch(torch_cuda, task, config, impl)
