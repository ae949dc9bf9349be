from cudaperf.execute.sanity import escape_message, outside_clock_message, roofline_message
from cudaperf.execute.types import Timing


def t(us: float) -> Timing:
    return Timing.of([us])


def test_escape_is_flagged_only_when_wall_far_exceeds_events():
    assert escape_message(t(100), t(190)) == ""
    assert "escapes the timing events" in escape_message(t(40), t(500))


def test_escape_ignores_preempted_trials():
    """Some trials' wall time inflated (the timing thread preempted) is not an escape; work
    that escapes shows in every trial, the fastest included."""
    event = Timing.of([1944.0] * 9)
    preempted = Timing.of([1990.0, 2010.0] + [3049.0] * 7)  # median 3049: 1.57x the events
    assert escape_message(event, preempted) == ""
    escaping = Timing.of([3010.0, 3020.0] + [3049.0] * 7)
    assert "fastest call" in escape_message(event, escaping)


def test_roofline():
    assert roofline_message(1000, t(0.001), 1.0) == ""  # too few bytes to judge
    assert roofline_message(1 << 30, t(1000), 5000) == ""  # ~1074 GB/s: plausible
    assert "impossible" in roofline_message(1 << 30, t(10), 5000)


def test_escape_bound_scales_with_short_kernels():
    """A 10 us kernel hiding 35 us of side work: a fixed 50 us allowance let it through; the
    bound is 1.5 x the event time + twice the measured empty-call overhead + 5 us."""
    assert "escapes" in escape_message(t(10), t(45), overhead_us=2.0)
    assert escape_message(t(10), t(14), overhead_us=2.0) == ""  # honest: events + overhead
    assert escape_message(t(10), t(45), overhead_us=15.0) == ""  # a slow sync is allowed for
    assert escape_message(t(2000), t(2900), overhead_us=2.0) == ""  # long kernels: 1.5x


def test_escape_default_keeps_the_fixed_allowance_for_callers_that_measure_no_overhead():
    assert escape_message(t(10), t(60)) == ""
    assert "escapes" in escape_message(t(10), t(70))


def test_outside_clock_rejects_times_the_trusted_side_contradicts():
    assert outside_clock_message(30.0, t(20)) == ""  # a burst costs about the event time
    assert outside_clock_message(75.0, t(20)) == ""  # 3x + 20 us of slack for a busy host
    assert "trusted clock" in outside_clock_message(4000.0, t(1))


def test_host_work_no_device_work_is_always_flagged():
    from cudaperf.execute.sanity import host_work_message

    assert "computed on the host" in host_work_message(20_000.0, 0.0, 0.05)
    assert "computed on the host" in host_work_message(50.0, 0.0, 0.05)  # however short


def test_host_work_a_low_share_counts_only_beyond_the_slack():
    from cudaperf.execute.sanity import HOST_SLACK_US, host_work_message

    assert "0.1%" in host_work_message(20_000.0, 20.0, 0.05)  # a token kernel, a host loop
    assert host_work_message(HOST_SLACK_US, 5.0, 0.05) == ""  # a short setup: allowed
    assert host_work_message(HOST_SLACK_US + 10.0, 5.0, 0.05) != ""  # just beyond it
    assert host_work_message(10_000.0, 600.0, 0.05) == ""  # 6% >= 5%
    assert host_work_message(10_000.0, 600.0, 0.07) != ""
    assert host_work_message(0.0, 5.0, 0.05) == ""  # no window measured: nothing to judge
