"""The bundled sample set: shape of every task, C references that run, implementations that compile.

CPU-only. The GPU correctness check of every implementation is in test_sample_gpu.py, which
reuses the helpers here (input drawing, the gcc-built C reference, CUDA source extraction).
"""

from __future__ import annotations

import ast
import ctypes
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from cudaperf.tasks.io import load_sample
from cudaperf.tasks.model import Distribution, InputConfig, Role, Task, TaskKind, eval_length

MIN_TASKS_PER_KIND = 6
KNOWN_STRATEGIES = {
    "naive",
    "grid_stride",
    "coalesced",
    "uncoalesced",
    "smem_tiling",
    "smem_privatized",
    "vectorized",
    "warp_shuffle",
    "unrolled",
    "register_blocking",
    "bank_conflicted",
}


# ---- helpers shared with test_sample_gpu.py ----------------------------------------------


@cache
def sample_tasks() -> tuple[Task, ...]:
    return tuple(load_sample())


def tasks_of(kind: TaskKind) -> list[Task]:
    return [t for t in sample_tasks() if t.kind is kind]


def cuda_source(task: Task, code: str) -> str:
    """The CUDA text of an implementation: the .cu file itself, or a torch file's CUDA_SRC."""
    if task.kind is TaskKind.C2CUDA:
        return code
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "CUDA_SRC" for t in node.targets
        ):
            assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            return node.value.value
    raise AssertionError(f"{task.id}: implementation defines no CUDA_SRC string")


def array_length(task: Task, config: InputConfig, name: str) -> int:
    param = next(p for p in task.signature if p.name == name)
    return eval_length(param.length, config.sizes)


