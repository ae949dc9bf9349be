"""BabelTower importer: rows it used to skip but can handle (issue #7), on hand-written rows."""

from __future__ import annotations

from cudaperf.tasks.importers.babeltower.inputs import ArrayArg
from cudaperf.tasks.importers.babeltower.lengths import choose_length
from tests.tasks.importers.babeltower.helpers import import_rows, imported, needs_gcc, row, wrapper


def _row(i, cpp, cuda, tests, params, body):
    return row(i, cpp, cuda, tests, wrapper(i, params, body))


ROWS = [
    # 0: per column j < n of a rows x n matrix, one sum into acc[j]; the tests declare `acc`
    #    with `rows` elements (shorter than the n the C code writes), so `rows` matches the
    #    declared length exactly and the C reference overruns it; the wrapper allocates n
    _row(
        0,
        "void colSum ( const float * mat , float * acc , int rows , int n ) { for ( int j = 0 ; "
        "j < n ; j ++ ) { float s = 0 ; for ( int i = 0 ; i < rows ; i ++ ) s += mat [ i * n + "
        "j ] ; acc [ j ] = s ; } }",
        "__global__ void colSumK ( const float * mat , float * acc , int rows , int n ) { int j "
        "= blockIdx . x * blockDim . x + threadIdx . x ; if ( j < n ) { float s = 0 ; for ( int "
        "i = 0 ; i < rows ; i ++ ) s += mat [ i * n + j ] ; acc [ j ] = s ; } }",
        [
            "float m1[] = {1, 2, 3, 4};\nfloat a1[1];\nwrapper(colSum, m1, a1, 1, 4);\n",
            "float m2[] = {1, 2, 3, 4, 5, 6};\nfloat a2[2];\nwrapper(colSum, m2, a2, 2, 3);\n",
        ],
        "const float* mat, float* acc, int rows, int n",
        "float *d_mat, *d_acc;\n"
        "cudaMalloc((void**)&d_mat, rows * n * sizeof(float));\n"
        "cudaMalloc((void**)&d_acc, n * sizeof(float));\n"
        "cudaMemcpy(d_mat, mat, rows * n * sizeof(float), cudaMemcpyHostToDevice);\n"
        "colSumK<<<(n + 127) / 128, 128>>>(d_mat, d_acc, rows, n);\n"
        "cudaMemcpy(acc, d_acc, n * sizeof(float), cudaMemcpyDeviceToHost);\n"
        "cudaFree(d_mat);\ncudaFree(d_acc);",
    ),
    # 1: the wrapper stages the arrays through `new[]` / `malloc` buffers (memcpy in and out,
    #    delete[] / free) and launches on those
    _row(
        1,
        "void negate ( double * a , double * b , int len ) { for ( int i = 0 ; i < len ; i ++ ) "
        "b [ i ] = - a [ i ] ; }",
        "__global__ void negK ( double * a , double * b , int len ) { int i = blockIdx . x * "
        "blockDim . x + threadIdx . x ; if ( i < len ) b [ i ] = - a [ i ] ; }",
        [
            "double x[] = {1, -2, 3};\ndouble y[3];\nwrapper(negate, x, y, 3);\n",
            "double x[] = {4, 5};\ndouble y[2];\nwrapper(negate, x, y, 2);\n",
        ],
        "double* a, double* b, int len",
        "double *sa = new double[len];\ndouble *sb;\n"
        "sb = (double*)malloc(len * sizeof(double));\n"
        "memcpy(sa, a, len * sizeof(double));\n"
        "negK<<<len, 1>>>(sa, sb, len);\n"
        "memcpy(b, sb, len * sizeof(double));\n"
        "delete[] sa;\nfree(sb);",
    ),
    # 2: a kernel without bounds checks that ignores blockIdx: every block writes the same
    #    first 16 elements, so it is in bounds from n >= 16 although the grid has more
    #    threads than n
    _row(
        2,
        "void ones ( float * out , int n ) { for ( int i = 0 ; i < 16 ; i ++ ) out [ i ] = 1 ; }",
        "__global__ void onesK ( float * out , int n ) { out [ threadIdx . x ] = 1 ; }",
        ["float o[4];\nwrapper(ones, o, 4);\n", "float o[8];\nwrapper(ones, o, 8);\n"],
        "float* out, int n",
        "onesK<<<n / 16 + 1, 16>>>(out, n);",
    ),
]


def _import(tmp_path, **kw):
    return import_rows(tmp_path, ROWS, **kw)


checked = imported(ROWS, "checked", jobs=2)


@needs_gcc
def test_overrun_on_lengths_from_tests_retried_with_wrapper_lengths(checked):
    report, tasks = checked
    lengths = {p.name: p.length for p in tasks["0"].signature if p.is_array}
    assert lengths == {"mat": "rows * n", "acc": "n"}
    assert [c.name for c in tasks["0"].configs] == ["test1", "test2", "medium", "large"]
    assert not [s for s in report.skipped if s[0].startswith("row 0")]
    assert report.summary()["reference_check"]["wrapper_lengths"] == 1


def test_without_check_lengths_still_from_tests(tmp_path):
    _, tasks = _import(tmp_path, check_references=False)
    lengths = {p.name: p.length for p in tasks["0"].signature if p.is_array}
    assert lengths["acc"] == "rows"  # exact on both tests: only the check shows it too short


def test_wrapper_staging_through_host_buffers_is_dropped(tmp_path):
    report, tasks = _import(tmp_path, check_references=False)
    assert not [s for s in report.skipped if s[0].startswith("row 1")]
    code = tasks["1"].implementations[0].code
    assert "negK<<<len, 1>>>(a, b, len);" in code
    for word in ("new", "malloc", "memcpy", "delete", "free(", "sa", "sb"):
        assert word not in code.split("static void", 1)[1]


def test_blockless_unguarded_kernel_counts_one_block(tmp_path):
    report, tasks = _import(tmp_path, check_references=False)
    t = tasks["2"]
    assert [c.name for c in t.configs] == ["medium", "large"]
    assert all(c.sizes["n"] >= 16 for c in t.configs)
    why = "given test left out: more threads than array elements for a kernel without bounds checks"
    assert ("row 2 test1", why) in report.skipped and ("row 2 test2", why) in report.skipped


def test_length_choice_can_prefer_the_wrapper():
    tests = [[ArrayArg(1, None), 1, 3], [ArrayArg(2, None), 2, 3]]
    names, ints = {1: "m", 2: "n"}, ["m", "n"]
    assert choose_length(0, tests, names, ints, "n", {"j", "n"}) == "m"  # exact on both
    assert choose_length(0, tests, names, ints, "n", {"j", "n"}, prefer_wrapper=True) == "n"
    # a wrapper expression shorter than a test's declared length still does not fit
    assert choose_length(0, tests, names, ints, "m-1", set(), prefer_wrapper=True) == "m"
