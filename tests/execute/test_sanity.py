from cudaperf.execute.sanity import escape_message, roofline_message
from cudaperf.execute.types import Timing


def t(us: float) -> Timing:
    return Timing.of([us])


def test_escape_is_flagged_only_when_wall_far_exceeds_events():
    assert escape_message(t(100), t(190)) == ""
    assert "escapes the timing events" in escape_message(t(40), t(500))


def test_roofline():
    assert roofline_message(1000, t(0.001), 1.0) == ""  # too few bytes to judge
    assert roofline_message(1 << 30, t(1000), 5000) == ""  # ~1074 GB/s: plausible
    assert "impossible" in roofline_message(1 << 30, t(10), 5000)
