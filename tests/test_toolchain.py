import stat

from cudaperf.toolchain import tool_version


def _exe(tmp_path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(f"#!/bin/sh\nprintf '%s\\n' '{text}'\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


def test_nvcc_release_line_gives_the_version(tmp_path):
    exe = _exe(tmp_path, "nvcc", "Cuda compilation tools, release 13.0, V13.0.88")
    assert tool_version(exe) == "13.0.88"


def test_other_tools_give_their_first_line_and_missing_ones_say_so(tmp_path):
    assert tool_version(_exe(tmp_path, "gcc", "gcc (Ubuntu) 13.3.0")) == "gcc (Ubuntu) 13.3.0"
    assert tool_version(str(tmp_path / "nope")) == "missing"


def test_a_failed_probe_is_not_remembered(tmp_path):
    exe = tmp_path / "late"
    assert tool_version(str(exe)) == "missing"  # not there yet
    _exe(tmp_path, "late", "Cuda compilation tools, release 13.0, V13.0.88")
    assert tool_version(str(exe)) == "13.0.88"  # asked again, not the cached "missing"
