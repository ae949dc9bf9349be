"""Sampling completions from a causal LM in one of transformers' generation modes.

One function, `generate_ids`, used by inference (`refine.hf.HFBackend`), training
(`train.rollout.policy_generate`) and the speed benchmark (`bench/train_speed.py`), so that the
mode measured fastest is the mode the tools run:

- `auto` (the default everywhere): `compile` for a model on CUDA, `dynamic` elsewhere (the
  automatic compilation is CUDA's; a static cache on a CPU is only slower). On the H200, a
  GRPO run's generation of 8 replies of up to 1,024 tokens took 21-28 s per two-turn step in
  `compile` (after the first step's compiling), where `dynamic` decodes at 1/15 the speed;
- `dynamic`: `model.generate` with the default dynamic KV cache (no compilation);
- `static`: a static (preallocated) KV cache, not compiled;
- `compile`: a static cache and transformers' automatic `torch.compile` of the decoding step
  (on CUDA; the first batch of each new shape pays for compiling, about 45 s on an H200). The
  static cache's length (`max_cache_len`) is the prompt width plus `max_new_tokens` rounded up
  to a power of two, and transformers never shrinks a model's static cache, so calls of one
  batch size recompile only when they outgrow it, a few times per process at most, however
  their prompt lengths vary (a cache sized to each call's own need grew, and recompiled,
  whenever a GRPO run's turn-2 prompts got longer), and the cache holds at most twice what a
  call needs; prompts are left-padded to a multiple of `PAD_MULTIPLE` tokens in the static
  modes, so the (uncompiled) prefill meets a few widths;
- `continuous`: `model.generate_batch`, transformers' continuous batching over a paged cache
  (finished sequences leave the batch and waiting ones take their place).

Guaranteed: one completion per prompt, in prompt order, cut after the first end-of-sequence
token (which is kept), never longer than the configuration's `max_new_tokens`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

__all__ = [
    "MODES",
    "chat_ids",
    "check_mode",
    "generate_ids",
    "mode_config",
    "resolve_mode",
    "sampling_config",
]

MODES = ("auto", "dynamic", "static", "compile", "continuous")
STATIC = ("static", "compile")  # the modes with a preallocated (static) KV cache
PAD_MULTIPLE = 256  # static modes: the prompt width is rounded up to this


def check_mode(mode: str) -> str:
    """`mode` itself, or a ValueError naming the modes there are."""
    if mode not in MODES:
        raise ValueError(f"--generation {mode!r}: unknown; use one of {', '.join(MODES)}")
    return mode


def resolve_mode(mode: str, device_type: str) -> str:
    """The mode that runs: `auto` is `compile` on CUDA and `dynamic` elsewhere."""
    if check_mode(mode) != "auto":
        return mode
    return "compile" if device_type == "cuda" else "dynamic"


def chat_ids(tokenizer, messages: list[dict]) -> list[int]:
    """The prompt token ids of a conversation: its chat template with the generation prompt
    (the template holds the special tokens, so none are added again)."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def mode_config(config, mode: str):
    """A copy of the `GenerationConfig` set up for `mode` (cache and compilation; `auto` must
    be resolved first, `resolve_mode`)."""
    if check_mode(mode) == "auto":
        raise ValueError("mode_config: resolve --generation auto first (resolve_mode)")
    cfg = copy.deepcopy(config)
    cfg.num_return_sequences = 1
    cfg.cache_implementation = "static" if mode in STATIC else None
    cfg.disable_compile = mode != "compile"
    return cfg


def sampling_config(model, temperature: float, max_new_tokens: int):
    """The model's own `GenerationConfig` (its EOS ids among them) set to sample at
    `temperature` for at most `max_new_tokens` tokens."""
    import transformers

    base = getattr(model, "generation_config", None) or transformers.GenerationConfig()
    cfg = copy.deepcopy(base)
    cfg.do_sample, cfg.temperature, cfg.max_new_tokens = True, temperature, max_new_tokens
    cfg.max_length = None
    return cfg


