from cudaperf.execute.sanity import escape_message, roofline_message
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
