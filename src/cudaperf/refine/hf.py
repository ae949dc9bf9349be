"""`HFBackend`: a Hugging Face causal LM in-process (transformers imported lazily).

Any model name or local directory works; `smollm2` (the bundled default) and GGUF files are
converted once to a plain checkpoint by `cudaperf.models.resolve_model`.

Generation applies the tokenizer's chat template and samples (`do_sample=True`, `n` replies
per conversation) through `cudaperf.generation` in the mode given (`generation`: auto, dynamic,
static, compile or continuous); `generate_batch` batches several conversations into one call
(how `refine_many` generates a turn for every task at once).
"""

from __future__ import annotations

import logging
from pathlib import Path

from cudaperf.models import DEFAULT_MODEL, join_pieces, resolve_model

log = logging.getLogger(__name__)

__all__ = ["HFBackend", "default_device"]


def default_device() -> str:
    """Where `HFBackend` puts a model unless told: "cuda" when torch sees a GPU, else "cpu"."""
    try:
        import torch
    except ImportError:  # the backend itself then says what to install
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


class HFBackend:
    """A transformers causal LM with a chat template, sampling `n` replies per conversation."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        gguf_file: str | None = None,
        device: str | None = None,
        temperature: float = 0.8,
        max_new_tokens: int = 768,
        seed: int | None = None,
        cache_dir: str | Path | None = None,
        dtype: str = "auto",
        max_batch: int = 64,
        adapter: str | Path | None = None,
        generation: str = "auto",
    ) -> None:
        """`model`: `smollm2`, a hub name, a local checkpoint directory or a `.gguf` file
        (`gguf_file`: a GGUF file inside the directory `model`). `device`: default cuda when
        available. `dtype`: "auto" (bfloat16 on cuda, float32 on cpu), "float32", "bfloat16"
        or "float16". `max_batch`: most sequences generated at once by `generate_batch`.
        `adapter`: a PEFT adapter folder (`cudaperf train ... --lora-r`; files saved in pieces
        are joined first) loaded on top of `model` and merged into it. `generation`: the
        `cudaperf.generation` mode."""
        try:
            import torch
            import transformers
        except ImportError:
            raise ImportError(
                "the Hugging Face backend needs torch and transformers: "
                "pip install 'cudaperf[refine]'"
            ) from None
        from cudaperf.generation import check_mode

        check_mode(generation)
        if max_new_tokens < 1 or max_batch < 1:
            raise ValueError(f"max_new_tokens={max_new_tokens}, max_batch={max_batch}: use >= 1")
        path = resolve_model(model, gguf_file, cache_dir)
        self.device = device or default_device()
        if dtype == "auto":
            dtype = "bfloat16" if self.device.startswith("cuda") else "float32"
        if dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"dtype={dtype!r}; use auto, float32, bfloat16 or float16")
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"  # generation continues after the prompt
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=getattr(torch, dtype)
        )
        if adapter is not None:
            self.model = _with_adapter(self.model, adapter)
        self.model.to(self.device).eval()
        self.name = model if gguf_file is None else f"{model}:{gguf_file}"
        if adapter is not None:
            self.name += f"+{Path(adapter).name}"
        self.path = path  # what was loaded (the converted checkpoint for a GGUF)
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.max_batch = max_batch
        self.generation = generation
        if seed is not None:
            torch.manual_seed(seed)

    def generate(self, messages: list[dict[str, str]], n: int) -> list[str]:
        """`n` sampled replies to one conversation."""
        return self.generate_batch([messages], n)[0]

    def generate_batch(self, conversations: list[list[dict[str, str]]], n: int) -> list[list[str]]:
        """`n` sampled replies to each conversation, left-padded into batches of at most
        `max_batch` sequences; replies in conversation order."""
        per = max(1, self.max_batch // max(n, 1))
        out: list[list[str]] = []
        for i in range(0, len(conversations), per):
            out.extend(self._batch(conversations[i : i + per], n))
        return out

    def _batch(self, convs: list[list[dict[str, str]]], n: int) -> list[list[str]]:
        from cudaperf.generation import chat_ids, generate_ids, sampling_config

        tok = self.tokenizer
        ids = [chat_ids(tok, m) for m in convs]
        cfg = sampling_config(self.model, self.temperature, self.max_new_tokens)
        rows = [p for p in ids for _ in range(n)]  # each conversation's n samples together
        comps = generate_ids(
            self.model,
            rows,
            cfg,
            self.generation,
            tok.pad_token_id,
            [tok.eos_token_id],
            self.max_batch,
        )
        text = tok.batch_decode(comps, skip_special_tokens=True)
        return [text[j * n : (j + 1) * n] for j in range(len(convs))]


def _with_adapter(model, adapter: str | Path):
    """`model` with the PEFT adapter at `adapter` merged in (a plain model again)."""
    folder = Path(adapter)
    if not (folder / "adapter_config.json").is_file():
        raise FileNotFoundError(
            f"{folder}: no adapter_config.json; give the folder `cudaperf train` saved the "
            "adapter to (its final/ or a checkpoint-N/ folder)"
        )
    try:
        from peft import PeftModel
    except ImportError:
        raise ImportError("loading an adapter needs peft: pip install 'cudaperf[train]'") from None
    join_pieces(folder)
    return PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
