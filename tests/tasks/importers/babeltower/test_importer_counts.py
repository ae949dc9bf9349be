"""BabelTower importer: wrappers that read array contents on the host, and lengths held in an
array (issue #7), on hand-written rows."""

from __future__ import annotations

import numpy as np

from cudaperf.tasks.importers.babeltower import check as refcheck
from cudaperf.tasks.inputs import make_inputs
from cudaperf.tasks.model import Distribution, InputConfig, Param, Role, Task
from tests.tasks.importers.babeltower.helpers import imported, needs_gcc, row, wrapper


def _row(i, cpp, cuda, tests, params, body):
    return row(i, cpp, cuda, tests, wrapper(i, params, body))


ROWS = [
    # 0: the length of `v` is a count stored in `len[0]`; the wrapper reads it on the host for
    #    its allocations and the block size (at most 1024 threads per block)
    _row(
        0,
        "void halve ( const int * len , float * v ) { int n = len [ 0 ] ; for ( int i = 0 ; "
        "i < n ; i ++ ) v [ i ] = v [ i ] * 0.5f ; }",
        "__global__ void halveK ( const int * len , float * v ) { int i = threadIdx . x ; if "
        "( i < len [ 0 ] ) v [ i ] = v [ i ] * 0.5f ; }",
        [
            "int l1[] = {3};\nfloat v1[] = {1, 2, 3};\nwrapper(halve, l1, v1);\n",
            "int l2[] = {4};\nfloat v2[] = {2, 4, 6, 8};\nwrapper(halve, l2, v2);\n",
        ],
        "const int* len, float* v",
        "int *d_len; float *d_v;\n"
        "cudaMalloc((void**)&d_len, sizeof(int));\n"
        "cudaMalloc((void**)&d_v, len[0] * sizeof(float));\n"
        "cudaMemcpy(d_len, len, sizeof(int), cudaMemcpyHostToDevice);\n"
        "cudaMemcpy(d_v, v, len[0] * sizeof(float), cudaMemcpyHostToDevice);\n"
        "halveK<<<1, len[0]>>>(d_len, d_v);\n"
        "cudaMemcpy(v, d_v, len[0] * sizeof(float), cudaMemcpyDeviceToHost);\n"
        "cudaFree(d_len);\ncudaFree(d_v);",
    ),
    # 1: tallies `keys[i] / 10` into `tally`; the wrapper scans the keys on the host for the
    #    largest bin to size (and zero) its copy of `tally`. Test 2's key 30 lands in bin 3,
    #    the last of a four-element tally; test 3's key 40 lands past its end
    _row(
        1,
        "void tallyBins ( int n , const int * keys , int * tally ) { for ( int i = 0 ; i < n ; "
        "i ++ ) tally [ keys [ i ] / 10 ] += 1 ; }",
        "__global__ void tallyK ( int n , const int * keys , int * tally ) { int i = blockIdx "
        ". x * blockDim . x + threadIdx . x ; if ( i < n ) atomicAdd ( & tally [ keys [ i ] / "
        "10 ] , 1 ) ; }",
        [
            "int k1[] = {0, 15, 22, 9};\nint t1[] = {0, 0, 0, 0};\n"
            "wrapper(tallyBins, 4, k1, t1);\n",
            "int k2[] = {5, 30, 12, 7};\nint t2[] = {0, 0, 0, 0};\n"
            "wrapper(tallyBins, 4, k2, t2);\n",
            "int k3[] = {40, 1, 2, 3};\nint t3[] = {0, 0, 0, 0};\nwrapper(tallyBins, 4, k3, t3);\n",
        ],
        "int n, const int* keys, int* tally",
        "int *d_keys, *d_tally;\n"
        "cudaMalloc((void**)&d_keys, n * sizeof(int));\n"
        "cudaMemcpy(d_keys, keys, n * sizeof(int), cudaMemcpyHostToDevice);\n"
        "int top = 0;\n"
        "for (int i = 0; i < n; ++i) { if (keys[i] / 10 > top) top = keys[i] / 10; }\n"
        "cudaMalloc((void**)&d_tally, (top + 1) * sizeof(int));\n"
        "cudaMemset(d_tally, 0, (top + 1) * sizeof(int));\n"
        "tallyK<<<(n + 255) / 256, 256>>>(n, d_keys, d_tally);\n"
        "cudaMemcpy(tally, d_tally, (top + 1) * sizeof(int), cudaMemcpyDeviceToHost);\n"
        "cudaFree(d_keys);\ncudaFree(d_tally);",
    ),
    # 2: the wrapper writes an array on the host (no host copy can stand in for that)
    _row(
        2,
        "void bump ( float * v , int n ) { for ( int i = 0 ; i < n ; i ++ ) v [ i ] += 1 ; }",
        "__global__ void bumpK ( float * v , int n ) { int i = blockIdx . x * blockDim . x + "
        "threadIdx . x ; if ( i < n ) v [ i ] += 1 ; }",
        ["float v1[] = {1, 2};\nwrapper(bump, v1, 2);\n"],
        "float* v, int n",
        "float *d_v;\ncudaMalloc((void**)&d_v, n * sizeof(float));\n"
        "v[0] = v[0];\n"
        "cudaMemcpy(d_v, v, n * sizeof(float), cudaMemcpyHostToDevice);\n"
        "bumpK<<<(n + 255) / 256, 256>>>(d_v, n);\n"
        "cudaMemcpy(v, d_v, n * sizeof(float), cudaMemcpyDeviceToHost);\ncudaFree(d_v);",
    ),
]


