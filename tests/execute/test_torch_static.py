import json
from pathlib import Path

import pytest

from cudaperf.execute.torch_static import FATAL, TORCH_CHECKS, check_torch_candidate

CORPUS = Path(__file__).parents[1] / "adversarial" / "torch"
MANIFEST = json.loads((CORPUS / "expected.json").read_text())
REF_NAMES = {"Model", "get_inputs", "get_init_inputs"}


def fatal_ids(source: str) -> list[str]:
    return [cid for cid, _, fatal in check_torch_candidate(source, REF_NAMES) if fatal]


@pytest.mark.parametrize("name", sorted(MANIFEST["candidates"]))
def test_adversarial_corpus_static_outcome(name):
    expected = MANIFEST["candidates"][name]["static"]
    fired = fatal_ids((CORPUS / name).read_text())
    if expected is None:
        assert fired == [], f"{name} should pass the static checks, got {fired}"
    else:
        assert expected in fired, f"{name} should be rejected by {expected}, got {fired}"


def test_every_fatal_check_has_a_cheating_candidate_or_unit_test():
    static = {c["static"] for c in MANIFEST["candidates"].values()} - {None}
    covered = static | {
        "no_model_new",
        "calls_reference",
        "nn_module_calls",
        "no_custom_kernel",
        "embedded_host_code",
    }
    assert set(FATAL) <= covered
    assert set(FATAL) <= set(TORCH_CHECKS)


HONEST = (CORPUS / "honest.py").read_text()


def test_nn_layer_call_rejected():
    src = HONEST.replace(
        "self.lib = load_cuda(CUDA_SRC)",
        "self.lib = load_cuda(CUDA_SRC)\n        self.fc = nn.Linear(4, 4)",
    ).replace("return y", "return self.fc(y)")
    assert "nn_module_calls" in fatal_ids(src)


def test_calls_reference_and_missing_model_new():
    assert "calls_reference" in fatal_ids(HONEST.replace("return y", "return Model()(x)"))
    assert "no_model_new" in fatal_ids(HONEST.replace("class ModelNew", "class Other"))


def test_no_kernel_and_unloaded_kernel():
    no_src = (
        "import torch\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n        return x\n"
    )
    assert "no_custom_kernel" in fatal_ids(no_src)
    unloaded = HONEST.replace("self.lib = load_cuda(CUDA_SRC)", "self.lib = None")
    assert "no_custom_kernel" in fatal_ids(unloaded)


def test_embedded_host_code_checks_apply():
    evil = HONEST.replace(
        'extern "C" void affine_relu(',
        'extern "C" void helper() { system("ls"); }\nextern "C" void affine_relu(',
    )
    assert "embedded_host_code" in fatal_ids(evil)


def test_launcher_names_that_look_like_ops_are_allowed():
    src = HONEST.replace(
        "self.lib.affine_relu(x, y, x.numel())", "self.lib.softmax(x, y, x.numel())"
    )
    src = src.replace("self.lib = load_cuda", "self.kernels = load_cuda").replace(
        "self.lib.", "self.kernels."
    )
    assert fatal_ids(src) == []


def test_warnings_are_not_fatal():
    half = HONEST.replace("x = x.contiguous()", "x = x.contiguous().half().float()")
    found = {cid: fatal for cid, _, fatal in check_torch_candidate(half, REF_NAMES)}
    assert found.get("half_precision") is False


def test_syntax_error_is_one_fatal_finding():
    assert check_torch_candidate("class ModelNew(:\n")[0][0] == "syntax_error"
