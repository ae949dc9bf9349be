"""Dynamic sanity checks on a measured time, shared by the C→CUDA and PyTorch→CUDA tracks.

Each returns a rejection message, or "" when the time is plausible.
"""

from __future__ import annotations

from cudaperf.execute.types import Timing

__all__ = ["escape_message", "roofline_message"]

_MIN_ROOFLINE_BYTES = 1 << 20  # below this, launch overhead dominates and the check says nothing


def escape_message(t: Timing, wall: Timing) -> str:
    # Work on a side stream or a thread finishes after the end event; the device-wide sync
    # after each trial still waits for it, so the wall-clock time gives it away. That happens
    # in every trial, so the *fastest* wall time is compared: a timing thread that the OS
    # preempts (busy CPUs, e.g. compiles beside the run) inflates some trials' wall time, and
    # on the H200 that rejected honest 2 ms kernels when the median was compared.
    if wall.min_us > 1.5 * t.median_us + 50.0:
        return (
            f"work escapes the timing events: event time {t.median_us:.1f} us but even the "
            f"fastest call takes {wall.min_us:.1f} us of wall time; launch on the default stream "
            "and use no threads"
        )
    return ""


def roofline_message(nbytes: int, t: Timing, max_gbs: float) -> str:
    # L2 is flushed before each trial, so every byte of an input that must be read in full
    # (callers leave out `Param.partial_read` inputs) comes from device memory: a time implying
    # more bytes per second than the card can move is impossible.
    if nbytes < _MIN_ROOFLINE_BYTES:
        return ""
    gbs = nbytes / (t.median_us * 1e3)
    if gbs > max_gbs:
        return f"reads {nbytes} input bytes in {t.median_us:.2f} us ({gbs:.0f} GB/s): impossible"
    return ""
