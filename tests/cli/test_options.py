"""Shared options (`cli.options`): the reward the CLI hands to GRPO for each preset and for
--reward overrides, options derived from `GrpoOptions`' fields (default and help declared once),
one GPU-list parser, and renamed options (--timing-budget, --wall-budget) whose old spellings
still work, saying the new name."""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path

import click
import pytest
import typer
from typer.testing import CliRunner

from cudaperf.cli import app
from cudaperf.cli.common import UserError
from cudaperf.cli.options import field_help, gpu_list, renamed
from cudaperf.reward.config import RewardConfig
from cudaperf.train.grpo import GrpoOptions
from tests.train.helpers import write_task_file

runner = CliRunner()

# The weights GRPO trained with before --reward existed (`--preset unified` / `outcome_only`).
UNIFIED = dict(
    name="unified",
    rejected=-1.0,
    format_error=-0.75,
    compile_error=-0.5,
    compiled=-0.25,
    runtime_error=-0.25,
    wrong_output=-0.25,
    correct=1.0,
    speed_weight=1.0,
    speed_cap=16.0,
    speed_floor=-0.5,
    baseline="auto",
    structure_weight=0.25,
    ranker_weight=0.25,
)
OUTCOME_ONLY = UNIFIED | dict(name="outcome_only", structure_weight=0.0, ranker_weight=0.0)


@pytest.fixture
def grpo(tmp_path, monkeypatch):
    """`cudaperf train grpo ARGS` up to the options `run_grpo` would get (returned; no run)."""
    import cudaperf.train.grpo as grpo_mod

    seen = []
    monkeypatch.setattr(grpo_mod, "run_grpo", lambda opts: seen.append(opts) or {})
    tasks = write_task_file(tmp_path)

    def invoke(*args):
        seen.clear()
        res = runner.invoke(
            app,
            [
                "train",
                "grpo",
                "--out",
                str(tmp_path / "run"),
                "--tasks",
                str(tasks),
                "--ranker",
                "none",
                *args,
            ],
        )
        return res, (seen[0] if seen else None)

    return invoke


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ([], UNIFIED),
        (["--preset", "unified"], UNIFIED),
        (["--preset", "outcome_only"], OUTCOME_ONLY),
        (
            ["--reward", "structure_weight=0.5"],
            UNIFIED | dict(name="unified+structure_weight=0.5", structure_weight=0.5),
        ),
        (
            [
                "--preset",
                "outcome_only",
                "--reward",
                "ranker_weight=0.1",
                "--reward",
                "baseline=naive",
            ],
            OUTCOME_ONLY
            | dict(
                name="outcome_only+ranker_weight=0.1,baseline=naive",
                ranker_weight=0.1,
                baseline="naive",
            ),
        ),
    ],
)
def test_the_reward_the_cli_hands_to_grpo(grpo, args, want):
    res, opts = grpo(*args)
    assert res.exit_code == 0, res.output
    assert asdict(opts.reward) == want


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--preset", "fastest"], "unknown reward preset 'fastest'"),
        (["--reward", "weight=1"], "no reward field 'weight'"),
        (["--reward", "structure_weight=lots"], "structure_weight takes a number"),
        (["--reward", "structure_weight"], "write FIELD=VALUE"),
        (["--reward", "structure_weight=-1"], "is negative"),
        (["--reward", "speed_cap=inf"], "must be a finite number"),
        (["--reward", "baseline=gpu"], "use one of"),
        (["--reward", "wrong_output=2"], "must be <"),
    ],
)
def test_a_bad_preset_or_reward_field_is_one_line(grpo, args, needle):
    res, opts = grpo(*args)
    assert res.exit_code == 2 and opts is None
    assert needle in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1, res.output


def _grpo_params(command: str = "grpo") -> dict[str, click.Parameter]:
    group = typer.main.get_command(app)
    cmd = group.commands["train"].commands[command]  # type: ignore[attr-defined]
    return {p.name: p for p in cmd.params}


