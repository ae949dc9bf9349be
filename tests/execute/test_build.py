from catalog import SAXPY_NAIVE, saxpy_task
from conftest import needs_nvcc

from cudaperf.execute.build import build_candidate, build_reference, first_error

pytestmark = needs_nvcc


def test_candidate_builds_once_then_cached(cpu_config):
    t = saxpy_task()
    a = build_candidate(t, SAXPY_NAIVE, "sm_90", cpu_config)
    b = build_candidate(t, SAXPY_NAIVE, "sm_90", cpu_config)
    assert a.ok and b.ok and b.cached and a.lib == b.lib


def test_first_error_names_the_candidate_line(cpu_config):
    code = SAXPY_NAIVE.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + z;")
    b = build_candidate(saxpy_task(), code, "sm_90", cpu_config)
    assert not b.ok
    line = 1 + code.splitlines().index(next(ln for ln in code.splitlines() if "+ z" in ln))
    assert first_error(b.log) == f'compile error at line {line}: identifier "z" is undefined'


def test_wrong_signature_and_missing_entry(cpu_config):
    t = saxpy_task()
    wrong = SAXPY_NAIVE.replace(
        'extern "C" void saxpy(int n, float a', 'extern "C" void saxpy(int n, double a'
    )
    b = build_candidate(t, wrong, "sm_90", cpu_config)
    assert not b.ok and '"saxpy" has "C" linkage' in first_error(b.log)
    missing = SAXPY_NAIVE.replace('extern "C" void saxpy', 'extern "C" void other')
    b = build_candidate(t, missing, "sm_90", cpu_config)
    assert not b.ok and "undefined reference to saxpy" in first_error(b.log)


def test_reference_builds_with_gcc(cpu_config):
    assert build_reference(saxpy_task(), cpu_config).ok


def test_compile_only_results_carry_the_build_s_protections_and_hits_keep_them(cpu_config):
    """A compile-only result names what confined its compiler; a result-cache hit keeps the
    protections of the run that produced it, not those of the evaluator serving it."""
    from cudaperf.execute.evaluator import Evaluator
    from cudaperf.execute.pool import prepare_cached
    from cudaperf.execute.types import Candidate, Status

    ev = Evaluator(cpu_config)
    cand = Candidate(code=SAXPY_NAIVE + "\n// protections-hit\n")
    first = prepare_cached(ev, saxpy_task(), cand)
    assert first.status is Status.COMPILED and [p.stage for p in first.protections] == ["build"]
    hit = prepare_cached(ev, saxpy_task(), cand)
    assert hit.cached and hit.protections == first.protections


def test_the_evaluator_fingerprint_covers_its_subpackages(tmp_path):
    """A change to a module in a subfolder of execute/ (the C track, the PyTorch track, the
    isolation) is a changed evaluator: the fingerprint must change, and a moved module too."""
    from cudaperf.execute.build import evaluator_fingerprint, source_hash

    (tmp_path / "c").mkdir()
    (tmp_path / "top.py").write_text("x = 1\n")
    (tmp_path / "c" / "trusted.py").write_text("y = 1\n")
    before = source_hash(tmp_path)
    (tmp_path / "c" / "trusted.py").write_text("y = 2\n")
    edited = source_hash(tmp_path)
    (tmp_path / "c" / "trusted.py").rename(tmp_path / "trusted.py")
    moved = source_hash(tmp_path)
    assert len({before, edited, moved}) == 3
    assert len(evaluator_fingerprint()) == 12
