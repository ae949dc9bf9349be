"""Loading the policy to train: any HF name or path, `smollm2`, plus LoRA or full fine-tuning.

`load_policy` resolves `smollm2` and GGUF files through `models.resolve_model` (a GGUF-loaded
model is marked quantised and transformers refuses to train it, so it is rebuilt once as a
plain checkpoint), loads model and tokenizer and gives the tokenizer a pad token.
`lora_config(r)` targets every linear layer. Errors name the model and the fix.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["Policy", "load_policy", "lora_config", "pick_dtype"]


@dataclass
class Policy:
    """A model ready for TRL and its tokenizer."""

    model: object  # transformers PreTrainedModel (a PeftModel after `attach_adapter`)
    tokenizer: object  # transformers tokenizer, pad token set
    path: str  # what was loaded (the converted checkpoint for smollm2 / GGUF)
    name: str  # what the user asked for


def pick_dtype(dtype: str, device: str) -> str:
    """ "auto" → bfloat16 on cuda, float32 on cpu; otherwise checked and returned."""
    if dtype == "auto":
        return "bfloat16" if device.startswith("cuda") else "float32"
    if dtype not in ("float32", "bfloat16", "float16"):
        raise ValueError(f"dtype={dtype!r}; use auto, float32, bfloat16 or float16")
    return dtype


def load_policy(
    model: str,
    dtype: str = "auto",
    cache_dir: str | Path | None = None,
    adapter: str | Path | None = None,
) -> Policy:
    """Load `model` (smollm2, a hub name, a checkpoint folder or a .gguf file) for training.
    `adapter`: a PEFT adapter folder to continue training (e.g. GRPO from an SFT adapter)."""
    import torch
    import transformers

    from cudaperf.models import join_pieces, resolve_model

    try:
        path = resolve_model(model, None, cache_dir)
    except (ImportError, FileNotFoundError) as e:
        raise ValueError(f"--model {model}: {e}") from None
    local = Path(path)
    if (local.is_absolute() or path.startswith(".")) and not local.exists():
        raise ValueError(f"--model {model}: no such folder; give smollm2, a hub name or a path")
    if local.is_dir():
        join_pieces(local)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        tok = transformers.AutoTokenizer.from_pretrained(path)
        net = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=getattr(torch, pick_dtype(dtype, device))
        )
    except OSError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(
            f"--model {model}: cannot load it ({first}); give smollm2, a local checkpoint "
            "folder, a .gguf file or a hub name this machine can reach"
        ) from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if tok.chat_template is None:
        raise ValueError(
            f"--model {model}: its tokenizer has no chat template; use an instruct model"
        )
    if adapter is not None:
        net = attach_adapter(net, adapter)
    return Policy(model=net, tokenizer=tok, path=path, name=model)


def attach_adapter(model, adapter: str | Path):
    """`model` with a trainable PEFT adapter loaded from `adapter` (pieces joined first)."""
    from peft import PeftModel

    from cudaperf.models import join_pieces

    folder = Path(adapter)
    if not (folder / "adapter_config.json").is_file():
        raise ValueError(f"--adapter {folder}: no adapter_config.json there")
    join_pieces(folder)
    return PeftModel.from_pretrained(model, str(folder), is_trainable=True)


def lora_config(r: int, alpha: int | None = None, dropout: float = 0.05):
    """A peft `LoraConfig` of rank `r` on every linear layer (causal LM)."""
    if r < 1:
        raise ValueError(f"--lora-r {r}: use >= 1, or 0 for full fine-tuning")
    from peft import LoraConfig

    return LoraConfig(
        r=r,
        lora_alpha=alpha or 2 * r,
        lora_dropout=dropout,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )
