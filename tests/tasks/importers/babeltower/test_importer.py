"""BabelTower importer on a hand-written fixture in the test set's JSONL format."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cudaperf.cli import app
from cudaperf.tasks.importers.babeltower.importer import import_babeltower
from cudaperf.tasks.importers.babeltower.inputs import ArrayArg, parse_test
from cudaperf.tasks.importers.babeltower.lengths import choose_length
from cudaperf.tasks.importers.ctok import access_modes, format_c, tokenize
from cudaperf.tasks.model import Role, eval_length

FIXTURE = Path(__file__).parents[3] / "fixtures" / "babeltower" / "test.jsonl"


@pytest.fixture(scope="module")
def report():
    return import_babeltower(FIXTURE)


def test_every_row_imported_or_skipped_with_reason(report):
    assert [t.id for t in report.tasks] == [
        "babeltower/0_saxpy_cpu",
        "babeltower/1_scale2d",
        "babeltower/2_gather_clamp",
        "babeltower/6_dec",
    ]
    summary = report.summary()
    assert summary.pop("reference_check")["mode"] != ""  # which check ran (gcc or skipped)
    assert summary == {
        "configs": sum(len(t.configs) for t in report.tasks),
        "imported": 4,
        "skipped": 5,
        "reasons": {
            "not a JSON object": 1,
            "wrapper never launches a kernel": 1,
            "C function returns a value (the candidate shape needs void)": 1,
            "no given test input matches the C signature": 1,
            "missing field(s) cuda_code, consistent_cpp_inputs, cuda_wrapper": 1,
        },
    }
    for t in report.tasks:
        assert t.provenance["license"].startswith("Apache-2.0")
        assert t.implementations[0].id == "babeltower"


def test_roles_and_lengths(report):
    saxpy, scale, gather, _ = report.tasks
    sig = {p.name: (p.role, p.length) for p in saxpy.signature}
    assert sig == {
        "n": (Role.SCALAR, None),
        "a": (Role.SCALAR, None),
        "x": (Role.IN, "n"),
        "y": (Role.INOUT, "n"),
    }
    sig = {p.name: (p.role, p.length) for p in scale.signature}
    assert sig["src"] == (Role.IN, "rows * cols")  # from the wrapper's `bytes` local
    assert sig["dst"] == (Role.OUT, "rows * cols")  # written only, unconditionally
    roles = {p.name: p.role for p in gather.signature}
    assert roles["out"] is Role.INOUT  # written only under an `if`: poison would survive
    assert roles["idx"] is Role.IN and roles["table"] is Role.IN


def test_configs_from_tests_and_generated(report):
    saxpy, scale, gather, _ = report.tasks
    names = [c.name for c in scale.configs]
    assert names == ["test1", "test2", "test3", "medium", "large"]
    assert [c.held_out for c in scale.configs] == [False, False, True, False, False]
    t1 = scale.config("test1")
    assert t1.sizes == {"rows": 2, "cols": 3, "s": 2.0}
    assert t1.param_distributions["src"].low == 1.0 and t1.param_distributions["src"].high == 6.0
    large = scale.config("large")
    assert large.sizes["s"] == 2.0  # non-size scalars keep their value
    assert large.sizes["rows"] * 3 == large.sizes["cols"] * 2  # one common factor
    assert eval_length("rows * cols", large.sizes) >= 2**20
    idx = gather.config("large").param_distributions["idx"]  # index ranges are kept
    assert (idx.kind, idx.low, idx.high) == ("randint", 0, 3)


def test_launcher_shape(report):
    scale = report.tasks[1]
    code = scale.implementations[0].code
    assert scale.c_prototype() + " {" in code
    assert "scale2d_kernel<<<grid, block>>>(src, dst, rows, cols, s);" in code  # renamed kernel
    assert "cudaMalloc(" not in code and "cudaMemcpy(" not in code


def _compile(cmd: list[str], src: str, suffix: str, tmp: Path) -> str:
    f = tmp / f"src{suffix}"
    f.write_text(src)
    r = subprocess.run([*cmd, str(f), "-o", str(tmp / "out")], capture_output=True, text=True)
    return r.stderr if r.returncode else ""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_references_compile_with_gcc(report, tmp_path):
    for t in report.tasks:
        assert _compile(["gcc", "-O2", "-shared", "-fPIC"], t.source, ".c", tmp_path) == "", t.id


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_implementations_compile_with_nvcc(report, tmp_path):
    from cudaperf.execute.c.harness import harness_source

    for t in report.tasks:
        src = harness_source(t, t.implementations[0].code)
        assert _compile(["nvcc", "-arch=sm_90", "-cubin"], src, ".cu", tmp_path) == "", t.id


def test_parse_test_snippets():
    args = parse_test("float a[] = {1, -2.5f}, b[3];\nint n = 2;\nwrapper(f, a, b, n, 2 * 3);\n")
    assert args == [ArrayArg(2, (1, -2.5)), ArrayArg(3, None), 2, 6]
    assert parse_test("{ int c[2][2] = {{1, 2}, {3, 4}};\nwrapper(g, c, FLT_MAX); }")[0].length == 4
    with pytest.raises(ValueError, match="no wrapper"):
        parse_test("int x = 1;")


def test_length_choice_prefers_exact_then_wrapper():
    tests = [[ArrayArg(6, None), 2, 3], [ArrayArg(4, None), 2, 2]]
    assert choose_length(0, tests, {1: "r", 2: "c"}, ["r", "c"], "", {"r", "c"}) == "r*c"
    # a test that declares more than it uses (n = 0) does not rule out `n`
    tests = [[ArrayArg(5, None), 5], [ArrayArg(10, None), 0]]
    assert choose_length(0, tests, {1: "n"}, ["n"], "n", set()) == "n"
    assert choose_length(0, [[ArrayArg(3, None)], [ArrayArg(4, None)]], {}, [], "", set()) is None


def test_tokens_roundtrip_and_access_modes():
    src = "void f ( float * a , float * b ) { for ( int i = 0 ; i < 4 ; i ++ ) "
    src += "b [ i ] += a [ i ] ; }"
    toks = tokenize(src)
    assert tokenize(format_c(toks)) == toks
    body = tokenize("{ float * q = b + 1 ; * q = a [ 0 ] ; if ( a [ 1 ] ) c [ 0 ] = 1 ; }")
    modes = access_modes(body, ["a", "b", "c"])
    assert modes == {"a": (True, False, False), "b": (False, True, False), "c": (False, True, True)}


def test_missing_file_and_cli(tmp_path):
    with pytest.raises(FileNotFoundError, match="BabelTower test set"):
        import_babeltower(tmp_path / "nope.jsonl")
    out = tmp_path / "bt.jsonl"
    r = CliRunner().invoke(
        app, ["tasks", "import", "babeltower", str(FIXTURE), "--out", str(out), "--json"]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["imported"] == 4
    assert len(out.read_text().splitlines()) == 4
