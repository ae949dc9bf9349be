"""bench/hoststat.py: the CPUs' time shares between two /proc/stat readings and the speed of a
fixed Python loop, for bench_suite.sh's step logs."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.script_helpers import ROOT, load_script

hs = load_script("bench/hoststat.py")

# user nice system idle iowait irq softirq steal guest guest_nice
BEFORE = "cpu 100 0 50 800 10 0 0 40 0 0"


def test_shares_count_busy_iowait_and_steal_of_the_ticks_between():
    after = "cpu 400 0 150 1100 60 0 0 240 0 0"  # +300 user +100 system +300 idle +50 io +200 steal
    assert hs.shares(BEFORE, after) == {"busy": 42.1, "iowait": 5.3, "steal": 21.1}


def test_missing_trailing_fields_count_zero_and_no_time_is_no_share():
    assert hs.ticks("cpu 1 2 3 4")["steal"] == 0
    assert hs.shares(BEFORE, BEFORE) == {}


def test_readings_out_of_order_or_not_a_cpu_line_are_refused():
    with pytest.raises(ValueError, match="older"):
        hs.shares("cpu 900 0 50 800 10 0 0 40", BEFORE)
    with pytest.raises(ValueError, match="not a /proc/stat cpu line"):
        hs.ticks("cpu0 1 2 3 4")


def test_cpu_line_is_the_aggregate_line(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu0 9 9 9 9\ncpu  1 2 3 4 5 6 7 8 0 0\nintr 5\n")
    assert hs.ticks(hs.cpu_line(str(stat)))["steal"] == 8
    stat.write_text("intr 5\n")
    with pytest.raises(ValueError, match="no aggregate"):
        hs.cpu_line(str(stat))


def test_the_commands_print_one_line_each():
    def run(*args):
        return subprocess.run(
            [sys.executable, str(ROOT / "bench/hoststat.py"), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert re.fullmatch(r"python loop [\d.]+ ms\n", run("speed").stdout)
    line = run("stat").stdout.strip()
    assert hs.ticks(line)["idle"] >= 0
    over = run("over", line).stdout
    assert re.fullmatch(
        r"(busy [\d.]+%, iowait [\d.]+%, steal [\d.]+% of \d+ CPUs|no CPU time passed)\n", over
    )
    bad = run("over", "nonsense")
    assert bad.returncode == 2 and bad.stderr.startswith("hoststat: not a /proc/stat cpu line")
    assert run().returncode == 2
