"""Compilers under `confine` (`build_confine`): a source that includes a host file through a
macro (which `checks.include_outside` does not see) cannot read it when confined and reads it
when not; an honest build still works; a kernel that refuses namespaces still builds, with the
missing protections named; `isolate_files` switches it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from catalog import SAXPY_NAIVE, saxpy_task
from conftest import needs_nvcc

from cudaperf.execute import checks
from cudaperf.execute.build import build_candidate, build_reference
from cudaperf.execute.isolation import build_confine
from tests.execute.isolation.test_confine import needs_ns

TOKEN = "THE_SECRET_TOKEN_93"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


@pytest.fixture()
def secrets_(cpu_config):
    """Two host files a build must not read: one among the evaluator's results (cache dir),
    one in a non-system top-level folder (/var)."""
    results = Path(cpu_config.cache_dir) / "results"
    results.mkdir(parents=True, exist_ok=True)
    a = results / "secret-include.h"
    other = Path(tempfile.mkdtemp(prefix="build-secret-", dir="/var/tmp"))
    b = other / "answer.h"
    for p in (a, b):
        p.write_text(f"int leaked = {TOKEN} + ;\n")
    yield a, b
    a.unlink()
    shutil.rmtree(other, ignore_errors=True)


def _including(path: Path, body: str) -> str:
    """`body` preceded by an include of `path` spelled through a macro."""
    return f'#define HOSTFILE "{path}"\n#include HOSTFILE\n{body}'


def _reference(cfg, path: Path):
    """gcc on a task source that includes `path` (build_reference, the gcc path)."""
    t = saxpy_task()
    return build_reference(t.model_copy(update={"source": _including(path, t.source)}), cfg)


@needs_ns
def test_a_macro_include_of_a_host_file_cannot_read_it_under_confinement(cpu_config, secrets_):
    for secret in secrets_:
        code = _including(secret, "int honest(void) { return 1; }\n")
        assert not any(f.rule == "include_outside" for f in checks.run_checks(code))  # unseen
        b = _reference(cpu_config, secret)
        assert not b.ok and TOKEN not in b.log, b.log
        assert "No such file" in b.log, b.log
        assert {"mount_ns", "readonly_root", "seccomp"} <= set(b.protections["active"])


def test_unconfined_control_reads_the_host_file(cpu_config, secrets_):
    """Without isolate_files the same build quotes the file: the test above can fail."""
    off = replace(cpu_config, isolate_files=False)
    for secret in secrets_:
        b = _reference(off, secret)
        assert not b.ok and TOKEN in b.log
        assert b.protections == build_confine.OFF


@needs_ns
def test_an_honest_build_works_confined_and_says_so(cpu_config):
    b = build_reference(saxpy_task(), cpu_config)
    assert b.ok and Path(b.lib).is_file()
    assert "mount_ns" in b.protections["active"] and not b.protections["missing"]


@needs_ns
@needs_nvcc
def test_nvcc_builds_confined_and_the_macro_include_is_blocked(cpu_config, secrets_):
    ok = build_candidate(saxpy_task(), SAXPY_NAIVE + "\n// confined nvcc\n", "sm_90", cpu_config)
    assert ok.ok, ok.log
    assert {"mount_ns", "seccomp"} <= set(ok.protections["active"])
    bad = build_candidate(saxpy_task(), _including(secrets_[1], SAXPY_NAIVE), "sm_90", cpu_config)
    assert not bad.ok and TOKEN not in bad.log


DEGRADED = """
import json, sys
sys.path[:0] = [sys.argv[1]]
from cudaperf.execute.isolation import build_confine
from cudaperf.execute.isolation import confine
confine._seccomp(confine.Protections())  # stands in for a kernel that forbids namespaces
p, report = build_confine.run_compiler(
    ["gcc", "-shared", "-fPIC", "-o", "x.so", "x.c"], sys.argv[2], 60, True, [])
print(json.dumps({"rc": p.returncode, "log": p.stderr, "report": report}))
"""


def test_refused_namespaces_degrade_like_the_worker_and_are_named(tmp_path):
    (tmp_path / "x.c").write_text("int f(void) { return 2; }\n")
    src = str(Path(build_confine.__file__).parents[3])
    r = subprocess.run(
        [sys.executable, "-c", DEGRADED, src, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["rc"] == 0, got["log"]  # the build still runs
    assert (tmp_path / "x.so").is_file()
    assert "mount_ns" not in got["report"]["active"]
    assert "refused" in got["report"]["missing"]["mount_ns"]
    assert "no_new_privs" in got["report"]["active"]


def test_the_policy_hides_non_system_folders_and_keeps_the_toolchain(tmp_path):
    pol = build_confine.build_policy(str(tmp_path), ["/nonexistent/cache"], ["gcc"])
    assert "/tmp" in pol.private and "/nonexistent/cache" in pol.private
    assert "/usr" not in pol.private and "/etc" not in pol.private
    if Path("/var").is_dir():
        assert "/var" in pol.private
    assert pol.writable == (str(tmp_path),) and pol.chdir == str(tmp_path)
    assert not pol.python
