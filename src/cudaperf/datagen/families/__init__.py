"""Family modules; importing this package registers every family in `FAMILIES`."""

from cudaperf.datagen.families import elementwise  # noqa: F401
