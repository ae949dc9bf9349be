"""pool_map: results in order, and an interrupted parent leaves no worker running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cudaperf.procpool import pool_map
from tests.proc_helpers import kill_group, pid_gone

SRC = Path(__file__).resolve().parents[1] / "src"


def _square(x: int) -> int:
    return x * x


def test_results_come_in_order():
    assert list(pool_map(_square, range(50), workers=3, chunksize=4)) == [x * x for x in range(50)]


# The parent maps a slow function over many items and prints its workers' pids; SIGINT goes to
# the parent alone (as from a scheduler or `kill -INT`), not to its process group. The parent
# then stays alive: its workers must be gone before it exits, not only at its exit.
PARENT = textwrap.dedent("""
    import multiprocessing, os, sys, time
    from cudaperf.procpool import pool_map

    def slow(x):
        os.write(1, f"worker {os.getpid()}\\n".encode())  # one write: lines never interleave
        time.sleep(60)
        return x

    if __name__ == "__main__":
        try:
            for _ in pool_map(slow, range(100), workers=2):
                pass
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            time.sleep(30)
""")


def _start_parent(tmp_path, source: str, *args: str) -> subprocess.Popen:
    """Run `source` as a script (with `args`) in its own session (stdout read line by line)."""
    script = tmp_path / "parent.py"
    script.write_text(source)
    env = dict(os.environ, PYTHONPATH=str(SRC), PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        text=True,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )


def test_sigint_to_the_parent_alone_stops_every_worker(tmp_path):
    p = _start_parent(tmp_path, PARENT)
    try:
        lines = [p.stdout.readline() for _ in range(2)]
        assert all(line.startswith("worker ") for line in lines), (lines, p.poll())
        pids = [int(line.split()[1]) for line in lines]
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        assert p.stdout.readline().strip() == "interrupted" and time.monotonic() - t0 < 10
        deadline = time.monotonic() + 5
        while not all(map(pid_gone, pids)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(map(pid_gone, pids)), "a worker outlived the interrupted parent"
    finally:
        kill_group(p)


# The same, with the SIGINT delivered to another thread of the parent (the kernel picks any
# thread that does not block the signal, the pool's helper threads included): the main thread,
# waiting for a result that takes 60 s, must still act on it within seconds.
PARENT_THREAD_SIGNAL = PARENT.replace(
    "    try:\n",
    "    import signal, threading\n"
    "    def hit():\n"
    "        time.sleep(1.5)\n"
    "        signal.pthread_kill(threading.get_ident(), signal.SIGINT)\n"
    "    threading.Thread(target=hit, daemon=True).start()\n"
    "    try:\n",
    1,
)


def test_sigint_delivered_to_a_helper_thread_still_stops_the_map(tmp_path):
    p = _start_parent(tmp_path, PARENT_THREAD_SIGNAL)
    try:
        t0 = time.monotonic()
        lines = [p.stdout.readline() for _ in range(3)]
        assert lines[2].strip() == "interrupted", (lines, p.poll())
        assert time.monotonic() - t0 < 15  # not after the 60 s item
    finally:
        kill_group(p)


# A parent whose multiprocessing child uses a spawn pool, ends it with `stop` (argv[1]: 1 when
# two items are still running) and returns; the parent prints how long the child took to exit,
# or "alive" when it had not after 15 s (with `pool.shutdown(wait=False)` instead it mostly
# never exits).
POOL_CHILD = textwrap.dedent("""
    import multiprocessing, sys, time
    from concurrent.futures import ProcessPoolExecutor
    from cudaperf.procpool import stop

    def square(x):
        return x * x

    def child(pending):
        pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))
        assert [f.result() for f in [pool.submit(square, i) for i in range(8)]] == [
            i * i for i in range(8)]
        if pending:
            pool.submit(time.sleep, 60), pool.submit(time.sleep, 60)
            time.sleep(0.5)
        stop(pool)

    if __name__ == "__main__":
        ctx = multiprocessing.get_context("spawn")
        p = ctx.Process(target=child, args=(sys.argv[1] == "1",))
        t0 = time.monotonic()
        p.start()
        p.join(15)
        print("alive" if p.is_alive() else f"{time.monotonic() - t0:.2f} {p.exitcode}", flush=True)
