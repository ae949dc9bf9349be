"""run_bench end to end on the sample set with an evaluator that reports stored measurements:
every sample of every turn recorded, resume after an interruption, summaries and compare."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from cudaperf.refine.scripted import pick_reference
from cudaperf.refine.trajectory import SummaryRecord, TurnRecord, read_trajectory
from cudaperf.report.rows import task_meta
from cudaperf.report.run import BenchSettings, make_bench_backend, read_run, run_bench
from cudaperf.report.summary import compare, summarize
from cudaperf.reward import RewardScorer
from cudaperf.tasks.io import load_sample

from .helpers import stored_evaluator, stored_speedup

TASKS = load_sample()
META = {t.id: task_meta(t, "sample") for t in TASKS}


def scorer(calls, interrupt_at: int | None = None):
    ev = stored_evaluator(calls)

    def run(jobs):
        if interrupt_at is not None and len(calls) == interrupt_at:
            raise KeyboardInterrupt  # what Ctrl-C does in the middle of an evaluator batch
        return ev(jobs)

    return RewardScorer(TASKS, evaluator=run, analyzer=lambda c: [], analyze="always")


def bench(out, model="scripted:best", calls=None, interrupt_at=None, samples=2, turns=2):
    st = BenchSettings(model=model, suite="sample", samples=samples, turns=turns)
    sc = scorer([] if calls is None else calls, interrupt_at)
    return run_bench(st, TASKS, META, out, make_bench_backend(model, TASKS), sc, batch_tasks=4)


def test_every_sample_of_every_turn_is_recorded(tmp_path):
    assert bench(tmp_path / "r", turns=3) == len(TASKS)  # the same reply every turn
    recs = read_trajectory(tmp_path / "r/trajectories.jsonl")
    turns = Counter(r.task_id for r in recs if isinstance(r, TurnRecord))
    assert turns == {t.id: 3 for t in TASKS}  # patience = turns: no task stopped early
    assert all(len(r.samples) == 2 for r in recs if isinstance(r, TurnRecord))
    assert {r.task_id for r in recs if isinstance(r, SummaryRecord)} == set(META)


def test_an_interrupted_run_resumes_after_the_last_recorded_turn(tmp_path):
    """Finished tasks are skipped; a task stopped between its turns continues with its next
    turn (its recorded turns are neither redone nor rewritten): 12 tasks in chunks of 4,
    2 turns, one evaluator call a turn and chunk."""
    out = tmp_path / "r"
    wf = "scripted:weakest-first"  # a new implementation each turn: one evaluator call a turn
    with pytest.raises(KeyboardInterrupt):
        bench(out, wf, interrupt_at=3)  # chunk 1 done (2 calls), chunk 2 only its turn 1
    first = read_trajectory(out / "trajectories.jsonl")
    done = {r.task_id for r in first if isinstance(r, SummaryRecord)}
    partial = {r.task_id for r in first} - done
    assert len(done) == 4 and len(partial) == 4
    calls: list = []
    assert bench(out, wf, calls=calls) == len(TASKS) - 4
    assert not done & {tid for batch in calls for tid in batch}
    assert len(calls) == 1 + 2  # chunk 2's turn 2, then chunk 3's two turns
    assert {tid for tid in calls[0]} == partial
    recs = read_trajectory(out / "trajectories.jsonl")
    turn1 = [r for r in first if isinstance(r, TurnRecord) and r.task_id in partial]
    assert [r for r in recs if isinstance(r, TurnRecord) and r.task_id in partial][:4] == turn1
    turns = Counter((r.task_id, r.turn) for r in recs if isinstance(r, TurnRecord))
    assert set(turns.values()) == {1} and len(turns) == 2 * len(TASKS)
    for r in recs:  # turn 2 of a continued task was prompted with its turn-1 reply
        if isinstance(r, TurnRecord) and r.task_id in partial and r.turn == 2:
            t1 = next(x for x in turn1 if x.task_id == r.task_id)
            assert t1.samples[t1.chosen].reply in [m["content"] for m in r.messages]
    assert bench(out, wf) == 0  # everything finished: nothing runs


def test_turns_that_do_not_replay_are_dropped_and_their_task_starts_again(tmp_path):
    """A recorded turn whose prompt is not the one this run builds (another prompt version,
    a hand-edited file) cannot be continued from: its task runs again from turn 1."""
    out = tmp_path / "r"
    wf = "scripted:weakest-first"
    with pytest.raises(KeyboardInterrupt):
        bench(out, wf, interrupt_at=3)
    traj = out / "trajectories.jsonl"
    recs = read_trajectory(traj)
    done = {r.task_id for r in recs if isinstance(r, SummaryRecord)}
    partial = {r.task_id for r in recs} - done
    docs = [json.loads(line) for line in traj.read_text().splitlines()]
    for d in docs:  # the partial tasks' turn 1 was prompted with another text
        if d["task_id"] in partial:
            d["messages"][-1]["content"] += "\n(an older prompt)"
    traj.write_text("".join(json.dumps(d) + "\n" for d in docs))
    calls: list = []
    assert bench(out, wf, calls=calls) == len(TASKS) - 4
    assert len(calls) == 2 + 2 and {tid for tid in calls[0]} == partial  # from turn 1
    recs = read_trajectory(traj)
    turns = Counter((r.task_id, r.turn) for r in recs if isinstance(r, TurnRecord))
    assert set(turns.values()) == {1} and len(turns) == 2 * len(TASKS)


def test_a_report_reads_a_cut_trajectory_without_changing_it_and_a_rerun_resumes(tmp_path):
    """A run killed mid-write leaves a cut last line: reading it for a report skips that line
    and leaves the file as it is (reading used to rewrite it); the rerun finishes the tasks."""
    from cudaperf.report.run import read_records

    out = tmp_path / "r"
    bench(out, samples=1, turns=1)
    traj = out / "trajectories.jsonl"
    lines = traj.read_text().splitlines(keepends=True)
    last = next(i for i in range(len(lines) - 1, -1, -1) if '"summary"' in lines[i])
    cut = "".join(lines[:last]) + lines[last][:40]  # the last task's summary, cut
    traj.write_text(cut)
    assert len(read_records(traj)) == last and traj.read_text() == cut
    assert bench(out, samples=1, turns=1) == 1  # the task whose summary was cut runs again
    recs = read_trajectory(traj)
    assert {r.task_id for r in recs if isinstance(r, SummaryRecord)} == set(META)


def test_a_rerun_with_other_settings_is_refused(tmp_path):
    bench(tmp_path / "r", samples=1, turns=1)
    with pytest.raises(ValueError, match="other settings.*samples=1 there, 2 now"):
        bench(tmp_path / "r", samples=2, turns=1)
    st = BenchSettings(model="scripted:best", suite="sample", samples=1, turns=1)
    few = {k: META[k] for k in list(META)[:3]}
    with pytest.raises(ValueError, match="other tasks"):
        run_bench(st, TASKS[:3], few, tmp_path / "r", make_bench_backend(st.model, TASKS), None)


def test_a_rerun_on_another_measurement_setup_is_refused(tmp_path):
    """A run's tasks are measured on one setup: resuming it on another GPU, toolchain or
    evaluator would mix cards in one run silently. The machine-local options (cache folder,
    GPU indices) may differ; a caller that passes no setup is not checked."""
    setup = {
        "gpu": "NVIDIA H100 80GB HBM3",
        "mode": "full",
        "evaluator": {"trials": "30", "cache_dir": "/a", "gpus": "(0,)"},
        "versions": {"nvcc": "13.0.88", "cudaperf": "0.1.0+017329b2e51f"},
    }
    st = BenchSettings(model="scripted:weakest-first", suite="sample", samples=1, turns=1)

    def go(info, n=2):
        backend = make_bench_backend(st.model, TASKS)
        few = {k: META[k] for k in list(META)[:n]}
        return run_bench(st, TASKS[:n], few, tmp_path / "r", backend, scorer([]), 4, info)

    go(setup, n=2)
    here = {**setup, "evaluator": {"trials": "30", "cache_dir": "/b", "gpus": "(3,)"}}
    assert go(here) == 0  # same setup, other local options: resumes (nothing left)
    assert go({}) == 0
    for key, value, shown in (
        ("gpu", "NVIDIA H200", "gpu 'NVIDIA H100 80GB HBM3' there, 'NVIDIA H200' now"),
        ("versions", {**setup["versions"], "cudaperf": "0.1.0+bbb"}, "versions cudaperf"),
        ("evaluator", {**setup["evaluator"], "trials": "100"}, "evaluator trials '30' there"),
        ("mode", "compile_only", "mode 'full' there, 'compile_only' now"),
    ):
        with pytest.raises(ValueError, match="another setup") as e:
            go({**setup, key: value})
        assert shown in str(e.value) and "use a new --out" in str(e.value)


def test_summary_of_scripted_best_matches_the_stored_measurements(tmp_path):
    bench(tmp_path / "best")
    s = summarize(read_run(tmp_path / "best"))
    m = {e["metric"]: e for e in s["metrics"]}
    want = math.exp(
        sum(math.log(stored_speedup(t, pick_reference(t, "best").code)) for t in TASKS) / 12
    )
    got = m["geomean speedup vs naive, correct turn-1 samples"]
    assert got["value"] == pytest.approx(want) and got["ci"][0] <= want <= got["ci"][1]
    assert m["correct rate (turn 1)"]["value"] == 1.0 and s["mode"] == "full"
    assert s["tasks"] == {"selected": 12, "finished": 12, "families": 12}
    assert [t["turn"] for t in s["per_turn"]] == [1, 2]
    json.dumps(s)  # summary.json is plain JSON


def test_compare_pairs_the_same_tasks_and_samples(tmp_path):
    bench(tmp_path / "naive", model="scripted:naive", samples=3, turns=1)
    bench(tmp_path / "best", model="scripted:best", samples=2, turns=2)
    c = compare([read_run(tmp_path / "naive"), read_run(tmp_path / "best")])
    assert (c["samples"], c["turns"], c["tasks"]) == (2, 1, 12)
    m = {e["metric"]: e for e in c["metrics"]}
    fast = m["fast_1 vs naive (turn 1)"]
    assert fast["values"] == [0.0, 1.0]  # naive vs itself is 1.0x, never > 1
    # the same difference in every family: no interval, not a zero-width one
    assert fast["diffs"][0] == {
        "diff": 1.0,
        "ci": None,
        "ci_note": "the same difference in every family",
        "tasks": 12,
    }
    same = m["correct rate (turn 1)"]["diffs"][0]
    assert same == {
        "diff": 0.0,
        "ci": None,
        "ci_note": "the same difference in every family",
        "tasks": 12,
    }
    fams = c["by_family"]  # one task per sample family
    assert [f["family"] for f in fams] == sorted(t.family for t in TASKS)
    for f in fams:
        e = {x["metric"]: x for x in f["metrics"]}
        assert e["fast_1 vs naive (best of 2x1)"]["values"] == [0.0, 1.0]
        geo = e["geomean speedup vs naive, all tasks (best of 2x1; failure = 0.1x floor)"]
        task = next(t for t in TASKS if t.family == f["family"])
        want = stored_speedup(task, pick_reference(task, "best").code)
        assert geo["values"] == pytest.approx([1.0, want])
        assert geo["diffs"][0]["diff"] == pytest.approx(want)


def test_compile_only_runs_report_compile_rates_only(tmp_path):
    from cudaperf.execute.types import ExecResult, Status

    def ev(jobs):
        return [
            ExecResult(
                status=Status.COMPILED, mode="compile-only", task_id=t.id, candidate_hash=c.hash
            )
            for t, c in jobs
        ]

    st = BenchSettings(model="scripted:naive", suite="sample", samples=1, turns=1)
    sc = RewardScorer(TASKS, evaluator=ev, analyzer=lambda c: [], analyze="always")
    run_bench(st, TASKS, META, tmp_path / "r", make_bench_backend(st.model, TASKS), sc)
    s = summarize(read_run(tmp_path / "r"))
    assert s["mode"] == "compile-only"
    assert [e["metric"] for e in s["metrics"]] == ["compile rate (turn 1)"]
    assert s["speedups"] == {} and s["per_turn"] == []


def test_an_adapter_needs_a_hugging_face_model():
    with pytest.raises(ValueError, match="--adapter loads on top of a Hugging Face model"):
        BenchSettings(model="scripted:best", suite="sample", adapter="x")


def test_a_run_of_only_format_errors_takes_the_mode_the_run_recorded(tmp_path):
    from cudaperf.refine.backends import ScriptedBackend

    st = BenchSettings(model="scripted:talker", suite="sample", samples=1, turns=1)
    info = {"mode": "compile-only"}
    run_bench(
        st,
        TASKS[:2],
        {k: META[k] for k in list(META)[:2]},
        tmp_path / "r",
        ScriptedBackend(["no code here"]),
        scorer([]),
        info=info,
    )
    s = summarize(read_run(tmp_path / "r"))
    assert s["mode"] == "compile-only" and s["statuses"] == {"format_error": 2}
    assert [e["metric"] for e in s["metrics"]] == ["compile rate (turn 1)"]


def test_per_suite_and_per_family_tables_when_a_run_spans_suites(tmp_path):
    two = {
        k: m.model_copy(update={"suite": "A" if i % 2 else "B"})
        for i, (k, m) in enumerate(META.items())
    }
    st = BenchSettings(model="scripted:best", suite="A + B", samples=1, turns=1)
    run_bench(st, TASKS, two, tmp_path / "r", make_bench_backend(st.model, TASKS), scorer([]))
    s = summarize(read_run(tmp_path / "r"))
    assert [(g["group"], g["tasks"]) for g in s["groups"]["suite"]] == [("A", 6), ("B", 6)]
    assert len(s["groups"]["family"]) == 12 and s["groups"]["level"] == []


def test_a_last_line_cut_short_is_dropped_and_its_task_rerun(tmp_path):
    out = tmp_path / "r"
    bench(out, samples=1, turns=1)
    traj = out / "trajectories.jsonl"
    text = traj.read_text()
    traj.write_text(text[: len(text) - 40])  # killed while writing the last summary
    assert bench(out, samples=1, turns=1) == 1
    recs = read_trajectory(traj)
    assert sum(isinstance(r, SummaryRecord) for r in recs) == len(TASKS)
    traj.write_text("not json\n" + traj.read_text())
    with pytest.raises(ValueError, match="not a trajectory written by cudaperf bench"):
        read_run(out)


def test_a_backend_without_batches_gets_concurrent_requests():
    import threading
    import time

    from cudaperf.report.run import ConcurrentBatch

    class Slow:
        name = "slow"
        threads: set = set()

        def generate(self, messages, n):
            self.threads.add(threading.get_ident())
            time.sleep(0.3)
            return [messages[-1]["content"]] * n

    be = ConcurrentBatch(Slow())
    t0 = time.perf_counter()
    out = be.generate_batch([[{"role": "user", "content": str(i)}] for i in range(4)], 2)
    assert out == [[str(i)] * 2 for i in range(4)]  # in order
    assert time.perf_counter() - t0 < 0.9 and len(Slow.threads) == 4
    pytest.importorskip("openai")
    url = make_bench_backend("http://127.0.0.1:9/v1", [], model="m")  # no request is made
    assert isinstance(url, ConcurrentBatch) and url.name == "m"


def test_a_run_without_the_compile_baseline_records_it_and_reports_it_absent(tmp_path):
    from cudaperf.report.render import write_run_report

    st = BenchSettings(
        model="scripted:best", suite="sample", samples=1, turns=1, compile_baseline=False
    )
    meta = {t.id: task_meta(t, "sample", compile_baseline=False) for t in TASKS}
    sc = scorer([])
    run_bench(st, TASKS, meta, tmp_path / "r", make_bench_backend(st.model, TASKS), sc, 4)
    r = read_run(tmp_path / "r")
    assert r.settings["compile_baseline"] is False
    assert all("compile" not in m.baselines for m in r.meta.values())
    s = summarize(r)
    assert "compile" not in s["baselines"] and "eager" in s["baselines"]
    assert s["baselines_absent"] == {"compile": "not timed (--no-compile-baseline)"}
    md = (write_run_report(s, tmp_path / "r").parent / "report.md").read_text()
    assert "baselines absent: torch.compile (not timed (--no-compile-baseline))" in md
    bench(tmp_path / "full", samples=1, turns=1)
    c = compare([read_run(tmp_path / "full"), r])
    assert c["baselines_absent"] == {"compile": "not timed (--no-compile-baseline)"}
    with pytest.raises(ValueError, match="compile_baseline=False there, True now"):
        bench(tmp_path / "r", samples=1, turns=1)


def test_a_run_json_without_compile_baseline_resumes_as_the_default(tmp_path):
    import json

    bench(tmp_path / "r", samples=1, turns=1)
    rj = tmp_path / "r/run.json"
    doc = json.loads(rj.read_text())
    del doc["settings"]["compile_baseline"]  # written before the setting existed
    rj.write_text(json.dumps(doc))
    assert bench(tmp_path / "r", samples=1, turns=1) == 0
    assert summarize(read_run(tmp_path / "r"))["baselines_absent"] == {}


def test_the_report_says_what_it_left_out_as_the_harness_failures():
    from cudaperf.report.render import left_out_text
    from cudaperf.report.summary import left_out

    from .helpers import meta, row, views

    rows = [
        row("a", 1, 0),
        row("b", 1, 0, naive=2.0),
        row("b", 1, 1, "infra_error"),
        row("c", 1, 0, "infra_error"),
    ]
    v = views(rows, [meta("a"), meta("b"), meta("c")])
    lo = left_out(rows, v, ["naive"])
    assert lo == {
        "infra_error_samples": 2,
        "infra_error_tasks": 1,
        "baseline_unmeasured": {"naive": 1},
    }
    text = " ".join(left_out_text(lo, {"naive": "the naive kernel"}))
    assert "infra errors: 2 sample(s)" in text and "1 task(s) with no other sample" in text
    assert "the naive kernel could not be timed for 1 task(s)" in text


def test_compare_names_every_difference_in_how_the_runs_were_measured(tmp_path):
    """Runs timed on another GPU, with other evaluator settings or another toolchain or
    evaluator code measure different things: `setup_differences` names each (machine-local
    options such as the cache folder and GPU indices excepted)."""
    from cudaperf.report.summary import setup_differences

    bench(tmp_path / "a", model="scripted:naive", samples=1, turns=1)
    bench(tmp_path / "b", model="scripted:best", samples=1, turns=1)
    setup = {
        "gpu": "NVIDIA H200",
        "mode": "full",
        "evaluator": {"trials": "100", "cache_dir": "/a", "gpus": "(0,)"},
        "versions": {"nvcc": "13.0", "cudaperf": "0.1.0+abc"},
    }
    for name, info in (
        ("a", setup),
        ("b", {**setup, "evaluator": {"trials": "100", "cache_dir": "/elsewhere", "gpus": "(1,)"}}),
    ):
        doc = json.loads((tmp_path / name / "run.json").read_text())
        doc.update(info)
        (tmp_path / name / "run.json").write_text(json.dumps(doc))
    runs = [read_run(tmp_path / "a"), read_run(tmp_path / "b")]
    assert setup_differences(runs) == [] and compare(runs)["setup_differences"] == []
    doc = json.loads((tmp_path / "b" / "run.json").read_text())
    doc["gpu"] = "NVIDIA H100"
    doc["versions"]["cudaperf"] = "0.1.0+def"
    (tmp_path / "b" / "run.json").write_text(json.dumps(doc))
    diffs = setup_differences([read_run(tmp_path / "a"), read_run(tmp_path / "b")])
    assert len(diffs) == 2 and "H100" in diffs[0] and "0.1.0+def" in diffs[1]


@pytest.mark.parametrize(
    "content, why",
    [
        ("[1]", "not a JSON object"),
        ('{"settings": 5, "tasks": {}}', "'settings' is not an object"),
        ('{"settings": {}, "tasks": [1]}', "'tasks' is not an object"),
        ("{oops", "Expecting property name"),
        ('{"settings": {"model": "m", "suite": "s", "turns": 1}, "tasks": {}}', "settings.samples"),
        (
            '{"settings": {"model": "m", "suite": "s", "samples": "4", "turns": 1}, "tasks": {}}',
            "is not a whole number",
        ),
    ],
    ids=["list", "settings", "tasks", "not_json", "no_samples", "samples_text"],
)
def test_a_rerun_into_a_folder_whose_run_json_is_not_bench_s_is_one_named_error(
    tmp_path, content, why
):
    """Resuming reads the old run.json as `bench report` does: a list or a wrong field was an
    AttributeError traceback, bad JSON an error that did not name the file."""
    out = tmp_path / "r"
    out.mkdir()
    (out / "run.json").write_text(content)
    with pytest.raises(ValueError, match="not a run.json written by") as e:
        bench(out, samples=1, turns=1)
    assert str(out / "run.json") in str(e.value) and why in str(e.value)
    assert (out / "run.json").read_text() == content  # left as it was


def test_each_chunk_records_its_time_and_the_summary_adds_them_up(tmp_path):
    """timing.jsonl gets a line per chunk as it ends, one cut by Ctrl-C included; the
    summary's `time` adds every process's chunks and the finished tasks' evaluator phases."""
    from cudaperf.report.run import TIMING
    from cudaperf.report.summary import fmt_time, run_time

    out = tmp_path / "r"
    wf = "scripted:weakest-first"
    with pytest.raises(KeyboardInterrupt):
        bench(out, wf, interrupt_at=3)  # chunk 1 (4 tasks) done, chunk 2 cut in its turn 1
    lines = [json.loads(x) for x in (out / TIMING).read_text().splitlines()]
    assert [(c["tasks"], c["complete"]) for c in lines] == [(4, True), (4, False)]
    assert [c["turns"] for c in lines] == [4 * 2, 4]  # task-turns scored; the cut turn 2 is not
    for c in lines:
        assert c["wall_s"] >= c["generate_s"] + c["score_s"] - 1e-3 and c["score_s"] >= 0
        parts = c["evaluate_s"] + c["analyse_s"] + c["rank_s"]  # the scorer's clocks, this chunk's
        assert min(c["evaluate_s"], c["analyse_s"], c["rank_s"]) >= 0
        assert parts <= c["score_s"] + 1e-3
    with (out / TIMING).open("a") as f:
        f.write('{"tasks": 4, "wa')  # a line cut by a kill mid-write: the rerun's lines stay whole
    bench(out, wf)  # the rerun: the unfinished tasks, in chunks of 4
    run = read_run(out)
    rest = [(c["tasks"], c["complete"]) for c in run.timing][2:]
    assert sum(n for n, _ in rest) == len(TASKS) - 4 and all(ok for _, ok in rest)
    t = run_time(run)
    assert t["chunks"] == 2 + len(rest) and t["chunks_interrupted"] == 1
    assert t["wall_s"] == pytest.approx(sum(c["wall_s"] for c in run.timing), abs=0.06)
    done = [c for c in run.timing if c["complete"]]
    assert t["s_per_task"] == pytest.approx(sum(c["wall_s"] for c in done) / len(TASKS), abs=0.006)
    assert summarize(run)["time"] == t and f"in {t['chunks']} chunk(s), 1 cut short" in fmt_time(t)
    fake = [  # known numbers: the cut chunk's seconds count in the wall time, not per task
        {"tasks": 4, "complete": True, "wall_s": 10.0, "generate_s": 4.0, "score_s": 6.0},
        {"tasks": 4, "complete": False, "wall_s": 5.0, "generate_s": 5.0},
        {"tasks": 8, "complete": True, "wall_s": 30.0, "generate_s": 10.0, "score_s": 20.0},
    ]
    (out / TIMING).write_text("".join(json.dumps(c) + "\n" for c in fake) + '{"tasks": 4, "wa')
    t = run_time(read_run(out))
    assert (t["wall_s"], t["generate_s"], t["score_s"], t["s_per_task"]) == (45, 19, 26, 3.33)
    (out / TIMING).write_text('{"tasks": 4}\n{oops\n{"tasks": 2}\n')  # not a cut last line
    with pytest.raises(ValueError, match="timing.jsonl: not a timing file"):
        read_run(out)
    assert (t["chunks"], t["chunks_interrupted"]) == (3, 1)  # the cut last line is skipped
    assert fmt_time(t).startswith("time: 45 s in 3 chunk(s), 1 cut short (generation 42%")
    assert "scoring_split_s" not in t and "evaluator" not in fmt_time(t)  # chunks lack clocks
    clocks = [{"evaluate_s": 3.0, "analyse_s": 1.5, "rank_s": 0.5}, {}, {}]
    clocks[1] = clocks[2] = {"evaluate_s": 9.0, "analyse_s": 0.0, "rank_s": 0.0}
    timed = [c | k for c, k in zip(fake, clocks, strict=True)]
    (out / TIMING).write_text("".join(json.dumps(c) + "\n" for c in timed))
    t = run_time(read_run(out))
    assert t["scoring_split_s"] == {"evaluate_s": 21.0, "analyse_s": 1.5, "rank_s": 0.5}
    assert "scoring 58%: evaluator 47%, analysis 3%, ranker 1%)" in fmt_time(t)
    n = len(TASKS)  # a run begun before timing.jsonl existed and resumed after: timed in part
    (out / TIMING).write_text(json.dumps({"tasks": 2, "complete": True, "wall_s": 8.0}) + "\n")
    t = run_time(read_run(out))
    assert (t["tasks_timed"], t["tasks_finished"], t["s_per_task"]) == (2, n, 4.0)
    assert fmt_time(t).startswith(f"time: 8 s for 2 of {n} tasks (the rest ran before timing")
    (out / TIMING).unlink()  # a run older than timing.jsonl: no wall time, no line
    old = run_time(read_run(out))
    assert "wall_s" not in old and fmt_time(old) == "" and fmt_time({}) == ""


