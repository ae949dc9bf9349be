"""The multi-turn GRPO rollout: TRL's `rollout_func` over `refine.episode` chains.

TRL 1.16's contract (`GRPOTrainer._generate`): the function gets the per-process prompts —
each dataset row already repeated `num_generations` times, the copies of one prompt next to
each other — and the trainer; it returns a dict with one entry per incoming row for
`prompt_ids`, `completion_ids` and `logprobs` (None: the trainer recomputes them), and any
other key is copied into each row's inputs, so it reaches the reward functions. TRL subtracts
the mean over consecutive blocks of `num_generations` rows (and scales by their standard
deviation unless `scale_rewards="none"`, which `train.grpo` sets).

Here a block of G = `num_generations` rows of one task becomes m = G / n chains of n turns
(`turns`). Turn k of every chain of the batch is generated in one batch, analysed at once when the
scorer's analyzer can prefetch (`reward.analyzers.PooledAnalyzer`), then scored in one
evaluator batch (`episode.step`): generation and timing never overlap. Each turn is a row:
its prompt is the conversation of that turn (the task, the earlier replies and the
evaluator's feedback, visible configurations only), its completion the reply, and its reward
the discounted return R_k = s_k + γ s_{k+1} + γ² s_{k+2} + ... over the chain's later turns
(Kevin-32B's recipe; γ = 0.4 by default). The reward function (`train.rewards.TurnReturn`)
turns returns into advantages among the rows of one task *and one turn*: returns of different
turns live on different scales and must not be normalised together.

Keys added per row: `cudaperf_return` (the reward), `cudaperf_score` (that turn's own total),
`cudaperf_<component>`, `cudaperf_status`, `cudaperf_turn`, `task_id`.

Each call reports one record (`on_batch`): rollout statistics, the step-time breakdown
(`generate_s`, `analyse_s`, `eval_s`, and from a `train.layout.MeteredEvaluator` the candidates
evaluated, cache hits, seconds in the evaluator and waiting for another process's timing, and
the evaluator's seconds per phase, `eval_phases_s`), the task of each group and each task's
mean score, the canaries' times, and `samples`: every row's reply text with its task, turn,
status, score and return (`train.runlog.StepLog` writes them to completions.jsonl). Under
several processes (`distribute`) the records of all processes are gathered and merged
(`train.curves.merge_rollouts`), and only the main process reports, so a run's log has one
record per step however many processes train.

Canaries: the naive implementation of each `canaries` task, changed by a comment naming the
step (so the result cache never answers it), is timed after the last turn of every
`RolloutOptions.canary_every`-th step (steps 0, N, 2N, ...): the same known kernels, timed
where the candidates are, tell whether a layout disturbs timing, or the timing drifts.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cudaperf.execute.api import naive_implementation
from cudaperf.execute.types import Candidate
from cudaperf.refine import episode
from cudaperf.refine.prompts import task_prompt
from cudaperf.reward.scorer import RewardScorer
from cudaperf.tasks.model import Task
from cudaperf.train.curves import merge_rollouts

log = logging.getLogger(__name__)

__all__ = ["COMPONENTS", "MultiTurnRollout", "RolloutOptions", "discounted_returns"]

COMPONENTS = ("outcome", "speed", "structure", "ranker")
WEIGHTS = ("adapter", "merged")  # RolloutOptions.generation_weights
# (conversations) -> per conversation (prompt_ids, completion_ids, text)
Generate = Callable[[list[list[dict]]], list[tuple[list[int], list[int], str]]]


@dataclass(frozen=True)
class RolloutOptions:
    """How episodes are run."""

    turns: int = 2  # turns per chain (n); num_generations must be a multiple of it
    gamma: float = 0.4  # discount of later turns' scores
    keep_exchanges: int = 1  # earlier (reply, feedback) exchanges kept in a turn's prompt
    generation: str = "auto"  # cudaperf.generation mode of the policy's sampling
    canary_every: int = 10  # time the canaries at steps 0, N, 2N, ... (module doc)
    # what samples: "adapter", the policy itself (its LoRA layers unmerged), or "merged", a plain
    # twin holding base + LoRA weights, refreshed before each step's generation (`train.twin`)
    generation_weights: str = "adapter"

    def __post_init__(self) -> None:
        from cudaperf.generation import check_mode

        check_mode(self.generation)
        if self.turns < 1 or self.keep_exchanges < 1:
            raise ValueError(f"--turns {self.turns}, keep_exchanges {self.keep_exchanges}: >= 1")
        if not 0 <= self.gamma <= 1:
            raise ValueError(f"--gamma {self.gamma}: use a discount in [0, 1] (e.g. 0.4)")
        if self.canary_every < 1:
            raise ValueError(f"--canary-every {self.canary_every}: use >= 1 (1: every step)")
        if self.generation_weights not in WEIGHTS:
            raise ValueError(
                f"--generation-weights {self.generation_weights!r}: use adapter (the policy "
                "itself) or merged (a plain twin with the LoRA update merged in; train.twin)"
            )


def discounted_returns(scores: Sequence[float | None], gamma: float) -> list[float | None]:
    """R_k = sum_{j >= k} gamma^(j-k) s_j. A turn without a score (evaluator failure) has no
    return, and neither has any earlier turn of the chain: its return would need that score,
    and reading the missing one as 0 would pay the earlier turn for the evaluator's failure."""
    out: list[float | None] = [None] * len(scores)
    acc: float | None = 0.0
    for k in range(len(scores) - 1, -1, -1):
        s = scores[k]
        acc = s + gamma * acc if s is not None and acc is not None else None
        out[k] = acc
    return out