def test_grpo_options_take_default_and_help_from_grpo_options():
    params = _grpo_params()
    # required; default dataset; --preset/--reward; shared with bench and refine
    other_form = {"out", "tasks", "splits", "reward", "generation"}
    derived = [f for f in fields(GrpoOptions) if f.name in params and f.name not in other_form]
    assert len(derived) >= 20, [f.name for f in derived]
    for f in derived:
        assert params[f.name].default == f.default, f.name
        assert params[f.name].help == field_help(GrpoOptions, f.name), f.name
    budget = params["wall_budget"]
    assert budget.opts == ["--wall-budget"] and budget.help.startswith("Seconds from the start")


def test_sft_options_take_default_and_help_from_sft_options():
    """`cudaperf train sft` retyped its defaults until 2026-12-05, and --epochs said 2 where
    SftOptions said 3: every option now comes from its SftOptions field."""
    from cudaperf.train.sft import SftOptions

    params = _grpo_params("sft")
    cli_name = {"time_budget_s": "wall_budget", "kinds": "kind"}
    other_form = {"out", "tasks", "kinds"}  # required; the default dataset; a repeated --kind
    derived = [
        f
        for f in fields(SftOptions)
        if cli_name.get(f.name, f.name) in params and f.name not in other_form
    ]
    assert len(derived) == 17, [f.name for f in derived]
    for f in derived:
        p = params[cli_name.get(f.name, f.name)]
        assert p.default == f.default and p.help == field_help(SftOptions, f.name), f.name
    assert SftOptions(out="x").epochs == params["epochs"].default == 2.0
    assert params["wall_budget"].opts == ["--wall-budget"]


def test_help_starts_with_a_capital_unless_it_starts_with_a_lower_case_name():
    from dataclasses import dataclass

    from cudaperf.fields import option

    @dataclass
    class Opts:
        a: int = option(1, "rows per step.")
        b: str = option("x", "smollm2 (bundled), a name or a path.")
        c: str = option("x", "splits.json (beside the task file).")

    assert field_help(Opts, "a") == "Rows per step."
    assert field_help(Opts, "b").startswith("smollm2 (") and field_help(Opts, "c")[0] == "s"


def test_every_visible_grpo_option_has_help_and_old_names_are_hidden():
    for p in _grpo_params().values():
        if isinstance(p, click.Option) and not p.hidden:
            assert p.help, p.name
    hidden = {o for p in _grpo_params().values() if getattr(p, "hidden", False) for o in p.opts}
    assert hidden == {"--time-budget"}
    shown = runner.invoke(app, ["train", "grpo", "--help"], terminal_width=200).output
    assert "--wall-budget" in shown and "--time-budget" not in shown and "--reward" in shown


def test_the_old_time_budget_of_train_is_the_wall_budget(grpo):
    res, opts = grpo("--time-budget", "120")
    assert res.exit_code == 0, res.output
    assert opts.wall_budget_s == 120.0
    assert "--time-budget is deprecated: use --wall-budget 120" in res.output
    res, opts = grpo("--time-budget", "120", "--wall-budget", "60")
    assert res.exit_code == 2 and "give --wall-budget only" in res.output


def test_eval_and_bench_timing_budget_and_its_old_name(monkeypatch, tmp_path):
    """--timing-budget (seconds per config) reaches EvalConfig.time_budget_s; --time-budget,
    its old name, too, with one line naming the new one."""
    import cudaperf.cli.bench as bench
    import cudaperf.cli.eval as ev

    got = []

    def stop(**kw):
        got.append(kw["time_budget_s"])
        raise UserError("stop here")

    monkeypatch.setattr(ev, "eval_config", stop)
    monkeypatch.setattr(bench, "check_toolchain", lambda *a, **k: None)
    monkeypatch.setattr(bench, "_scorer", lambda tasks, reward, ranker, **kw: stop(**kw))
    cmds = (
        ["eval", "--implementations"],
        [
            "bench",
            "run",
            "--model",
            "scripted:best",
            "--suite",
            "sample",
            "--out",
            str(tmp_path / "b"),
        ],
    )
    for cmd in cmds:
        res = runner.invoke(app, [*cmd, "--timing-budget", "0.3"])
        assert "stop here" in res.output and "deprecated" not in res.output
        res = runner.invoke(app, [*cmd, "--time-budget", "0.4"])
        assert "--time-budget is deprecated: use --timing-budget 0.4" in res.output
    assert got == [0.3, 0.4, 0.3, 0.4]


