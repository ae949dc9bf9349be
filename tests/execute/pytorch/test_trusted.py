"""The trusted side of PyTorch→CUDA checking, run for real on the CPU (spawned candidate
process, shared-memory buffers): honest candidates pass; candidates that hunt for the answer
in their own process find nothing; inputs separate functions; every dynamic check fires."""

import pytest

torch = pytest.importorskip("torch")

from torch_cpu import HONEST, RELU_REF, SALT, FakeGpuChild, relu_task, run, run_fake  # noqa: E402

from cudaperf.execute.pytorch.trusted import signed_wide  # noqa: E402

# --- item 1: the candidate's process holds no answer ----------------------------------------

FRAME_WALK = """import torch
def _walk():
    f = GEN.gi_frame.f_back  # the generator's caller: up through whatever runs the forward
    seen, depth = [], 0
    while f is not None:
        depth += 1
        for name, v in list(f.f_locals.items()):
            seen.append(name)
            if name in ("want", "ref", "ref_mod", "salt", "req") and v is not None:
                yield ("found", name, v)
        f = f.f_back
    print("frames walked:", depth, "locals:", sorted(set(seen)))
    yield ("none", None, None)
class ModelNew(torch.nn.Module):
    def forward(self, x):
        global GEN
        GEN = _walk()
        kind, name, v = next(GEN)
        if kind == "found" and isinstance(v, torch.Tensor):
            return v.clone()
        if kind == "found" and hasattr(v, "forward"):
            return v(x)
        return torch.zeros_like(x)
"""

GC_SCAN = """import gc, sys, torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        mods = [m for m in gc.get_objects() if isinstance(m, torch.nn.Module)]
        refs = [m for m in mods if type(m).__name__ == "Model"]
        names = [n for n in sys.modules if n.startswith("cudaperf_ref")]
        salts = [o for o in gc.get_objects() if type(o) is dict and type(o.get("salt")) is int]
        print("gc modules:", sorted({type(m).__name__ for m in mods}), "refs:", len(refs),
              "ref modules:", names, "salt dicts:", len(salts))
        if refs:
            return refs[0](x)
        return torch.zeros_like(x)
"""

IMPORT_REF = """import importlib, torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        for name in ("cudaperf_ref_base", "cudaperf_ref_heldout"):
            try:
                mod = importlib.import_module(name)
            except ImportError as e:
                print("no reference module:", name, e)
                continue
            return mod.Model()(x)
        return torch.zeros_like(x)
"""

ENV_AND_MEMORY = """import gc, os, sys, torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        ints = set()
        for o in gc.get_objects():
            if isinstance(o, dict):
                ints.update(v for v in list(o.values()) if type(v) is int and v > 10**6)
        print("ENV", dict(os.environ))
        print("ARGV", sys.argv)
        print("INTS", sorted(ints))
        return torch.zeros_like(x)
"""


@pytest.mark.parametrize(
    ("code", "evidence"),
    [
        (FRAME_WALK, "frames walked:"),
        (GC_SCAN, "refs: 0 ref modules: [] salt dicts: 0"),
        (IMPORT_REF, "no reference module"),
    ],
    ids=["frame_walk", "gc_scan", "import_reference"],
)
def test_candidates_hunting_for_the_answer_find_nothing(code, evidence):
    reply, log = run(code)
    assert reply["status"] == "wrong_output", reply
    assert evidence in log  # the hunt ran, and came back empty-handed


def test_the_secret_salt_is_nowhere_in_the_candidates_process():
    reply, log = run(ENV_AND_MEMORY)
    assert reply["status"] == "wrong_output"
    assert "ENV" in log and "INTS" in log
    assert str(SALT) not in log  # not in the environment, argv or any reachable dict


def test_honest_candidate_passes_and_nothing_is_launched_on_the_cpu():
    reply, _ = run(HONEST)
    assert reply["status"] == "ok", reply
    assert [c["config"] for c in reply["configs"]] == ["base", "heldout"]
    assert all(c["timing"] and c["correct"] for c in reply["configs"])
    assert reply["launched"] is None and reply["restart"] is False


# --- item 4: inputs that separate functions -------------------------------------------------

COPY = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x.clone()
"""

INPLACE = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x.relu_()
"""

