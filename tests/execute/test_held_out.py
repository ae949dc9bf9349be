"""held_out: the per-config fold both tracks share (JobFold), and the message rules."""

from __future__ import annotations

from cudaperf.execute.held_out import WITHHELD, JobFold, held_out_message, visible_first
from cudaperf.execute.types import ConfigResult, Status
from cudaperf.tasks.model import InputConfig

CFGS = [
    InputConfig(name="big", sizes={"n": 4096}, held_out=True),
    InputConfig(name="small", sizes={"n": 64}),
    InputConfig(name="mid", sizes={"n": 512}),
]


def _cr(cfg: InputConfig, correct: bool, message: str = "") -> ConfigResult:
    return ConfigResult(config=cfg.name, held_out=cfg.held_out, correct=correct, message=message)


def test_visible_configs_run_first_in_task_order():
    assert visible_first(CFGS) == [1, 2, 0]


def test_status_and_message_come_from_the_first_config_that_failed_in_run_order():
    fold = JobFold()
    order = visible_first(CFGS)
    fold.add(order[0], CFGS[1], Status.OK, _cr(CFGS[1], True), True)
    fold.add(order[1], CFGS[2], Status.WRONG_OUTPUT, _cr(CFGS[2], False, "out[3]: 1 vs 2"), True)
    fold.add(order[2], CFGS[0], Status.RUNTIME_ERROR, _cr(CFGS[0], False, "crash n=4096"), False)
    assert fold.status is Status.WRONG_OUTPUT and fold.message == "out[3]: 1 vs 2"
    assert [c.config for c in fold.configs()] == ["big", "small", "mid"]  # task order
    assert fold.configs()[0].message == WITHHELD  # the candidate's own text on a held-out one


def test_a_held_out_config_keeps_the_trusted_side_s_words_without_numbers():
    fold = JobFold()
    assert not fold.started
    fold.add(0, CFGS[0], Status.WRONG_OUTPUT, _cr(CFGS[0], False, "out[4095]: 1.5 vs 2"), True)
    assert fold.started and fold.status is Status.WRONG_OUTPUT
    assert "4095" not in fold.message and fold.message == fold.configs()[0].message
    assert fold.message == held_out_message("out[4095]: 1.5 vs 2", True)
    ok = JobFold()
    ok.add(1, CFGS[1], Status.OK, _cr(CFGS[1], True), True)
    assert ok.status is Status.OK and ok.message == ""
