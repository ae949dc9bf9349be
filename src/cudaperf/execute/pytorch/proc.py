"""`CandidateProcess`: the trusted side's handle on one spawned PyTorch→CUDA candidate process.

A `child_proc.SpawnedChild` started through `torch.multiprocessing` (so tensors in a request
travel as CUDA IPC handles or shared memory) running `torch_child.child_main`. One job per
child: `torch_trusted` closes it at the end of every job, whatever happened, so a sticky CUDA
error (which poisons the whole CUDA context of the child) never meets the next candidate. A
spare child can be started ahead of time so the next job does not wait for `import torch`
and CUDA initialisation.
"""

from __future__ import annotations

from cudaperf.execute.isolation.child_proc import ChildError, Spare, SpawnedChild

__all__ = ["CandidateProcess", "ChildError", "take_child"]


class CandidateProcess(SpawnedChild):
    """A fresh interpreter (spawn start method) running `torch_child.child_main`."""

    def __init__(self) -> None:
        import torch.multiprocessing as tmp

        from cudaperf.execute.pytorch.child import child_main

        super().__init__(tmp.get_context("spawn"), child_main)


_SPARE = Spare(CandidateProcess)


def take_child(spare: bool) -> CandidateProcess:
    """A ready child for the next job (`child_proc.Spare.take`)."""
    return _SPARE.take(spare)
