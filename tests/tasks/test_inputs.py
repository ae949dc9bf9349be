"""Input drawing (`tasks.inputs`): seeded by the salt, outputs poisoned, valid CSR row
pointers, and the second (separating) distribution that keeps integer arrays valid."""

import numpy as np

from cudaperf.tasks.inputs import make_inputs, separating_distribution, separating_range
from tests.execute.catalog import rowsum_task


def test_inputs_depend_on_secret_salt_and_poison_outputs():
    t = rowsum_task()
    cfg = t.configs[0]
    a, b, c = (make_inputs(t, cfg, 0, s) for s in (1, 1, 2))
    assert np.array_equal(a[2], b[2]) and not np.array_equal(a[2], c[2])
    assert a[2].min() >= 0.5 and a[2].max() <= 1.5  # positive default distribution
    assert np.isnan(a[3]).all() and a[3].shape == (64,)


def test_row_ptr_inputs_are_valid_csr_and_seeded():
    from cudaperf.tasks.model import Distribution

    t = rowsum_task()
    cfg = t.configs[0]
    name = next(p.name for p in t.signature if p.is_array and p.role.value == "in")
    for skew in (0.0, 1.5):
        d = Distribution(kind="row_ptr", nnz=1000, skew=skew)
        cfg2 = cfg.model_copy(update={"param_distributions": {name: d}})
        for salt in (1, 2, 3):
            arrays = make_inputs(t, cfg2, 0, salt)
            i = [p.name for p in t.signature].index(name)
            rp = arrays[i]
            assert rp[0] == 0 and rp[-1] == 1000 and np.all(np.diff(rp) >= 0)
        a, b = (make_inputs(t, cfg2, 0, 7)[i] for _ in range(2))
        assert np.array_equal(a, b)


def test_second_distribution_keeps_integer_and_index_arrays_valid():
    from cudaperf.tasks.model import Distribution

    assert separating_distribution(Distribution(kind="randint", low=0, high=64), "int32") is None
    assert separating_distribution(Distribution(kind="row_ptr", nnz=10), "int64") is None
    assert separating_distribution(Distribution(kind="constant", value=1.0), "float32") is None
    d = separating_distribution(Distribution(kind="normal", mean=1.0, std=0.5), "float32")
    assert d.kind == "uniform" and d.low == -5.0 and d.high == 5.0
    assert separating_range(0.5, 1.5) == (-3.0, 3.0)
    t = rowsum_task()
    own, sep = make_inputs(t, t.configs[0], 0, 1), make_inputs(t, t.configs[0], 0, 1, True)
    assert own[0] == sep[0] and own[1] == sep[1]  # scalars (sizes) unchanged
