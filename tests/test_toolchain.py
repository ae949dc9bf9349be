import stat

from cudaperf.toolchain import host_cpu, tool_version


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


def test_host_cpu_is_the_model_name_and_falls_back_when_cpuinfo_is_unreadable(monkeypatch):
    import platform
    from pathlib import Path

    real = Path.read_text
    monkeypatch.setattr(
        Path,
        "read_text",
        lambda self, *a, **k: (
            "processor\t: 0\nmodel name\t: Some CPU @ 2.0GHz\nmodel name\t: other\n"
            if str(self) == "/proc/cpuinfo"
            else real(self, *a, **k)
        ),
    )
    assert host_cpu() == "Some CPU @ 2.0GHz"

    def unreadable(self, *a, **k):
        raise OSError("no /proc here")

    monkeypatch.setattr(Path, "read_text", unreadable)
    monkeypatch.setattr(platform, "processor", lambda: "")
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    assert host_cpu() == "x86_64"
