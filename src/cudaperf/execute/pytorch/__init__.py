"""The PyTorch→CUDA track: a candidate module's build and static checks (`build`, `static`,
`ops`, `native_prebuild`), its process (`child`, `proc`, `runtime`), the trusted side that
checks and times it (`trusted`, the mirror of `c.trusted`), the buffers it shares with the
candidate (`shared`) and the eager/compiled baselines (`baselines`, `baseline_job`)."""
