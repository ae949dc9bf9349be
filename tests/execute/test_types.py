from cudaperf.execute.types import Candidate, ConfigResult, ExecResult, Status, Timing, geomean


def test_timing_summary():
    t = Timing.of([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (t.median_us, t.min_us, t.max_us, t.trials) == (3.0, 1.0, 5.0, 5)
    assert t.iqr_us == 2.0


def test_exec_result_json_round_trip():
    cr = ConfigResult(config="a", held_out=True, correct=True, timing=Timing.of([1.0]))
    r = ExecResult(status=Status.OK, mode="full", task_id="t", candidate_hash="h", configs=[cr])
    assert ExecResult.model_validate_json(r.model_dump_json()) == r
    assert r.ok and not r.model_copy(update={"status": Status.COMPILED}).ok


def test_candidate_hash_ignores_label():
    assert Candidate(code="x", id="a").hash == Candidate(code="x", id="b").hash


def test_geomean():
    assert geomean([2.0, 8.0]) == 4.0
    assert geomean([]) is None


def test_the_speedup_list_names_every_speedup_field_and_its_timing():
    from cudaperf.execute.types import SPEEDUP_FIELDS, SPEEDUPS

    declared = {f for f in ExecResult.model_fields if f.startswith("speedup_")}
    assert set(SPEEDUP_FIELDS) == declared and len(SPEEDUP_FIELDS) == len(declared)
    timings = {f for f in ConfigResult.model_fields if f.endswith("_timing")}
    assert {t for _, t in SPEEDUPS.values()} == timings


def test_protections_line_only_when_something_is_missing():
    from cudaperf.execute.types import Protection, protections_line

    base = dict(status=Status.OK, mode="full", task_id="t", candidate_hash="h")
    full = Protection(stage="run", active=("mount_ns", "seccomp"))
    weak = Protection(stage="run", active=("seccomp",), missing=("mount_ns: refused",))
    good = ExecResult(**base, protections=[full])
    assert protections_line([good, good]) == ""
    line = protections_line([good, ExecResult(**base, protections=[weak])])
    assert "\n" not in line and "1 of 2" in line and "mount_ns: refused" in line
    assert Protection.of("build", {}).missing == ("all: the stage ran unconfined",)
    got = Protection.of("run", {"active": ["mount_ns"], "missing": {"seccomp": "EINVAL"}})
    assert got.active == ("mount_ns",) and got.missing == ("seccomp: EINVAL",)


def test_phases_add_up_by_name_in_sorted_order():
    from cudaperf.execute.types import sum_phases

    parts = [{"time": 0.1234, "call": 1.0}, {"call": 0.5004}, {}]
    assert sum_phases(parts) == {"call": 1.5, "time": 0.123}
    assert list(sum_phases(parts)) == ["call", "time"]
    assert sum_phases(parts, digits=None)["call"] == 1.5004
    assert sum_phases(iter(parts), digits=1) == {"call": 1.5, "time": 0.1}
