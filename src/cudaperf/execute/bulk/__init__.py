"""`cudaperf data measure`: verify and time a whole task set on the GPU(s), many implementations
per nvcc call and per process (see `core` for the pipeline; `torch_tasks` for PyTorch→CUDA)."""

from cudaperf.execute.bulk.core import (
    MeasureConfig,
    MeasureError,
    estimate_gpu_seconds,
    measure_tasks,
)

__all__ = ["MeasureConfig", "MeasureError", "estimate_gpu_seconds", "measure_tasks"]
