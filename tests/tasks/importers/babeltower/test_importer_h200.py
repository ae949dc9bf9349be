"""BabelTower importer fixes for the failures seen on the H200 (issue #7), on hand-written rows."""

from __future__ import annotations

from cudaperf.execute.checks import run_checks
from cudaperf.tasks.importers.babeltower.importer import MAX_WORK
from cudaperf.tasks.importers.ctok import loop_work, tokenize
from cudaperf.tasks.model import Role, eval_length
from tests.tasks.importers.babeltower.helpers import import_rows, row


def _wrapper(name: str, params: str, body: str) -> str:
    return f"void {name}_invoke_in_cpp({params}) {{\n{body}\n}}"


_row = row


ROWS = [
    # 0: the kernel is named like a CUDA runtime API; n = 0 in one test
    _row(
        0,
        "void cpuScale ( float * x , int n ) { for ( int i = 0 ; i < n ; i ++ ) x [ i ] *= 2 ; }",
        "__global__ void cudaScale ( float * x , int n ) { int i = blockIdx . x * blockDim . x "
        "+ threadIdx . x ; if ( i < n ) x [ i ] *= 2 ; }",
        [
            "float a[] = {1, 2, 3};\nwrapper(cpuScale, a, 3);\n",
            "float b[] = {1, 2};\nwrapper(cpuScale, b, 2);\n",
            "float c[4];\nwrapper(cpuScale, c, 0);\n",
        ],
        _wrapper("s", "float* x, int n", "cudaScale<<<(n + 255) / 256, 256>>>(x, n);"),
    ),
    # 1: the C function writes nothing (its result is a discarded local)
    _row(
        1,
        "void maxOf ( float * a , int n ) { float m = 0 ; for ( int i = 0 ; i < n ; i ++ ) "
        "if ( a [ i ] > m ) m = a [ i ] ; }",
        "__global__ void maxK ( float * a , int n ) { int i = threadIdx . x ; if ( i < n / 2 ) "
        "a [ i ] = a [ i ] > a [ i + n / 2 ] ? a [ i ] : a [ i + n / 2 ] ; }",
        ["float a[] = {1, 2};\nwrapper(maxOf, a, 2);\n"],
        _wrapper("m", "float* a, int n", "maxK<<<1, n>>>(a, n);"),
    ),
    # 2: the kernel writes `a`, which the C function only reads; one block of n threads
    _row(
        2,
        "void addTo ( float * a , float * b , int n ) { for ( int i = 0 ; i < n ; i ++ ) "
        "b [ i ] += a [ i ] ; }",
        "__global__ void addK ( float * a , float * b , int n ) { int i = threadIdx . x ; "
        "if ( i < n ) { b [ i ] += a [ i ] ; a [ i ] = 0 ; } }",
        ["float a[] = {1, 2, 3};\nfloat b[] = {0, 0, 0};\nwrapper(addTo, a, b, 3);\n"],
        _wrapper("a", "float* a, float* b, int n", "addK<<<1, n>>>(a, b, n);"),
    ),
    # 3: a kernel without bounds check, launched on whole blocks of 256; C zero-starts `c`
    _row(
        3,
        "void host_add ( float * c , float * a , int n ) { for ( int k = 0 ; k < n ; k ++ ) "
        "c [ k ] += a [ k ] ; }",
        "__global__ void gpu_add ( float * c , float * a , int n ) { int j = blockIdx . x * "
        "blockDim . x + threadIdx . x ; c [ j ] = a [ j ] ; }",
        [
            "float c[3] = {0};\nfloat a[] = {1, 2, 3};\nwrapper(host_add, c, a, 3);\n",
            "float c[1] = {0};\nfloat a[] = {4};\nwrapper(host_add, c, a, 1);\n",
        ],
        _wrapper(
            "h",
            "float* c, float* a, int n",
            "int t = 256;\nint g = (n + t - 1) / t;\ngpu_add<<<g, t>>>(c, a, n);",
        ),
    ),
    # 4: a matrix product: generated sizes bounded by the C loop work; output written after
    #    a 2-D launch with dim3
    _row(
        4,
        "void mm ( float * A , float * B , float * C , int n ) { for ( int i = 0 ; i < n ; i ++ )"
        " for ( int j = 0 ; j < n ; j ++ ) { float s = 0 ; for ( int k = 0 ; k < n ; k ++ ) "
        "s += A [ i * n + k ] * B [ k * n + j ] ; C [ i * n + j ] = s ; } }",
        "__global__ void mmK ( float * A , float * B , float * C , int n ) { int i = blockIdx . y "
        "* blockDim . y + threadIdx . y ; int j = blockIdx . x * blockDim . x + threadIdx . x ; "
        "if ( i < n && j < n ) { float s = 0 ; for ( int k = 0 ; k < n ; k ++ ) s += "
        "A [ i * n + k ] * B [ k * n + j ] ; C [ i * n + j ] = s ; } }",
        [
            "float A[4] = {1, 2, 3, 4};\nfloat B[4] = {1, 0, 0, 1};\nfloat C[4];\n"
            "wrapper(mm, A, B, C, 2);\n"
        ],
        _wrapper(
            "mm",
            "float* A, float* B, float* C, int n",
            "dim3 block(16, 16);\ndim3 grid((n + block.x - 1) / block.x, (n + 15) / 16);\n"
            "mmK<<<grid, block>>>(A, B, C, n);",
        ),
    ),
    # 5: `out` is longer than what the C code writes (n + 1 elements, n written)
    _row(
        5,
        "void fill ( float * out , int n ) { for ( int i = 0 ; i < n ; i ++ ) out [ i ] = i ; }",
        "__global__ void fillK ( float * out , int n ) { int i = blockIdx . x * blockDim . x + "
        "threadIdx . x ; if ( i < n ) out [ i ] = i ; }",
        [
            "float o[2];\nwrapper(fill, o, 1);\n",
            "float p[4];\nwrapper(fill, p, 3);\n",
        ],
        _wrapper("f", "float* out, int n", "fillK<<<(n + 127) / 128, 128>>>(out, n);"),
    ),
]


