"""Task.dims: sizes that are not parameters (e.g. a count stored in an array's element 0)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cudaperf.execute.bulk.rows import task_content_hash
from cudaperf.tasks.inputs import make_inputs
from cudaperf.tasks.model import Distribution, InputConfig, Param, Role, Task


def _task(dims=("n_0",), sizes=None, length="n_0", **kw) -> Task:
    sizes = {"n_0": 6, "k": 2} if sizes is None else sizes
    return Task(
        id="t",
        kind="c2cuda",
        family="t",
        source="-",
        entry="f",
        signature=[
            Param(name="n", ctype="int", role=Role.IN, length="1"),
            Param(name="v", ctype="float", role=Role.INOUT, length=length),
            Param(name="k", ctype="int", role=Role.SCALAR),
        ],
        configs=[
            InputConfig(
                name="c",
                sizes=sizes,
                param_distributions={"n": Distribution(kind="constant", value=6)},
            )
        ],
        dims=list(dims),
        **kw,
    )


def test_lengths_may_name_dims_and_inputs_follow():
    t = _task()
    n, v, k = make_inputs(t, t.configs[0], 0, 1)
    assert n.tolist() == [6] and v.size == 6 and int(k) == 2
    assert Task.model_validate_json(t.model_dump_json()) == t


def test_dims_are_validated():
    with pytest.raises(ValidationError, match="not scalar parameters nor dims"):
        _task(dims=())
    with pytest.raises(ValidationError, match="no value for dim"):
        _task(sizes={"k": 2})
    with pytest.raises(ValidationError, match="are parameter names"):
        _task(dims=("n_0", "k"))
    with pytest.raises(ValidationError, match="duplicate dim"):
        _task(dims=("n_0", "n_0"))
    with pytest.raises(ValidationError, match="not scalar parameters nor dims"):
        _task(sizes={"n_0": 6, "k": 2, "m": 1})


def test_no_dims_serialise_and_hash_as_before_the_field():
    t = _task(dims=(), sizes={"k": 6}, length="k")
    assert "dims" not in t.model_dump_json() and "dims" not in t.model_dump()
    # the hash of a task without dims is the hash of its dump without the field
    assert "dims" in _task().model_dump_json()
    assert task_content_hash(t) != task_content_hash(t.model_copy(update={"dims": ["z"]}))
