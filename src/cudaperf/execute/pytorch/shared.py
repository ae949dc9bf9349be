"""The buffers the trusted side shares with the candidate's process, and bitwise comparisons.

`SharedBuffers` owns one config's input and output buffers. On a GPU they are allocated
from a private `torch.cuda.MemPool`, so the allocation a CUDA IPC handle exposes holds
nothing but these buffers (the caching allocator otherwise packs unrelated tensors, such as
reference outputs, into the same segment, and the whole segment is mapped by the receiver).
On the CPU they live in shared memory. The trusted side writes fresh inputs into the same
buffers every trial and poisons the outputs before each checked call. Buffers of earlier
configs or jobs may still sit in the pool's segments: inputs and candidate outputs, never an
answer.
"""

from __future__ import annotations

import contextlib
import logging

import torch

__all__ = ["SharedBuffers", "mutated", "same_bits"]

log = logging.getLogger(__name__)


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def same_bits(a, b) -> bool:
    """Same shape, dtype and bytes (NaNs compare equal to themselves; -0.0 != 0.0)."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return a == b
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(torch.equal(_bytes(a), _bytes(b.to(a.device))))


def mutated(before: list, after: list) -> bool:
    """Whether any tensor of `after` differs bitwise from its counterpart in `before`."""
    return any(
        isinstance(a, torch.Tensor) and not same_bits(a, b)
        for a, b in zip(before, after, strict=True)
    )


def _poison(t: torch.Tensor) -> None:
    if t.is_floating_point() or t.is_complex():
        t.fill_(float("nan"))
    elif t.dtype is torch.bool:
        t.fill_(True)
    else:
        t.fill_(-1 if t.dtype.is_signed else 0)
        if not t.dtype.is_signed:
            t.bitwise_not_()


class SharedBuffers:
    """Input buffers shaped like `x0` and output buffers shaped like the reference's."""

    def __init__(self, x0: list, want: list[torch.Tensor], device: str):
        self.device = device
        self.pool = _private_pool() if device == "cuda" else None
        with torch.cuda.use_mem_pool(self.pool) if self.pool else contextlib.nullcontext():
            self.inputs = [torch.empty_like(x) if isinstance(x, torch.Tensor) else x for x in x0]
            self.outs = [torch.empty_like(w) for w in want]
        if device != "cuda":
            for t in self.tensors():
                t.share_memory_()
        self.expected = [(list(w.shape), str(w.dtype)) for w in want]

    def tensors(self) -> list[torch.Tensor]:
        return [t for t in [*self.inputs, *self.outs] if isinstance(t, torch.Tensor)]

    def payload(self) -> dict:
        """What the candidate's process receives for this config."""
        return {"inputs": self.inputs, "outs": self.outs}

    def _sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def write_inputs(self, xs: list, poison_outs: bool = True) -> None:
        """Fresh values into the same input buffers; outputs poisoned (NaN / all ones)."""
        for buf, x in zip(self.inputs, xs, strict=True):
            if isinstance(buf, torch.Tensor):
                buf.copy_(x)
        if poison_outs:
            for o in self.outs:
                _poison(o)
        self._sync()

    def meta_message(self, meta) -> str:
        """Why the candidate's outputs do not fit the reference's, or ""."""
        if isinstance(meta, str):
            return meta
        if not isinstance(meta, list):
            return "the candidate's process sent a malformed reply"
        if len(meta) != len(self.expected):
            return f"returned {len(meta)} tensors, expected {len(self.expected)}"
        for k, (got, want) in enumerate(zip(meta, self.expected, strict=True)):
            if not (isinstance(got, list) and len(got) == 2):
                return "the candidate's process sent a malformed reply"
            if list(got[0]) != want[0]:
                return f"output {k} has shape {tuple(got[0])}, expected {tuple(want[0])}"
            if got[1] != want[1]:
                return f"output {k} has dtype {got[1]}, expected {want[1]}"
        return ""

    def read_outs(self) -> list[torch.Tensor]:
        """Private copies of the output buffers (the candidate cannot change them later)."""
        self._sync()
        return [o.clone() for o in self.outs]

    def flip_inputs(self) -> None:
        """Invert every byte of every input buffer (an output aliasing one changes with it)."""
        for x in self.inputs:
            if isinstance(x, torch.Tensor):
                raw = torch.empty(0, dtype=torch.uint8, device=x.device)
                raw.set_(x.untyped_storage())
                raw.bitwise_not_()
        self._sync()

    def input_bytes(self) -> int:
        return sum(x.numel() * x.element_size() for x in self.inputs if isinstance(x, torch.Tensor))


_POOL: list = []  # [pool or None], made once per process


def _private_pool():
    """The process's one `MemPool` for shared buffers (only they are ever allocated from it,
    so a mapped segment holds nothing else, now or later), or None when this torch has none
    or cannot share its blocks over CUDA IPC (then the default allocator)."""
    if _POOL:
        return _POOL[0]
    try:
        from torch.multiprocessing.reductions import reduce_tensor

        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            probe = torch.empty(1, device="cuda")
        reduce_tensor(probe)
    except Exception as e:  # noqa: BLE001 - any failure means: no private pool here
        log.warning("no private CUDA memory pool for shared buffers (%s); default allocator", e)
        pool = None
    _POOL.append(pool)
    return pool