def _prompt_text(prompt) -> str:
    if isinstance(prompt, str):
        return prompt
    users = [m.get("content", "") for m in prompt if m.get("role") == "user"]
    return users[0] if users else ""


class MultiTurnRollout:
    """A `rollout_func` for `GRPOTrainer` (see the module doc). `generate` overrides the
    policy generation (tests); by default the trainer's model generates (`policy_generate`).
    `on_batch(record)` receives each call's statistics (the run log)."""

    def __init__(
        self,
        tasks: Sequence[Task],
        scorer: RewardScorer | None,
        options: RolloutOptions = RolloutOptions(),
        generate: Generate | None = None,
        on_batch: Callable[[dict], None] | None = None,
        canaries: Sequence[Task] = (),
    ) -> None:
        """`scorer` may be attached later (`attach`), once the trainer has set up processes."""
        self.tasks = list(tasks)
        self.by_prompt = {task_prompt(t): t for t in tasks}
        self.scorer: RewardScorer | None = None
        if scorer is not None:
            self.attach(scorer)
        self.options = options
        self.generate = generate
        self.on_batch = on_batch
        self.canaries = [(t, c) for t in canaries if (c := naive_implementation(t)) is not None]
        self.gather: Callable[[dict], list[dict]] | None = None
        self.main = True
        self.twin = None  # train.twin.MergedTwin, made at the first step that samples from it
        self.__name__ = "cudaperf_multi_turn_rollout"

    def distribute(self, gather: Callable[[dict], list[dict]], main: bool) -> None:
        """Several processes: `gather(record)` returns every process's record (a collective:
        every process's rollout calls it once per step); only the `main` one reports."""
        self.gather, self.main = gather, main

    def attach(self, scorer: RewardScorer) -> RewardScorer:
        """Use `scorer` for the rewards (it learns the pool's tasks); returns it."""
        for t in self.tasks:
            scorer.tasks.setdefault(t.id, t)
        self.scorer = scorer
        return scorer

    def task_of(self, prompt) -> Task:
        task = self.by_prompt.get(_prompt_text(prompt))
        if task is None:
            raise ValueError(
                "the rollout got a prompt that is not a task prompt of the training pool; build "
                "the dataset with cudaperf.train.grpo.prompt_dataset from the same tasks"
            )
        return task

    def groups(self, prompts: list, g: int) -> list[Task]:
        """The task of each block of `g` consecutive rows (all rows of a block must agree)."""
        if len(prompts) % g:
            raise ValueError(f"{len(prompts)} rows are not whole groups of num_generations={g}")
        out = []
        for i in range(0, len(prompts), g):
            tasks = {self.task_of(p).id: self.task_of(p) for p in prompts[i : i + g]}
            if len(tasks) != 1:
                raise ValueError(
                    f"rows {i}..{i + g - 1} hold {len(tasks)} tasks: a group of num_generations "
                    "rows must be one task (keep per_device_train_batch_size a multiple of it)"
                )
            out.extend(tasks.values())
        return out

    def __call__(self, prompts: list, trainer) -> dict:
        g = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
        gen = self.generate or self._policy_generate(trainer)
        return self.run(prompts, g, gen, getattr(getattr(trainer, "state", None), "global_step", 0))

    def _policy_generate(self, trainer) -> Generate:
        """The step's sampler: the trainer's model, or the merged twin (`generation_weights`),
        refreshed from the policy at the step's first generation (counted in `generate_s`)."""
        mode = self.options.generation
        if self.options.generation_weights == "adapter":
            return lambda convs: policy_generate(trainer, convs, mode=mode)
        fresh = [False]

        def gen(convs):
            if not fresh[0]:
                if self.twin is None:
                    from cudaperf.train.twin import MergedTwin

                    self.twin = MergedTwin(trainer.accelerator.unwrap_model(trainer.model))
                else:
                    self.twin.refresh()
                fresh[0] = True
            return policy_generate(trainer, convs, mode=mode, model=self.twin.model)

        return gen

    def run(self, prompts: list, g: int, gen: Generate, step: int = 0) -> dict:
        """The rollout for `prompts` in groups of `g`; the dict TRL expects (module doc)."""
        if self.scorer is None:
            raise RuntimeError("MultiTurnRollout has no scorer: call attach(scorer) first")
        n = self.options.turns
        if g % n:
            raise ValueError(f"num_generations={g} is not a multiple of --turns {n}")
        tasks = self.groups(prompts, g)
        chains = [episode.start(t) for t in tasks for _ in range(g // n)]
        rules = episode.Rules(turns=n, patience=n, keep_exchanges=self.options.keep_exchanges)
        per_chain: list[tuple[str, list[tuple]]] = [(c.task.id, []) for c in chains]
        gen_s = eval_s = analyse_s = 0.0
        prefetch = getattr(self.scorer.analyzer, "prefetch", None)
        for _ in range(n):
            t = time.perf_counter()
            outs = gen([c.messages for c in chains])
            gen_s += time.perf_counter() - t
            t = time.perf_counter()
            replies = [[o[2]] for o in outs]
            ex = episode.extract_turn(chains, replies)  # once: the scorer reuses them
            if prefetch is not None:  # the turn's static analysis at once, in a process pool
                prefetch([e[0].code for e in ex])
                analyse_s += time.perf_counter() - t
                t = time.perf_counter()
            recs = episode.step(chains, replies, self.scorer, rules, "policy", ex)
            eval_s += time.perf_counter() - t
            for (_, rows), o, rec in zip(per_chain, outs, recs, strict=True):
                rows.append((o, rec.samples[0]))
        out = self._rows(per_chain)
        texts = [o[2] for _, turns in per_chain for o, _ in turns]  # in the rows' order
        take = getattr(self.scorer.evaluator, "take", None)
        metered = take() if take is not None else {}
        canary = self._canaries(step)
        if take is not None:
            take()  # the canaries are not candidates
        extra = metered | canary | {"samples": _samples(out, texts)}
        self._report(out, tasks, g, (gen_s, analyse_s, eval_s), step, extra)
        return out

    def _canaries(self, step: int) -> dict:
        """Time the canaries (module doc); their per-config medians and the seconds taken."""
        if not self.canaries or step % self.options.canary_every:
            return {}
        t = time.perf_counter()
        jobs = [
            (task, Candidate(code=f"{c.code}\n// canary of step {step}\n", id="canary"))
            for task, c in self.canaries
        ]
        rows = []
        for (task, _), res in zip(jobs, self.scorer.evaluator(jobs), strict=True):
            for cfg in res.configs:
                if cfg.timing is not None:
                    rows.append(
                        {
                            "task": task.id,
                            "config": cfg.config,
                            "median_us": round(cfg.timing.median_us, 3),
                        }
                    )
        return {"canary": rows, "canary_s": round(time.perf_counter() - t, 3)}

    def _rows(self, per_chain: list[tuple[str, list[tuple]]]) -> dict:
        keys = [
            "prompt_ids",
            "completion_ids",
            "cudaperf_return",
            "cudaperf_score",
            "cudaperf_status",
            "cudaperf_turn",
            "task_id",
            *(f"cudaperf_{c}" for c in COMPONENTS),
        ]
        out: dict[str, list] = {k: [] for k in keys}
        for task_id, turns in per_chain:
            scores = [s.reward.total if s.reward and s.reward.valid else None for _, s in turns]
            returns = discounted_returns(scores, self.options.gamma)
            for k, ((pids, cids, _), s) in enumerate(turns):
                ret = returns[k]
                bd = s.reward
                out["prompt_ids"].append(pids)
                out["completion_ids"].append(cids)
                out["cudaperf_return"].append(ret)
                out["cudaperf_score"].append(scores[k])
                out["cudaperf_status"].append(bd.status if bd else "screened")
                out["cudaperf_turn"].append(k + 1)
                out["task_id"].append(task_id)
                for c in COMPONENTS:
                    out[f"cudaperf_{c}"].append(getattr(bd, c) if bd and bd.valid else None)
        out["logprobs"] = None
        return out

    def _report(
        self, out: dict, tasks: list[Task], g: int, secs: tuple, step: int, extra: dict
    ) -> None:
        gen_s, analyse_s, eval_s = secs
        status = Counter(out["cudaperf_status"])
        n = len(out["cudaperf_status"])
        ok = [s == "ok" for s in out["cudaperf_status"]]
        two = [sum(ok[i : i + g]) >= 2 for i in range(0, n, g)]
        rec = {
            "kind": "rollout",
            "step": step,
            "rows": n,
            "groups": len(tasks),
            "generate_s": round(gen_s, 3),
            "analyse_s": round(analyse_s, 3),
            "eval_s": round(eval_s, 3),
            "prompt_tokens": sum(map(len, out["prompt_ids"])),
            "completion_tokens": sum(map(len, out["completion_ids"])),
            "status_share": {k: round(v / n, 4) for k, v in sorted(status.items())},
            "groups_2_correct": round(sum(two) / max(1, len(two)), 4),
            "return_mean": _mean(out["cudaperf_return"]),
            "score_mean": _mean(out["cudaperf_score"]),
            **{f"{c}_mean": _mean(out[f"cudaperf_{c}"]) for c in COMPONENTS},
            "score_by_turn": [
                _mean(out["cudaperf_score"][k :: self.options.turns])
                for k in range(self.options.turns)
            ],
            "tasks": [t.id for t in tasks],
            "score_by_task": _by_task(out),
            **extra,
        }
        recs = self.gather(rec) if self.gather is not None else [rec]
        if not self.main:
            return
        merged = merge_rollouts(recs)
        log.info("rollout step %d: %s", step, {k: v for k, v in merged.items() if k != "samples"})
        if self.on_batch:
            self.on_batch(merged)


def _samples(out: dict, texts: list[str]) -> list[dict]:
    """One entry per row: the reply behind the numbers (`StepLog` writes them to
    completions.jsonl)."""
    keys = ("task_id", "cudaperf_turn", "cudaperf_status", "cudaperf_score", "cudaperf_return")
    names = ("task", "turn", "status", "score", "return")
    return [
        {
            **{n: out[k][i] for n, k in zip(names, keys, strict=True)},
            "completion_tokens": len(out["completion_ids"][i]),
            "text": text,
        }
        for i, text in enumerate(texts)
    ]


def _by_task(out: dict) -> dict[str, dict]:
    """{task id: {"score": mean score of its scored rows (None: none scored), "rows": rows}}:
    the pool's tasks recur across epochs, so a task's first and later visits can be paired."""
    acc: dict[str, list] = {}
    for task, score in zip(out["task_id"], out["cudaperf_score"], strict=True):
        acc.setdefault(task, []).append(score)
    return {t: {"score": _mean(v), "rows": len(v)} for t, v in acc.items()}


def _mean(xs) -> float | None:
    v = [x for x in xs if x is not None and math.isfinite(x)]
    return round(sum(v) / len(v), 4) if v else None


def policy_generate(
    trainer, convs: list[list[dict]], batch: int = 64, mode: str = "auto", model=None
):
    """One sampled reply per conversation from the trainer's model (or `model`, the merged
    twin), with the trainer's generation config (temperature, max_completion_length) in
    `cudaperf.generation` mode `mode`; (prompt_ids, completion_ids up to and with the first
    EOS, text) per conversation."""
    from trl.models.utils import unwrap_model_for_generation

    from cudaperf.generation import chat_ids, generate_ids

    tok = trainer.processing_class
    eos = set(trainer.eos_token_ids) if hasattr(trainer, "eos_token_ids") else {tok.eos_token_id}
    ids = [chat_ids(tok, c) for c in convs]
    cfg = trainer.generation_config
    if model is not None:
        comps = generate_ids(model, ids, cfg, mode, tok.pad_token_id, eos, batch)
    else:
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as policy:
            comps = generate_ids(policy, ids, cfg, mode, tok.pad_token_id, eos, batch)
    return [
        (p, c, tok.decode(c, skip_special_tokens=True)) for p, c in zip(ids, comps, strict=True)
    ]
