"""Family modules; importing this package registers every family in `FAMILIES`."""

from cudaperf.datagen.families import (  # noqa: F401
    elementwise,
    filter2d,
    gather_scatter,
    gemm,
    gemv,
    histogram,
    nbody,
    reduction,
    row_reduce,
    scan,
    segsort,
    stencil,
    torch_channel_affine,
    torch_linear_act,
    torch_rownorm,
    transpose,
)
