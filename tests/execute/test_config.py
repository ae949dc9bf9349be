import pytest

from cudaperf.execute import EvalConfig


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"trials": 0}, "positive integer"),
        ({"warmup": -1}, "use 0 or more"),
        ({"arch": "hopper"}, "sm_90"),
        ({"run_timeout_s": 0}, "must be > 0"),
        ({"gpus": ()}, "non-negative indices"),
    ],
)
def test_bad_values_say_how_to_fix(kw, words):
    with pytest.raises(ValueError, match=words):
        EvalConfig(**kw)


def test_defaults_and_help(tmp_path):
    c = EvalConfig(cache_dir=tmp_path)
    assert c.trials >= 100 and c.cache_dir == tmp_path
    assert all(EvalConfig.help().values())
