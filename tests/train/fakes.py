"""A fake evaluator and a scripted policy for rollout and GRPO tests (no GPU, no model)."""

from __future__ import annotations

from cudaperf.execute.types import ConfigResult, ExecResult, Status
from tests.refine.helpers import result


class FakeEvaluator:
    """OK for code with a `__global__` kernel, wrong output (failing the held-out config)
    for code with `WRONG`, compile error otherwise; records every batch."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def __call__(self, jobs) -> list[ExecResult]:
        self.batches.append(len(jobs))
        out = []
        for task, cand in jobs:
            if "WRONG" in cand.code:
                held = next(c for c in task.configs if c.held_out)
                cfgs = [
                    ConfigResult(config=held.name, held_out=True, correct=False, max_abs_err=3.0)
                ]
                out.append(result(Status.WRONG_OUTPUT, cand.code, task.id, configs=cfgs))
            elif "__global__" in cand.code:
                out.append(result(Status.OK, cand.code, task.id, speedup_vs_naive=2.0))
            else:
                out.append(
                    result(
                        Status.COMPILE_ERROR, cand.code, task.id, compile_log="error: expected ';'"
                    )
                )
        return out


class ScriptedPolicy:
    """Replies by turn: turn 1 `first`, later turns `later` (cycled per conversation), as
    token ids of `tokenizer` (or of the characters when there is none)."""

    def __init__(self, first: list[str], later: list[str], tokenizer=None) -> None:
        self.first, self.later, self.tok = first, later, tokenizer
        self.seen: list[list[dict]] = []

    def ids(self, text: str) -> list[int]:
        if self.tok is None:
            return [ord(c) % 50 for c in text]
        return self.tok(text, add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id]

    def __call__(self, convs):
        out = []
        for i, conv in enumerate(convs):
            self.seen.append(conv)
            pool = self.first if len(conv) <= 2 else self.later
            text = pool[i % len(pool)]
            prompt = self.ids("".join(m["content"] for m in conv))[:32]
            out.append((prompt, self.ids(text), text))
        return out


def reply(code: str) -> str:
    return f"Plan: try.\n```cuda\n{code}\n```"
