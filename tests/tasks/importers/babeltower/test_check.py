"""BabelTower importer's reference check (issue #7), on hand-written rows."""

from __future__ import annotations

from cudaperf.tasks.importers.babeltower import check as refcheck
from tests.tasks.importers.babeltower.helpers import import_rows, imported, needs_gcc, row, wrapper


def _row(i, cpp, cuda, tests, launch, params):
    return row(i, cpp, cuda, tests, wrapper(i, params, launch))


_KERNEL = (
    "__global__ void {k} ( float * out , float * a , int n ) {{ int i = blockIdx . x * "
    "blockDim . x + threadIdx . x ; if ( i < n ) out [ i ] = a [ i ] ; }}"
)
ROWS = [
    # 0: reads a[i + 1] only once i >= 16: clean on the given tests (n <= 4), overruns `a`
    #    (length n) on the generated sizes
    _row(
        0,
        "void late ( float * out , float * a , int n ) { for ( int i = 0 ; i < n ; i ++ ) { "
        "out [ i ] = a [ i ] ; if ( i >= 16 ) out [ i ] += a [ i + 1 ] ; } }",
        _KERNEL.format(k="lateK"),
        [
            "float o[2];\nfloat a[] = {1, 2};\nwrapper(late, o, a, 2);\n",
            "float o[4];\nfloat a[] = {1, 2, 3, 4};\nwrapper(late, o, a, 4);\n",
            "float o[3];\nfloat a[] = {1, 2, 3};\nwrapper(late, o, a, 3);\n",
        ],
        "lateK<<<(n + 255) / 256, 256>>>(out, a, n);",
        "float* out, float* a, int n",
    ),
    # 1: writes out[n]: overruns on every config, the given tests too
    _row(
        1,
        "void always ( float * out , float * a , int n ) { for ( int i = 0 ; i <= n ; i ++ ) "
        "out [ i ] = a [ 0 ] ; }",
        _KERNEL.format(k="alwaysK"),
        [
            "float o[2];\nfloat a[] = {1, 2};\nwrapper(always, o, a, 2);\n",
            "float o[3];\nfloat a[] = {1, 2, 3};\nwrapper(always, o, a, 3);\n",
        ],
        "alwaysK<<<(n + 255) / 256, 256>>>(out, a, n);",
        "float* out, float* a, int n",
    ),
    # 2: a += 1 on INT_MAX in the first test (signed overflow); -INT_MIN (outside int32) in
    #    the fourth
    _row(
        2,
        "void inc ( int * a , int n ) { for ( int i = 0 ; i < n ; i ++ ) a [ i ] += 1 ; }",
        "__global__ void incK ( int * a , int n ) { int i = blockIdx . x * blockDim . x + "
        "threadIdx . x ; if ( i < n ) a [ i ] += 1 ; }",
        [
            "int a[] = {INT_MAX};\nwrapper(inc, a, 1);\n",
            "int a[] = {1, 2, 3};\nwrapper(inc, a, 3);\n",
            "int a[] = {4, 5};\nwrapper(inc, a, 2);\n",
            "int a[] = {-INT_MIN, 0};\nwrapper(inc, a, 2);\n",
        ],
        "incK<<<(n + 255) / 256, 256>>>(a, n);",
        "int* a, int n",
    ),
]


def _import(tmp_path, **kw):
    return import_rows(tmp_path, ROWS, **kw)


checked = imported(ROWS, "checked", jobs=2)


@needs_gcc
def test_generated_config_that_overruns_is_dropped_row_kept(checked):
    report, tasks = checked
    t = tasks["0"]
    assert [c.name for c in t.configs] == ["test1", "test2", "test3"]
    assert [c.held_out for c in t.configs] == [False, False, True]
    why = "generated config dropped: C reference overruns an inferred array length"
    for name in ("medium", "large"):
        assert (f"row 0 {name}", f"{why} (AddressSanitizer)") in report.skipped


@needs_gcc
def test_row_overrunning_on_its_given_tests_too_is_skipped(checked):
    report, tasks = checked
    assert "1" not in tasks
    why = "no config the C reference runs cleanly on (first: C reference overruns an array"
    assert ("row 1", f"{why} (AddressSanitizer))") in report.skipped
    assert not [s for s in report.skipped if s[0].startswith("row 1 ")]  # one reason per row


@needs_gcc
def test_signed_overflow_and_out_of_range_given_tests_left_out(checked):
    report, tasks = checked
    t = tasks["2"]
    assert [c.name for c in t.configs] == ["test2", "test3", "medium", "large"]
    assert [c.held_out for c in t.configs] == [False, True, False, False]
    ub = "given test left out: C reference has undefined behaviour (UBSan: signed integer overflow)"
    assert ("row 2 test1", ub) in report.skipped
    rng = "given test left out: a value outside its C type's range"
    assert ("row 2 input 4", rng) in report.skipped  # at parse time, before any config


@needs_gcc
def test_summary_says_the_check_ran(checked):
    report, tasks = checked
    s = report.summary()
    assert s["reference_check"]["mode"].startswith("gcc -O1 -g -fsanitize=address,undefined")
    assert s["reference_check"]["configs_checked"] == 5 + 4 + 5
    assert s["configs"] == sum(len(t.configs) for t in tasks.values()) == 3 + 4


@needs_gcc
def test_single_remaining_config_is_not_held_out(tmp_path, monkeypatch):
    def fake(tasks, **_):  # every config fails but test2 and large
        bad = refcheck.Problem("overrun", "heap-buffer-overflow")
        keep = {"test2", "large"}
        return [{c.name: bad for c in t.configs if c.name not in keep} for t in tasks]

    monkeypatch.setattr(refcheck, "check_tasks", fake)
    _, tasks = _import(tmp_path)
    t = tasks["0"]
    assert [(c.name, c.held_out) for c in t.configs] == [("test2", False), ("large", False)]


def test_without_gcc_nothing_is_checked_and_it_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(refcheck.shutil, "which", lambda _: None)
    report, tasks = _import(tmp_path)
    assert report.summary()["reference_check"]["mode"] == "skipped (gcc not found)"
    assert report.summary()["reference_check"]["configs_checked"] == 0
    assert [c.name for c in tasks["0"].configs] == ["test1", "test2", "test3", "medium", "large"]
    assert "1" in tasks  # unchecked: imported as before
    assert not [s for s in report.skipped if "C reference" in s[1]]


def test_check_can_be_turned_off(tmp_path, monkeypatch):
    def boom(*_, **__):
        raise AssertionError("checked although turned off")

    monkeypatch.setattr(refcheck, "check_tasks", boom)
    report, _ = _import(tmp_path, validate=False)  # the CLI's --no-validate
    assert report.summary()["reference_check"]["mode"] == "skipped (turned off)"
    report, _ = _import(tmp_path, check_references=False)
    assert report.summary()["reference_check"]["mode"] == "skipped (turned off)"


def test_classify_sanitizer_reports():
    c = refcheck.classify
    asan = "==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6 at pc 0x5"
    assert c(1, asan) == refcheck.Problem("overrun", "heap-buffer-overflow")
    ub = "ref.c:3:12: runtime error: signed integer overflow: 2147483647 + 1 cannot be ..."
    assert c(1, ub) == refcheck.Problem("ub", "signed integer overflow")
    assert c(-11, "").kind == "crash"
