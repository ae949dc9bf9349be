"""Small hand-written tasks for the tasks/CLI tests (independent of the bundled sample)."""

from __future__ import annotations

import copy
from typing import Any

C_TASK: dict[str, Any] = {
    "id": "test/c2cuda/scale",
    "kind": "c2cuda",
    "family": "scale",
    "entry": "scale",
    "source": "void scale(int n, float a, const float* x, float* y) {\n"
    "  for (int i = 0; i < n; ++i) y[i] = a * x[i];\n}\n",
    "signature": [
        {"name": "n", "ctype": "int", "role": "scalar"},
        {"name": "a", "ctype": "float", "role": "scalar"},
        {"name": "x", "ctype": "const float*", "role": "in", "length": "n"},
        {"name": "y", "ctype": "float", "role": "out", "length": "n"},
    ],
    "configs": [
        {"name": "small", "sizes": {"n": 10, "a": 2.0}},
        {"name": "big", "sizes": {"n": 1000, "a": 0.5}, "seed": 7},
        {
            "name": "heldout",
            "sizes": {"n": 333, "a": -1.0},
            "held_out": True,
            "distribution": {"kind": "normal", "mean": 3.0, "std": 0.5},
        },
    ],
    "tolerance": {"atol": 1e-6, "rtol": 1e-5},
    "implementations": [
        {
            "id": "naive",
            "code": "__global__ void k(int n,float a,const float*x,float*y){}\n"
            'extern "C" void scale(int n, float a, const float* x, float* y) {}',
            "strategies": ["naive"],
            "measurements": [
                {
                    "gpu": "NVIDIA H200",
                    "config": "small",
                    "median_us": 3.5,
                    "iqr_us": 0.1,
                    "trials": 100,
                    "versions": {"nvcc": "13.0"},
                    "date": "2026-11-30",
                }
            ],
        }
    ],
    "provenance": {"source": "test", "license": "Apache-2.0"},
}

TORCH_TASK: dict[str, Any] = {
    "id": "test/torch2cuda/relu",
    "kind": "torch2cuda",
    "family": "relu",
    "entry": "Model",
    "source": "import torch\nN = 16\nclass Model(torch.nn.Module):\n"
    "    def forward(self, x):\n        return torch.relu(x)\n"
    "def get_inputs():\n    return [torch.randn(N)]\ndef get_init_inputs():\n    return []\n",
    "configs": [
        {"name": "a", "sizes": {"N": 16}},
        {"name": "b", "sizes": {"N": 1024}},
        {"name": "c", "sizes": {"N": 4097}, "held_out": True},
    ],
    "implementations": [
        {"id": "naive", "code": "class ModelNew: pass", "strategies": ["naive"]},
        {"id": "fast", "code": "class ModelNew: pass  # v2", "strategies": ["vectorized"]},
    ],
}


def c_task(**changes: Any) -> dict[str, Any]:
    """A deep copy of C_TASK with top-level fields replaced."""
    d = copy.deepcopy(C_TASK)
    d.update(changes)
    return d
