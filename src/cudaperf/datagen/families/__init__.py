"""Family modules; importing this package registers every family in `FAMILIES`."""

from cudaperf.datagen.families import (  # noqa: F401
    elementwise,
    reduction,
    stencil,
    torch_rownorm,
    transpose,
)
