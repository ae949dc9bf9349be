"""Dynamic sanity checks on a measured time, shared by the C→CUDA and PyTorch→CUDA tracks.

Each returns a rejection message, or "" when the time is plausible.
"""

from __future__ import annotations

from cudaperf.execute.types import Timing

__all__ = ["escape_message", "roofline_message"]

_MIN_ROOFLINE_BYTES = 1 << 20  # below this, launch overhead dominates and the check says nothing


def escape_message(t: Timing, wall: Timing) -> str:
    # Work on a side stream or a thread finishes after the end event; the device-wide sync
    # after each trial still waits for it, so the wall-clock time gives it away.
    if wall.median_us > 1.5 * t.median_us + 50.0:
        return (
            f"work escapes the timing events: event time {t.median_us:.1f} us but the call takes "
            f"{wall.median_us:.1f} us of wall time; launch on the default stream and use no "
            "threads"
        )
    return ""


def roofline_message(nbytes: int, t: Timing, max_gbs: float) -> str:
    # L2 is flushed before each trial, so every input byte must come from device memory: a
    # time implying more bytes per second than the card can move is impossible.
    if nbytes < _MIN_ROOFLINE_BYTES:
        return ""
    gbs = nbytes / (t.median_us * 1e3)
    if gbs > max_gbs:
        return f"reads {nbytes} input bytes in {t.median_us:.2f} us ({gbs:.0f} GB/s): impossible"
    return ""