RETURNS_INPUT = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
"""

IDENTITY_REF = RELU_REF.replace("torch.relu(x)", "x * 1.0")
ALIASING_REF = RELU_REF.replace("torch.relu(x)", "x")


def test_copy_kernel_fails_relu_on_non_negative_inputs():
    reply, _ = run(COPY)
    assert reply["status"] == "wrong_output"
    assert "signed inputs" in reply["message"]


def test_in_place_kernel_returning_its_input_fails_relu():
    reply, _ = run(INPLACE)
    assert reply["status"] == "rejected", reply["message"]


def test_output_aliasing_an_input_is_rejected_unless_the_reference_aliases_too():
    reply, _ = run(RETURNS_INPUT, relu_task(IDENTITY_REF))  # right values on every input
    assert reply["status"] == "rejected" and "shares memory" in reply["message"]
    reply, _ = run(RETURNS_INPUT, relu_task(ALIASING_REF))
    assert reply["status"] == "ok", reply


def test_signed_inputs_are_used_only_where_the_reference_stays_finite():
    sqrt_ref = RELU_REF.replace("torch.relu(x)", "torch.sqrt(x)")
    honest = HONEST.replace("torch.clamp(x, min=0.0)", "x.sqrt()")
    reply, _ = run(honest, relu_task(sqrt_ref))  # sqrt of a negative is NaN: own inputs only
    assert reply["status"] == "ok", reply


def test_signed_wide_keeps_shapes_dtypes_and_index_tensors():
    x = torch.rand(64, 3)
    idx = torch.randint(0, 10, (5,))
    mask = torch.rand(7) > 0.5
    out = signed_wide([x, idx, mask, 3], seed=5)
    assert out[0].shape == x.shape and out[0].dtype == x.dtype
    assert (out[0] < 0).any() and out[0].abs().max() > 1.0 and out[0].abs().max() <= 2.0
    assert out[1] is idx and out[2] is mask and out[3] == 3
    assert torch.equal(signed_wide([x], seed=5)[0], out[0])  # deterministic in the seed


# --- item 5 and item 8: the dynamic checks, each with a candidate it catches ----------------

POINTER_CACHE = """import torch
CACHE = {}
class ModelNew(torch.nn.Module):
    def forward(self, x):
        key = x.data_ptr()
        if key not in CACHE:
            CACHE[key] = torch.relu(x)
        return CACHE[key].clone()