def test_the_time_entry_sums_the_evaluator_phases_of_finished_tasks(tmp_path):
    from cudaperf.report.summary import run_time

    out = tmp_path / "r"
    bench(out, samples=1, turns=1)
    traj = out / "trajectories.jsonl"
    recs = [json.loads(x) for x in traj.read_text().splitlines()]
    n = 0
    for r in recs:
        for s in r.get("samples") or []:
            if s.get("result"):
                s["result"]["phases"] = {"compile": 1.5, "copy": 0.25}
                n += 1
    traj.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert run_time(read_run(out))["evaluator_phases_s"] == {"compile": 1.5 * n, "copy": 0.25 * n}


def test_a_finished_run_packs_to_gzip_and_reads_resumes_and_reports_as_before(tmp_path):
    import gzip

    from cudaperf.report.run import pack_run

    out = tmp_path / "r"
    bench(out)
    before = read_run(out)
    plain = (out / "trajectories.jsonl").read_bytes()
    n_plain, n_packed = pack_run(out)
    assert not (out / "trajectories.jsonl").exists() and n_plain == len(plain)
    assert gzip.decompress((out / "trajectories.jsonl.gz").read_bytes()) == plain
    assert n_packed == (out / "trajectories.jsonl.gz").stat().st_size < n_plain
    assert read_run(out).records == before.records  # reports and compare read it
    calls: list = []
    assert bench(out, calls=calls) == 0 and calls == []  # finished: nothing runs, nothing added
    assert not (out / "trajectories.jsonl").exists()
    with pytest.raises(ValueError, match="packed already"):
        pack_run(out)
    packed_bytes = (out / "trajectories.jsonl.gz").read_bytes()
    # a byte-identical second pack of the same text (no timestamp in the gzip header)
    again = tmp_path / "again"
    bench(again)
    pack_run(again)
    assert (again / "trajectories.jsonl.gz").read_bytes() == packed_bytes


