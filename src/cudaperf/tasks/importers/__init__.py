"""Importers for public benchmark suites, read from the user's own checkout or file.

`IMPORTERS` maps a suite name to `fn(path, **options) -> ImportReport`. Every item of a suite
is either imported or skipped with a reason; nothing is skipped silently.
"""

from __future__ import annotations

from cudaperf.tasks.importers.common import ImportReport
from cudaperf.tasks.importers.kernelbench import import_kernelbench

IMPORTERS = {
    "kernelbench": import_kernelbench,
}

__all__ = ["IMPORTERS", "ImportReport", "import_kernelbench"]
