"""Saving a folder's large files in pieces of at most N MiB (so they fit a size-limited
transfer), and the reverse (`models.join_pieces`, which `HFBackend` and `load_policy` call).

A file `NAME` larger than the limit becomes `NAME.part000`, `NAME.part001`, ... (byte-exact
splits) and `NAME` is removed; `join_pieces` rebuilds it. Guaranteed: joining the pieces
gives back the original bytes (checked by size and SHA-256 in `split_large_files`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from cudaperf.models import PIECE, join_pieces

__all__ = ["join_pieces", "split_large_files"]


def split_large_files(folder: str | Path, max_mib: float) -> list[Path]:
    """Split every file of `folder` over `max_mib` MiB into pieces; the pieces written."""
    if not max_mib > 0:
        raise ValueError(f"--pieces-mib {max_mib}: use a size in MiB > 0, e.g. 15")
    limit = int(max_mib * 1024 * 1024)
    out: list[Path] = []
    for f in sorted(Path(folder).iterdir()):
        if not f.is_file() or PIECE in f.name or f.stat().st_size <= limit:
            continue
        data = f.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        parts = [f.with_name(f"{f.name}{PIECE}{k:03d}") for k in range(-(-len(data) // limit))]
        for k, p in enumerate(parts):
            p.write_bytes(data[k * limit : (k + 1) * limit])
        joined = b"".join(p.read_bytes() for p in parts)
        if hashlib.sha256(joined).hexdigest() != digest:
            raise OSError(f"{f}: its pieces do not join back to the file; disk full?")
        f.unlink()
        out.extend(parts)
    return out