def test_data_measure_timing_budget_in_seconds_and_the_old_budget_ms(monkeypatch):
    import cudaperf.cli.data as data

    got = []

    def stop(**kw):
        got.append(kw["timing_budget"])
        raise ValueError("stop here")

    monkeypatch.setattr(data, "measure_config", stop)
    base = ["data", "measure", "--compile-only", "--out", "/tmp/cudaperf-never.jsonl"]
    for extra in ([], ["--timing-budget", "0.02"], ["--budget-ms", "20"]):
        res = runner.invoke(app, [*base, *extra])
        assert "stop here" in res.output, res.output
    assert got == [None, 0.02, 0.02]  # None: the bulk default (0.05 s)
    assert "--budget-ms is deprecated: use --timing-budget 0.02" in res.output
    from cudaperf.execute.bulk import BULK_EVAL_DEFAULTS

    monkeypatch.undo()
    kw = dict(
        out=Path("m.jsonl"),
        batch_tasks=1,
        jobs=None,
        gpus=None,
        trials=20,
        warmup=3,
        compile_only=True,
        arch=None,
        cache_dir=Path("/tmp"),
        scratch=None,
        seed_salt=None,
        run_timeout=1.0,
        max_inflight_gb=1.0,
        cpu_trials=0,
    )
    default = BULK_EVAL_DEFAULTS["time_budget_s"]
    assert data.measure_config(timing_budget=None, **kw).eval.time_budget_s == default


@pytest.mark.parametrize("spec", ["", "1,", ",1", "a", "one", "-1", "1.5", "0,-2", "1 2"])
def test_gpu_list_refuses_what_is_not_a_list_of_indices(spec):
    with pytest.raises(UserError, match="give GPU indices such as 0,1"):
        gpu_list(spec, "--gpus")


def test_gpu_list_parses_indices_refuses_repeats_and_checks_presence(monkeypatch):
    assert gpu_list(None, "--gpus") is None
    assert gpu_list("0", "--gpus") == (0,) and gpu_list(" 2, 1 ", "--eval-gpus") == (2, 1)
    with pytest.raises(UserError, match="--eval-gpus '1,1': GPU 1 is named twice"):
        gpu_list("1,1", "--eval-gpus")
    import cudaperf.execute.build as build

    class Gpu:
        def __init__(self, index):
            self.index = index

    monkeypatch.setattr(build, "detect_gpus", lambda: [Gpu(0), Gpu(1)])
    assert gpu_list("1,0", "--gpus", present=True) == (1, 0)
    with pytest.raises(UserError, match=r"no GPU 2 here \(GPUs: 0, 1\)"):
        gpu_list("0,2", "--gpus", present=True)
    assert gpu_list("7", "--gpus") == (7,)  # presence only when asked (the layout checks it)


@pytest.mark.parametrize(
    "cmd",
    [
        ["train", "grpo", "--out", "/tmp/x"],
        ["data", "measure", "--compile-only"],
        ["bench", "run", "--model", "scripted:best", "--suite", "sample", "--out", "/tmp/x"],
    ],
)
def test_every_gpu_option_uses_the_one_parser(cmd):
    flag = "--eval-gpus" if "train" in cmd else "--gpus"
    res = runner.invoke(app, [*cmd, flag, "0,0"])
    assert res.exit_code == 2 and "GPU 0 is named twice" in res.output, res.output


def test_renamed_converts_the_old_unit_and_refuses_both():
    assert renamed("--old", None, "--new", 3.0) == 3.0
    assert renamed("--old", 50.0, "--new", None, lambda ms: ms / 1e3) == 0.05
    with pytest.raises(UserError, match="--old is the old name of --new; give --new only"):
        renamed("--old", 1.0, "--new", 2.0)


def test_reward_config_is_the_preset_unless_a_field_is_changed():
    assert RewardConfig.preset("unified") == RewardConfig.preset("unified", []) == RewardConfig()
    assert asdict(RewardConfig.preset("unified")) == UNIFIED
    assert asdict(RewardConfig.preset("outcome_only")) == OUTCOME_ONLY
