"""Tasks: the task model, loading and saving task sets, and the bundled sample set."""

from cudaperf.tasks.model import (
    Distribution,
    Implementation,
    InputConfig,
    Measurement,
    Param,
    Role,
    Task,
    TaskKind,
    Tolerance,
)

__all__ = [
    "Distribution",
    "Implementation",
    "InputConfig",
    "Measurement",
    "Param",
    "Role",
    "Task",
    "TaskKind",
    "Tolerance",
]