def test_an_unfinished_run_is_not_packed_and_a_packed_unfinished_one_is_not_resumed(tmp_path):
    import gzip

    from cudaperf.report.run import check_resume, pack_run

    out = tmp_path / "r"
    with pytest.raises(KeyboardInterrupt):
        bench(out, "scripted:weakest-first", interrupt_at=3)
    with pytest.raises(ValueError, match="unfinished; pack a finished run"):
        pack_run(out)
    assert (out / "trajectories.jsonl").is_file()  # nothing changed
    plain = out / "trajectories.jsonl"  # packed by hand: nothing may append to it
    (out / "trajectories.jsonl.gz").write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    st = BenchSettings(model="scripted:weakest-first", suite="sample", samples=2, turns=2)
    with pytest.raises(ValueError, match="unfinished; gunzip it to trajectories.jsonl"):
        check_resume(out, st, META, {})
    with pytest.raises(ValueError, match="gunzip it"):
        bench(out, "scripted:weakest-first")
    assert not plain.exists()


def test_a_packed_trajectory_that_is_not_gzip_is_one_named_error(tmp_path):
    out = tmp_path / "r"
    bench(out)
    (out / "trajectories.jsonl").unlink()
    (out / "trajectories.jsonl.gz").write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="not a gzipped trajectory"):
        read_run(out)


