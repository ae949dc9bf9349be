"""Reward functions in TRL's `GRPOTrainer` contract, and a verl `compute_score` adapter.

TRL calls every function in `reward_funcs` as `f(prompts=..., completions=..., **columns)`
where `completions` are strings (standard format) or lists of chat messages (conversational
format), `columns` are the dataset's other columns repeated per completion (plus keys such as
`completion_ids` and `trainer_state`), and the result is a `list[float | None]`; `None`
becomes NaN and is ignored by TRL's `nansum` over functions. TRL weights and sums the
functions, and since the total is the sum of the four components you pass either
`reward_functions(scorer)` (four functions, logged separately, weights 1) or
`[reward_function(scorer, "total")]` — not both. This module does not import TRL.

The dataset needs a `task_id` column (name configurable). `None` means the evaluator failed
(`INFRA_ERROR`): the sample carries no reward either way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from cudaperf.reward.scorer import RewardScorer
from cudaperf.tasks.model import Task

log = logging.getLogger(__name__)

__all__ = [
    "COMPONENTS",
    "compute_score",
    "make_compute_score",
    "reward_function",
    "reward_functions",
]

COMPONENTS = ("outcome", "speed", "structure", "ranker", "total")

RewardFunc = Callable[..., list[float | None]]


def reward_function(
    scorer: RewardScorer, component: str = "total", task_column: str = "task_id"
) -> RewardFunc:
    """One TRL reward function returning `component` of each completion's reward."""
    if component not in COMPONENTS:
        raise ValueError(f"component {component!r} is unknown; use one of {COMPONENTS}")

    def func(prompts: Any = None, completions: Any = None, **kwargs: Any) -> list[float | None]:
        if completions is None:
            raise ValueError("TRL passes `completions`; got none")
        if task_column not in kwargs:
            raise ValueError(
                f"the dataset needs a {task_column!r} column naming each prompt's task; got "
                f"columns {sorted(kwargs)}"
            )
        ids = kwargs[task_column]
        if isinstance(ids, str):
            ids = [ids] * len(completions)
        scored = scorer.score(list(zip(ids, completions, strict=True)))
        return [getattr(s.breakdown, component) if s.breakdown.valid else None for s in scored]

    func.__name__ = f"cudaperf_{component}"  # TRL logs rewards under the function's name
    func.__qualname__ = func.__name__
    return func


def reward_functions(
    scorer: RewardScorer,
    components: tuple[str, ...] = ("outcome", "speed", "structure", "ranker"),
    task_column: str = "task_id",
) -> list[RewardFunc]:
    """One function per component; with weights 1 their sum is the total reward."""
    return [reward_function(scorer, c, task_column) for c in components]


def make_compute_score(scorer: RewardScorer) -> Callable[..., dict[str, float]]:
    """A verl-style `compute_score(data_source, solution_str, ground_truth, extra_info)`.

    `ground_truth` is the task id; `extra_info["task"]` may carry the whole task (a dict or
    its JSON) for tasks the scorer does not know. Returns a dict whose `score` is the total
    (verl's reward manager reads `score` and logs the other keys); `valid` is 0.0 and the
    score 0.0 when the evaluator failed, since verl has no "no reward" value.
    """

    def compute(data_source: str, solution_str: str, ground_truth: str, extra_info=None):
        task = _task_from(extra_info)
        if task is not None and task.id not in scorer.tasks:
            scorer.tasks[task.id] = task
        tid = task.id if task is not None else str(ground_truth)
        (s,) = scorer.score([(tid, solution_str)])
        b = s.breakdown
        return {
            "score": b.total if b.valid else 0.0,
            "valid": float(b.valid),
            **{k: v for k, v in b.components.items()},
            "speedup": b.speedup or 0.0,
        }

    return compute


def _task_from(extra_info: Any) -> Task | None:
    raw = extra_info.get("task") if isinstance(extra_info, dict) else None
    if raw is None:
        return None
    return Task.model_validate(json.loads(raw) if isinstance(raw, str) else raw)


_DEFAULT: dict[str, Callable] = {}


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info=None):
    """verl entry point with a default scorer: the bundled tasks, `EvalConfig()` defaults.

    Point verl's `custom_reward_function.path` at this module and `name` at `compute_score`;
    for another task set or evaluator use `make_compute_score(RewardScorer(...))`.
    """
    if "fn" not in _DEFAULT:
        from cudaperf.reward.scorer import default_ranker
        from cudaperf.tasks.io import load_sample

        _DEFAULT["fn"] = make_compute_score(RewardScorer(load_sample(), ranker=default_ranker()))
    return _DEFAULT["fn"](data_source, solution_str, ground_truth, extra_info)
