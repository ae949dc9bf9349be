"""Prompt order that does not depend on where a run was resumed (`--sampler epoch`).

TRL's `RepeatSampler` draws one permutation of the prompts per epoch from a generator seeded
once, when the trainer is built. A run resumed from a checkpoint builds a new one, so its next
draw is the first permutation again: a run resumed in epoch e trains the rest of that epoch,
and every later one, on other batches than the same run without the stop. Measured on the CPU
(5 tasks, one group per step, seed 3): a run stopped at step 7 and resumed drew other tasks
than the uninterrupted run at 3 of the 5 steps after it (tests/train/test_sampler.py). The
ablation's runs, chunked at fixed steps, are paired in the tasks they train on only because
both arms of a seed stop at the same steps (bench/ablation/PROTOCOL.md, session-39 note (5)).

`EpochSeededSampler` draws epoch e's permutation from a generator seeded with (seed, e), and the
trainer sets the epoch before each one (transformers' `Trainer` calls the dataloader's
`set_epoch`, which accelerate passes on to the sampler); a resume inside an epoch skips that
epoch's trained batches as before. So the task order is a function of the seed alone, however
often the run stopped. `--sampler trl` (the default while the ablation runs) keeps TRL's own.
"""

from __future__ import annotations

import hashlib

SAMPLERS = ("trl", "epoch")


def epoch_seed(seed: int, epoch: int) -> int:
    """A 63-bit seed for epoch `epoch` of a run seeded `seed` (distinct per pair)."""
    digest = hashlib.sha256(f"cudaperf-sampler:{seed}:{epoch}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def epoch_seeded_trainer(base: type) -> type:
    """A subclass of the GRPO trainer class `base` whose training sampler is an
    `EpochSeededSampler` with the arguments TRL's own would have had."""
    from trl.trainer.utils import RepeatSampler

    class EpochSeededSampler(RepeatSampler):
        """TRL's RepeatSampler with each epoch's permutation a function of (seed, epoch)."""

        epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = int(epoch)

        def __iter__(self):
            if self.shuffle:
                self.generator.manual_seed(epoch_seed(self.seed or 0, self.epoch))
            return super().__iter__()

    class EpochSeededTrainer(base):
        def _get_train_sampler(self, dataset=None):
            trl = super()._get_train_sampler(dataset)
            return EpochSeededSampler(
                data_source=trl.data_source,
                mini_repeat_count=trl.mini_repeat_count,
                batch_size=trl.batch_size,
                repeat_count=trl.repeat_count,
                shuffle=trl.shuffle,
                seed=trl.seed,
            )

    return EpochSeededTrainer