def draw(dist: Distribution, n: int, dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Values for one input array, drawn from the config's distribution."""
    if dist.kind == "uniform":
        return (rng.random(n, dtype=np.float64) * (dist.high - dist.low) + dist.low).astype(dtype)
    if dist.kind == "normal":
        return rng.normal(dist.mean, dist.std, n).astype(dtype)
    if dist.kind == "randint":
        return rng.integers(int(dist.low), int(dist.high), n).astype(dtype)
    return np.full(n, dist.value, dtype=dtype)


def make_c_inputs(task: Task, config: InputConfig, seed: int) -> dict[str, np.ndarray]:
    """Arrays for every array parameter: drawn for in/inout, zeros for out."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for p in task.signature:
        if not p.is_array:
            continue
        n = array_length(task, config, p.name)
        if p.role is Role.OUT:
            arrays[p.name] = np.zeros(n, dtype=p.dtype)
        else:
            dist = config.param_distributions.get(p.name, config.distribution)
            arrays[p.name] = draw(dist, n, p.dtype, rng)
    return arrays


def scalar_args(task: Task, config: InputConfig) -> dict[str, int | float]:
    out = {}
    for p in task.signature:
        if p.role is Role.SCALAR:
            v = config.sizes[p.name]
            out[p.name] = float(v) if p.dtype.startswith("float") else int(v)
    return out


def build_c_reference(task: Task, workdir: Path):
    """The task's C source compiled with gcc -O2 into a shared library; returns the function."""
    src = workdir / "reference.c"
    lib = workdir / "reference.so"
    src.write_text(task.source, encoding="utf-8")
    res = subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, f"{task.id}: gcc failed:\n{res.stderr[-3000:]}"
    fn = getattr(ctypes.CDLL(str(lib)), task.entry)
    fn.argtypes = [
        ctypes.c_void_p if p.is_array else np.ctypeslib.as_ctypes_type(np.dtype(p.dtype))
        for p in task.signature
    ]
    fn.restype = None
    return fn


def run_c_reference(fn, task: Task, config: InputConfig, arrays: dict[str, np.ndarray]) -> None:
    """Call the reference in place on numpy arrays (out/inout arrays are overwritten)."""
    scalars = scalar_args(task, config)
    args = [
        arrays[p.name].ctypes.data_as(ctypes.c_void_p) if p.is_array else scalars[p.name]
        for p in task.signature
    ]
    fn(*args)


def smallest_config(task: Task) -> InputConfig:
    def size(c: InputConfig) -> int:
        if task.kind is TaskKind.C2CUDA:
            return sum(array_length(task, c, p.name) for p in task.signature if p.is_array)
        return int(np.prod([v for v in c.sizes.values()]))

    return min(task.configs, key=size)


# ---- shape of the set and of each task --------------------------------------------------


def test_sample_has_enough_tasks_of_each_kind_with_distinct_families():
    for kind in TaskKind:
        tasks = tasks_of(kind)
        assert len(tasks) >= MIN_TASKS_PER_KIND, f"only {len(tasks)} {kind.value} tasks"
        families = [t.family for t in tasks]
        assert len(set(families)) == len(families), f"repeated {kind.value} families: {families}"


@pytest.mark.parametrize("task", sample_tasks(), ids=lambda t: t.id)
def test_task_shape(task: Task):
    folder = f"{task.kind.value}_{task.family}"
    assert task.id == f"sample/{task.kind.value}/{task.family}", f"id should match {folder}"
    assert task.provenance == {"source": "cudaperf sample set", "license": "Apache-2.0"}
    assert len(task.description) > 80, "description should be a real paragraph"
    assert len(task.configs) >= 3
    assert any(c.held_out for c in task.configs), "needs a held-out config"
    assert task.visible_configs, "needs a config that prompts may show"
    assert len(task.implementations) >= 2
    naive = [i for i in task.implementations if "naive" in i.strategies]
    assert naive, "needs an implementation tagged naive"
    for impl in task.implementations:
        assert impl.strategies, f"{impl.id} has no strategies"
        unknown = set(impl.strategies) - KNOWN_STRATEGIES
        assert not unknown, f"{impl.id}: unknown strategy tags {unknown}"
    if task.kind is TaskKind.TORCH2CUDA:
        assert task.entry == "Model" and not task.signature


@pytest.mark.parametrize("task", tasks_of(TaskKind.C2CUDA), ids=lambda t: t.id)
def test_c_implementations_define_the_exact_prototype(task: Task):
    from cudaperf.execute.native import parse_prototypes

    for impl in task.implementations:
        protos = parse_prototypes(impl.code)
        assert task.entry in protos, f'{impl.id} has no extern "C" {task.entry}'
        got = [(p.name, p.ctype, p.pointer) for p in protos[task.entry].params]
        want = [(p.name, p.ctype, p.is_array) for p in task.signature]
        assert got == want, f"{impl.id}: prototype differs from {task.c_prototype()}"
        assert protos[task.entry].restype == "void"


@pytest.mark.parametrize("task", tasks_of(TaskKind.TORCH2CUDA), ids=lambda t: t.id)
def test_torch_files_have_the_kernelbench_shape(task: Task):
    names = {n.name for n in ast.parse(task.source).body if hasattr(n, "name")}
    assert {"Model", "get_inputs", "get_init_inputs"} <= names
    for config in task.configs:
        consts = {
            t.id
            for n in ast.parse(task.source).body
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        assert set(config.sizes) <= consts, f"{config.name} sets names the module lacks"
    for impl in task.implementations:
        tree = ast.parse(impl.code)
        assert "ModelNew" in {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        assert 'extern "C"' in cuda_source(task, impl.code)
        assert "load_cuda" in impl.code


# ---- the C references run ---------------------------------------------------------------


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
@pytest.mark.parametrize("task", tasks_of(TaskKind.C2CUDA), ids=lambda t: t.id)
def test_c_reference_runs_on_the_smallest_config(task: Task, tmp_path: Path):
    fn = build_c_reference(task, tmp_path)
    config = smallest_config(task)
    arrays = make_c_inputs(task, config, config.seed)
    for p in task.signature:
        if p.role is Role.OUT and arrays[p.name].dtype.kind == "f":
            arrays[p.name][:] = np.nan
    run_c_reference(fn, task, config, arrays)
    for p in task.signature:
        if p.role in (Role.OUT, Role.INOUT):
            out = arrays[p.name]
            assert np.isfinite(out.astype(np.float64)).all(), f"{p.name} not fully written"
            assert np.abs(out.astype(np.float64)).max() > 0, f"{p.name} is all zeros"


# ---- the torch references run and ModelNew mirrors Model's parameters -------------------


@pytest.mark.parametrize("task", tasks_of(TaskKind.TORCH2CUDA), ids=lambda t: t.id)
def test_torch_reference_runs_and_model_new_gets_the_same_weights(task: Task, monkeypatch):
    torch = pytest.importorskip("torch")
    import cudaperf.execute.native as native

    monkeypatch.setattr(native, "load_cuda", lambda src, **kw: None)  # no build needed here
    config = smallest_config(task)
    ns: dict = {"__name__": "reference"}
    exec(compile(task.source, "reference.py", "exec"), ns)
    ns.update(config.sizes)
    init = ns["get_init_inputs"]()
    torch.manual_seed(config.seed)
    model = ns["Model"](*init)
    torch.manual_seed(config.seed)
    out = model(*ns["get_inputs"]())
    assert torch.isfinite(out).all() and out.abs().max() > 0
    want = dict(model.named_parameters())
    for impl in task.implementations:
        impl_ns: dict = {"__name__": impl.id}
        exec(compile(impl.code, f"{impl.id}.py", "exec"), impl_ns)
        torch.manual_seed(config.seed)
        got = dict(impl_ns["ModelNew"](*init).named_parameters())
        assert got.keys() == want.keys(), f"{impl.id}: parameters differ from Model's"
        for k in want:
            assert torch.equal(got[k], want[k]), f"{impl.id}: {k} initialised differently"


# ---- every implementation compiles -------------------------------------------------------


def _all_sources() -> list[tuple[str, str]]:
    return [
        (f"{t.id}:{i.id}", cuda_source(t, i.code))
        for t in sample_tasks()
        for i in t.implementations
    ]


@pytest.fixture(scope="module")
def compile_results(tmp_path_factory) -> dict[str, str]:
    """Compile every implementation once, in parallel; name → "" or the nvcc log.

    `nvcc -cubin` runs the whole front end over host and device code and ptxas over the
    kernels, but skips the host compiler and the link (about 0.7 s a file instead of 1.8 s);
    the full shared-library build is exercised by tests/execute/test_native.py and the GPU run.
    """
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    workdir = tmp_path_factory.mktemp("cubin")

    def build(item: tuple[int, tuple[str, str]]) -> tuple[str, str]:
        k, (name, src) = item
        path = workdir / f"impl{k}.cu"
        path.write_text(src, encoding="utf-8")
        cmd = [
            nvcc,
            "-O3",
            "-arch=sm_90",
            "-cubin",
            "-o",
            str(path.with_suffix(".cubin")),
            str(path),
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        return name, "" if res.returncode == 0 else (res.stdout + res.stderr)[-4000:]

    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(pool.map(build, enumerate(_all_sources())))


@pytest.mark.parametrize("name", [n for n, _ in _all_sources()])
def test_implementation_compiles_with_nvcc(name: str, compile_results: dict[str, str]):
    assert compile_results[name] == "", compile_results[name]