def _more_turns(out, source, calls, turns=3, info=None):
    """A `turns`-turn run of weakest-first into `out` that begins from the run `source`."""
    from cudaperf.report.run import check_turns_from

    st = BenchSettings(model="scripted:weakest-first", suite="sample", samples=2, turns=turns)
    src = check_turns_from(source, st, META, info or {})
    backend = make_bench_backend(st.model, TASKS)
    return run_bench(st, TASKS, META, out, backend, scorer(calls), 4, info, turns_from=src)


def test_a_run_of_more_turns_begins_from_the_turns_of_a_run_of_fewer(tmp_path):
    """`bench run --turns-from`: a 3-turn run after a 1-turn one of the same settings takes
    each task's recorded turn 1 and generates and scores turns 2-3 only, prompted from that
    turn's chosen reply; run.json and the report say how many tasks began so."""
    from cudaperf.report.render import write_run_report

    one = tmp_path / "t1"
    bench(one, "scripted:weakest-first", samples=2, turns=1)
    calls: list = []
    out = tmp_path / "t3"
    assert _more_turns(out, one, calls) == len(TASKS)
    assert len(calls) == 3 * 2  # 3 chunks x turns 2-3; turn 1 is not scored again
    src = read_trajectory(one / "trajectories.jsonl")
    recs = read_trajectory(out / "trajectories.jsonl")
    first = [r for r in recs if isinstance(r, TurnRecord) and r.turn == 1]
    assert first == [r for r in src if isinstance(r, TurnRecord)]
    for r in recs:
        if isinstance(r, TurnRecord) and r.turn == 2:
            t1 = next(x for x in first if x.task_id == r.task_id)
            assert t1.samples[t1.chosen].reply in [m["content"] for m in r.messages]
    turns = Counter((r.task_id, r.turn) for r in recs if isinstance(r, TurnRecord))
    assert set(turns.values()) == {1} and len(turns) == 3 * len(TASKS)
    doc = json.loads((out / "run.json").read_text())
    started = json.loads((one / "run.json").read_text())["started"]
    assert doc["turns_from"] == {"run": str(one), "turns": 1, "started": started, "tasks": 12}
    timing = [json.loads(x) for x in (out / "timing.jsonl").read_text().splitlines()]
    assert [c["turns"] for c in timing] == [4 * 2] * 3  # turns 2-3 only: turn 1 was not scored
    assert _more_turns(out, one, []) == 0  # a rerun: nothing left, nothing seeded twice
    assert json.loads((out / "run.json").read_text())["turns_from"]["tasks"] == 12
    assert len(read_trajectory(out / "trajectories.jsonl")) == len(recs)
    s = summarize(read_run(out))
    write_run_report(s, out)
    assert (
        f"first turns: 12 task(s) begin with the turn 1 recorded by {one}"
        in (out / "report.md").read_text()
    )


def test_tasks_that_ran_their_own_first_turns_keep_them(tmp_path):
    """A run cut after its first chunk's turn 1, resumed with --turns-from: that chunk's
    tasks continue from their own turn 1; only the others take the other run's."""
    one = tmp_path / "t1"
    bench(one, "scripted:weakest-first", samples=2, turns=1)
    traj = one / "trajectories.jsonl"
    docs = [json.loads(line) for line in traj.read_text().splitlines()]
    for d in docs:  # mark the other run's replies, to see which turn 1 a task continued from
        for sample in d.get("samples", []):
            sample["reply"] += "\n// from t1"
    traj.write_text("".join(json.dumps(d) + "\n" for d in docs))
    out = tmp_path / "t3"
    with pytest.raises(KeyboardInterrupt):  # chunk 1's turn 1 scored, then Ctrl-C
        bench(out, "scripted:weakest-first", interrupt_at=1, turns=3)
    own = {r.task_id for r in read_trajectory(out / "trajectories.jsonl")}
    assert len(own) == 4
    calls: list = []
    assert _more_turns(out, one, calls) == len(TASKS)
    assert len(calls) == 3 * 2
    for r in read_trajectory(out / "trajectories.jsonl"):
        if isinstance(r, TurnRecord) and r.turn == 2:
            marked = any("// from t1" in m["content"] for m in r.messages)
            assert marked == (r.task_id not in own), r.task_id
    assert json.loads((out / "run.json").read_text())["turns_from"]["tasks"] == 8


