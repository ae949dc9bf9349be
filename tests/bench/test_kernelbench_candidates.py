"""The hand-written KernelBench candidates in bench/kernelbench_candidates.

CPU-only: the index is consistent, every candidate passes the static anti-hacking checks, and
every native CUDA source compiles with nvcc (device code only, --ptx for speed). Correctness
on a GPU is checked by running the candidates against KernelBench's reference modules.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cudaperf.execute.native import parse_prototypes
from cudaperf.execute.pytorch.static import check_torch_candidate
from cudaperf.execute.types import Severity

ROOT = Path(__file__).resolve().parents[2] / "bench" / "kernelbench_candidates"
INDEX = json.loads((ROOT / "index.json").read_text())
REFERENCE_NAMES = {"Model", "get_inputs", "get_init_inputs"}


def _string_assign(path: Path, name: str) -> str:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == name:
            return node.value.value
    raise AssertionError(f"{path} assigns no {name}")


def _called_lib_functions(path: Path) -> set[str]:
    calls = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            inner = node.func.value
            if isinstance(inner, ast.Attribute) and inner.attr == "lib":
                calls.add(node.func.attr)
    return calls


def test_index_is_consistent():
    assert len(INDEX) >= 40
    levels = [e["level"] for e in INDEX]
    assert levels.count(1) >= 30 and levels.count(2) >= 8
    keys = [(e["level"], e["problem"]) for e in INDEX]
    assert len(set(keys)) == len(keys)
    for e in INDEX:
        stem = f"{e['level']}_{e['problem'].removesuffix('.py')}"
        assert e["inline"] == f"inline/{stem}.py"
        assert e["native"] == f"native/{stem}.py"
        assert (ROOT / e["inline"]).is_file() and (ROOT / e["native"]).is_file()


def test_inline_extension_names_are_unique():
    names = []
    for e in INDEX:
        tree = ast.parse((ROOT / e["inline"]).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "load_inline":
                names += [k.value.value for k in node.keywords if k.arg == "name"]
    assert len(names) == len(INDEX) and len(set(names)) == len(names)


@pytest.mark.parametrize("form", ["inline", "native"])
def test_static_checks_pass(form):
    bad = {}
    for e in INDEX:
        src = (ROOT / e[form]).read_text()
        found = check_torch_candidate(src, REFERENCE_NAMES)
        fatal = [f for f in found if f.severity is Severity.ERROR]
        if fatal:
            bad[e[form]] = fatal
    assert bad == {}


def test_native_forward_calls_exported_launchers():
    for e in INDEX:
        path = ROOT / e["native"]
        exported = set(parse_prototypes(_string_assign(path, "CUDA_SRC")))
        called = _called_lib_functions(path)
        assert called and called <= exported, (e["native"], called, exported)


def _ptx(path: Path, nvcc: str) -> tuple[str, int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / "k.cu"
        cu.write_text(_string_assign(path, "CUDA_SRC"))
        # the front end and cicc without optimising: a source that does not compile fails
        # the same, in about 30% less time than -O3
        out = str(Path(tmp) / "k.ptx")
        cmd = [nvcc, "-arch=sm_90", "--ptx", "-Xcicc", "-O0", "-o", out, str(cu)]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return path.name, res.returncode, (res.stdout + res.stderr)[-2000:]


def test_native_sources_compile():
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found on PATH")
    paths = [ROOT / e["native"] for e in INDEX]
    with ThreadPoolExecutor(2) as ex:
        results = list(ex.map(lambda p: _ptx(p, nvcc), paths))
    failed = {name: log for name, rc, log in results if rc != 0}
    assert failed == {}
