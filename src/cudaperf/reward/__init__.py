"""The unified reward: correctness, speed, structure and the ranker's opinion in one number.

    from cudaperf.reward import RewardConfig, compute_reward
    bd = compute_reward(exec_result, reports, rank_score, RewardConfig.preset("unified"))
    bd.total, bd.components, bd.notes

Formula (every number is a `RewardConfig` field; defaults in brackets):

    total = outcome + speed + structure + ranker

    outcome   = the level of the status:
                rejected [-1] < format error [-0.75] <= compile error [-0.5]
                < wrong output [-0.25] <= runtime error = timeout [-0.25] < correct [1];
                compiled (compile-only mode) [-0.25]
    speed     = speed_weight [1] * clip(ln(s) / ln(speed_cap [16]), speed_floor [-0.5], 1)
                with s the speedup against the baseline (auto: eager PyTorch, else the task's
                naive CUDA, else the serial CPU reference)          -- correct candidates only
    structure = structure_weight [0.25] * mean over kernels of StructuralReport.score
                                                                     -- correct candidates only
    ranker    = ranker_weight [0.25] * RankScore.score               -- correct candidates only

Bounds: [rejected, correct + speed_weight + structure_weight + ranker_weight] = [-1, 2.5].

Why this shape:
- **Failures are ordered**, so a policy that cannot yet write a correct kernel still gets a
  gradient towards one: compiling beats not compiling. Timeouts share the runtime-error level
  (a hang is a runtime failure). A wrong output is never above a crash: a kernel that writes
  nothing (or a constant) is a wrong output, and it must not pay more than an honest attempt
  that crashed (issue 15; closeness-based credit would need an error measure that emptiness
  cannot score on, which the ExecResult does not carry yet).
- **A detected hack gets the lowest reward**, below even a reply without code, so cheating is
  never a better bet than honest failure.
- **Bonuses only for correct candidates**: a wrong kernel can never buy reward with nice
  structure or a favourable ranker opinion. `RewardConfig` validation guarantees the slowest
  correct candidate (correct + speed_weight * speed_floor = 0.5) beats every wrong one.
  Structure and ranker count only kernels that ran (`ExecResult.launched`; when launches were
  not observed, kernels that host code launches), never a `<<<1, 1>>>` serial port
  (`cudaperf.analyze.launches`).
- **Speed is a clipped log-speedup**: log makes 2x faster worth the same wherever it starts;
  the cap stops one outlier (or a timing glitch) from dominating a GRPO group; the floor keeps
  a slow but correct kernel above every failure.
- **Compile-only results (`COMPILED`) never earn speed or bonuses**: nothing ran, so neither
  correctness nor speed is known. They get the runtime-error level: above a compile error
  (it compiled, which is all that is known), at the level of a wrong output.
- **INFRA_ERROR gets no reward** (`valid=False`; `None` in TRL functions): the evaluator
  failed, not the candidate, and training on it would teach noise.
- **No partial credit for some configs passing**: passing the visible configs while failing
  held-out ones is exactly what shape hard-coding does.

The `outcome_only` preset (structure_weight = ranker_weight = 0) is the ablation.
"""

from cudaperf.rank.types import RankScore
from cudaperf.reward.callables import (
    COMPONENTS,
    compute_score,
    make_compute_score,
    reward_function,
    reward_functions,
)
from cudaperf.reward.config import BASELINES, PRESETS, RewardConfig
from cudaperf.reward.formula import (
    FORMAT_ERROR,
    RewardBreakdown,
    compute_reward,
    format_error_reward,
    speed_term,
)
from cudaperf.reward.scorer import (
    Analyzer,
    Evaluator,
    Ranker,
    RewardScorer,
    Scored,
    StructureAnalyzer,
    default_analyzer,
    default_evaluator,
)
from cudaperf.tasks.reply import Extraction, completion_text, extract_candidate

__all__ = [
    "BASELINES",
    "COMPONENTS",
    "FORMAT_ERROR",
    "PRESETS",
    "Analyzer",
    "Evaluator",
    "Extraction",
    "RankScore",
    "Ranker",
    "RewardBreakdown",
    "RewardConfig",
    "RewardScorer",
    "Scored",
    "StructureAnalyzer",
    "completion_text",
    "compute_reward",
    "compute_score",
    "default_analyzer",
    "default_evaluator",
    "extract_candidate",
    "format_error_reward",
    "make_compute_score",
    "reward_function",
    "reward_functions",
    "speed_term",
]