def _cut(row: Iterable[int], eos: set[int]) -> list[int]:
    out = []
    for t in row:
        out.append(t)
        if t in eos:
            break
    return out


def generate_ids(
    model,
    prompts: Sequence[Sequence[int]],
    config,
    mode: str = "auto",
    pad_id: int = 0,
    eos_ids: Iterable[int] = (),
    batch: int = 64,
) -> list[list[int]]:
    """One sampled completion (token ids) per prompt. `config`: the `GenerationConfig`
    (temperature, max_new_tokens, ...); `batch`: prompts per `generate` call (the continuous
    mode schedules all prompts at once); runs under `torch.no_grad`."""
    import torch

    device = next(model.parameters()).device
    mode = resolve_mode(mode, device.type)
    cfg = mode_config(config, mode)
    cfg.pad_token_id = pad_id
    own = cfg.eos_token_id
    eos = set(eos_ids) | ({own} if isinstance(own, int) else set(own or ()))
    if eos:  # generation stops at these (continuous batching reads nothing else)
        cfg.eos_token_id = sorted(eos)
    out: list[list[int]] = []
    with torch.no_grad():
        if mode == "continuous":
            return _continuous(model, prompts, cfg, eos)
        for i in range(0, len(prompts), batch):
            chunk = [list(p) for p in prompts[i : i + batch]]
            width = max(map(len, chunk))
            if mode in STATIC:
                width = -(-width // PAD_MULTIPLE) * PAD_MULTIPLE
                need = width + cfg.max_new_tokens  # the cache: a power of two that holds it
                cfg.max_cache_len = max(cfg.max_cache_len or 0, 1 << (need - 1).bit_length())
            x = torch.tensor([[pad_id] * (width - len(p)) + p for p in chunk], device=device)
            mask = torch.tensor(
                [[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=device
            )
            seqs = model.generate(input_ids=x, attention_mask=mask, generation_config=cfg)
            out.extend(_cut(row, eos) for row in seqs[:, width:].tolist())
    return out


def _cpu_cache_config(prompts, max_new_tokens: int):
    """The paged cache sized to the work on the CPU. Left to itself, transformers sizes it
    from the free memory of the device, which on the CPU is the machine's RAM: one small test
    took 14.9 GB. Here: the blocks every prompt and its completion can need, twice over."""
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    page = 256
    need = sum(-(-(len(p) + max_new_tokens) // page) for p in prompts)
    tokens = sum(len(p) for p in prompts) + len(prompts) * max_new_tokens
    return ContinuousBatchingConfig(
        page_size=page,
        num_blocks=2 * need + len(prompts),
        max_batch_tokens=max(256, min(8192, tokens)),
    )


def _continuous(model, prompts, cfg, eos: set[int]) -> list[list[int]]:
    """`generate_batch`; its results are matched to the prompts by request order and checked
    by their prompt ids (a missing or failed request raises)."""
    import inspect

    kw = {"progress_bar": False}
    params = inspect.signature(model.generate_batch).parameters
    on_cuda = next(model.parameters()).device.type == "cuda"
    if "warmup" in params:
        kw["warmup"] = on_cuda  # CUDA graphs only there
    if not on_cuda and "continuous_batching_config" in params:
        kw["continuous_batching_config"] = _cpu_cache_config(prompts, cfg.max_new_tokens)
    res = model.generate_batch([list(p) for p in prompts], generation_config=cfg, **kw)
    outs = list(res.values())
    if len(outs) != len(prompts):
        raise RuntimeError(f"continuous batching returned {len(outs)} of {len(prompts)} results")
    done = []
    for p, o in zip(prompts, outs, strict=True):
        if getattr(o, "error", None):
            raise RuntimeError(f"continuous batching failed a request: {o.error}")
        if list(getattr(o, "prompt_ids", p)) != list(p):
            raise RuntimeError("continuous batching returned its results out of prompt order")
        done.append(_cut(o.generated_tokens[: cfg.max_new_tokens], eos))
    return done