def test_turns_from_refuses_a_run_that_is_not_the_same_run_of_fewer_turns(tmp_path):
    from cudaperf.report.run import check_resume, check_turns_from

    setup = {"gpu": "NVIDIA H100 80GB HBM3", "sampling": {"temperature": 0.8, "max_tokens": 9}}
    one = tmp_path / "t1"
    st1 = BenchSettings(model="scripted:weakest-first", suite="sample", samples=2, turns=1)
    backend = make_bench_backend(st1.model, TASKS)
    run_bench(st1, TASKS, META, one, backend, scorer([]), 4, setup)
    st3 = BenchSettings(model="scripted:weakest-first", suite="sample", samples=2, turns=3)
    assert check_turns_from(one, st3, META, setup).path == one
    few = {k: META[k] for k in list(META)[:3]}
    for source, st, meta, info, why in (
        (tmp_path / "none", st3, META, setup, "no run.json"),
        (one, st1, META, setup, "it ran 1 turn(s); a run of --turns 1 begins from a run of fewer"),
        (one, BenchSettings(**{**st3.__dict__, "samples": 4}), META, setup, "samples=2 there"),
        (one, st3, few, setup, "it ran other tasks"),
        (one, st3, META, {**setup, "gpu": "NVIDIA H200"}, "another setup (gpu"),
        (one, st3, META, {**setup, "sampling": {"temperature": 1.0, "max_tokens": 9}}, "temper"),
    ):
        with pytest.raises(ValueError, match="--turns-from") as e:
            check_turns_from(source, st, meta, info)
        assert why in str(e.value) and "\n" not in str(e.value), str(e.value)
    out = tmp_path / "t3"
    _more_turns(out, one, [], info={**setup, "turns_from": {"run": str(one)}})
    check_resume(out, st3, META, {**setup, "turns_from": {"run": str(one) + "/"}})  # same run
    with pytest.raises(ValueError, match=f"its first turns came from {one}"):
        check_resume(out, st3, META, {**setup, "turns_from": {"run": str(tmp_path / "other")}})


def test_only_the_tasks_the_other_run_finished_begin_from_it(tmp_path):
    """A task the other run left unfinished may still be continued there: this run makes
    its own turns for it from turn 1."""
    two = tmp_path / "t2"
    with pytest.raises(KeyboardInterrupt):  # chunk 1 finished, chunk 2 only its turn 1
        bench(two, "scripted:weakest-first", interrupt_at=3, turns=2)
    recs = read_trajectory(two / "trajectories.jsonl")
    done = {r.task_id for r in recs if isinstance(r, SummaryRecord)}
    assert len(done) == 4 and len({r.task_id for r in recs}) == 8
    calls: list = []
    out = tmp_path / "t3"
    assert _more_turns(out, two, calls) == len(TASKS)
    assert set(calls[0]) == done  # chunk 1 goes on at turn 3; the others start at turn 1
    recs = read_trajectory(out / "trajectories.jsonl")
    turns = Counter((r.task_id, r.turn) for r in recs if isinstance(r, TurnRecord))
    assert set(turns.values()) == {1} and len(turns) == 3 * len(TASKS)
    assert json.loads((out / "run.json").read_text())["turns_from"]["tasks"] == 4


def test_a_run_stopped_while_scoring_scores_the_replies_it_had_generated(tmp_path):
    """Ctrl-C in chunk 2's turn-2 evaluator batch: its 4 tasks' turn-2 replies stay in
    pending_replies.jsonl; the rerun scores them without generating that turn again (timing.jsonl
    counts them), ends as an uninterrupted run does, and leaves no pending file."""
    out = tmp_path / "r"
    wf = "scripted:weakest-first"
    with pytest.raises(KeyboardInterrupt):
        bench(out, wf, interrupt_at=3)  # chunk 1 done (2 calls), chunk 2 stopped in turn 2
    pending = out / "pending_replies.jsonl"
    held = [json.loads(line) for line in pending.read_text().splitlines()]
    assert len(held) == 4 and {d["turn"] for d in held} == {2}
    done = next(r.task_id for r in read_trajectory(out / "trajectories.jsonl") if r.turn == 2)
    stale = {"key": "k", "task_id": done, "turn": 2, "model": "x", "replies": ["a", "b"]}
    with pending.open("a") as fh:  # a finished task's set (a stop after its records were written)
        fh.write(json.dumps(stale) + "\n")

    backend = make_bench_backend(wf, TASKS)
    asked = []
    one = backend.generate  # its generate_batch calls generate once per conversation

    def counting(messages, n):
        asked.append(messages)
        return one(messages, n)

    backend.generate = counting
    st = BenchSettings(model=wf, suite="sample", samples=2, turns=2)
    (out / "scored_results.jsonl").write_text("")  # what KeptResults leaves of a cut batch
    seen, sc = [], scorer([])
    inner = sc.evaluator

    def watching(jobs):
        seen.append((out / "scored_results.jsonl").exists())
        return inner(jobs)

    sc.evaluator = watching
    assert run_bench(st, TASKS, META, out, backend, sc, batch_tasks=4) == len(TASKS) - 4
    assert seen == [True, False, False]  # kept for the cut chunk, gone once it was recorded
    assert len(asked) == 2 * 4  # chunk 3's two turns only
    lines = [json.loads(x) for x in (out / "timing.jsonl").read_text().splitlines()]
    assert lines[-2]["reused_sets"] == 4 and "reused_sets" not in lines[-1]
    assert not pending.exists()
    recs = read_trajectory(out / "trajectories.jsonl")
    for d in held:  # the turn-2 records hold the replies generated before the stop
        rec = next(r for r in recs if r.task_id == d["task_id"] and r.turn == 2)
        assert [s.reply for s in rec.samples] == d["replies"]
    whole = tmp_path / "w"
    bench(whole, wf)
    assert summarize(read_run(out))["metrics"] == summarize(read_run(whole))["metrics"]
    (out / "scored_results.jsonl").write_text("")  # left by a stop after the last record
    assert bench(out, wf) == 0 and not (out / "scored_results.jsonl").exists()


