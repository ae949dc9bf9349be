"""Tasks from a user's C file or PyTorch module file."""

from __future__ import annotations

import pytest

from cudaperf.refine import parse_sizes, task_from_c_file, task_from_torch_file
from cudaperf.tasks.io import sample_path
from cudaperf.tasks.model import Role


def test_parse_sizes():
    assert parse_sizes("n=1048576, a=2.5") == {"n": 1048576, "a": 2.5}
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_sizes("n")
    with pytest.raises(ValueError, match="not a number"):
        parse_sizes("n=big")


def test_c_file_roles_and_default_length(tmp_path):
    f = tmp_path / "scale.c"
    f.write_text(
        "/* void scale(junk) { */\n"
        "void scale(int n, float a, const float* restrict x, float *y) {\n"
        "  for (int i = 0; i < n; ++i) y[i] = a * x[i];\n}\n"
    )
    t = task_from_c_file(f, "scale", parse_sizes("n=1000,a=2"))
    roles = {p.name: (p.role, p.length) for p in t.signature}
    assert roles == {
        "n": (Role.SCALAR, None),
        "a": (Role.SCALAR, None),
        "x": (Role.IN, "n"),
        "y": (Role.INOUT, "n"),
    }
    assert t.c_prototype() == 'extern "C" void scale(int n, float a, const float* x, float* y)'


def test_c_file_needs_lengths_when_ambiguous(tmp_path):
    f = tmp_path / "mm.c"
    f.write_text("void mm(int r, int c, const float* a, float* b) { }\n")
    with pytest.raises(ValueError, match="--length"):
        task_from_c_file(f, "mm", {"r": 2, "c": 3})
    t = task_from_c_file(f, "mm", {"r": 2, "c": 3}, {"a": "r*c", "b": "r*c"})
    assert t.signature[2].length == "r*c"
    with pytest.raises(ValueError, match="--function"):
        task_from_c_file(f, "nope", {})


def test_torch_file():
    t = task_from_torch_file(sample_path() / "torch2cuda_softmax" / "reference.py", validate=False)
    assert t.kind.value == "torch2cuda" and t.entry == "Model"
    assert any(c.held_out for c in t.configs)
