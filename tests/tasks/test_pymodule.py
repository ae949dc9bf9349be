import pytest

from cudaperf.tasks.pymodule import exec_with_sizes, module_constants

SRC = "a = 4\nb = a * 2 + 1\nshape = (b, 3)\nname = 'x'\nneg = -2.5\nc = 10 // 3\n"


def test_constants_evaluate_arithmetic_of_earlier_constants():
    assert module_constants(SRC) == {"a": 4, "b": 9, "neg": -2.5, "c": 3}


def test_sizes_apply_at_assignment_so_derived_values_follow():
    mod = exec_with_sizes(SRC, {"b": 20}, "cudaperf_test_pymodule")
    assert mod.b == 20 and mod.shape == (20, 3) and mod.a == 4


def test_unknown_size_is_named():
    with pytest.raises(ValueError, match=r"\['zz'\]"):
        exec_with_sizes(SRC, {"zz": 1}, "cudaperf_test_pymodule2")
