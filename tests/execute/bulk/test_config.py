"""`BulkConfig` contains the evaluator's `EvalConfig`; `data measure`'s flags map onto it with
the values the bulk runner read before the two were joined."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cudaperf.cli import app
from cudaperf.cli.data import measure_config
from cudaperf.execute.bulk import BULK_EVAL_DEFAULTS, BulkConfig, bulk_eval_config
from cudaperf.execute.config import EvalConfig

# Every flag of `data measure` (the set before BulkConfig contained EvalConfig).
FLAGS = {
    "--out",
    "--batch-tasks",
    "--jobs",
    "--gpus",
    "--trials",
    "--warmup",
    "--timing-budget",
    "--shard",
    "--kinds",
    "--limit",
    "--compile-only",
    "--arch",
    "--cache-dir",
    "--scratch",
    "--max-inflight-gb",
    "--cpu-trials",
    "--run-timeout",
    "--seed-salt",
    "--summary",
    "--progress-every",
    "--json",
}

CLI_DEFAULTS = dict(
    out=Path("measure_results.jsonl"),
    batch_tasks=32,
    jobs=None,
    gpus=None,
    trials=20,
    warmup=3,
    timing_budget=0.05,
    compile_only=False,
    arch=None,
    cache_dir=Path("~/.cache/cudaperf"),
    scratch=None,
    seed_salt=None,
    run_timeout=120.0,
    max_inflight_gb=16.0,
    cpu_trials=0,
)


def test_help_lists_the_same_flags():
    out = CliRunner().invoke(app, ["data", "measure", "--help"], terminal_width=200).output
    shown = set(re.findall(r"(--[a-z][a-z-]+)", out)) - {"--help", "--no-compile-only"}
    assert FLAGS <= shown, FLAGS - shown


def test_cli_values_land_in_eval_config_and_bulk_fields():
    c = measure_config(**CLI_DEFAULTS)
    ev = c.eval
    assert (ev.trials, ev.warmup, ev.time_budget_s, ev.compile_only) == (20, 3, 0.05, False)
    assert c.eval.time_budget_s == 0.05 and c.compile_only is False
    assert ev.cache_dir == Path("~/.cache/cudaperf").expanduser() and ev.arch is None
    assert (ev.check_after_timing, ev.max_bandwidth_gbs, ev.nvcc, ev.gcc) == (
        True,
        10000.0,
        "nvcc",
        "gcc",
    )
    assert (c.silence_timeout_s, c.batch_timeout_s, c.cpu_trials, c.max_inflight_gb) == (
        120.0,
        900.0,
        0,
        16.0,
    )
    # the single-candidate builds of the bisection keep the evaluator's compile limit
    assert ev.compile_timeout_s == EvalConfig().compile_timeout_s
    c = measure_config(
        **CLI_DEFAULTS
        | dict(
            trials=7,
            warmup=0,
            timing_budget=0.0125,
            arch="sm_80",
            seed_salt=5,
            gpus=(0, 1),
            compile_only=True,
            run_timeout=8.0,
            cpu_trials=2,
        )
    )
    assert (c.eval.trials, c.eval.warmup, c.eval.time_budget_s, c.eval.arch) == (
        7,
        0,
        0.0125,
        "sm_80",
    )
    assert (c.eval.seed_salt, c.eval.gpus, c.compile_only) == (5, (0, 1), True)
    assert (c.silence_timeout_s, c.cpu_trials) == (8.0, 2)


@pytest.mark.parametrize("s", [0.05, 0.0125, 0.0001, 0.25, 0.0333, 1.0])
def test_the_timing_budget_stays_in_seconds(s):
    """Seconds from the command line to the runner; milliseconds only in the C call."""
    assert measure_config(**CLI_DEFAULTS | {"timing_budget": s}).eval.time_budget_s == s


def test_bulk_declares_no_setting_the_evaluator_has():
    shared = {f.name for f in fields(EvalConfig)} & {f.name for f in fields(BulkConfig)}
    assert shared == {"cpu_trials"}, shared  # 0 = "not timed", which EvalConfig refuses
    assert bulk_eval_config() == EvalConfig(**BULK_EVAL_DEFAULTS)


@pytest.mark.parametrize(
    "kw, word",
    [
        ({"trials": 0}, "trials"),
        ({"warmup": -1}, "warmup"),
        ({"timing_budget": 0.0}, "--timing-budget"),
        ({"arch": "90"}, "arch"),
        ({"cpu_trials": -1}, "cpu_trials"),
        ({"run_timeout": 0.0}, "silence_timeout_s"),
        ({"batch_tasks": 0}, "batch_tasks"),
        ({"out": Path("x.txt")}, ".jsonl"),
    ],
)
def test_bad_values_name_the_setting(kw, word):
    with pytest.raises(ValueError, match=re.escape(word)):
        measure_config(**CLI_DEFAULTS | kw)


def test_auto_compile_only_is_refused():
    with pytest.raises(ValueError, match="compile_only"):
        BulkConfig(out=Path("r.jsonl"), eval=EvalConfig())
