import json
from pathlib import Path

import pytest

from cudaperf.execute.pytorch.static import FATAL, TORCH_CHECKS, check_torch_candidate
from cudaperf.execute.types import Severity

CORPUS = Path(__file__).parents[2] / "adversarial" / "torch"
MANIFEST = json.loads((CORPUS / "expected.json").read_text())
REF_NAMES = {"Model", "get_inputs", "get_init_inputs"}


def fatal_ids(source: str) -> list[str]:
    found = check_torch_candidate(source, REF_NAMES)
    return [f.rule for f in found if f.severity is Severity.ERROR]


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
    found = {f.rule: f.severity for f in check_torch_candidate(half, REF_NAMES)}
    assert found.get("half_precision") is Severity.WARNING


def test_syntax_error_is_one_fatal_finding():
    (found,) = check_torch_candidate("class ModelNew(:\n")
    assert found.rule == "syntax_error" and found.severity is Severity.ERROR


def test_compute_op_list_is_torch_s_own():
    torch = pytest.importorskip("torch")
    from cudaperf.execute.pytorch.ops import COMPUTE_OPS, COMPUTE_OPS_TORCH, derive_compute_ops

    assert {"relu", "clamp_min", "matmul", "softmax", "gelu", "addcmul"} <= COMPUTE_OPS
    assert not {"empty_like", "view", "contiguous", "numel", "copy", "data_ptr"} & COMPUTE_OPS
    if torch.__version__ != COMPUTE_OPS_TORCH:
        pytest.skip(f"torch_ops.json is from torch {COMPUTE_OPS_TORCH}, not {torch.__version__}")
    assert COMPUTE_OPS == frozenset(derive_compute_ops())  # regenerate: see torch_static


FORWARD = "        self.lib.affine_relu(x, y, x.numel())\n        return y"


@pytest.mark.parametrize(
    "imports, body",
    [
        ("from torch.nn.functional import relu as r\n", "return r(y)"),
        ("from torch import clamp_min\n", "return clamp_min(y, 0.0)"),
        ("act = torch.relu\n", "return act(y)"),
        ("", "return y.clamp_min(0.0)"),
        ("", 'return getattr(torch, "relu")(y)'),
        ("", "return y * 2.0 + 1.0"),
        ("", "return -x"),
        ("", "z = torch.empty_like(y)\n        z += y\n        return z"),
        ("", "return y.where(x > 0, y)"),
    ],
)
def test_bare_aliased_and_operator_compute_is_rejected(imports, body):
    src = imports + HONEST
    assert FORWARD in src
    src = src.replace(FORWARD, "        self.lib.affine_relu(x, y, x.numel())\n        " + body)
    assert "torch_compute_ops" in fatal_ids(src), body


def test_host_side_scalar_arithmetic_is_allowed():
    src = HONEST.replace(
        FORWARD,
        "        n = x.numel()\n        blocks = (n + 255) // 256\n        if x.dim() == 2 and "
        "blocks > 0 and y is not None:\n            pass\n"
        "        self.lib.affine_relu(x, y, n)\n        return y",
    )
    assert fatal_ids(src) == []


@pytest.mark.parametrize(
    "lookup",
    [
        "key = x.data_ptr()\n        if key in self.cache:\n            return self.cache[key]",
        "key = (x.data_ptr(), x.shape)\n        hit = self.cache.get(key)",
        "k0 = id(x)\n        k1 = (k0, 1)\n        out = self.cache[k1]",
    ],
)
def test_pointer_cache_key_followed_through_variables(lookup):
    src = HONEST.replace(FORWARD, "        " + lookup + "\n" + FORWARD)
    found = {f.rule for f in check_torch_candidate(src, REF_NAMES)}
    assert "pointer_cache" in found


def test_honest_implementations_of_the_sample_set_pass_the_static_checks():
    """The derived op list must not reject honest code: constructor arithmetic on sizes
    (`kernel_size // 2`) and parameter initialisation (`nn.init.uniform_`) are not the
    task's compute (both once rejected every conv2d and layernorm implementation)."""
    from cudaperf.execute.evaluator import reference_names
    from cudaperf.tasks.io import load_sample

    tasks = [t for t in load_sample() if t.kind.value == "torch2cuda"]
    impls = [(t, i) for t in tasks for i in t.implementations]
    assert len(impls) >= 12
    for t, i in impls:
        found = check_torch_candidate(i.code, reference_names(t.source))
        fired = [f.rule for f in found if f.severity is Severity.ERROR]
        assert fired == [], (t.id, i.id, fired)


def test_constructor_size_arithmetic_and_initialisation_are_allowed():
    init = (
        "    def __init__(self, k=3):\n        super().__init__()\n        self.pad = k // 2\n"
        "        self.w = nn.Parameter(torch.empty(4))\n"
        "        nn.init.uniform_(self.w, -1.0, 1.0)\n"
    )
    src = HONEST.replace("    def __init__(self):\n        super().__init__()\n", init)
    assert "k // 2" in src and fatal_ids(src) == []