"""

STALE_AFTER = """import torch
CALLS, LAST = [0], []
class ModelNew(torch.nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 4 and LAST:
            return LAST[0].clone()  # cheap: the output of an earlier call
        LAST[:] = [torch.relu(x)]
        return LAST[0].clone()
"""

MEMO_SLOW = """import time, torch
SEEN = {}
class ModelNew(torch.nn.Module):
    def forward(self, x):
        probe = float(x[:8].sum())
        if probe not in SEEN:
            time.sleep(0.003)  # the expensive work, done once per distinct input
            SEEN[probe] = torch.relu(x)
        return SEEN[probe].clone()
"""

PATCHED_TIMER = """import time, torch
_real = time.perf_counter
time.perf_counter = lambda: _real()
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""

LYING_TIMES = """import time, torch
from cudaperf.execute.pytorch import runtime as torch_runtime
torch_runtime.time_once = lambda fn, args, flush, device: (fn(*args), (1.0, 1.0))[1]
torch_runtime.timers_intact = lambda: ""  # and silences the in-process integrity check
class ModelNew(torch.nn.Module):
    def forward(self, x):
        time.sleep(0.004)
        return torch.relu(x)
"""

WRONG_ON_HELDOUT = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        if x.numel() == 5003:
            y[-1] += 1.0
        return y
"""

MUTATES = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        x[0] = 7.0
        return y
"""


def test_pointer_keyed_cache_fails_fresh_inputs_in_the_same_buffers():
    reply, _ = run(POINTER_CACHE)
    assert reply["status"] == "wrong_output" and "same input buffers" in reply["message"]


def test_stale_outputs_after_timing_fail_the_check_after_timing():
    reply, _ = run(STALE_AFTER)
    assert reply["status"] == "wrong_output" and "after timing" in reply["message"]


def test_timed_trials_get_fresh_inputs_so_memoising_does_not_pay():
    reply, _ = run(MEMO_SLOW)
    assert reply["status"] == "ok", reply
    assert reply["configs"][0]["timing"]["median_us"] > 2500  # every timed call paid


def test_replaced_timers_are_rejected():
    reply, _ = run(PATCHED_TIMER)
    assert reply["status"] == "rejected" and "time.perf_counter" in reply["message"]
    forged = PATCHED_TIMER.replace(
        "time.perf_counter = lambda: _real()",
        "from cudaperf.execute.pytorch import runtime\n"
        "runtime.profile_share = lambda *a: (1.0, '', ['k'])",
    )
    reply, _ = run(forged)  # forging the profiler's answer in its own process
    assert reply["status"] == "rejected" and "pytorch.runtime.profile_share" in reply["message"]


def test_times_the_trusted_clock_contradicts_are_rejected():
    reply, _ = run(LYING_TIMES)
    assert reply["status"] == "rejected" and "trusted clock" in reply["message"]


def test_held_out_configs_are_checked_and_their_feedback_has_no_size():
    reply, _ = run(WRONG_ON_HELDOUT)
    assert reply["status"] == "wrong_output"
    held = reply["configs"][1]
    assert held["held_out"] and not held["correct"]
    assert "5003" not in held["message"] and "5002" not in held["message"]
    assert "elements outside tolerance" in held["message"]


def test_mutated_inputs_are_rejected():
    reply, _ = run(MUTATES)
    assert reply["status"] == "rejected" and "modified its inputs" in reply["message"]


PREDICTS_INPUTS = """import torch
from cudaperf.execute.pytorch.trusted import _seed
from cudaperf.tasks.model import InputConfig
CFG = InputConfig(name="base", sizes={"N": 1000})
GUESSES = []
for t in range(8):
    torch.manual_seed(_seed(0, CFG, t))  # the public seed formula with a guessed salt
    GUESSES.append(torch.rand(1000))
class ModelNew(torch.nn.Module):
    def forward(self, x):
        if any(torch.equal(x, g) for g in GUESSES):
            print("PREDICTED")
        return torch.clamp(x, min=0.0)
"""


def test_inputs_cannot_be_predicted_without_the_secret_salt():
    reply, log = run(PREDICTS_INPUTS)
    assert reply["status"] == "ok", reply
    assert "PREDICTED" not in log  # every trial's inputs depend on the salt it never sees


def test_profile_share_and_launched_kernels_are_judged():
    from cudaperf.execute.pytorch.trusted import _Fail, judge_profile

    names, note = judge_profile({"share": 0.9, "note": "", "launched": ["k1"]}, 0.5)
    assert names == ["k1"] and note == ""
    for share, words in ((0.0, "none of the candidate's own kernels"), (0.2, "only 20%")):
        with pytest.raises(_Fail, match=words) as e:
            judge_profile({"share": share, "launched": []}, 0.5)
        assert e.value.status.value == "rejected"
    assert judge_profile({"share": None, "note": "cpu", "launched": None}, 0.5) == (None, "cpu")


SQRT_REF = RELU_REF.replace("torch.relu(x)", "torch.sqrt(x)")


def test_pointer_cache_fails_on_fresh_values_alone():
    """On a task where the signed distribution is not used (sqrt), only fresh values in the
    same buffers tell a pointer-keyed cache from a kernel."""
    reply, _ = run(POINTER_CACHE.replace("torch.relu(x)", "torch.sqrt(x)"), relu_task(SQRT_REF))
    assert reply["status"] == "wrong_output" and "same input buffers" in reply["message"]


def test_a_reference_that_overflows_on_signed_inputs_is_judged_on_its_own_inputs_only():
    """exp(50 x) overflows for x > 1.78: on the signed distribution the reference is inf
    where a candidate that agrees on the task's own inputs need not be."""
    ref = RELU_REF.replace("torch.relu(x)", "torch.exp(x * 50.0)")
    clamped = HONEST.replace(
        "torch.clamp(x, min=0.0)", "torch.exp(torch.clamp(x * 50.0, max=88.0))"
    )
    reply, _ = run(clamped, relu_task(ref, tol=1e-4))
    assert reply["status"] == "ok", reply


def test_eager_baseline_is_timed_and_cached(tmp_path):
    cache = tmp_path / "baselines.jsonl"
    reply, _ = run(HONEST, baseline_cache=str(cache))
    assert reply["status"] == "ok" and all(c["eager_timing"] for c in reply["configs"])
    assert len(cache.read_text().splitlines()) == 2  # one per config
    again, _ = run(HONEST, baseline_cache=str(cache))
    assert again["configs"][0]["eager_timing"] == reply["configs"][0]["eager_timing"]


def test_a_machine_that_cannot_share_buffers_is_an_infra_error_not_the_candidates():
    from cudaperf.execute.pytorch.proc import ChildError
    from cudaperf.execute.pytorch.trusted import _probe_sharing

    class Broken:
        def ask(self, kind, arg=None):
            raise ChildError("RuntimeError: cudaIpcOpenMemHandle failed")

    with pytest.raises(RuntimeError, match="sharing buffers"):
        _probe_sharing(Broken(), "cpu")


def test_forged_impossible_times_and_overheads_are_refused():
    from cudaperf.execute.pytorch.proc import ChildError
    from cudaperf.execute.pytorch.trusted import _Fail, _overhead, _pair

    assert _pair([3.0, 4.0]) == (3.0, 4.0)
    for bad in ([float("nan"), 1.0], [-1.0, 2.0], [1.0, float("inf")]):
        with pytest.raises(_Fail, match="impossible time"):
            _pair(bad)
    with pytest.raises(ChildError):
        _pair("fast")
    assert _overhead(1e9) == 100.0 and _overhead(float("nan")) == 0.0 and _overhead(-5) == 0.0
    assert _overhead(7.5) == 7.5


# --- the checks of the timed window, on what a GPU reports ----------------------------------
# On the CPU the event time is the wall time by construction (`torch_runtime.time_once`) and
# there is no profiler, so no candidate can escape the events or show a kernel share there.
# `FakeGpuChild` answers as the candidate's process on a GPU would: outputs computed for real,
# times and profile as given. A candidate that replaced the timers in its own process could
# report anything; that is `timers_intact` and the trusted clock's to catch (tests above).


def _relu(x):
    return torch.relu(x)


def test_work_that_escapes_the_timing_events_is_rejected():
    reply = run_fake(FakeGpuChild(_relu, times=(50.0, 52.0)))
    assert reply["status"] == "ok", reply
    # a side stream: the events see 50 us of work, the device-wide sync waits 400 us for it
    reply = run_fake(FakeGpuChild(_relu, times=(50.0, 400.0)))
    assert reply["status"] == "rejected", reply
    assert "escapes the timing events" in reply["message"]


def test_an_impossible_bandwidth_is_rejected():
    task = relu_task(base=1 << 20)  # 4 MiB of input, read in full
    fast = (10.0, 10.0)  # 419 GB/s, on a card that moves 100
    reply = run_fake(FakeGpuChild(_relu, times=fast), task, max_bandwidth_gbs=100.0)
    assert reply["status"] == "rejected", reply
    assert "impossible" in reply["message"]
    reply = run_fake(FakeGpuChild(_relu, times=fast), task, max_bandwidth_gbs=1e4)
    assert reply["status"] == "ok", reply  # the request's bandwidth is the bound


def test_a_candidate_whose_own_kernels_carry_too_small_a_share_is_rejected():
    low = {"share": 0.2, "note": "", "launched": ["relu_kernel"]}
    child = FakeGpuChild(_relu, profile=low)
    reply = run_fake(child)  # min_kernel_share 0.5
    assert reply["status"] == "rejected", reply
    assert "only 20%" in reply["message"] and child.asked.count("profile") == 1
    reply = run_fake(FakeGpuChild(_relu, profile=low), min_kernel_share=0.0)
    assert reply["status"] == "ok", reply  # the request's threshold is the bound
    assert reply["launched"] == ["relu_kernel"]


# --- the held-out config's own correctness trials -------------------------------------------
# Both candidates are right on the visible config, and on the held-out config's own input
# distribution from the first timed call on (so the check after timing passes them): only
# the held-out config's correctness trials, signed inputs among them, find them out.

WRONG_ON_HELDOUT_SIGNED = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        if x.numel() == 5003 and bool((x < 0).any()):
            y[-1] += 1.0
        return y
"""

WRONG_ON_HELDOUT_EARLY = """import torch
CALLS = {}
class ModelNew(torch.nn.Module):
    def forward(self, x):
        n = CALLS[x.numel()] = CALLS.get(x.numel(), 0) + 1
        y = torch.relu(x)
        if x.numel() == 5003 and n <= 3:  # its first three calls: the correctness trials
            y[-1] += 1.0
        return y
"""


@pytest.mark.parametrize(
    "code", [WRONG_ON_HELDOUT_SIGNED, WRONG_ON_HELDOUT_EARLY], ids=["signed", "early"]
)
def test_the_held_out_config_s_correctness_trials_are_run(code):
    reply, _ = run(code)
    assert reply["status"] == "wrong_output", reply
    base, held = reply["configs"]
    assert base["correct"] and base["timing"], base
    assert held["held_out"] and not held["correct"] and "5003" not in held["message"]


# --- the salt, while the candidate's module and model are built -----------------------------

SALT_HUNT = """import gc, os, re, sys, torch
from cudaperf.execute.pytorch.trusted import _seed
from cudaperf.tasks.model import InputConfig
CFG = InputConfig(name="base", sizes={"N": 1000})
INTS, WHERE, FOUND, TRIED = set(), [], [], []

def _ints(vals):
    INTS.update(v for v in vals if type(v) is int and v > 10**6)

def _hunt(where):
    WHERE.append(where)
    for o in gc.get_objects():
        if isinstance(o, dict):
            _ints(list(o.values()))
    f = sys._getframe()
    while f is not None:  # up through whatever imports the module or builds the model
        for v in list(f.f_locals.values()):
            _ints(list(v.values()) if isinstance(v, dict) else [v])
        f = f.f_back
    for s in [*os.environ.values(), *sys.argv]:
        _ints([int(w) for w in re.findall(r"\\d{7,}", s)])

_hunt("import")

class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        _hunt("init")

    def forward(self, x):
        if not TRIED and x.numel() == 1000:  # trial 0 of the visible config
            TRIED.append(1)
            for s in sorted(INTS):
                torch.manual_seed(_seed(s, CFG, 0))
                if torch.equal(torch.rand(1000), x):  # its inputs, predicted: s is the salt
                    FOUND.append(s)
            print("hunted at", WHERE, "among", len(INTS), "ints; salt found:", bool(FOUND))
        return torch.relu(x) if FOUND else torch.zeros_like(x)  # right only with the salt
"""


def test_the_salt_is_not_in_the_candidates_process_while_its_model_is_built():
    reply, log = run(SALT_HUNT)
    assert reply["status"] == "wrong_output", (reply, log)  # it never had the salt
    assert "hunted at ['import', 'init'] among" in log and "salt found: False" in log
    assert str(SALT) not in log


# --- fresh values in the same buffers, by themselves ----------------------------------------

POINTER_CACHE_WHILE_CHECKED = """import torch
CACHE, CALLS = {}, [0]
class ModelNew(torch.nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 3:  # from the first timed call on: computed, so right after timing
            return torch.sqrt(x)
        key = x.data_ptr()
        if key not in CACHE:
            CACHE[key] = torch.sqrt(x)
        return CACHE[key].clone()
"""


def test_a_pointer_cache_of_the_correctness_trials_fails_on_fresh_values():
    """The cache is used by the correctness trials only (sqrt: no signed distribution), so
    only new values in the same buffers between those trials tell it from a kernel."""
    reply, _ = run(POINTER_CACHE_WHILE_CHECKED, relu_task(SQRT_REF))
    assert reply["status"] == "wrong_output", reply
    assert not reply["configs"][0]["correct"]


PROBE = """import sys, torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        print("probe n=%d" % x.numel())
        print("probe stderr n=%d" % x.numel(), file=sys.stderr)
        if x.numel() != 1000:
            raise ValueError("n=%d, in words five-oh-oh-three" % x.numel())
        return torch.clamp(x, min=0.0)
"""


def test_what_a_candidate_prints_on_a_held_out_config_stays_out_of_the_reply():
    """Visible configs run first; the reply's output is what the candidate printed before the
    first held-out call (so the held-out N = 5003 is not in it), and its exception text on the
    held-out config is withheld, also when the task lists the held-out config first."""
    from cudaperf.execute.held_out import WITHHELD

    task = relu_task()
    first = task.model_copy(update={"configs": task.configs[::-1]})
    for t in (task, first):
        reply, log = run(PROBE, t)
        assert reply["status"] == "runtime_error", reply
        assert "5003" in log  # it did print the held-out size ...
        assert "probe n=1000" in reply["output"] and "5003" not in reply["output"]  # ... unseen
        held = next(c for c in reply["configs"] if c["held_out"])
        assert held["message"] == WITHHELD and "five" not in reply["message"]
        assert [c["config"] for c in reply["configs"]] == [c.name for c in t.configs]
