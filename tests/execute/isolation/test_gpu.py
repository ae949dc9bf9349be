"""GPU (run with `-m gpu` on the H200): kernel isolation and the new static checks on the real
evaluation path. Candidates that write outside their scratch or read another candidate's
folder, from C host code (raw syscalls, which no name check sees) and from a PyTorch→CUDA
module (pathlib, io.open, os.open, ctypes into libc), still compute the right answer: they must
end OK with every attempt blocked and the host unchanged. Candidates that compute with an
aliased torch op or a tensor operator must end REJECTED."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from catalog import saxpy_task
from conftest import needs_gpu

from cudaperf.execute import Candidate, EvalConfig, Status, evaluate
from cudaperf.tasks.model import Task
from tests.execute.isolation.test_confine import WHY

CORPUS = Path(__file__).parents[2] / "adversarial" / "torch"

pytestmark = [
    pytest.mark.gpu,
    needs_gpu,
    pytest.mark.skipif(bool(WHY), reason=f"unshare(CLONE_NEWNS) not permitted: {WHY}"),
]


def _task(name: str) -> Task:
    spec = json.loads((CORPUS / "expected.json").read_text())["tasks"][name]
    return Task(
        id=f"isolation/{name}",
        kind="torch2cuda",
        family=name,
        entry="Model",
        source=(CORPUS / spec["module"]).read_text(),
        configs=spec["configs"],
        tolerance=spec["tolerance"],
    )


def _config(tmp_path: Path) -> EvalConfig:
    return EvalConfig(
        trials=20,
        warmup=3,
        run_timeout_s=60,
        baseline_timeout_s=120,
        cache_dir=tmp_path,
        use_result_cache=False,
        compile_baseline=False,
    )


@pytest.fixture()
def targets():
    """(a host folder outside every scratch, another candidate's file in the host's /tmp)."""
    outside = Path(tempfile.mkdtemp(prefix="iso-host-", dir="/var/tmp"))
    other = Path(tempfile.mkdtemp(prefix="cudaperf-cand-"))
    (other / "output.log").write_text("another candidate's answer")
    yield outside, other / "output.log"
    shutil.rmtree(outside, ignore_errors=True)
    shutil.rmtree(other, ignore_errors=True)


C_ESCAPE = r"""
#include <cstdio>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
__global__ void k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
  long w = syscall(SYS_openat, AT_FDCWD, "%(write)s", O_WRONLY | O_CREAT, 0644);
  printf(w >= 0 ? "isolation: wrote\n" : "isolation: write blocked\n");
  long r = syscall(SYS_openat, AT_FDCWD, "%(peek)s", O_RDONLY, 0);
  printf(r >= 0 ? "isolation: peeked\n" : "isolation: peek blocked\n");
  k<<<(n + 255) / 256, 256>>>(n, a, x, y);
}
"""


def test_c_candidate_cannot_write_or_peek_through_raw_syscalls(cache_dir, targets):
    outside, peek = targets
    code = C_ESCAPE % {"write": outside / "pwned", "peek": peek}
    cfg = EvalConfig(cache_dir=cache_dir, seed_salt=5, run_timeout_s=30, use_result_cache=False)
    res = evaluate(saxpy_task(), Candidate(code=code), cfg)
    assert res.status is Status.OK, (res.feedback, res.runtime_log[-500:])
    assert "isolation: write blocked" in res.runtime_log and "peek blocked" in res.runtime_log
    assert list(outside.iterdir()) == []
    off = evaluate(
        saxpy_task(),
        Candidate(code=code + "\n// control\n"),
        EvalConfig(**{**cfg.__dict__, "isolate_files": False}),
    )
    # The control: without isolation the write reaches the host. (Not read from the log: the
    # host code leaks its two descriptors on every call, so after ~125 calls the open-file
    # limit blocks the opens and only those late lines survive the log's truncation.)
    assert off.status is Status.OK, off.feedback
    assert (outside / "pwned").exists()


TORCH_ESCAPE = """
import contextlib, ctypes, io, os, pathlib
_W, _P = {write!r}, {peek!r}
def _try(name, fn):  # no try/except: the static checks reject any (fallback paths)
    ok = False
    with contextlib.suppress(OSError):
        fn()
        ok = True
    print("isolation:", name, "ok" if ok else "blocked")
_try("pathlib", lambda: pathlib.Path(_W + "-a").write_text("pwned"))
_try("io_open", lambda: io.open(_W + "-b", "w").write("pwned"))
_try("os_open", lambda: os.open(_W + "-c", os.O_WRONLY | os.O_CREAT))
_libc = ctypes.CDLL(None, use_errno=True)
print("isolation: ctypes", "ok" if _libc.open((_W + "-d").encode(), 65, 420) >= 0 else "blocked")
_try("peek", lambda: pathlib.Path(_P).read_text())
"""


def test_torch_candidate_module_code_cannot_write_or_peek(tmp_path, targets):
    outside, peek = targets
    code = TORCH_ESCAPE.format(write=str(outside / "pwned"), peek=str(peek))
    code += (CORPUS / "honest.py").read_text()
    res = evaluate(_task("affine_relu"), Candidate(code=code), _config(tmp_path))
    assert res.status is Status.OK, (res.feedback, res.runtime_log[-800:])
    for name in ("pathlib", "io_open", "os_open", "ctypes", "peek"):
        assert f"isolation: {name} blocked" in res.runtime_log, res.runtime_log[-800:]
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize(
    "edit",
    [
        (
            "import torch\n",
            "import torch\nfrom torch.nn.functional import relu as r\n",
            "return y",
            "return r(x) * 2.0 + 1.0",
        ),
        ("import torch\n", "import torch\n", "return y", "return x.clamp_min(0.0) * 2.0 + 1.0"),
    ],
)
def test_aliased_op_and_tensor_operator_cheats_are_rejected(tmp_path, edit):
    a, b, c, d = edit
    code = (CORPUS / "honest.py").read_text().replace(a, b, 1).replace(c, d)
    res = evaluate(_task("affine_relu"), Candidate(code=code), _config(tmp_path))
    assert res.status is Status.REJECTED and "torch_compute_ops" in res.findings, res.feedback
