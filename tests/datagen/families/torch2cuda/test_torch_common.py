"""Shared pieces of the PyTorch→CUDA families: the reference template, the row configs, and the
generated torch tasks pinned byte for byte (issue 43: the repeated `_REF` header and row-config
table were factored into `torch_common` without changing a generated task)."""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from cudaperf.datagen import FAMILIES, generate_one
from cudaperf.datagen.families.torch2cuda.torch_common import (
    ROW_SHAPES,
    reference_template,
    row_configs,
)
from cudaperf.tasks.model import TaskKind

# sha256 (first 16 hex digits) of the JSON of tasks 0-3 of seeds 0, 1 and 7, per torch family.
# A change here changes the generated data set: update the digests only when that is meant
# (and bump GENERATOR_VERSION), never to make a refactoring pass.
PINNED = {
    "torch_channel_affine": "694510fa29d162a0",
    "torch_cross_entropy": "8d1c2114e0ce7488",
    "torch_cumsum": "a3efbbb83f53a5b2",
    "torch_eltwise_chain": "54760fce46aef3fd",
    "torch_embedding": "1f35649ab1d688a0",
    "torch_layernorm": "e77b778c61235734",
    "torch_linear_act": "fd00bc7a5f3a8c68",
    "torch_masked_softmax": "051b865bf6ffd5da",
    "torch_pool2d": "7bab140dbef683a2",
    "torch_residual_norm": "14e2b046af652623",
    "torch_rmsnorm": "607d15bd0866573a",
    "torch_row_reduce": "9329ddfcf9ae56aa",
    "torch_softmax": "a59608e0baf8059c",
}


def test_every_torch_family_is_pinned():
    assert sorted(n for n, f in FAMILIES.items() if f.kind is TaskKind.TORCH2CUDA) == sorted(PINNED)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_generated_torch_tasks_are_unchanged(name):
    h = hashlib.sha256()
    for seed in (0, 1, 7):
        for index in range(4):
            task = generate_one(FAMILIES[name], seed, index).model_dump(mode="json")
            h.update((json.dumps(task, sort_keys=True) + "\n").encode())
    assert h.hexdigest()[:16] == PINNED[name]


def test_reference_template():
    body = "\n    def __init__(self):\n        super().__init__()\n"
    got = reference_template({"batch_size": "rows", "dim": "cols"}, body)
    assert got == (
        '\n"""$doc"""\n\nimport torch\nimport torch.nn as nn\n\n'
        "batch_size = $rows\ndim = $cols\n\n\n"
        'class Model(nn.Module):\n    """$doc"""\n' + body
    )


def test_row_configs():
    configs = row_configs(random.Random(3), ROW_SHAPES[0], 512, (4096,))
    assert [c.name for c in configs] == ["small", "medium", "large", "heldout"]
    small, medium, large, heldout = (c.sizes for c in configs)
    assert 3 <= small["batch_size"] < 9 and small["dim"] % 2 == 1
    assert medium == {"batch_size": 512, "dim": 4096}
    assert large == {"batch_size": 8192, "dim": 4096}
    assert 500 <= heldout["batch_size"] < 1500 and 1001 <= heldout["dim"] < 6000
    assert [c.held_out for c in configs] == [False, False, False, True]
    assert all(r * c == 2**25 for r, c in ROW_SHAPES)
