"""The BabelTower importer (C→CUDA test set → tasks): the row → task conversion (`importer`),
the test inputs read as values (`inputs`), the array lengths (`lengths`), the wrapper adapted
to our candidate shape (`wrapper`) and the sanitized reference check (`check`)."""

from __future__ import annotations

from cudaperf.tasks.importers.babeltower.importer import import_babeltower

__all__ = ["import_babeltower"]
