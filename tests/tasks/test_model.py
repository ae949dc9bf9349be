import pytest
from pydantic import ValidationError

from cudaperf.tasks.model import Param, Role, Task, TaskKind, eval_length, length_names

from .helpers import C_TASK, TORCH_TASK, c_task


def test_valid_tasks_parse():
    t = Task.model_validate(C_TASK)
    assert t.kind is TaskKind.C2CUDA
    assert t.signature[2].ctype == "float"  # const and * are stripped from the element type
    assert [c.name for c in t.visible_configs] == ["small", "big"]
    assert t.c_prototype() == 'extern "C" void scale(int n, float a, const float* x, float* y)'
    assert Task.model_validate(TORCH_TASK).kind is TaskKind.TORCH2CUDA


def test_json_round_trip_preserves_every_field():
    t = Task.model_validate(C_TASK)
    again = Task.model_validate_json(t.model_dump_json())
    assert again == t
    assert again.implementations[0].measurements[0].versions == {"nvcc": "13.0"}


@pytest.mark.parametrize(
    "expr,sizes,want",
    [
        ("n", {"n": 5}, 5),
        ("rows*cols", {"rows": 3, "cols": 4}, 12),
        ("n/2+1", {"n": 9}, 5),
        ("max(n, m) - 1", {"n": 2, "m": 8}, 7),
        ("n**2", {"n": 3}, 9),
    ],
)
def test_eval_length(expr, sizes, want):
    assert eval_length(expr, sizes) == want


def test_length_rejects_code():
    with pytest.raises(ValueError, match="only integers"):
        length_names("n.real")
    with pytest.raises(ValueError, match="only call min"):
        length_names("abs(n)")


def test_missing_size_parameter_is_named():
    cfg = [{"name": "small", "sizes": {"n": 10}}]
    with pytest.raises(ValidationError, match=r"no value for scalar parameter\(s\) \['a'\]"):
        Task.model_validate(c_task(configs=cfg))


def test_length_naming_unknown_scalar():
    sig = [dict(p) for p in C_TASK["signature"]]
    sig[2]["length"] = "n*m"
    with pytest.raises(ValidationError, match=r"names \['m'\], which are not scalar"):
        Task.model_validate(c_task(signature=sig))


def test_unknown_kind_and_wrong_type():
    with pytest.raises(ValidationError, match="c2cuda"):
        Task.model_validate(c_task(kind="fortran2cuda"))
    with pytest.raises(ValidationError, match="configs"):
        Task.model_validate(c_task(configs="small"))


def test_param_rules():
    with pytest.raises(ValidationError, match="needs a length"):
        Param(name="x", ctype="float", role=Role.IN)
    with pytest.raises(ValidationError, match="must not have a length"):
        Param(name="n", ctype="int", role=Role.SCALAR, length="4")
    with pytest.raises(ValidationError, match="unknown C type"):
        Param(name="x", ctype="float3", role=Role.SCALAR)
    with pytest.raises(ValidationError, match="not a C identifier"):
        Param(name="2x", ctype="int", role=Role.SCALAR)


def test_duplicates_rejected():
    cfgs = C_TASK["configs"] + [C_TASK["configs"][0]]
    with pytest.raises(ValidationError, match="duplicate config name 'small'"):
        Task.model_validate(c_task(configs=cfgs))


def test_torch_task_takes_no_signature():
    bad = dict(TORCH_TASK, signature=C_TASK["signature"])
    with pytest.raises(ValidationError, match="take no signature"):
        Task.model_validate(bad)


def test_frozen():
    t = Task.model_validate(C_TASK)
    with pytest.raises(ValidationError):
        t.family = "other"


