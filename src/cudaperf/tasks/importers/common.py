"""What every importer returns, and helpers they share."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from cudaperf.tasks.model import Task

__all__ = ["ImportReport"]


@dataclass
class ImportReport:
    """Tasks imported from a suite, and every item skipped with its reason."""

    suite: str  # importer name, e.g. "kernelbench"
    tasks: list[Task] = field(default_factory=list)  # imported, in suite order
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (item, reason)
    notes: dict = field(default_factory=dict)  # extra facts for `--json` (e.g. checks run)

    def skip(self, item: str, reason: str) -> None:
        self.skipped.append((item, reason))

    def summary(self) -> dict:
        """`{"imported": n, "skipped": n, "reasons": {reason: count}}` for `--json`, plus
        the importer's `notes` (keys of their own) when it has any."""
        out = {
            "imported": len(self.tasks),
            "skipped": len(self.skipped),
            "reasons": dict(Counter(r for _, r in self.skipped)),
        }
        return out | self.notes
