"""Multi-turn refinement: prompts, candidate extraction, feedback, the loop, and backends.

    from cudaperf.refine import refine, make_backend
    from cudaperf.reward import RewardScorer
    scorer = RewardScorer([task], analyze="always")
    result = refine(task, make_backend("http://localhost:8000/v1", model="m"), scorer,
                    turns=4, samples=8, out="traj.jsonl")
    result.best_code

Several tasks in lockstep (one generation batch and one evaluator batch per turn):
`refine_many(tasks, backend, scorer, ...)`.

Backends: `ScriptedBackend` (replays replies; tests), `WeakestFirstBackend` (replays each
task's implementations slowest-first, one per turn: `make_backend("scripted:weakest-first",
tasks=...)`), `OpenAIBackend` (any OpenAI-compatible server), `HFBackend` (transformers
in-process, the bundled SmolLM2 by default; `refine.hf`, imported lazily).
"""

from cudaperf.refine.backends import (
    Backend,
    OpenAIBackend,
    ScriptedBackend,
    WeakestFirstBackend,
    make_backend,
    scripted_from_task,
    weakest_first,
)
from cudaperf.refine.feedback import compile_errors, render_feedback
from cudaperf.refine.loop import RefineResult, refine, refine_many
from cudaperf.refine.prompts import SYSTEM, first_messages, next_messages, task_prompt
from cudaperf.refine.target import parse_sizes, task_from_c_file, task_from_torch_file
from cudaperf.refine.trajectory import (
    SampleRecord,
    SummaryRecord,
    TrajectoryWriter,
    TurnRecord,
    read_trajectory,
)
from cudaperf.tasks.reply import Extraction, extract_candidate

__all__ = [
    "SYSTEM",
    "Backend",
    "Extraction",
    "OpenAIBackend",
    "RefineResult",
    "SampleRecord",
    "ScriptedBackend",
    "SummaryRecord",
    "TrajectoryWriter",
    "TurnRecord",
    "WeakestFirstBackend",
    "compile_errors",
    "extract_candidate",
    "first_messages",
    "make_backend",
    "next_messages",
    "parse_sizes",
    "read_trajectory",
    "refine",
    "refine_many",
    "render_feedback",
    "scripted_from_task",
    "task_from_c_file",
    "task_from_torch_file",
    "task_prompt",
    "weakest_first",
]
