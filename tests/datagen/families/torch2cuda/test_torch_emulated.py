"""The generated PyTorch→CUDA implementations compute the reference's values, checked on the
CPU: each CUDA source is compiled by g++ against the emulator of the CUDA execution model in
tests/datagen/emulator.py (each CUDA thread a ucontext fiber, blocks one after another,
`__syncthreads` and warp shuffles as barriers, `__shared__` as block-wide statics, a shuffle
that reads a lane which has exited aborts) and ModelNew runs on CPU tensors with poisoned (NaN)
output buffers.

Slow (minutes): runs only with CUDAPERF_EMULATE=1. Not covered: timing, races the emulator's
schedule does not provoke, and any behaviour specific to the GPU's memory model.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import types

import pytest

torch = pytest.importorskip("torch")

from cudaperf.datagen import FAMILIES, generate_one  # noqa: E402
from cudaperf.execute.native import _SCALARS, parse_prototypes  # noqa: E402
from cudaperf.execute.pytorch.runtime import compare_outputs  # noqa: E402
from cudaperf.tasks.pymodule import exec_with_sizes  # noqa: E402
from tests.datagen import emulator  # noqa: E402

pytestmark = [
    pytest.mark.skipif(os.environ.get("CUDAPERF_EMULATE") != "1", reason=emulator.SKIP_REASON),
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed"),
]


class _Lib:
    def __init__(self, src: str) -> None:
        try:
            so = emulator.build(src)
        except emulator.EmulatorBuildError as e:
            raise AssertionError(str(e)) from None
        self._cdll = ctypes.CDLL(str(so))
        self._protos = parse_prototypes(src)

    def __getattr__(self, name: str):
        proto = self._protos[name]
        fn = getattr(self._cdll, name)
        fn.restype = None

        def call(*args):
            conv = []
            for p, a in zip(proto.params, args, strict=True):
                if p.pointer:
                    assert a.is_contiguous(), f"{name}: {p.name} not contiguous"
                    conv.append(ctypes.c_void_p(a.data_ptr()))
                else:
                    conv.append(_SCALARS[p.ctype](a))
            fn(*conv)

        return call


class _PoisonTorch(types.ModuleType):
    """`torch` for the candidate, except that fresh float buffers start as NaN."""

    def __init__(self) -> None:
        super().__init__("torch")

    def __getattr__(self, name: str):
        real = getattr(torch, name)
        if name in ("empty", "empty_like"):

            def poisoned(*a, **k):
                t = real(*a, **k)
                return t.fill_(float("nan")) if t.is_floating_point() else t.fill_(-7)

            return poisoned
        return real


def _candidate(code: str):
    code = code.replace("from cudaperf.execute.native import load_cuda", "")
    ns = {"__name__": "cudaperf_emu_cand", "load_cuda": _Lib}
    exec(compile(code, "<candidate>", "exec"), ns)
    ns["torch"] = _PoisonTorch()
    return ns["ModelNew"]


def check_task(task, config) -> list[str]:
    """Problems of `task`'s implementations on `config` (empty when all match)."""
    ref_mod = exec_with_sizes(task.source, config.sizes, "cudaperf_emu_ref")
    init = ref_mod.get_init_inputs()
    torch.manual_seed(11)
    ref = ref_mod.Model(*init).eval()
    problems = []
    for im in task.implementations:
        torch.manual_seed(11)
        new = _candidate(im.code)(*init).eval()
        torch.manual_seed(config.seed + 100)
        inputs = ref_mod.get_inputs()
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        with torch.no_grad():
            want = ref(*before)
            got = new(*inputs)
        for a, b in zip(inputs, before, strict=True):
            if isinstance(a, torch.Tensor) and not torch.equal(a, b):
                problems.append(f"{im.id}: mutated an input")
        tol = task.tolerance
        ok, mabs, _, msg = compare_outputs(want, got, tol.atol, tol.rtol, 1e-2)
        if not ok:
            problems.append(f"{im.id} on {config.name} {dict(config.sizes)}: {msg}")
    return problems


TORCH_FAMS = sorted(
    n for n in FAMILIES if n.startswith("torch_") and FAMILIES[n].kind.value == "torch2cuda"
)


@pytest.mark.parametrize("name", TORCH_FAMS)
def test_implementations_match_reference_on_small_config(name):
    for index in range(int(os.environ.get("CUDAPERF_EMULATE_TASKS", "3"))):
        t = generate_one(FAMILIES[name], 0, index)
        small = next(c for c in t.configs if c.name == "small")
        problems = check_task(t, small) + check_task(t, aligned(small))
        assert not problems, "\n".join(problems)


def aligned(config):
    """`config` with every size rounded up to a multiple of 8 (exercises vectorised paths)."""
    sizes = {
        k: (v + 7) // 8 * 8 if isinstance(v, int) and v > 1 else v for k, v in config.sizes.items()
    }
    return config.model_copy(update={"sizes": sizes, "name": config.name + "_aligned"})
