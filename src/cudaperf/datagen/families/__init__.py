"""Family modules; importing this package registers every family in `FAMILIES`."""

from cudaperf.datagen.families import elementwise, reduction, stencil  # noqa: F401
