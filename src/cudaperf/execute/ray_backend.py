"""The Ray backend: the same evaluator steps and sandboxed worker, one Ray actor per GPU.

Each actor owns an `Evaluator` (its node's GPU, toolchain and caches) and one `WorkerHandle`;
it compiles on its own node (nvcc in a thread pool of its CPUs) and runs on its GPU, so a
library never crosses nodes. Jobs are spread over actors by a shared queue: each actor
takes the next job when it has a free slot, and results stream back in completion order.
Without GPUs (compile-only), `num_actors` actors of one CPU each compile. Needs `ray>=2.9`
(the `[ray]` extra); importing this module does not import ray.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from cudaperf.execute.config import EvalConfig
from cudaperf.execute.evaluator import Evaluator
from cudaperf.execute.isolation.sandbox import WorkerHandle
from cudaperf.execute.pool import Backend, Job, infra_result, prepare_cached, run_prepared
from cudaperf.execute.types import Candidate, ExecResult
from cudaperf.tasks.model import Task

log = logging.getLogger(__name__)

__all__ = ["EvalActor", "RayBackend"]


class EvalActor:
    """Per-GPU evaluation service (wrapped with `ray.remote` by `RayBackend`)."""

    def __init__(self, config: EvalConfig, gpu: bool):
        import threading

        cfg = config if gpu else EvalConfig(**{**config.__dict__, "compile_only": True})
        self.ev = Evaluator(cfg)
        # Ray sets CUDA_VISIBLE_DEVICES for the actor; the worker inherits it (index None).
        full = self.ev.env.mode == "full"
        self.handle = WorkerHandle(None, cfg, arch=self.ev.env.arch) if full else None
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max(1, (cfg.compile_jobs or 4)))

    def describe(self) -> dict:
        return {"mode": self.ev.env.mode, "gpu": self.ev.env.gpu_name, "arch": self.ev.env.arch}

    def evaluate(self, task_json: str, code: str, cand_id: str) -> str:
        """One job: compile here, run on this actor's GPU; the result as JSON."""
        task, cand = Task.model_validate_json(task_json), Candidate(code=code, id=cand_id)
        try:
            p = self.pool.submit(prepare_cached, self.ev, task, cand).result()
            if not isinstance(p, ExecResult):
                with self.lock:  # one candidate at a time on the GPU
                    p = run_prepared(self.ev, self.handle, p)  # type: ignore[arg-type]
            return p.model_dump_json()
        except Exception as e:  # noqa: BLE001 - the reply must always come back
            return infra_result(self.ev, (task, cand), e).model_dump_json()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


class RayBackend(Backend):
    """Runs jobs on Ray actors: one per GPU in the cluster (or `num_actors` when compile-only)."""

    def __init__(
        self,
        config: EvalConfig,
        address: str | None = None,
        num_actors: int | None = None,
        slots_per_actor: int = 4,
        init_kwargs: dict | None = None,
    ):
        import ray

        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=address, **(init_kwargs or {}))
        gpus = 0 if config.compile_only else int(ray.cluster_resources().get("GPU", 0))
        n = num_actors or gpus or 1
        opts = {"num_gpus": 1, "num_cpus": 1} if gpus else {"num_gpus": 0, "num_cpus": 1}
        cls = ray.remote(**opts)(EvalActor).options(max_concurrency=slots_per_actor)
        self.actors = [cls.remote(config, bool(gpus)) for _ in range(min(n, gpus or n))]
        self.slots = slots_per_actor
        self.config = config
        self.evaluator = _DriverEvaluator(ray.get(self.actors[0].describe.remote()), config)

    def run(self, jobs: list[Job]) -> Iterator[tuple[int, ExecResult]]:
        pending: dict = {}
        todo = list(range(len(jobs)))[::-1]
        free = [a for a in self.actors for _ in range(self.slots)]
        while todo or pending:
            while todo and free:
                i, actor = todo.pop(), free.pop()
                task, cand = jobs[i]
                ref = actor.evaluate.remote(task.model_dump_json(), cand.code, cand.id)
                pending[ref] = (i, actor)
            done, _ = self.ray.wait(list(pending), num_returns=1)
            i, actor = pending.pop(done[0])
            free.append(actor)
            yield i, ExecResult.model_validate_json(self.ray.get(done[0]))

    def close(self) -> None:
        for a in self.actors:
            try:
                self.ray.get(a.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - best effort at shutdown
                log.warning("a Ray actor did not close cleanly")
            self.ray.kill(a)


class _DriverEvaluator:
    """What `evaluate_batch` needs on the driver: the actors' env (mode) and cache keys."""

    def __init__(self, desc: dict, config: EvalConfig):
        from cudaperf.execute.evaluator import Env

        self.env = Env(desc["mode"], (), desc["gpu"], desc["arch"], {}, 0)
        self.config = config

    def key(self, task: Task, cand: Candidate) -> str:
        return f"ray:{cand.hash}:{task.id}:{time.monotonic_ns()}"  # never matches: no resume
