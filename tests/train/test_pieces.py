from __future__ import annotations

import pytest

from cudaperf.train.pieces import join_pieces, split_large_files


def test_large_files_split_into_pieces_and_join_back(tmp_path):
    big = bytes(range(256)) * 9000  # 2.2 MiB
    (tmp_path / "w.bin").write_bytes(big)
    (tmp_path / "small.json").write_text("{}")
    parts = split_large_files(tmp_path, 1.0)
    assert [p.name for p in parts] == ["w.bin.part000", "w.bin.part001", "w.bin.part002"]
    assert all(p.stat().st_size <= 1024 * 1024 for p in parts)
    assert not (tmp_path / "w.bin").exists() and (tmp_path / "small.json").exists()
    join_pieces(tmp_path)
    assert (tmp_path / "w.bin").read_bytes() == big
    with pytest.raises(ValueError, match="pieces-mib"):
        split_large_files(tmp_path, 0)