unchecked = imported(ROWS, "unchecked", check_references=False)
checked = imported(ROWS, "checked", jobs=2)


def test_length_held_in_an_array_becomes_a_dim(unchecked):
    _, tasks = unchecked
    t = tasks["0"]
    assert t.dims == ["len_0"]
    assert {p.name: p.length for p in t.signature} == {"len": "1", "v": "len_0"}
    assert [c.sizes["len_0"] for c in t.configs[:2]] == [3, 4]
    for c in t.configs:  # the count array holds the dim's value in every config
        assert c.param_distributions["len"] == Distribution(kind="constant", value=c.sizes["len_0"])
        arrays = make_inputs(t, c, 0, 1)
        assert arrays[0].tolist() == [c.sizes["len_0"]] and arrays[1].size == c.sizes["len_0"]
    # generated sizes scale the dim, but the launch's one block holds at most 1024 threads
    generated = [c.sizes["len_0"] for c in t.configs if c.name in ("medium", "large")]
    assert generated and max(generated) <= 1024


def test_host_reads_come_from_a_copy_of_the_device_array(unchecked):
    _, tasks = unchecked
    launch = tasks["0"].implementations[0].code.split("static void", 1)[1]
    assert "cudaMemcpy(h_len, len, (size_t)(1) * sizeof(int), cudaMemcpyDeviceToHost);" in launch
    assert "halveK<<<1, h_len[0]>>>(len, v);" in launch and "free(h_len);" in launch
    scan = tasks["1"].implementations[0].code.split("static void", 1)[1]
    assert "cudaMemcpy(h_keys, keys, (size_t)(n) * sizeof(int), cudaMemcpyDeviceToHost);" in scan
    assert "h_keys[i] / 10" in scan and "tallyK<<<(n + 255) / 256, 256>>>(n, keys, tally);" in scan


def test_host_writes_still_skip_the_row(unchecked):
    report, tasks = unchecked
    assert "2" not in tasks
    assert ("row 2", "wrapper reads or writes array contents on the host") in report.skipped


@needs_gcc
def test_extreme_values_find_an_overrun_a_random_draw_misses(checked):
    report, tasks = checked
    t = tasks["1"]
    assert {p.name: p.length for p in t.signature if p.is_array} == {"keys": "n", "tally": "n"}
    names = [c.name for c in t.configs]
    assert "test1" in names and "test3" not in names  # key 40 → bin 4 of a 4-element tally
    assert (
        "row 1 test3",
        "given test left out: C reference overruns an array (AddressSanitizer)",
    ) in report.skipped
    assert "medium" in names  # keys keep test 1's range [0, 22], the tally grows with n


def test_extreme_inputs_hit_both_ends_of_integer_ranges():
    t = Task(
        id="x",
        kind="c2cuda",
        family="x",
        source="-",
        entry="f",
        signature=[
            Param(name="idx", ctype="int", role=Role.IN, length="n"),
            Param(name="w", ctype="float", role=Role.IN, length="n"),
            Param(name="n", ctype="int", role=Role.SCALAR),
        ],
        configs=[
            InputConfig(
                name="c",
                sizes={"n": 5},
                param_distributions={"idx": Distribution(kind="randint", low=2, high=9)},
            )
        ],
    )
    cfg = t.configs[0]
    arrays = make_inputs(t, cfg, 0, 1)
    w = arrays[1].copy()
    assert refcheck.extreme_inputs(t, cfg, arrays)
    assert arrays[0].tolist() == [8, 2, 8, 2, 8] and np.array_equal(arrays[1], w)
    plain = cfg.model_copy(update={"param_distributions": {}})
    assert not refcheck.extreme_inputs(t, plain, make_inputs(t, plain, 0, 1))
