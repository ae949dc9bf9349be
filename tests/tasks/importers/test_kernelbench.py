from pathlib import Path

import pytest

from cudaperf.tasks.importers.kernelbench import derive_configs, import_kernelbench, scaled_sizes

pytest.importorskip("torch")

ROOT = Path(__file__).parents[2] / "fixtures" / "kernelbench"


def test_imports_levels_and_skips_with_reasons():
    r = import_kernelbench(ROOT, levels=(1, 2, 3, 4))
    ids = [t.id for t in r.tasks]
    assert ids == [
        "kernelbench/level1/1_Scaled_copy",
        "kernelbench/level1/2_Row_softmax",
        "kernelbench/level2/1_Linear_bias_relu",
    ]
    assert r.summary() == {
        "imported": 3,
        "skipped": 2,
        "reasons": {
            "missing Model, get_inputs or get_init_inputs": 1,
            "level 4 needs pretrained models from a hub (offline)": 1,
        },
    }
    t = r.tasks[0]
    assert t.kind.value == "torch2cuda" and t.entry == "Model"
    assert t.provenance["license"].startswith("MIT")
    assert t.source == (ROOT / "KernelBench/level1/1_Scaled_copy.py").read_text()


def test_default_small_and_heldout_configs():
    t = import_kernelbench(ROOT / "KernelBench", levels=(1,)).tasks[0]
    by = {c.name: c for c in t.configs}
    assert by["default"].sizes == {"rows": 512, "cols": 1000, "alpha": 0.5}  # 256 * 2 evaluated
    assert by["small"].sizes == {"rows": 64, "cols": 128, "alpha": 0.5}
    assert by["heldout"].held_out and by["heldout"].sizes["rows"] == 384
    assert not by["small"].held_out and not by["default"].held_out


def test_no_sizes_means_default_only():
    t = import_kernelbench(ROOT, levels=(1,)).tasks[1]
    assert [c.name for c in t.configs] == ["default"]


def test_derived_constants_follow_their_sizes():
    # bias_shape = (out_features,) is recomputed, so the scaled configs stay valid.
    t = import_kernelbench(ROOT, levels=(2,)).tasks[0]
    assert [c.name for c in t.configs] == ["default", "small", "heldout"]


def test_invalid_derivations_are_dropped():
    src = (ROOT / "KernelBench/level1/1_Scaled_copy.py").read_text()
    broken = src.replace("return [torch.rand(rows, cols)]", "assert rows == 512\n    return []")
    assert [c.name for c in derive_configs(broken)] == ["default"]


def test_scaling_keeps_small_ints_and_multiples_of_8():
    assert scaled_sizes({"k": 3, "n": 1024, "m": 1001, "x": 0.5}, 1 / 8) == {
        "k": 3,
        "n": 128,
        "m": 125,
        "x": 0.5,
    }


def test_level_one_folder_and_missing_checkout(tmp_path):
    r = import_kernelbench(ROOT / "KernelBench" / "level2", levels=(2,))
    assert len(r.tasks) == 1
    with pytest.raises(FileNotFoundError, match="no KernelBench levelN folders"):
        import_kernelbench(tmp_path)
