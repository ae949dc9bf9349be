"""GPU check of the candidates against KernelBench's reference modules (needs CUDA torch).

    python bench/kernelbench_candidates/check_gpu.py native|inline KERNELBENCH_DIR [FILTER...]

KERNELBENCH_DIR holds level1/ and level2/ (KernelBench/ in its repository). Each candidate
runs at the problem's size (timed against the reference), at a shrunk size (every int >= 64
in the problem module becomes n // 16 + 3, which makes shapes irregular), and, for level-1
problems with a `dim` argument, with dim 0 and -1 too. Inputs are checked for mutation and
outputs with allclose(atol=rtol=1e-2). Results go to stdout and $OUT/<form>.txt.
"""

import ast
import importlib.util
import json
import os
import subprocess
import sys
import time
import traceback
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
CAND = ROOT / "bench/kernelbench_candidates"
OUT = Path(os.environ.get("OUT", "/tmp/out"))
OUT.mkdir(parents=True, exist_ok=True)

pkg = types.ModuleType("cudaperf")
pkg.__path__ = []
sub = types.ModuleType("cudaperf.execute")
sub.__path__ = []
sys.modules["cudaperf"] = pkg
sys.modules["cudaperf.execute"] = sub
spec = importlib.util.spec_from_file_location(
    "cudaperf.execute.native", ROOT / "src/cudaperf/execute/native.py"
)
native = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = native
spec.loader.exec_module(native)

DIM_ARG = {
    "24_LogSoftmax.py": 0,
    "47_": 0,
    "48_": 0,
    "49_": 0,
    "51_": 0,
    "52_": 0,
    "53_": 0,
    "89_": 0,
    "90_": 0,
    "91_": 0,
    "92_": 0,
    "93_": 0,
}


_IMPORT = (
    "import importlib.util as u; s = u.spec_from_file_location('m', '{path}'); "
    "m = u.module_from_spec(s); s.loader.exec_module(m)"
)


def load(path, name):
    s = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    return m


def shrink(mod):
    for k, v in list(vars(mod).items()):
        if k.startswith("_") or isinstance(v, bool):
            continue
        if isinstance(v, int) and v >= 64:
            setattr(mod, k, v // 16 + 3)
        elif isinstance(v, tuple) and v and all(isinstance(i, int) for i in v):
            setattr(mod, k, tuple(i // 16 + 3 if i >= 64 else i for i in v))


def compare(out, ref):
    if isinstance(ref, torch.Tensor) and ref.dtype == torch.int64:
        ok = out.shape == ref.shape and out.dtype == ref.dtype and bool((out == ref).all())
        return ok, f"exact={ok} mism={int((out != ref).sum()) if out.shape == ref.shape else -1}"
    if out.shape != ref.shape or out.dtype != ref.dtype:
        return (
            False,
            f"shape/dtype {tuple(out.shape)} {out.dtype} vs {tuple(ref.shape)} {ref.dtype}",
        )
    d = (out.double() - ref.double()).abs()
    ok = bool(torch.allclose(out, ref, atol=1e-2, rtol=1e-2)) and not bool(out.isnan().any())
    rel = (d / (ref.double().abs() + 1e-6)).max().item()
    return ok, f"maxabs={d.max().item():.2e} maxrel={rel:.2e} refmax={ref.abs().max().item():.2e}"


def timeit(fn, inputs, n=5):
    for _ in range(2):
        fn(*inputs)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        fn(*inputs)
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / n


def run_case(prob, cand_path, form, init_override=None, small=False, time_it=False):
    P = load(prob, f"p_{prob.stem}_{small}")
    if small:
        shrink(P)
    init = P.get_init_inputs() if init_override is None else init_override
    C = load(cand_path, f"c_{form}_{cand_path.stem}")
    torch.manual_seed(0)
    ref_m = P.Model(*init).cuda()
    torch.manual_seed(0)
    new_m = C.ModelNew(*init).cuda()
    torch.manual_seed(1)
    inputs = P.get_inputs()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in inputs]
    keep = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad():
        ref = ref_m(*inputs)
        out = new_m(*inputs)
        torch.cuda.synchronize()
        out2 = new_m(*inputs)
        torch.cuda.synchronize()
    ok, msg = compare(out, ref)
    ok2, _ = compare(out2, ref)
    mut = any(
        isinstance(x, torch.Tensor) and not torch.equal(x, k)
        for x, k in zip(inputs, keep, strict=True)
    )
    ok = ok and ok2 and not mut
    if mut:
        msg += " INPUT MUTATED"
    shape = [tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor)]
    t = ""
    if time_it and ok:
        with torch.no_grad():
            tr, tn = timeit(ref_m, inputs), timeit(new_m, inputs)
        t = f" ref={tr:.3f}ms new={tn:.3f}ms speedup={tr / tn:.2f}"
    del ref, out, out2, inputs, keep, ref_m, new_m
    torch.cuda.empty_cache()
    return ok, f"{msg} init={init} in={shape}{t}"


def main():
    form, kb_dir = sys.argv[1], Path(sys.argv[2])
    only = sys.argv[3:]
    idx = json.load(open(CAND / "index.json"))
    if only:
        idx = [e for e in idx if any(o in e[form] for o in only)]
    t0 = time.time()
    if form == "native":
        srcs = []
        for e in idx:
            tree = ast.parse((CAND / e["native"]).read_text())
            srcs += [
                n.value.value
                for n in tree.body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "CUDA_SRC"
            ]
        with ThreadPoolExecutor(16) as ex:
            list(ex.map(native.load_cuda, srcs))
    else:

        def build(e):
            r = subprocess.run(
                [sys.executable, "-c", _IMPORT.format(path=CAND / e["inline"])],
                capture_output=True,
                text=True,
                env={**os.environ, "MAX_JOBS": "2"},
            )
            return e["inline"], r.returncode, (r.stdout + r.stderr)[-3000:]

        with ThreadPoolExecutor(int(os.environ.get("PAR", "8"))) as ex:
            for name, rc, log in ex.map(build, idx):
                if rc:
                    print("BUILD FAIL", name, log, flush=True)
    print(f"built in {time.time() - t0:.0f}s", flush=True)
    res = open(OUT / f"{form}.txt", "a")
    nfail = 0
    for e in idx:
        prob = kb_dir / f"level{e['level']}" / e["problem"]
        cand = CAND / e[form]
        cases = [dict(small=False, time_it=form == "native"), dict(small=True)]
        key = next((k for k in DIM_ARG if e["level"] == 1 and e["problem"].startswith(k)), None)
        if key and os.environ.get("DIMS", "1") == "1":
            cases += [dict(small=True, init_override=[0]), dict(small=True, init_override=[-1])]
        for c in cases:
            try:
                ok, msg = run_case(prob, cand, form, **c)
            except Exception:
                ok, msg = False, traceback.format_exc()[-1500:]
                torch.cuda.empty_cache()
            nfail += not ok
            line = f"{'PASS' if ok else 'FAIL'} {e[form]} small={c.get('small')} {msg}"
            print(line, flush=True)
            res.write(line + "\n")
            res.flush()
    print(f"done in {time.time() - t0:.0f}s, failures: {nfail}")


if __name__ == "__main__":
    main()
