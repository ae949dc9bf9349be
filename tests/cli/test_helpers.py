"""tests/cli/helpers.py's `cli`: a call forked from the server answers as a fresh
`python -m cudaperf` process does (exit status, stdout, stderr, environment, folder)."""

from __future__ import annotations

import subprocess

import pytest

from tests.cli import helpers


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("tasks", "show", "nope/nope"),  # a user error: one line, exit 2
        ("report", "missing.jsonl"),
        ("bench", "run", "--samples", "0"),  # click's own usage error
        (),  # no arguments: the help, exit 2 (no_args_is_help)
    ],
)
def test_a_forked_call_answers_as_a_fresh_process(args, monkeypatch):
    forked = helpers.cli(*args)
    monkeypatch.setenv("CUDAPERF_TEST_CLI_FORK", "0")
    fresh = helpers.cli(*args)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        fresh.returncode,
        fresh.stdout,
        fresh.stderr,
    )


def test_a_forked_call_gets_its_environment_folder_and_timeout(tmp_path):
    (tmp_path / "here.jsonl").write_text("not json\n")
    r = helpers.cli("report", "here.jsonl", cwd=tmp_path)  # found in the call's folder
    assert r.returncode == 2 and "here.jsonl:1: not valid JSON" in r.stderr, r.stderr
    none = tmp_path / "none.jsonl.gz"
    r = helpers.cli("data", "verify", "--no-nvcc", "--json", CUDAPERF_DATASET=str(none))
    assert r.returncode != 0 and f"{none}: no such file" in r.stderr, r.stderr  # its env
    with pytest.raises(subprocess.TimeoutExpired):
        helpers.cli("tasks", "list", timeout=0.01)
    assert helpers.cli("--version").returncode == 0  # the server goes on after a timeout


def test_both_answers_of_a_quick_call_read_at_once_are_both_taken(monkeypatch):
    """A command that ends at once: its pid and exit answers may come in one read; the
    second must not wait for more from the pipe (it would time the call out)."""
    import os
    import time
    from types import SimpleNamespace

    r, w = os.pipe()
    os.write(w, b'{"pid": 1}\n{"rc": 0}\n')
    monkeypatch.setattr(helpers, "_pending", bytearray())
    with os.fdopen(r, "rb", buffering=0) as pipe:
        server = SimpleNamespace(stdout=pipe)
        t0 = time.monotonic()
        assert helpers._answer(server, 5) == {"pid": 1}
        assert helpers._answer(server, 5) == {"rc": 0}
        assert time.monotonic() - t0 < 1
        assert helpers._answer(server, 0.2) is None  # nothing more: no answer, no wait past it
    os.close(w)
