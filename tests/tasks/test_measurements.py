import json

from cudaperf.tasks.measurements import (
    attach_measurements,
    measurements_from_results,
    read_results,
)
from cudaperf.tasks.model import Task

from .helpers import C_TASK


def _row(status="ok", mode="full", impl="naive"):
    timing = {"median_us": 12.5, "iqr_us": 0.5, "min_us": 12, "max_us": 14, "trials": 100}
    return {
        "status": status,
        "mode": mode,
        "task_id": C_TASK["id"],
        "candidate_id": impl,
        "gpu": "NVIDIA H200",
        "versions": {"nvcc": "13.0"},
        "configs": [{"config": c["name"], "timing": timing} for c in C_TASK["configs"]],
    }


def test_only_ok_full_results_become_measurements(tmp_path):
    p = tmp_path / "r.jsonl"
    rows = [_row(), _row(status="wrong_output", impl="x"), _row(mode="compile-only", impl="y")]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    found = measurements_from_results(read_results(p), "2026-11-30")
    assert list(found) == [(C_TASK["id"], "naive")]
    assert [m.config for m in found[(C_TASK["id"], "naive")]] == ["small", "big", "heldout"]


def test_attach_replaces_same_gpu_and_config():
    t = Task.model_validate(C_TASK)  # has one old H200 measurement on "small"
    found = measurements_from_results([_row()], "2026-11-30")
    (new,), n = attach_measurements([t], found)
    ms = new.implementations[0].measurements
    assert n == 1 and len(ms) == 3 and all(m.median_us == 12.5 for m in ms)
    assert new.implementations[0].measured_on("NVIDIA H200", [c.name for c in t.configs])


def test_keep_verified_drops_failed_implementations_then_thin_tasks():
    from cudaperf.tasks.measurements import keep_verified
    from cudaperf.tasks.model import Implementation

    base = Task.model_validate(C_TASK)
    impls = [
        Implementation(id=f"i{k}", code=f"// {k}\n", strategies=[s])
        for k, s in enumerate(["naive", "coalesced", "smem_tiling", "vectorized"])
    ]
    t = base.model_copy(update={"implementations": impls})
    found = measurements_from_results(
        [_row(impl="i0"), _row(impl="i1"), _row(impl="i2"), _row(status="wrong_output", impl="i3")],
        "2026-11-30",
    )
    (kept,), dropped = keep_verified([t], found)
    assert [i.id for i in kept.implementations] == ["i0", "i1", "i2"]
    assert dropped == {"implementation not verified (failed or not run)": 1}
    partial = {k: v[:1] for k, v in found.items()}  # timed on one config only
    kept2, dropped2 = keep_verified([t], partial)
    assert kept2 == [] and dropped2["implementation not timed on every config"] == 3
    renamed = {  # as many configs as the task, but one of them is not the task's
        k: [m.model_copy(update={"config": "other"}) if m.config == "big" else m for m in v]
        for k, v in found.items()
    }
    assert keep_verified([t], renamed)[0] == []
    assert keep_verified([t], found, gpu="NVIDIA A100")[0] == []


def test_results_carry_their_protocol_and_old_rows_read_as_bulk_v1():
    old, new = _row(), _row(impl="fast") | {"protocol": "evaluator-v1"}
    found = measurements_from_results([old, new], "2026-12-01")
    assert {m.protocol for m in found[(C_TASK["id"], "naive")]} == {"bulk-v1"}
    assert {m.protocol for m in found[(C_TASK["id"], "fast")]} == {"evaluator-v1"}


def test_legacy_protocol_is_left_out_when_written_so_old_files_stay_byte_identical():
    from cudaperf.tasks.model import Measurement

    legacy = Measurement(gpu="g", config="c", median_us=1.0)
    assert "protocol" not in legacy.model_dump(mode="json")
    assert Measurement.model_validate(legacy.model_dump()).protocol == "bulk-v1"
    ev = Measurement(gpu="g", config="c", median_us=1.0, protocol="evaluator-v1")
    assert ev.model_dump(mode="json")["protocol"] == "evaluator-v1"
    assert Measurement.model_validate_json(ev.model_dump_json()) == ev


def test_packaged_dataset_lines_save_byte_identically():
    import gzip
    from pathlib import Path

    import pytest

    data = Path(__file__).resolve().parents[2] / "data" / "tasks.jsonl.gz"
    if not data.exists():
        pytest.skip("no packaged dataset in this checkout")
    with gzip.open(data, "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(40)]
    for line in lines:
        t = Task.model_validate_json(line)
        assert any(i.measurements for i in t.implementations)
        assert json.dumps(t.model_dump(mode="json"), sort_keys=True) + "\n" == line


def test_keep_protocols_filters_measurements():
    import pytest

    from cudaperf.tasks.measurements import keep_protocols

    naive = C_TASK["implementations"][0]
    fast = dict(naive, id="fast", code=naive["code"] + "// v2\n")
    task = Task.model_validate(C_TASK | {"implementations": [naive, fast]})
    rows = [_row(), _row(impl="fast") | {"protocol": "evaluator-v1"}]
    found = measurements_from_results(rows, "2026-12-01")
    tasks, _ = attach_measurements([task], found)
    [bulk] = keep_protocols(tasks, ["bulk-v1"])
    [ev] = keep_protocols(tasks, {"evaluator-v1"})
    got = {i.id: len(i.measurements) for i in bulk.implementations if i.measurements}
    assert got == {"naive": 3}
    got = {i.id: len(i.measurements) for i in ev.implementations if i.measurements}
    assert got == {"fast": 3}
    with pytest.raises(ValueError, match="unknown measurement protocol"):
        keep_protocols(tasks, ["kernelbench"])
