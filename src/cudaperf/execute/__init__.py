"""Compile, run, verify and time candidates: sandboxed GPU workers, caches, backends.

Public API: `evaluate(task, candidate, config) -> ExecResult`, `evaluate_batch(jobs, config,
out=...)` (streams results), `EvalConfig`, the result types, and the backends
(`LocalBackend`, `cudaperf.execute.ray_backend.RayBackend`).
"""

from cudaperf.execute.api import evaluate, evaluate_batch, naive_implementation
from cudaperf.execute.config import EvalConfig
from cudaperf.execute.pool import LocalBackend
from cudaperf.execute.types import Candidate, ConfigResult, ExecResult, Status, Timing

__all__ = [
    "Candidate",
    "ConfigResult",
    "EvalConfig",
    "ExecResult",
    "LocalBackend",
    "Status",
    "Timing",
    "evaluate",
    "evaluate_batch",
    "naive_implementation",
]
