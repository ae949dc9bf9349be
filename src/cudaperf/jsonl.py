"""JSONL files that an interruption may have left with a cut last line.

A process killed in the middle of a write (Ctrl-C, a timeout, the machine taken away) can
leave a file whose last line has no newline. Appending to it as it is glues the next row onto
that fragment, and the row is lost with it; a strict reader then fails on the whole file.
Every appender in cudaperf goes through here:

- `open_append(path)` (a long-lived writer) and `append_lines(path, lines)` (one `write` of
  the lines) first remove a cut last line from a file this process alone appends to: the
  fragment was never a complete record, so nothing computed is lost, and the file is again
  valid JSONL for strict readers;
- `append_lines(path, lines, shared=True)`, for a cache that several processes append to at
  once, ends a cut last line with a newline instead, in the same write as the lines (removing
  bytes could cut another process's write in flight); readers of such files skip bad lines.
- `complete_lines(text)`: the lines of a file's text without a cut last line, for strict
  readers that run before any writer (a resumed run reading what its stopped run wrote);
- `read_text(path)`: a file's text, gunzipped when its name ends in `.gz` (a finished run's
  packed trajectory, which nothing appends to again);
- `replace_text(path, text)`: a file rewritten whole (a run's `run.json`, a file of waiting
  work), through a temporary file beside it and one rename, so an interruption leaves the old
  text or the new, never a part.

Guaranteed: each line appended starts a line of its own; nothing before the last newline of a
file ever changes.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

__all__ = [
    "append_lines",
    "complete_lines",
    "cut_line",
    "cut_tail",
    "open_append",
    "read_text",
    "replace_text",
]


def read_text(path: str | Path, encoding: str = "utf-8") -> str:
    """The text of `path`, read through gzip when its name ends in `.gz`."""
    p = Path(path)
    if p.suffix == ".gz":
        with gzip.open(p, "rt", encoding=encoding) as f:
            return f.read()
    return p.read_text(encoding=encoding)


def replace_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """Make `text` the whole of `path` (parents made) atomically: written to `NAME.tmp` beside
    it, then renamed over it, so a reader or an interruption sees the old text or the new."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(text, encoding=encoding)
    tmp.replace(p)


def cut_tail(path: str | Path) -> int | None:
    """The byte offset just after the last newline of `path` when its last line is cut (no
    newline at the end), else None (no file, an empty one, or one that ends with a newline)."""
    try:
        with open(path, "rb") as fh:
            pos = fh.seek(0, os.SEEK_END)
            if pos == 0:
                return None
            fh.seek(pos - 1)
            if fh.read(1) == b"\n":  # the common case: one byte read, on every append
                return None
            while pos > 0:
                start = max(0, pos - (1 << 16))
                fh.seek(start)
                nl = fh.read(pos - start).rfind(b"\n")
                if nl >= 0:
                    return start + nl + 1
                pos = start
            return 0
    except FileNotFoundError:
        return None


def _drop_cut_tail(path: Path) -> None:
    keep = cut_tail(path)
    if keep is not None:
        os.truncate(path, keep)


def open_append(path: str | Path, encoding: str = "utf-8") -> TextIO:
    """Open `path` (this process its only writer) for appending text, parents made, after
    removing a cut last line."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    _drop_cut_tail(p)
    return p.open("a", encoding=encoding)


def append_lines(
    path: str | Path, lines: Iterable[str], shared: bool = False, encoding: str = "utf-8"
) -> None:
    """Append `lines` (each without its newline) in one write. A cut last line is removed
    first, or with `shared` (several processes append at once) ended with a newline."""
    text = "".join(line + "\n" for line in lines)
    if not text:
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if not shared:
        _drop_cut_tail(p)
    elif cut_tail(p) is not None:
        text = "\n" + text
    with p.open("a", encoding=encoding) as fh:
        fh.write(text)


def cut_line(text: str) -> str | None:
    """The last line of `text` when it has no newline and is not valid JSON (a line cut by an
    interruption), else None."""
    tail = text.rpartition("\n")[2]
    if not tail.strip():
        return None
    try:
        json.loads(tail)
    except ValueError:
        return tail
    return None


def complete_lines(text: str) -> list[str]:
    """`text`'s lines, less a `cut_line` (a last line that parses is kept, newline or not)."""
    lines = text.split("\n")
    tail = lines.pop()  # after the last newline: "" for a file that ends with one
    if tail.strip() and cut_line(text) is None:
        lines.append(tail)
    return lines
