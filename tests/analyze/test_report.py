"""Config validation, feature documentation, the score."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from cudaperf.analyze import FEATURES, RULES, AnalyzeConfig, analyze, score_features

KERNELS = Path(__file__).parent / "kernels"


def test_config_errors_say_how_to_fix():
    with pytest.raises(ValidationError, match="use one of .*sm_90"):
        AnalyzeConfig(arch="sm_99")
    with pytest.raises(ValidationError, match="1..1024"):
        AnalyzeConfig(block_size=2048)


def test_every_report_has_exactly_the_documented_features_and_known_rules():
    cfg = AnalyzeConfig(resources=False)
    for f in sorted(KERNELS.glob("*.cu")):
        for r in analyze(f.read_text(), config=cfg):
            assert set(r.features) == set(FEATURES)
            assert 0.0 <= r.score <= 1.0
            assert {x.rule for x in r.findings} <= set(RULES)
            assert [x.line for x in r.findings] == sorted(x.line for x in r.findings)


def test_score_orders_known_pairs():
    cfg = AnalyzeConfig(resources=False)

    def score(name: str, kernel: str) -> float:
        return {r.name: r.score for r in analyze((KERNELS / name).read_text(), config=cfg)}[kernel]

    assert score("coalesced.cu", "copy_coalesced") > score("strided.cu", "copy_strided")
    assert score("transpose_smem.cu", "transpose_padded") > score(
        "transpose_smem.cu", "transpose_unpadded"
    )
    assert score("barriers.cu", "uniform_barriers") > score("barriers.cu", "divergent_branch")
    assert score("matmul.cu", "matmul_tiled") > score("matmul.cu", "matmul_naive")


def test_score_components():
    cfg = AnalyzeConfig()
    base = dict.fromkeys(FEATURES)
    base.update(global_accesses=2, coalesced_fraction=1.0, unknown_accesses=0,
                vector_width_max=16, shared_bank_conflict_degree_max=1, divergent_barriers=0,
                spill_bytes=0, theoretical_occupancy=1.0, arithmetic_intensity=1e9)  # fmt: skip
    assert score_features(base, cfg) == pytest.approx(1.0)
    assert score_features({**base, "divergent_barriers": 1}, cfg) == pytest.approx(0.9)
    assert score_features({**base, "coalesced_fraction": 0.0}, cfg) == pytest.approx(0.7)
