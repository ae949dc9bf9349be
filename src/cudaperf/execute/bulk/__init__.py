"""Bulk measurement, a mode of the evaluator: `cudaperf data measure` verifies and times a whole
task set on the GPU(s), many implementations per nvcc call and per process (see `core` for the
pipeline, `config` for `BulkConfig`, `torch_tasks` for PyTorch→CUDA)."""

from cudaperf.execute.bulk.config import BULK_EVAL_DEFAULTS, BulkConfig, bulk_eval_config
from cudaperf.execute.bulk.core import MeasureError, estimate_gpu_seconds, measure_tasks

__all__ = [
    "BULK_EVAL_DEFAULTS",
    "BulkConfig",
    "MeasureError",
    "bulk_eval_config",
    "estimate_gpu_seconds",
    "measure_tasks",
]
