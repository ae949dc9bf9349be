"""`EvalSession`: one evaluator kept alive across many batches (a training run's evaluator).

`evaluate_batch` with no backend starts a `LocalBackend` (GPU workers, a fresh secret salt)
and closes it at the end of the batch, so every call pays worker start-up again and, with a
new salt, draws new inputs and recomputes references. A session holds one `LocalBackend`
for its lifetime: its workers, its secret salt (so the same task's inputs, references and
naive baselines stay valid and come from the evaluator's result cache) and its build cache.
It is an `Evaluator` for `RewardScorer` (`session(jobs) -> results in job order`).

`TRAINING` is the preset for RL: few trials and short budgets (a GRPO step scores dozens of
candidates; their ranking, not a reportable number, is what the reward needs). Numbers for
reports come from `EvalConfig()` defaults.

Guaranteed: results are returned in job order, one per job; `close` (or leaving the `with`
block) stops the workers; a session is not shared between processes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from cudaperf.execute.api import evaluate_batch
from cudaperf.execute.config import EvalConfig
from cudaperf.execute.pool import LocalBackend
from cudaperf.execute.types import Candidate, ExecResult
from cudaperf.tasks.model import Task

log = logging.getLogger(__name__)

__all__ = ["TRAINING", "EvalSession", "training_config"]

TRAINING = dict(
    trials=10,
    warmup=3,
    time_budget_s=0.2,
    cpu_trials=1,
    cpu_time_budget_s=0.1,
    compile_timeout_s=60.0,
    run_timeout_s=30.0,
    correctness_trials=2,
    compile_baseline=False,
    set_cache_gib=None,  # from host memory: a pool's sets stay across steps (measure's doc)
)


def training_config(**changes) -> EvalConfig:
    """`EvalConfig` with the `TRAINING` settings, then `changes` (e.g. `gpus=(1,)`)."""
    return replace(EvalConfig(**TRAINING), **changes)


class EvalSession:
    """A persistent evaluator: one `LocalBackend` for many batches (see the module doc)."""

    def __init__(self, config: EvalConfig | None = None) -> None:
        self.config = config or training_config()
        self._backend: LocalBackend | None = None
        self.batches = 0  # batches evaluated so far
        self.seconds = 0.0  # wall seconds spent evaluating

    @property
    def backend(self) -> LocalBackend:
        """The backend, started on first use (workers, salt)."""
        if self._backend is None:
            self._backend = LocalBackend(self.config)
            log.info("evaluator session: %s mode", self._backend.evaluator.env.mode)
        return self._backend

    @property
    def mode(self) -> str:
        """ "full" or "compile-only"."""
        return self.backend.evaluator.env.mode

    def __call__(self, jobs: list[tuple[Task, Candidate]]) -> list[ExecResult]:
        """Evaluate jobs on the session's backend; results in job order."""
        t = time.perf_counter()
        got = list(evaluate_batch(jobs, self.config, backend=self.backend))
        by_key = {(r.task_id, r.candidate_hash): r for r in got}
        self.batches += 1
        self.seconds += time.perf_counter() - t
        return [by_key[(task.id, c.hash)] for task, c in jobs]

    def close(self) -> None:
        """Stop the workers (a later call starts a new backend, with a new salt)."""
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def __enter__(self) -> EvalSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self):  # a live backend holds processes and threads: never pickled
        raise TypeError("EvalSession holds worker processes and cannot be pickled")
