"""Processes and confinement: the GPU worker and the evaluator's handle on it (`worker`,
`sandbox`), candidate processes and their supervision (`child_proc`, `supervise`), and the
filesystem/syscall confinement of candidates and compilers (`confine`, `build_confine`)."""
