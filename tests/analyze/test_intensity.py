"""Static arithmetic intensity: the naive/tiled matmul pair and loop trip counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaperf.analyze import AnalyzeConfig, StructuralReport, analyze
from cudaperf.analyze.index import Scope
from cudaperf.analyze.intensity import trip_count
from cudaperf.analyze.parse import parse

KERNELS = Path(__file__).parent / "kernels"
STATIC = AnalyzeConfig(resources=False)  # tree-sitter only: no nvcc, fast


def reports(name: str, config: AnalyzeConfig = STATIC) -> dict[str, StructuralReport]:
    """Reports by kernel name for one known-answer file."""
    return {r.name: r for r in analyze((KERNELS / name).read_text(), config=config)}


def test_tiled_matmul_has_16x_the_intensity_of_naive():
    r = reports("matmul.cu")
    naive = r["matmul_naive"].features["arithmetic_intensity"]
    tiled = r["matmul_tiled"].features["arithmetic_intensity"]
    assert naive == pytest.approx(0.25, rel=0.02)  # 2 FLOP per 8 bytes, unknown trip n
    assert tiled == pytest.approx(4.0, rel=0.02)  # each loaded element used 16 times
    assert r["matmul_naive"].features["intensity_exact"] == 0


def test_elementwise_intensity_is_exact():
    f = reports("coalesced.cu")["copy_coalesced"].features
    assert (f["flops_per_thread"], f["global_bytes_per_thread"]) == (1, 8)
    assert f["intensity_exact"] == 1


@pytest.mark.parametrize(
    "loop,trips",
    [
        ("for (int i = 0; i < 16; ++i) x;", 16),
        ("for (int i = 0; i <= 16; i += 4) x;", 5),
        ("for (int i = 10; i > 0; --i) x;", 10),
        ("for (int s = 128; s > 0; s >>= 1) x;", 8),
        ("for (int s = 1; s < 32; s *= 2) x;", 5),
        ("for (int i = 0; i < n; ++i) x;", None),
    ],
)
def test_trip_counts(loop, trips):
    root = parse("void f(int n) { " + loop + " }").root_node
    stack, node = [root], None
    while stack:
        n = stack.pop()
        if n.type == "for_statement":
            node = n
            break
        stack.extend(n.children)
    assert trip_count(node, Scope({}, {})) == trips
