"""Builders of ExecResults, reports and rank scores for reward and refine tests (no GPU)."""

from __future__ import annotations

from cudaperf.analyze.types import Finding, Severity, StructuralReport
from cudaperf.execute.types import Candidate, ConfigResult, ExecResult, Status, Timing
from cudaperf.rank.types import RankScore


def result(status: Status = Status.OK, code: str = "x", task_id: str = "t", **kw) -> ExecResult:
    fields = dict(
        status=status, mode="full", task_id=task_id, candidate_hash=Candidate(code=code).hash
    )
    if status is Status.OK:
        fields["configs"] = [
            ConfigResult(
                config="small",
                held_out=False,
                correct=True,
                timing=Timing.of([10.0, 11.0]),
                cpu_timing=Timing.of([400.0]),
            )
        ]
    return ExecResult(**(fields | kw))


def report(score: float, findings: list[Finding] | None = None) -> StructuralReport:
    return StructuralReport(name="k", line=1, features={}, findings=findings or [], score=score)


def finding(line: int = 3, rule: str = "uncoalesced-access") -> Finding:
    return Finding(
        rule=rule,
        severity=Severity.WARNING,
        line=line,
        message="threads read addresses 32 elements apart; index with threadIdx.x",
    )


def rank(score: float) -> RankScore:
    return RankScore(score=score, compared=2, model="test-ranker")
