"""child_proc on its own: the flush handshake, and the helpers of a job's output.log."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import threading

from cudaperf.execute.isolation.child_proc import ChildError, SpawnedChild, read_log


class _Alive:
    def is_alive(self) -> bool:
        return True


def _handle():
    """A SpawnedChild whose other end this test holds (no process is started)."""
    ours, theirs = multiprocessing.Pipe(duplex=True)
    h = SpawnedChild.__new__(SpawnedChild)
    h.conn, h.proc, h.output_mb = ours, _Alive(), None
    return h, theirs


def test_a_flush_not_answered_in_time_is_an_error_not_a_reply_for_the_next_request():
    """A reply arriving after the wait would be read as the next request's answer: a child
    that does not answer the flush within the wait ends the job instead."""
    h, child = _handle()
    raised: list[BaseException] = []

    def flush() -> None:
        try:
            h.flush(wait_s=0.1)
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            raised.append(e)

    t = threading.Thread(target=flush, daemon=True)  # without the bound it would block
    t.start()
    t.join(5)
    assert not t.is_alive() and len(raised) == 1 and isinstance(raised[0], ChildError)
    assert "did not flush" in str(raised[0])
    assert child.recv() == ("flush", None)
    child.send_bytes(json.dumps(["ok", None]).encode())
    h.flush(wait_s=1.0)  # answered: returns
    assert child.recv() == ("flush", None)


def test_read_log_keeps_the_end_and_says_what_it_cut(tmp_path):
    assert read_log(tmp_path, 10) == ""
    (tmp_path / "output.log").write_text("0123456789abcdef")
    assert read_log(tmp_path, 100) == "0123456789abcdef"
    assert read_log(tmp_path, 6) == "[... 10 bytes cut]\nabcdef"


def test_redirect_output_appends_or_truncates(tmp_path):
    """The worker truncates the job's log at its start; a candidate's process appends."""
    code = (
        "import sys; from cudaperf.execute.isolation.child_proc import redirect_output; "
        f"redirect_output({str(tmp_path)!r}, truncate=sys.argv[1] == 't'); "
        "print('line', sys.argv[1])"
    )
    for modes, want in ((("t", "a", "a"), "line t\nline a\nline a\n"), (("t",), "line t\n")):
        for mode in modes:
            subprocess.run([sys.executable, "-c", code, mode], check=True)
        assert (tmp_path / "output.log").read_text() == want
