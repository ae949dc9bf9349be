"""The C→CUDA track: the candidate's process (`child`, `proc`), the trusted side that checks
and times it (`trusted`, the mirror of `pytorch.trusted`), the harness compiled with each
candidate, and the C reference with the output comparison (`reference`)."""
