"""`RewardScorer`: reply → candidate → evaluation → analysis → ranker → `RewardBreakdown`.

The three expensive steps are injectable functions, so tests (and callers with their own
execution service) can supply results without a GPU:

- `Evaluator`: `(jobs: list[(Task, Candidate)]) -> list[ExecResult]`, one result per job in
  order. Default: `cudaperf.execute.evaluate_batch` with one shared `EvalConfig` (parallel
  compiles; compile-only on a machine without a GPU).
- `Analyzer`: `(code) -> list[StructuralReport]`. Default: `StructureAnalyzer`
  (`cudaperf.analyze.analyze`); a candidate without kernels, or an analyzer failure, gives `[]`.
- `Ranker`: `(task, code) -> RankScore | None`. Default: none (`default_ranker()` gives the
  packaged feature ranker).

One analysis per candidate: a correct candidate's reports go on to a feature ranker
(`rank.features.features_from_analysis`) when its features can be read from them, which is the
case with the defaults (the analyzer runs ptxas, the packaged ranker's features are the same
analysis without it, `analyze.without_resources`). The analyzer must then say which
`AnalyzeConfig` it used (`config`) and, to hand on an empty result too, tell a candidate
without kernels from a failure (`analyse(code) -> list | None`, as `StructureAnalyzer` does);
otherwise the ranker analyses the candidate itself, as before.

Results are cached per (task id, code hash), so the per-component reward functions that TRL
calls one after another on the same batch share one evaluation. An evaluator that raises
turns into `INFRA_ERROR` results (no reward), never into a crash of the training step.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cudaperf.analyze.types import StructuralReport
from cudaperf.execute.config import EvalConfig
from cudaperf.execute.types import Candidate, ExecResult, Status
from cudaperf.rank.types import RankScore
from cudaperf.reward.analyzers import PooledAnalyzer, StructureAnalyzer
from cudaperf.reward.config import RewardConfig
from cudaperf.reward.formula import RewardBreakdown, compute_reward, format_error_reward
from cudaperf.tasks.model import Task
from cudaperf.tasks.reply import Extraction, extract_candidate

log = logging.getLogger(__name__)

__all__ = [
    "Analyzer",
    "Evaluator",
    "Ranker",
    "RewardScorer",
    "Scored",
    "StructureAnalyzer",
    "build_scorer",
    "default_analyzer",
    "default_evaluator",
    "default_ranker",
    "ranker_from_spec",
]

Evaluator = Callable[[list[tuple[Task, Candidate]]], list[ExecResult]]
Analyzer = Callable[[str], list[StructuralReport]]
Ranker = Callable[[Task, str], "RankScore | None"]


def default_evaluator(config: EvalConfig | None = None) -> Evaluator:
    """`evaluate_batch` with one shared `EvalConfig`; results returned in job order."""
    cfg = config or EvalConfig()

    def run(jobs: list[tuple[Task, Candidate]]) -> list[ExecResult]:
        from cudaperf.execute.api import evaluate_batch

        by_key = {(r.task_id, r.candidate_hash): r for r in evaluate_batch(jobs, cfg)}
        return [by_key[(t.id, c.hash)] for t, c in jobs]

    return run


def default_analyzer(config=None) -> Analyzer:
    """A `StructureAnalyzer` with `config` (an `AnalyzeConfig`; None: the defaults, ptxas on)."""
    return StructureAnalyzer(config)


def default_ranker(path: str | None = None) -> Ranker | None:
    """The ranker for the unified reward: the packaged feature ranker (or the one at `path`:
    a feature JSON or a `rank train --out` folder), as a `Ranker`; None, with a warning that
    says why, when none is available (no shipped weights, lightgbm missing)."""
    from cudaperf.rank.formats import ModelNotTrainedError
    from cudaperf.rank.ranker import load_ranker, make_ranker

    try:
        return make_ranker(load_ranker(path))
    except (ModelNotTrainedError, ValueError, ImportError) as e:
        log.warning("reward without the ranker term: %s", e)
        return None


def ranker_from_spec(spec: str) -> Ranker | None:
    """The ranker an option names: "default" (the packaged one), "none", or a ranker file or
    folder (`default_ranker`); None for "none" or when it cannot be loaded."""
    if spec == "none":
        return None
    return default_ranker(None if spec == "default" else spec)


def build_scorer(
    tasks: Iterable[Task],
    config: RewardConfig,
    evaluator: Evaluator,
    ranker: str | Ranker | None = "default",
    analyzer: Analyzer | None = None,
) -> RewardScorer:
    """The scorer of every command (`bench run`, `refine`, `reward`, `train grpo`): the reward
    `config`, the command's one `evaluator` (an `execute.session.EvalSession` or a wrapper of
    one: the evaluator's settings stay with the caller, they do not pass through this
    package), the structural analyzer on every candidate (feedback shows its findings;
    `analyzer`: default a `reward.analyzers.PooledAnalyzer`, which analyses a batch's candidates
    in a process pool once the evaluator has returned; close it with `RewardScorer.close`) and
    the ranker: a loaded `Ranker`, None, or a spec
    for `ranker_from_spec` ("default", "none", a ranker file or folder)."""
    rk = ranker_from_spec(ranker) if isinstance(ranker, str) else ranker
    return RewardScorer(
        tasks,
        config=config,
        evaluator=evaluator,
        analyzer=analyzer if analyzer is not None else PooledAnalyzer(),
        ranker=rk,
        analyze="always",
    )


@dataclass(frozen=True)
class Scored:
    """Everything learned about one reply: the code, its result, reports, opinion, reward."""

    task_id: str  # Task.id
    extraction: Extraction  # the code taken from the reply (or the format error)
    result: ExecResult | None  # None for a format error
    reports: tuple[StructuralReport, ...]  # one per kernel (empty when not analysed)
    rank: RankScore | None  # the ranker's opinion (None: no ranker)
    breakdown: RewardBreakdown  # the reward


class RewardScorer:
    """Scores replies to tasks; shares evaluations between calls through an LRU cache."""

    def __init__(
        self,
        tasks: Iterable[Task],
        config: RewardConfig | None = None,
        evaluator: Evaluator | None = None,
        analyzer: Analyzer | None = None,
        ranker: Ranker | None = None,
        eval_config: EvalConfig | None = None,
        analyze: Literal["needed", "always"] = "needed",
        cache_size: int = 4096,
    ) -> None:
        """`analyze="needed"` analyses only correct candidates when the structure bonus
        counts; `"always"` analyses every extracted candidate (refinement feedback)."""
        self.tasks = {t.id: t for t in tasks}
        self.config = config or RewardConfig()
        self.evaluator = evaluator or default_evaluator(eval_config)
        self.analyzer = analyzer or default_analyzer()
        self.ranker = ranker
        self.analyze = analyze
        self._cache: OrderedDict[tuple[str, str], tuple] = OrderedDict()
        self._ranks: dict[tuple[str, str], RankScore | None] = {}
        self._cache_size = cache_size
        # seconds spent so far in the evaluator, the structural analysis and the ranker (a
        # bench chunk's timing.jsonl line takes their growth: where its scoring went)
        self.seconds = {"evaluate_s": 0.0, "analyse_s": 0.0, "rank_s": 0.0}

    def task(self, task_id: str) -> Task:
        """The task with this id (or the only one whose id ends with '/' + task_id)."""
        if task_id in self.tasks:
            return self.tasks[task_id]
        hits = [t for k, t in self.tasks.items() if k.endswith("/" + task_id)]
        if len(hits) != 1:
            raise KeyError(
                f"task {task_id!r} is not among the scorer's {len(self.tasks)} tasks; pass the "
                "task set the prompts came from (RewardScorer(tasks=...))"
            )
        return hits[0]

    def rank(self, task: Task, code: str) -> RankScore | None:
        """The ranker's opinion of `code` (cached; None without a ranker)."""
        if self.ranker is None:
            return None
        key = (task.id, Candidate(code=code).hash)
        if key not in self._ranks:
            self._ranks[key] = self.ranker(task, code)
        return self._ranks[key]

    def score(self, items: Sequence[tuple[str, Any]]) -> list[Scored]:
        """Score (task id, reply) pairs; a reply is text or chat messages."""
        pairs = [(self.task(tid), reply) for tid, reply in items]
        return self.score_extracted([(t, extract_candidate(r, t.kind)) for t, r in pairs])

    def score_extracted(self, items: Sequence[tuple[Task, Extraction]]) -> list[Scored]:
        """Score replies whose candidate the caller already took out (`extract_candidate`),
        so a reply is extracted once on its way to a reward; `Scored.extraction` is the
        given Extraction itself."""
        return self._score([t for t, _ in items], [e for _, e in items])

    def score_code(self, task: Task, codes: Sequence[str]) -> list[Scored]:
        """Score candidate sources that are already extracted."""
        return self._score([task] * len(codes), [Extraction(code=c) for c in codes])

    def _score(self, tasks: list[Task], ex: list[Extraction]) -> list[Scored]:
        todo: dict[tuple[str, str], tuple[Task, Candidate]] = {}
        for t, e in zip(tasks, ex, strict=True):
            if e.code is not None:
                c = Candidate(code=e.code)
                if (t.id, c.hash) not in self._cache:
                    todo[(t.id, c.hash)] = (t, c)
        self._evaluate(list(todo.values()))
        out = []
        for t, e in zip(tasks, ex, strict=True):
            if e.code is None:
                bd = format_error_reward(self.config, e.error)
                out.append(Scored(t.id, e, None, (), None, bd))
                continue
            res, reports, rank = self._cache[(t.id, Candidate(code=e.code).hash)]
            self._cache.move_to_end((t.id, res.candidate_hash))
            bd = compute_reward(res, reports, rank, self.config)
            out.append(Scored(t.id, e, res, reports, rank, bd))
        while len(self._cache) > self._cache_size:  # evict only after the batch is read
            self._cache.popitem(last=False)
        return out

    def _evaluate(self, jobs: list[tuple[Task, Candidate]]) -> None:
        if not jobs:
            return
        t0 = time.perf_counter()
        try:
            results = self.evaluator(jobs)
        except Exception as e:  # noqa: BLE001 - infrastructure failure, not the candidate's
            if interrupted(e):
                raise KeyboardInterrupt from e  # Ctrl-C, wrapped by a library: stop the run
            log.exception("evaluator failed on %d candidates", len(jobs))
            results = [_infra(t, c, e) for t, c in jobs]
        finally:
            self.seconds["evaluate_s"] += time.perf_counter() - t0
        todo = []
        for (t, c), res in zip(jobs, results, strict=True):
            ok = res.status is Status.OK
            need = self.analyze == "always" or (ok and self.config.structure_weight > 0)
            code = _credited(c.code, res) if ok else c.code  # only kernels that really ran
            todo.append((t, c, res, ok, need, code))
        t0 = time.perf_counter()
        prefetch = getattr(self.analyzer, "prefetch", None)
        if prefetch is not None:  # the batch's analyses at once (`reward.analyzers`), after the
            prefetch([code for *_, need, code in todo if need])  # evaluator: no CPU contest
        for t, c, res, ok, need, code in todo:
            reports = self._analyse(code, share=ok) if need else ()
            t1 = time.perf_counter()
            rank = self.rank(t, code) if ok else None
            self.seconds["rank_s"] += time.perf_counter() - t1
            t0 += time.perf_counter() - t1  # the analysis' clock leaves the ranker's out
            self._cache[(t.id, c.hash)] = (res, reports, rank)
        self.seconds["analyse_s"] += time.perf_counter() - t0

    def close(self) -> None:
        """Close what the scorer holds: its evaluator (an `EvalSession`: its workers) and its
        analyzer's process pool, each where it has a `close`."""
        for part in (self.evaluator, self.analyzer):
            close = getattr(part, "close", None)
            if close is not None:
                close()

    def _analyse(self, code: str, share: bool) -> tuple[StructuralReport, ...]:
        """The analyzer's reports of `code`; with `share` (the ranker will see this code) they
        are handed to the ranker when its features can be read from them, so `analyze()` runs
        once per candidate. Reports are complete when the analyzer's `analyse` says so (an
        empty list: no kernel), or, for an analyzer without it, when there are some."""
        analyse = getattr(self.analyzer, "analyse", None)
        found = analyse(code) if analyse is not None else self.analyzer(code)
        reports = tuple(found or ())
        complete = found is not None if analyse is not None else bool(reports)
        want = getattr(self.ranker, "analyze_config", None)
        have = getattr(self.analyzer, "config", None)
        if share and complete and want is not None and have is not None:
            from cudaperf.rank.features import features_from_analysis

            features_from_analysis(code, reports, have, want)
        return reports


def interrupted(e: BaseException) -> bool:
    """Whether `e` is a Ctrl-C in disguise: a library (pydantic's serializer calling a
    validator, for one) turned the KeyboardInterrupt raised inside it into its own error.
    Such an error must stop the run, not become an infra error of the candidates."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, KeyboardInterrupt):
            return True
        if type(e).__name__ == "PydanticSerializationError" and "KeyboardInterrupt" in str(e):
            return True  # only our own models are serialised there: no candidate text
        e = e.__cause__ or e.__context__
    return False


def _credited(code: str, res: ExecResult) -> str:
    """The code with kernels that earn no credit (never launched, serial only) blanked."""
    from cudaperf.analyze.launches import credited_source

    return credited_source(code, res.launched)


def _infra(task: Task, cand: Candidate, err: Exception) -> ExecResult:
    return ExecResult(
        status=Status.INFRA_ERROR,
        mode="full",
        task_id=task.id,
        candidate_hash=cand.hash,
        candidate_id=cand.id,
        runtime_log=f"{type(err).__name__}: {err}"[:2000],
    )