""")


def _child_exit(tmp_path: Path, pending: bool) -> str:
    script = tmp_path / "pool_child.py"
    script.write_text(POOL_CHILD)
    env = dict(os.environ, PYTHONPATH=str(SRC), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, str(script), str(int(pending))]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        return p.stdout.readline().strip()
    finally:  # the child, and the workers of a child that never exited
        kill_group(p, wait_s=30)


def test_stop_lets_a_child_process_that_used_a_pool_exit(tmp_path):
    for pending in (False, True):
        got = _child_exit(tmp_path, pending)
        assert got != "alive" and got.split()[1] == "0" and float(got.split()[0]) < 12, got


# A main thread waiting in procpool.wait_get, or in an evaluator batch (LocalBackend.run waits
# for each result with it), while the SIGINT reaches another thread: it must stop within
# seconds, not when the next item comes (30 s here). argv[1]: "queue" or "batch".
WAIT_PARENT = textwrap.dedent("""
    import os, queue, signal, sys, threading, time
    from cudaperf.procpool import wait_get

    def hit():
        time.sleep(1.0)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    def run_queue():
        q = queue.Queue()
        threading.Thread(target=lambda: (time.sleep(30), q.put(1)), daemon=True).start()
        wait_get(q)

    def run_batch():
        import tempfile
        from cudaperf.execute import pool
        from cudaperf.execute.config import EvalConfig
        from cudaperf.execute.types import Candidate
        from cudaperf.tasks.io import load_sample

        def slow(ev, task, cand, stop, gate=None):  # a job that takes 30 s to prepare
            time.sleep(30)
            raise RuntimeError("late")

        pool.prepare_cached = slow
        cfg = EvalConfig(compile_only=True, cache_dir=tempfile.mkdtemp(), compile_jobs=1)
        task = load_sample()[0]
        for _ in pool.LocalBackend(cfg).run([(task, Candidate(code="x"))]):
            pass

    threading.Thread(target=hit, daemon=True).start()
    t0 = time.monotonic()
    try:
        {"queue": run_queue, "batch": run_batch}[sys.argv[1]]()
        print("finished", flush=True)
    except KeyboardInterrupt:
        print(f"interrupted {time.monotonic() - t0:.1f}", flush=True)
    os._exit(0)  # the 30 s job's thread would hold up the exit
""")


@pytest.mark.parametrize("what", ["queue", "batch"])
def test_a_wait_for_the_next_item_acts_on_a_sigint_another_thread_got(tmp_path, what):
    p = _start_parent(tmp_path, WAIT_PARENT, what)
    try:
        out, err = p.communicate(timeout=60)
    finally:
        kill_group(p)
    out = out.strip()
    assert out.startswith("interrupted"), (out, err[-2000:])
    assert float(out.split()[1]) < 10  # not after the 30 s item


def test_stop_returns_after_the_pools_manager_thread_closed_its_wakeup(monkeypatch):
    # The manager thread closes its wake-up pipe as it ends; the interpreter's exit hook
    # writes to that pipe without a lock, so a process exiting while the thread is still
    # ending could die of EBADF (exit code 1, seen in CI). Here the thread ends slowly.
    import concurrent.futures.process as cfp
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from cudaperf.procpool import stop, worker_init

    slow = cfp._ExecutorManagerThread.join_executor_internals

    def join_slowly(self):
        time.sleep(1.0)
        slow(self)

    monkeypatch.setattr(cfp._ExecutorManagerThread, "join_executor_internals", join_slowly)
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(2, mp_context=ctx, initializer=worker_init)
    assert [f.result() for f in [pool.submit(_square, i) for i in range(4)]] == [0, 1, 4, 9]
    wakeup = pool._executor_manager_thread_wakeup  # shutdown drops it
    stop(pool)
    assert wakeup._closed