def test_row_ptr_distribution_is_valid_csr_for_any_seed():
    import numpy as np

    from cudaperf.tasks.model import Distribution

    for seed in range(30):
        rng = np.random.default_rng(seed)
        rows = int(rng.integers(1, 500))
        nnz = int(rng.integers(0, 5000))
        skew = [0.0, 1.2, 2.5][seed % 3]
        rp = Distribution(kind="row_ptr", nnz=nnz, skew=skew).row_ptr(rng, rows + 1)
        assert rp.shape == (rows + 1,) and rp[0] == 0 and rp[-1] == nnz
        assert np.all(np.diff(rp) >= 0)


def test_row_ptr_distribution_rejects_bad_fields():
    import numpy as np

    from cudaperf.tasks.model import Distribution

    with pytest.raises(ValidationError, match="nnz >= 0"):
        Distribution(kind="row_ptr", nnz=-1)
    with pytest.raises(ValidationError, match="skew >= 0"):
        Distribution(kind="row_ptr", nnz=5, skew=-1)
    with pytest.raises(ValueError, match="cannot hold"):
        Distribution(kind="row_ptr", nnz=5).row_ptr(np.random.default_rng(0), 1)


def _with_sizes(**sizes) -> dict:
    d = c_task()
    d["configs"][1]["sizes"] = {"n": 1000, "a": 0.5, **sizes}
    return d


@pytest.mark.parametrize(
    "sizes, match",
    [
        ({"n": -5}, r"array 'x' would have -5 elements"),
        ({"n": 2.5}, r"integer parameter 'n' the value 2.5; use a whole number"),
        ({"n": 1e30}, r"'n' the value 1e\+30, outside its C type int \(-2147483648 to"),
        ({"n": 2**31}, r"'n' the value 2147483648, outside its C type int"),
        ({"a": float("inf")}, r"'a' the value inf; use a number"),
        ({"a": float("nan")}, r"'a' the value nan; use a number"),
    ],
)
def test_a_config_that_makes_no_array_is_refused(sizes, match):
    """A negative length or a fractional integer parameter once passed validation and broke
    `data verify` with a traceback (numpy's 'negative dimensions', a float where an int goes)."""
    with pytest.raises(ValidationError, match=match):
        Task.model_validate(_with_sizes(**sizes))


def test_a_config_no_gpu_can_hold_is_refused():
    """Two float arrays of k * n elements: 2**33 elements each (64 GiB together) fit the
    bound, one element more per array does not; refused by validation, not by the
    evaluator's allocation."""
    d = c_task(dims=["k"])
    for c in d["configs"]:
        c["sizes"]["k"] = 1
    d["signature"][2]["length"] = d["signature"][3]["length"] = "n * k"
    d["configs"][1]["sizes"] = {"n": 2**23, "a": 0.5, "k": 2**10}
    Task.model_validate(d)
    d["configs"][1]["sizes"]["n"] = 2**23 + 1
    with pytest.raises(ValidationError, match=r"config 'big': its arrays would hold 68719484928 b"):
        Task.model_validate(d)


def test_a_length_that_cannot_be_computed_is_refused():
    d = _with_sizes(m=0)
    d["signature"] = [*d["signature"], {"name": "m", "ctype": "int", "role": "scalar"}]
    d["signature"][2]["length"] = "n / m"
    for c in d["configs"]:
        c["sizes"].setdefault("m", 1)
    with pytest.raises(ValidationError, match=r"length of array 'x' \('n / m'\) cannot be"):
        Task.model_validate(d)


def test_negative_and_whole_float_values_stay_allowed_where_they_make_arrays():
    """Negative constants (a float scale here) are values, not sizes; 16.0 is a whole number."""
    t = Task.model_validate(_with_sizes(a=-3.5, n=16.0))
    assert t.configs[1].sizes["a"] == -3.5
    d = c_task(dims=["k"])
    for c in d["configs"]:
        c["sizes"]["k"] = 4
    d["signature"][2]["length"] = "n + k"
    Task.model_validate(d)
    d["configs"][0]["sizes"]["k"] = 0.5
    with pytest.raises(ValidationError, match=r"dim 'k' the value 0.5"):
        Task.model_validate(d)
