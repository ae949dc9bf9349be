"""The benchmark's reference backends, `scripted:best` and `scripted:naive`, as report uses them.

They are defined in `refine.scripted` (refine sits below report, and `refine.make_backend`
builds them for every command that takes `--model`); this module names the few things a
benchmark needs from there: which specs are references, which tasks can be replayed, and
which implementation each reference replays. `refine.scripted`'s module doc says what they
see and why their replies must never be training data.
"""

from __future__ import annotations

from cudaperf.refine.scripted import REFERENCE_SPECS, ReferenceBackend, pick_reference, replayable

__all__ = ["REFERENCE_SPECS", "ReferenceBackend", "pick_reference", "replayable"]
