from __future__ import annotations

import pickle
import shutil

import pytest

from cudaperf.execute.session import EvalSession, training_config
from cudaperf.execute.types import Candidate
from cudaperf.tasks.io import load_sample


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_one_backend_serves_every_batch_in_job_order(tmp_path):
    task = next(t for t in load_sample() if t.id.endswith("saxpy"))
    good = Candidate(code=task.implementations[0].code)
    bad = Candidate(code="this is not cuda")
    with EvalSession(training_config(compile_only=True, cache_dir=tmp_path)) as s:
        first = s([(task, bad), (task, good)])
        backend, salt = s.backend, s.backend.evaluator.env.salt
        second = s([(task, good)])
        assert s.backend is backend and s.backend.evaluator.env.salt == salt
        assert [r.status.value for r in first] == ["compile_error", "compiled"]
        assert second[0].status.value == "compiled" and s.batches == 2
        with pytest.raises(TypeError, match="pickled"):
            pickle.dumps(s)
    assert s._backend is None  # closed on leaving the block


def test_training_preset_is_a_valid_eval_config():
    cfg = training_config(gpus=(1,))
    assert cfg.trials == 10 and cfg.gpus == (1,) and not cfg.compile_baseline