class _Session:
    """An evaluator session over a backend that answers `ok` and can be cut after `stop_after`
    results (Ctrl-C in the middle of a batch)."""

    def __init__(self, stop_after: int | None = None):
        from cudaperf.execute.config import EvalConfig

        self.config, self.batches, self.seconds, self.closed = EvalConfig(), 0, 0.0, False
        self.ran: list[str] = []
        self.stop_after = stop_after
        env = type("Env", (), {"mode": "full"})()
        self.backend = self
        self.evaluator = type("E", (), {"env": env, "key": staticmethod(self._key)})()

    @staticmethod
    def _key(t, c):
        return f"{t.id}:{c.hash}"

    def run(self, jobs):
        from cudaperf.execute.types import ExecResult

        for i, (t, c) in enumerate(jobs):
            if self.stop_after is not None and len(self.ran) == self.stop_after:
                raise KeyboardInterrupt
            self.ran.append(c.id)
            r = ExecResult(status="ok", mode="full", task_id=t.id, candidate_hash=c.hash)
            yield i, r.model_copy(update={"candidate_id": c.id, "cache_key": self._key(t, c)})

    def close(self):
        self.closed = True


def test_kept_results_let_a_resumed_session_skip_what_a_cut_batch_finished(tmp_path):
    from cudaperf.execute import Candidate
    from cudaperf.report.run import KeptResults

    task = TASKS[0].model_copy(update={"implementations": []})  # no naive run first
    jobs = [(task, Candidate(code=f"// {i}", id=f"c{i}")) for i in range(5)]
    path = tmp_path / "scored_results.jsonl"
    cut = _Session(stop_after=3)
    with pytest.raises(KeyboardInterrupt):
        KeptResults(cut, path)(jobs)
    assert len(path.read_text().splitlines()) == 3  # each result written as it finished
    again = _Session()
    kept = KeptResults(again, path)
    got = kept(jobs)
    assert again.ran == ["c3", "c4"]  # the three finished ones were not run again
    assert [r.candidate_id for r in got] == [f"c{i}" for i in range(5)]  # in job order
    assert [r.cached for r in got] == [True, True, True, False, False]
    assert again.batches == 1 and again.seconds > 0
    kept.close()  # the rest is the session's
    assert again.closed


def _rehost(run_dir, *hosts):
    """timing.jsonl's chunks re-labelled as run on `hosts` (None: a line without the field)."""
    path = run_dir / "timing.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for line, host in zip(lines, hosts, strict=True):
        line.pop("host_cpu", None)
        if host is not None:
            line["host_cpu"] = host
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_speedups_vs_the_c_reference_name_the_hosts_that_timed_them(tmp_path, monkeypatch):
    """The serial C reference is timed on the host's CPU, which the run.json setup does not
    name (session 34: two runs on one GPU kind differed by 16% in C-reference time per naive
    time, from one lease's host to another's). Each chunk's timing line records it; a run
    report names it, and warns when chunks mixed hosts; compare warns when the runs' hosts
    differ or some are unknown, and only then."""
    from cudaperf.report import run as run_mod
    from cudaperf.report.render import write_compare_report

    monkeypatch.setattr(run_mod, "host_cpu", lambda: "CPU-A")
    bench(tmp_path / "a", model="scripted:naive", samples=1, turns=1)
    bench(tmp_path / "b", model="scripted:best", samples=1, turns=1)
    lines = [json.loads(x) for x in (tmp_path / "a/timing.jsonl").read_text().splitlines()]
    assert [x["host_cpu"] for x in lines] == ["CPU-A"] * 3
    s = summarize(read_run(tmp_path / "a"))
    assert s["hosts"] == {"models": {"CPU-A": 3}, "unrecorded": 0}
    c = compare([read_run(tmp_path / "a"), read_run(tmp_path / "b")])
    assert c["hosts_note"] == ""  # one recorded host: nothing to say

    _rehost(tmp_path / "b", "CPU-A", "CPU-B", None)
    s = summarize(read_run(tmp_path / "b"))
    assert s["hosts"] == {"models": {"CPU-A": 1, "CPU-B": 1}, "unrecorded": 1}
    c = compare([read_run(tmp_path / "a"), read_run(tmp_path / "b")])
    note = c["hosts_note"]
    assert "speedups vs cpu are not comparable" in note
    assert "a: CPU-A (3 chunk(s))" in note
    assert "b: CPU-A (1 chunk(s)), CPU-B (1 chunk(s)); 1 chunk(s) not recorded" in note
    md = (write_compare_report(c, tmp_path / "cmp").parent / "report.md").read_text()
    assert "speedups vs cpu are not comparable" in md

    _rehost(tmp_path / "b", "CPU-B", "CPU-B", "CPU-B")  # one host each, but not the same one
    c = compare([read_run(tmp_path / "a"), read_run(tmp_path / "b")])
    assert "a: CPU-A (3 chunk(s)); b: CPU-B (3 chunk(s))" in c["hosts_note"]
    _rehost(tmp_path / "b", None, None, None)  # a run older than the field: unknown, not known
    c = compare([read_run(tmp_path / "a"), read_run(tmp_path / "b")])
    assert "speedups vs cpu may not be comparable" in c["hosts_note"]
    assert "b: 3 chunk(s) not recorded" in c["hosts_note"]


def test_a_run_report_names_its_host_cpu_and_warns_when_chunks_mixed_hosts(tmp_path):
    from cudaperf.report.render import write_run_report as write_report

    bench(tmp_path / "r", model="scripted:naive", samples=1, turns=1)
    _rehost(tmp_path / "r", "CPU-A", "CPU-A", "CPU-A")
    md = write_report(summarize(read_run(tmp_path / "r")), tmp_path / "r").parent / "report.md"
    assert "host CPU (times the serial C reference): CPU-A" in md.read_text()
    _rehost(tmp_path / "r", "CPU-A", "CPU-B", "CPU-A")
    md = write_report(summarize(read_run(tmp_path / "r")), tmp_path / "r").parent / "report.md"
    text = md.read_text()
    assert "speedups vs cpu mix host CPUs" in text and "CPU-A (2 chunk(s)), CPU-B (1" in text


