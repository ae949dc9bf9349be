"""Training: SFT warm start and multi-turn GRPO on TRL (the only package that imports TRL).

    cudaperf train sft  --out runs/sft --kind c2cuda --lora-r 32 --epochs 2
    cudaperf train grpo --out runs/grpo --adapter runs/sft/final --turns 2 --num-generations 8
    cudaperf train report runs/grpo --plot runs/grpo/curves.png

Modules (imported lazily; TRL, transformers and peft are the `[train]` extra):

- `data`: training-split tasks only (`data/splits.json`), the leave-family-out / unseen-task
  holdout, SFT rows (refine's first prompt → the fastest implementation as a reply).
- `models`: `smollm2`, any HF name or path; LoRA on all linear layers or full fine-tuning.
- `sft`: `run_sft` through TRL's `SFTTrainer` (loss on the reply only, EOS taught, length
  cap chosen from the data, best epoch by held-out-family loss).
- `rollout`: the multi-turn `rollout_func` over `refine.episode` chains (discounted returns,
  groups of one task); `rewards`: the picklable `TurnReturn` reward.
- `grpo`: `run_grpo` through TRL's `GRPOTrainer` with one persistent evaluator
  (`execute.session`), the unified or outcome-only reward, checkpoints, resume, time budget;
  unchanged under `accelerate launch` (whole groups per process, one log row per step).
- `layout`: which GPUs generate, train and time (`--eval-gpus`), refused overlaps, the lock
  for processes that share timing GPUs, and the metered evaluator (step-time breakdown).
- `runlog` (steps.jsonl, time budget, saving), `pieces` (files in pieces of <= N MiB),
  `curves` (per-step tables, the step-time breakdown, plots).
"""
