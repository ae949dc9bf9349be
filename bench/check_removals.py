# ruff: noqa: E501 - the table below quotes source lines whole
"""Item 8 of issue 15: remove each evaluator check in turn, run the CPU test written for it,
and report whether that test fails (it must). The source file is restored after each run,
also on Ctrl-C or an error. Run from the repository root:

    python bench/check_removals.py            # every check
    python bench/check_removals.py alias salt  # only those whose name contains a word
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
# (check, file, text that implements it, text without it, tests that must then fail)
M = [
    (
        "share: a candidate's process is stopped when its worker holds no section",
        "src/cudaperf/execute/isolation/share.py",
        "            _stop(child)\n            self._give(exclusive)",
        "            self._give(exclusive)",
        "tests/execute/isolation/test_share.py::test_a_candidate_runs_only_inside_its_workers_sections",
    ),
    (
        "share: timed trials hold the GPU alone",
        "src/cudaperf/execute/c/trusted.py",
        "with share.section(proc, exclusive=True):  # numbers",
        "with share.section(proc):  # numbers",
        "tests/execute/isolation/test_share.py::test_two_workers_overlap_their_checks_and_time_alone",
    ),
    (
        "share: the traced call holds the GPU alone",
        "src/cudaperf/execute/c/trusted.py",
        'with share.section(proc, exclusive=True), clock("trace")',
        'with share.section(proc), clock("trace")',
        "tests/execute/isolation/test_share.py::test_two_workers_overlap_their_checks_and_time_alone",
    ),
    (
        "share: a CPU baseline holds the GPU alone",
        "src/cudaperf/execute/c/trusted.py",
        "        with libs.share.section(exclusive=True):  # the host quiet",
        "        with libs.share.section():  # the host quiet",
        "tests/execute/isolation/test_share.py::test_a_cpu_baseline_is_timed_with_the_gpu_alone",
    ),
    (
        "share: a PyTorch→CUDA job holds the GPU alone",
        "src/cudaperf/execute/isolation/worker.py",
        "            with libs.share.section(exclusive=True):\n                return _torch_job",
        "            with libs.share.section():\n                return _torch_job",
        "tests/execute/isolation/test_share.py::test_a_pytorch_job_has_the_gpu_alone",
    ),
    (
        "share: a waiting writer goes before later readers (turnstile)",
        "src/cudaperf/execute/isolation/share.py",
        "        waited = self._flock(self.turn, fcntl.LOCK_EX, False)\n",
        "        waited = self._flock(self.turn, fcntl.LOCK_EX, False) if exclusive else False\n",
        "tests/execute/isolation/test_share.py::test_a_waiting_writer_goes_before_readers_that_come_after_it",
    ),
    (
        "share: a wait for the GPU does not count against a job's deadline",
        "src/cudaperf/execute/isolation/sandbox.py",
        "                    deadline += now - since\n",
        "",
        "tests/execute/isolation/test_share.py::test_a_job_waiting_behind_a_hung_peer_is_not_timed_out",
    ),
    (
        "static: signalling processes is refused",
        "src/cudaperf/execute/checks.py",
        '    "signals",\n    "device_reset",',
        '    "device_reset",',
        "tests/execute/test_checks.py::test_signalling_a_process_is_fatal_and_names_stay_free",
    ),
    (
        "smoke --seed-from: another evaluator's families are not kept",
        "bench/eval_dataset_smoke.py",
        '    if was != version or doc.get("seed") != seed or not doc.get("families"):\n',
        '    if doc.get("seed") != seed or not doc.get("families"):\n',
        "tests/bench/test_eval_dataset_smoke.py::test_seed_from_keeps_families_measured_at_this_evaluator_only",
    ),
    (
        "smoke --seed-from: another seed's families are not kept",
        "bench/eval_dataset_smoke.py",
        '    if was != version or doc.get("seed") != seed or not doc.get("families"):\n',
        '    if was != version or not doc.get("families"):\n',
        "tests/bench/test_eval_dataset_smoke.py::test_seed_from_keeps_families_measured_at_this_evaluator_only",
    ),
    (
        "C: the traced call's messages are redacted (it runs after the held-out configs)",
        "src/cudaperf/execute/c/trusted.py",
        "    after = any(c.held_out for c in task.configs)\n",
        "    after = False\n",
        "tests/execute/c/test_trusted.py::test_the_traced_calls_error_text_is_withheld_after_the_held_out_configs",
    ),
    (
        "baselines: a C task's complete CPU records kept per handle (no file read per job)",
        "src/cudaperf/execute/isolation/sandbox.py",
        "        records = self._complete.get(prefix)\n",
        "        records = None\n",
        "tests/execute/c/test_baselines.py::test_a_tasks_complete_records_are_read_from_the_file_once_per_handle",
    ),
    (
        "baselines: a PyTorch task's complete records kept per handle",
        "src/cudaperf/execute/isolation/sandbox.py",
        '        records = self._complete.get(f"{prefix}{torch_compile}")\n',
        "        records = None\n",
        "tests/execute/pytorch/test_baseline_job.py::test_a_tasks_complete_records_are_read_once_per_handle",
    ),
    (
        "C: no device work during the traced call is a host fallback",
        "src/cudaperf/execute/sanity.py",
        "    if device_us <= 0.0:",
        "    if False:",
        "tests/execute/c/test_trusted.py::test_a_call_whose_work_the_gpu_did_not_do_is_rejected tests/execute/test_sanity.py::test_host_work_no_device_work_is_always_flagged",
    ),
    (
        "C: device work under min_device_share of the call is a host fallback",
        "src/cudaperf/execute/sanity.py",
        "if share < min_share and wall_us - device_us > slack_us:",
        "if False:",
        "tests/execute/c/test_trusted.py::test_a_call_whose_work_the_gpu_did_not_do_is_rejected",
    ),
    (
        "C: the traced call runs after every config passed",
        "src/cudaperf/execute/c/trusted.py",
        "        trace = _trace_job(proc, task, req, libs, ref_lib, fold)",
        "        trace = _Traced()",
        "tests/execute/c/test_trusted.py::test_a_call_whose_work_the_gpu_did_not_do_is_rejected",
    ),
    (
        "C: the evaluator hands the CUPTI shim to the job",
        "src/cudaperf/execute/evaluator.py",
        "            trace_lib=p.trace_lib,",
        "            trace_lib=None,",
        "tests/execute/c/test_trusted.py::test_a_call_whose_work_the_gpu_did_not_do_is_rejected",
    ),
    (
        "C: an untraced job says its launch check did not run",
        "src/cudaperf/execute/evaluator.py",
        '    why = f"kernel_trace: {reply.trace_note}"[:200]\n    return prot.model_copy(update={"missing": (*prot.missing, why)})',
        "    return prot",
        "tests/execute/c/test_trusted.py::test_an_untraced_call_passes_and_says_the_check_did_not_run",
    ),
    (
        "timing budget: seconds to milliseconds at the C harness call",
        "src/cudaperf/execute/c/child.py",
        "ctypes.c_double(budget_s * 1e3)",
        "ctypes.c_double(budget_s)",
        "tests/execute/c/test_trusted.py::test_the_timing_budget_reaches_the_harness_in_its_unit",
    ),
    (
        "timing budget: PyTorch baselines stop at the budget in seconds",
        "src/cudaperf/execute/pytorch/runtime.py",
        "spent += w / 1e6  # w in µs",
        "spent += w / 1e3  # w in µs",
        "tests/execute/pytorch/test_runtime.py::test_time_forward_stops_at_its_budget_in_seconds",
    ),
    (
        "C CPU baseline timed in clean requests, handed to jobs",
        "src/cudaperf/execute/isolation/sandbox.py",
        'elif req.get("op") == "run" and req.get("cpu_baseline_cache"):',
        "elif False:",
        "tests/execute/c/test_baselines.py",
    ),
    (
        "C CPU baseline timed with the compile pool quiet",
        "src/cudaperf/execute/isolation/sandbox.py",
        'with quiet(self.gate if phase == "time" else None):',
        "with quiet(None):",
        "tests/execute/c/test_baselines.py::test_cpu_baselines_are_timed_once_in_clean_requests_and_kept_on_disk",
    ),
    (
        "a C job uses the CPU baselines it is given",
        "src/cudaperf/execute/c/trusted.py",
        "if req.cpu_baselines is not None:",
        "if False:",
        "tests/execute/c/test_baselines.py::test_a_job_uses_the_records_it_is_given_and_times_none_itself",
    ),
    (
        "evaluator fingerprint covers execute/'s subpackages",
        "src/cudaperf/execute/build.py",
        'for f in sorted(root.rglob("*.py")):',
        'for f in sorted(root.glob("*.py")):',
        "tests/execute/test_build.py::test_the_evaluator_fingerprint_covers_its_subpackages",
    ),
    (
        "C re-check after timing",
        "src/cudaperf/execute/c/trusted.py",
        "    if req.check_after:",
        "    if False:",
        "tests/execute/c/test_trusted.py::test_stale_outputs_fail_the_re_check_after_timing",
    ),
    (
        "C escape/roofline rejection",
        "src/cudaperf/execute/c/trusted.py",
        "    if hack:\n        return Status.REJECTED",
        "    if False:\n        return Status.REJECTED",
        "tests/execute/c/test_trusted.py::test_work_escaping_a_short_kernels_events_is_rejected tests/execute/c/test_trusted.py::test_impossible_bandwidth_is_rejected",
    ),
    (
        "escape bound scaled (old fixed 50us)",
        "src/cudaperf/execute/sanity.py",
        "limit = 1.5 * t.median_us + 2.0 * max(overhead_us, 0.0) + 5.0",
        "limit = 1.5 * t.median_us + 50.0",
        "tests/execute/c/test_trusted.py::test_work_escaping_a_short_kernels_events_is_rejected tests/execute/test_sanity.py::test_escape_bound_scales_with_short_kernels",
    ),
    (
        "profile share check",
        "src/cudaperf/execute/pytorch/trusted.py",
        "    if share is not None and float(share) < min_share:",
        "    if False:",
        "tests/execute/pytorch/test_trusted.py::test_profile_share_and_launched_kernels_are_judged",
    ),
    (
        "profile zero-share check",
        "src/cudaperf/execute/pytorch/trusted.py",
        "    if share is not None and float(share) == 0.0:",
        "    if False:",
        "tests/execute/pytorch/test_trusted.py::test_profile_share_and_launched_kernels_are_judged",
    ),
    (
        "timer integrity (child)",
        "src/cudaperf/execute/pytorch/trusted.py",
        "        if tampered:\n",
        "        if False:\n",
        "tests/execute/pytorch/test_trusted.py::test_replaced_timers_are_rejected",
    ),
    (
        "outside clock",
        "src/cudaperf/execute/pytorch/trusted.py",
        "            or self.outside_clock(timing)\n",
        "",
        "tests/execute/pytorch/test_trusted.py::test_times_the_trusted_clock_contradicts_are_rejected",
    ),
    (
        "held-out configs checked (torch)",
        "src/cudaperf/execute/pytorch/trusted.py",
        "        for i in visible_first(task.configs):\n            cfg, stop, trusted",
        "        for i in [j for j in visible_first(task.configs) if not task.configs[j].held_out]:\n            cfg, stop, trusted",
        "tests/execute/pytorch/test_trusted.py::test_held_out_configs_are_checked_and_their_feedback_has_no_size",
    ),
    (
        "held-out redaction (both tracks: held_out.JobFold)",
        "src/cudaperf/execute/held_out.py",
        "        if cfg.held_out:  # feedback must not give a held-out config's size away",
        "        if False:  # feedback must not give a held-out config's size away",
        "tests/execute/test_held_out.py tests/execute/pytorch/test_trusted.py::test_held_out_configs_are_checked_and_their_feedback_has_no_size tests/execute/c/test_trusted.py::test_held_out_feedback_carries_no_size tests/execute/c/test_trusted.py::test_the_worker_reply_itself_carries_no_held_out_size",
    ),
    (
        "fresh values per correctness trial",
        "src/cudaperf/execute/pytorch/trusted.py",
        "        xs = _draw(self.ref_mod, _seed(self.salt, self.cfg, trial), self.dev)",
        "        xs = _draw(self.ref_mod, _seed(self.salt, self.cfg, 0 if trial < 1000 else trial), self.dev)",
        "tests/execute/pytorch/test_trusted.py::test_pointer_cache_fails_on_fresh_values_alone",
    ),
    (
        "fresh inputs per timed trial",
        "src/cudaperf/execute/pytorch/trusted.py",
        "            self.bufs.write_inputs(self.inputs(1000 + t, _OWN))  # fresh inputs every trial\n",
        "",
        "tests/execute/pytorch/test_trusted.py::test_timed_trials_get_fresh_inputs_so_memoising_does_not_pay",
    ),
    (
        "check after timing (torch)",
        "src/cudaperf/execute/pytorch/trusted.py",
        "        self.checked_call(2000, _OWN)  # the output check after timing, on fresh inputs\n",
        "",
        "tests/execute/pytorch/test_trusted.py::test_stale_outputs_after_timing_fail_the_check_after_timing",
    ),
    (
        "signed distribution",
        "src/cudaperf/execute/pytorch/trusted.py",
        "            dist = _SIGNED if t % 2 and self.signed_ok else _OWN",
        "            dist = _OWN",
        "tests/execute/pytorch/test_trusted.py::test_copy_kernel_fails_relu_on_non_negative_inputs",
    ),
    (
        "signed only where finite",
        "src/cudaperf/execute/pytorch/trusted.py",
        "        if dist == _SIGNED and not _finite(want):",
        "        if False:",
        "tests/execute/pytorch/test_trusted.py::test_a_reference_that_overflows_on_signed_inputs_is_judged_on_its_own_inputs_only",
    ),
    (
        "alias check",
        "src/cudaperf/execute/pytorch/trusted.py",
        "        if alias_check and not self.ref_alias:",
        "        if False:",
        "tests/execute/pytorch/test_trusted.py::test_output_aliasing_an_input_is_rejected_unless_the_reference_aliases_too",
    ),
    (
        "alias check honours an aliasing reference",
        "src/cudaperf/execute/pytorch/trusted.py",
        "        if alias_check and not self.ref_alias:",
        "        if alias_check:",
        "tests/execute/pytorch/test_trusted.py::test_output_aliasing_an_input_is_rejected_unless_the_reference_aliases_too",
    ),
    (
        "mutation check (torch)",
        "src/cudaperf/execute/pytorch/trusted.py",
        "        if mutated(xs, self.bufs.inputs):",
        "        if False:",
        "tests/execute/pytorch/test_trusted.py::test_mutated_inputs_are_rejected tests/execute/pytorch/test_trusted.py::test_in_place_kernel_returning_its_input_fails_relu",
    ),
    (
        "output poisoning",
        "src/cudaperf/execute/pytorch/shared.py",
        "                _poison(o)",
        "                pass",
        "tests/execute/pytorch/test_shared.py",
    ),
    (
        "child discarded after each job",
        "src/cudaperf/execute/pytorch/trusted.py",
        "    finally:\n        child.close()",
        "    finally:\n        globals()['_KEEP'] = child\n        import cudaperf.execute.pytorch.proc as tp; tp._SPARE.child = child",
        "tests/execute/isolation/test_worker.py::test_torch_faults_end_with_their_status_and_the_next_candidate_runs_fresh",
    ),
    (
        "worker replaced after a child death/CUDA error",
        "src/cudaperf/execute/pytorch/trusted.py",
        "                restart = e.died or any(k in e.message for k in _CUDA_ERROR)",
        "                restart = False",
        "tests/execute/isolation/test_worker.py::test_torch_faults_end_with_their_status_and_the_next_candidate_runs_fresh",
    ),
    (
        "C candidate in a fresh process (spawn, not a copy of the worker)",
        "src/cudaperf/execute/c/proc.py",
        'super().__init__(multiprocessing.get_context("spawn"), child_main)',
        'super().__init__(multiprocessing.get_context("fork"), child_main)',
        "tests/execute/c/test_trusted.py::test_a_candidate_that_runs_python_in_its_process_finds_no_answer",
    ),
    (
        "Python C API static check",
        "src/cudaperf/execute/checks.py",
        '    "python_api",\n    "network",\n',
        '    "network",\n',
        "tests/execute/test_checks.py::test_calls_into_the_python_interpreter_are_fatal",
    ),
    (
        "second reference run (inputs.py)",
        "src/cudaperf/execute/c/reference.py",
        "        unwritten = (_elements(bufs[i]) == 0xFF).all(1) & (_elements(again[i]) == 0).all(1)",
        "        unwritten = (_elements(bufs[i]) == 0xFF).all(1)",
        "tests/execute/c/test_trusted.py::test_reference_outputs_equal_to_the_poison_pattern_are_still_compared",
    ),
    (
        "held-out timing feedback",
        "src/cudaperf/execute/feedback.py",
        "timed = [c for c in configs if c.timing is not None and not c.held_out]",
        "timed = [c for c in configs if c.timing is not None]",
        "tests/execute/test_feedback.py",
    ),
    (
        "held-out configs run after the visible ones",
        "src/cudaperf/execute/held_out.py",
        "    return sorted(range(len(configs)), key=lambda i: (configs[i].held_out, i))",
        "    return list(range(len(configs)))",
        "tests/execute/isolation/test_sandbox.py::test_what_a_candidate_prints_on_a_held_out_config_never_reaches_a_result tests/execute/pytorch/test_trusted.py::test_what_a_candidate_prints_on_a_held_out_config_stays_out_of_the_reply",
    ),
    (
        "candidate output after a held-out call withheld",
        "src/cudaperf/execute/evaluator.py",
        "        if reply.output is not None:",
        "        if False:",
        "tests/execute/isolation/test_sandbox.py::test_what_a_candidate_prints_on_a_held_out_config_never_reaches_a_result",
    ),
    (
        "candidate's error text on a held-out config withheld",
        "src/cudaperf/execute/held_out.py",
        "    return redact_sizes(message) if trusted else WITHHELD",
        "    return redact_sizes(message)",
        "tests/execute/isolation/test_sandbox.py::test_what_a_candidate_prints_on_a_held_out_config_never_reaches_a_result tests/execute/pytorch/test_trusted.py::test_what_a_candidate_prints_on_a_held_out_config_stays_out_of_the_reply",
    ),
    (
        "C: text from the candidate's process (not its death) withheld on a held-out config",
        "src/cudaperf/execute/c/trusted.py",
        "                st, stop, trusted = Status.RUNTIME_ERROR, True, e.died",
        "                st, stop, trusted = Status.RUNTIME_ERROR, True, True",
        "tests/execute/isolation/test_sandbox.py::test_what_a_candidate_prints_on_a_held_out_config_never_reaches_a_result",
    ),
    (
        "output limit in the candidate's process",
        "src/cudaperf/execute/c/child.py",
        '        confine.limit_output(int(msg["output_limit_mb"]))',
        "        pass",
        "tests/execute/isolation/test_sandbox.py::test_a_call_segment_larger_than_the_output_limit_is_not_the_candidate_s_output",
    ),
    (
        "output limit cannot be lifted (hard = soft)",
        "src/cudaperf/execute/isolation/confine.py",
        "    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))",
        "    resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))",
        "tests/execute/isolation/test_sandbox.py::test_a_call_segment_larger_than_the_output_limit_is_not_the_candidate_s_output",
    ),
    (
        "feedback speedups over visible configs",
        "src/cudaperf/refine/feedback.py",
        "    visible = [c for c in res.configs if not c.held_out and c.timing is not None]",
        "    visible = [c for c in res.configs if c.timing is not None]",
        "tests/refine/test_feedback.py::test_ok_shows_speedups_findings_and_ranker",
    ),
    (
        "ranker scores visible configs only",
        "src/cudaperf/rank/ranker.py",
        "    task = visible_task(task)\n",
        "\n",
        "tests/rank/test_config_features.py::test_score_averages_the_probability_over_the_visible_configs",
    ),
    (
        "worker error asks for restart",
        "src/cudaperf/execute/isolation/worker.py",
        "message=msg, restart=True).wire()",
        "message=msg).wire()",
        "tests/execute/isolation/test_worker.py::test_an_error_of_the_worker_itself_asks_for_a_restart",
    ),
]


def main() -> None:
    sel = sys.argv[1:]
    for name, f, old, new, tests in M:
        if sel and not any(s in name for s in sel):
            continue
        run_one(name, ROOT / f, old, new, tests.split(), verbose=len(sel) == 1)


def run_one(name: str, p: Path, old: str, new: str, tests: list[str], verbose: bool) -> None:
    src = p.read_text()
    if src.count(old) != 1:
        print(f"SKIPPED: {name}: the check's text is not found once in {p.name} (edited?)")
        return
    p.write_text(src.replace(old, new))
    env = dict(os.environ, PYTHONPATH=f"{ROOT}/src:{ROOT}/tests/execute")
    try:
        cmd = [PY, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    finally:
        p.write_text(src)
    last = (r.stdout.strip().splitlines() or ["?"])[-1]
    verdict = "FAILS without it (good)" if r.returncode else "STILL GREEN without it (BAD)"
    print(f"{verdict}: {name}: {last}", flush=True)
    if verbose:
        print(r.stdout[-3000:])


if __name__ == "__main__":
    main()