def _import(tmp_path, rows=ROWS):
    return import_rows(tmp_path, rows)


def test_cuda_named_kernel_renamed_passes_static_checks(tmp_path):
    _, tasks = _import(tmp_path)
    code = tasks["0"].implementations[0].code
    assert "bt_cudaScale<<<" in code and "void bt_cudaScale(" in code
    assert run_checks(code) == []


def test_empty_test_left_out_and_reported(tmp_path):
    report, tasks = _import(tmp_path)
    assert [c.name for c in tasks["0"].configs] == ["test1", "test2", "medium", "large"]
    assert tasks["0"].config("test2").held_out  # the held-out test moved to one that runs
    assert (
        "row 0 test3",
        "given test left out: an empty array (CUDA cannot launch an empty grid)",
    ) in report.skipped


def test_c_function_writing_nothing_is_skipped(tmp_path):
    report, tasks = _import(tmp_path)
    assert "1" not in tasks
    assert ("row 1", "the C function writes no array (no output to compare)") in report.skipped


def test_array_the_kernel_writes_is_not_read_only(tmp_path):
    _, tasks = _import(tmp_path)
    roles = {p.name: p.role for p in tasks["2"].signature}
    assert roles == {"a": Role.INOUT, "b": Role.INOUT, "n": Role.SCALAR}
    assert "const float* a" not in tasks["2"].implementations[0].code
    # one block of n threads: generated sizes stop at 1024 threads per block
    assert max(c.sizes["n"] for c in tasks["2"].configs) <= 1024


def test_unguarded_kernel_runs_only_on_whole_blocks(tmp_path):
    report, tasks = _import(tmp_path)
    t = tasks["3"]
    assert [c.name for c in t.configs] == ["medium", "large"]
    assert all(c.sizes["n"] % 256 == 0 for c in t.configs)
    why = "given test left out: more threads than array elements for a kernel without bounds checks"
    assert ("row 3 test1", why) in report.skipped
    # every test starts `c` at zero (the kernel assigns, the C code accumulates): kept
    assert t.config("large").param_distributions["c"].value == 0.0


def test_generated_sizes_bounded_by_loop_work(tmp_path):
    _, tasks = _import(tmp_path)
    t = tasks["4"]
    body = tokenize(t.source[t.source.index("{") :])
    for c in t.configs:
        work = loop_work(body, lambda s, c=c: eval_length(s, c.sizes))
        assert work <= MAX_WORK
    assert max(c.sizes["n"] for c in t.configs) >= 256


def test_out_longer_than_written_is_inout(tmp_path):
    _, tasks = _import(tmp_path)
    (out,) = [p for p in tasks["5"].signature if p.name == "out"]
    assert (out.length, out.role) == ("n+1", Role.INOUT)


def test_loop_work_counts_nested_loops():
    body = tokenize(
        "{ for ( int i = 0 ; i < n ; i ++ ) for ( int j = 0 ; j <= m ; j ++ ) { x ++ ; } "
        "for ( int k = 0 ; k < 5 ; k ++ ) y ++ ; }"
    )
    sizes = {"n": 3, "m": 4}
    assert loop_work(body, lambda s: eval_length(s, sizes)) == 3 * 5 + 5