def test_a_chunk_is_predicted_from_the_slowest_complete_chunk_at_least_as_large():
    from cudaperf.report.run import chunk_seconds

    lines = [
        {"tasks": 16, "complete": True, "wall_s": 320.0},  # 20 s a task
        {"tasks": 16, "complete": True, "wall_s": 240.0},  # 15 s a task
        {"tasks": 16, "complete": False, "wall_s": 600.0},  # cut (a hang?): no chunk's length
        {"tasks": 2, "complete": True, "wall_s": 60.0},  # 30 s a task: its fixed costs
        {"tasks": 4},  # a line without seconds (not written by this version) is skipped
    ]
    assert chunk_seconds(lines, 16) == 320.0
    assert chunk_seconds(lines, 12) == 12 * 20.0  # the small chunk's rate predicts no larger one
    assert chunk_seconds(lines, 2) == 60.0  # every chunk holds at least 2: the slowest rate
    assert chunk_seconds(lines, 32) == 32 * 30.0  # none as large: every complete chunk's rate
    assert chunk_seconds(lines[2:3], 16) is None and chunk_seconds([], 4) is None


def test_the_tasks_that_fit_the_seconds_left_are_predicted_with_a_whole_generation():
    from cudaperf.report.run import fitting_tasks

    # session 41's chunk of arm A seed 1's bench (H100): 16 tasks in 206.6 s, 66.2 s of it
    # generating; the job stopped with 96 s left, where 3 tasks would have fit
    h100 = [{"tasks": 16, "complete": True, "wall_s": 206.6, "generate_s": 66.2}]
    assert fitting_tasks(h100, 15, 96.0) == 3  # (96 - 66.2) // ((206.6 - 66.2) / 16)
    assert fitting_tasks(h100, 2, 96.0) == 2 and fitting_tasks(h100, 15, 60.0) == 0
    lines = h100 + [
        {"tasks": 4, "complete": True, "wall_s": 50.0},  # no generate_s: 12.5 s a task
        {"tasks": 16, "complete": False, "wall_s": 900.0, "generate_s": 800.0},  # cut: not used
    ]
    assert fitting_tasks(lines, 15, 96.0) == 2  # (96 - 66.2) // 12.5: the slowest of each
    assert fitting_tasks(lines[2:], 15, 1e6) == 0 and fitting_tasks([], 15, 1e6) == 0


def test_a_wall_budget_stops_before_a_chunk_that_would_not_end_inside_it(tmp_path, monkeypatch):
    """12 tasks in chunks of 4, 2 turns; the evaluator takes 6.25 s of a fake clock per
    candidate (the scripted model's 2 samples are one), so a chunk of n tasks takes 12.5 n s.
    With 126 s the first two chunks run (the first with no chunk to predict from, the second
    predicted 50 s with 76 s left); the third (50 s, 26 left) is cut to the 2 tasks that fit,
    and the fourth (the other 2: 25 s, 1 left) does not start; the same call without the
    budget finishes the run."""
    import cudaperf.report.run as run_mod
    from cudaperf.report.run import WallBudget

    class Clock:
        now = 1000.0

        def perf_counter(self):
            return self.now

    clock = Clock()
    monkeypatch.setattr(run_mod, "time", clock)
    calls: list = []
    ev = stored_evaluator(calls)

    def slow(jobs):
        clock.now += 6.25 * len(jobs)
        return ev(jobs)

    sc = RewardScorer(TASKS, evaluator=slow, analyzer=lambda c: [], analyze="always")
    wf = "scripted:weakest-first"  # a new implementation each turn: one evaluator call a turn
    st = BenchSettings(model=wf, suite="sample", samples=2, turns=2)
    out = tmp_path / "r"

    def go(budget, started=None):
        be = make_bench_backend(wf, TASKS)
        return run_bench(st, TASKS, META, out, be, sc, 4, wall_budget_s=budget, started=started)

    with pytest.raises(WallBudget) as stop:
        go(126.0)
    assert (stop.value.finished, stop.value.total) == (10, len(TASKS))
    assert (stop.value.need_s, stop.value.left_s) == (25.0, 1.0)
    assert "25 s and 1 s are left; 10 of 12 tasks finished" in str(stop.value)
    run = read_run(out)
    assert len(finished_ids(run)) == 10
    assert [(c["tasks"], c["wall_s"]) for c in run.timing] == [(4, 50.0), (4, 50.0), (2, 25.0)]
    with pytest.raises(WallBudget, match="longer than the whole budget.*--batch-tasks"):
        go(10.0)  # a resumed process predicts from the run's chunks: not one task fits 10 s
    assert len(read_run(out).timing) == 3  # nothing ran
    clock.now += 1000.0
    with pytest.raises(WallBudget, match="take 25 s and 10 s are left; 10 of 12"):
        go(200.0, started=clock.now - 190.0)  # loading took 190 s of the 200
    assert go(None) == 2 and len(finished_ids(read_run(out))) == len(TASKS)
    with pytest.raises(ValueError, match="--wall-budget 0.0: give seconds > 0"):
        go(0.0)


def finished_ids(run) -> set[str]:
    return {r.task_id for r in run.records if isinstance(r, SummaryRecord)}


def test_the_time_entry_counts_a_shared_evaluation_once_and_a_cache_answer_not_at_all(tmp_path):
    """Samples of one task with the same candidate share one evaluation (the same result, its
    phases copied): counted once. A result the cache answered (`cached`) cost this run none of
    its copied phases. The same candidate of another task is another evaluation."""
    from cudaperf.report.summary import run_time

    out = tmp_path / "r"
    bench(out, samples=3, turns=1)
    traj = out / "trajectories.jsonl"
    recs = [json.loads(x) for x in traj.read_text().splitlines()]
    turns = [r for r in recs if r.get("samples")]
    assert len(turns) >= 2
    for r in turns:
        for s in r["samples"]:
            s["result"]["phases"] = {"compile": 1.0}
            s["result"]["cache_key"] = "same"  # every sample of a task: one evaluation
            s["result"]["cached"] = False
    turns[0]["samples"][0]["result"]["cache_key"] = "other"
    turns[1]["samples"][0]["result"]["cache_key"] = "hit"
    turns[1]["samples"][0]["result"]["cached"] = True
    traj.write_text("".join(json.dumps(r) + "\n" for r in recs))
    # task 0: "same" and "other"; task 1: "same" ("hit" came from the cache); then one each
    assert run_time(read_run(out))["evaluator_phases_s"] == {"compile": 2 + 1 + len(turns) - 2}
