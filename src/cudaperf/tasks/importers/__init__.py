"""Importers for public benchmark suites, read from the user's own checkout or file.

`IMPORTERS` maps a suite name to `fn(path, **options) -> ImportReport`. Every item of a suite
is either imported or skipped with a reason; nothing is skipped silently.
"""

from __future__ import annotations

from cudaperf.tasks.importers.babeltower import import_babeltower
from cudaperf.tasks.importers.common import ImportReport
from cudaperf.tasks.importers.cudal1 import import_cudal1
from cudaperf.tasks.importers.kernelbench import import_kernelbench
from cudaperf.tasks.importers.pareval import import_pareval
from cudaperf.tasks.importers.polybench import import_polybench

IMPORTERS = {
    "kernelbench": import_kernelbench,
    "babeltower": import_babeltower,
    "polybench-acc": import_polybench,
    "cudal1": import_cudal1,
    "pareval": import_pareval,
}

__all__ = [
    "IMPORTERS",
    "ImportReport",
    "import_babeltower",
    "import_cudal1",
    "import_kernelbench",
    "import_pareval",
    "import_polybench",
]
