"""Dynamic sanity checks on a measured time, shared by the C→CUDA and PyTorch→CUDA tracks.

Each returns a rejection message, or "" when the time is plausible.
"""

from __future__ import annotations

from cudaperf.execute.types import Timing

__all__ = [
    "HOST_SLACK_US",
    "escape_message",
    "host_work_message",
    "outside_clock_message",
    "roofline_message",
]

_MIN_ROOFLINE_BYTES = 1 << 20  # below this, launch overhead dominates and the check says nothing
# host time a C→CUDA call may spend beside its device work before a low share counts: launch
# and sync latency, cudaMalloc/cudaFree of scratch buffers, a small setup or final step
HOST_SLACK_US = 1000.0


def escape_message(t: Timing, wall: Timing, overhead_us: float = 22.5) -> str:
    """Work on a side stream or a thread finishes after the end event; the device-wide sync
    after each trial still waits for it, so the wall-clock time gives it away.

    Allowed: wall <= 1.5 x event median + 2 x `overhead_us` + 5 us, where `overhead_us` is
    the measured (wall - event) of timing an empty call in the same loop (event records and
    the sync, a few microseconds): the allowance scales with the kernel's own time, so a
    10 us kernel cannot hide 40 us of work (a fixed 50 us allowance let it). The fastest
    wall time is compared: a timing thread that the OS preempts inflates some trials only.
    The default overhead (22.5 us: a fixed 50 us allowance) is for callers that measure none,
    the dataset measurement of the project's own implementations; the evaluator measures it."""
    limit = 1.5 * t.median_us + 2.0 * max(overhead_us, 0.0) + 5.0
    if wall.min_us > limit:
        return (
            f"work escapes the timing events: event time {t.median_us:.1f} us but even the "
            f"fastest call takes {wall.min_us:.1f} us of wall time (allowed {limit:.1f} us); "
            "launch on the default stream and use no threads"
        )
    return ""


def outside_clock_message(per_call_us: float, t: Timing) -> str:
    """The trusted side's own clock around a burst of back-to-back calls against the time the
    candidate's process reported. A burst runs with warm caches and overlapped launches, so
    an honest call takes at most about its event time; a call measured at more than
    3 x the reported median + 20 us means the candidate's timers do not measure its work."""
    if per_call_us > 3.0 * t.median_us + 20.0:
        return (
            f"the trusted clock measured {per_call_us:.1f} us per call but the candidate's "
            f"process reported {t.median_us:.1f} us; its timers do not measure its work"
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


def host_work_message(
    wall_us: float, device_us: float, min_share: float, slack_us: float = HOST_SLACK_US
) -> str:
    """A C→CUDA candidate's traced call (`c.trace`): `wall_us` long, the GPU running its
    kernels, memsets or device-to-device copies for `device_us` of it. No device work at all
    means the answer was computed on the host; device work under `min_share` of the call, with
    more than `slack_us` of the call left over, means most of it was (a serial host loop
    between two copies, with or without a token kernel). Copies between host and device are
    not work: a host fallback is made of them."""
    if device_us <= 0.0:
        return (
            "no kernel ran on the GPU during the call: the answer was computed on the host; "
            "do the work in __global__ kernels"
        )
    share = device_us / wall_us if wall_us > 0 else 1.0
    if share < min_share and wall_us - device_us > slack_us:
        return (
            f"the GPU ran the candidate's kernels for only {share:.1%} of its call "
            f"({device_us:.0f} us of {wall_us:.0f} us): the work was done on the host; "
            "do it in __global__ kernels"
        )
    return ""
