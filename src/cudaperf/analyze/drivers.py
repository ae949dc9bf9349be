"""Profile a candidate (no `main()`) on its task's inputs: generated drivers run under ncu.

- C→CUDA: the candidate is built with the evaluator's harness (`execute.harness`) plus a
  small `main()` into one executable. The task's inputs for a config
  (`tasks.inputs.make_inputs`, public seed, no secret salt) go into a binary file that the
  driver reads (int32 count, then per parameter int32 role, int64 bytes, raw bytes); it calls
  the harness's one checked call twice, the second between `cudaProfilerStart/Stop`.
- PyTorch→CUDA: `python -m cudaperf.analyze.drivers SPEC.json` builds the task's `Model`
  module with the config's sizes, constructs `ModelNew(*get_init_inputs())`, runs one
  warm-up forward and one forward between `torch.cuda.profiler.start/stop`.

Both run under `ncu --profile-from-start off` restricted to the candidate's own kernel names,
so the warm-up, torch's own kernels and the harness's memsets are not profiled. Results are
cached on disk keyed by (candidate code, task, config, GPU name, ncu version, arch, metrics).

Not guaranteed: that the candidate is correct (run the evaluator for that); a candidate that
fails prints its error and the profile contains what ran before the failure, if anything.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from cudaperf.analyze.ncu import ALL_METRICS, ProfileError, find_ncu, profile_command
from cudaperf.analyze.types import AnalyzeConfig
from cudaperf.jsonl import replace_text

if TYPE_CHECKING:
    from cudaperf.tasks.model import InputConfig, Task

__all__ = [
    "c_driver_source",
    "largest_config",
    "profile_candidate",
    "torch_driver_spec",
    "write_c_inputs",
]

MAIN_FILE = "cudaperf_profile_main.cu"  # name nvcc errors use for the driver's lines

_MAIN = r"""
#include <cuda_profiler_api.h>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s INPUTS\n", argv[0]); return 2; }
  FILE* f = fopen(argv[1], "rb");
  if (!f) { perror(argv[1]); return 2; }
  int n = 0;
  if (fread(&n, sizeof n, 1, f) != 1 || n < 0 || n > 64) {
    fprintf(stderr, "%s: bad input file\n", argv[1]); return 2;
  }
  void* host[64]; long long nbytes[64]; int roles[64];
  for (int i = 0; i < n; ++i) {
    if (fread(&roles[i], sizeof(int), 1, f) != 1 ||
        fread(&nbytes[i], sizeof(long long), 1, f) != 1 || nbytes[i] < 0) {
      fprintf(stderr, "%s: truncated header of parameter %d\n", argv[1], i); return 2;
    }
    host[i] = malloc(nbytes[i] > 0 ? (size_t)nbytes[i] : 1);
    if (nbytes[i] > 0 && fread(host[i], 1, (size_t)nbytes[i], f) != (size_t)nbytes[i]) {
      fprintf(stderr, "%s: truncated data of parameter %d\n", argv[1], i); return 2;
    }
  }
  fclose(f);
  float ev = 0; double wall = 0; int done = 0; char err[512];
  for (int pass = 0; pass < 2; ++pass) {  // 0: warm-up, 1: profiled
    if (pass == 1) cudaProfilerStart();
    int rc = __cudaperf_run(host, nbytes, roles, n, 0, 0, 0.0, &ev, &wall, &done, err, 512);
    if (pass == 1) cudaProfilerStop();
    if (rc != 0) { fprintf(stderr, "the candidate failed: %s\n", err); return 1; }
  }
  printf("cudaperf profile driver: ok\n");
  return 0;
}
"""


def largest_config(task: Task) -> InputConfig:
    """The visible config with the most input data (C→CUDA: array bytes; else size product)."""
    from cudaperf.tasks.model import Role, eval_length

    visible = [c for c in task.configs if not c.held_out] or list(task.configs)

    def size(c) -> float:
        if task.signature:
            total = 0.0
            for p in task.signature:
                if p.role is not Role.SCALAR:
                    total += eval_length(p.length or "0", c.sizes)
            return total
        ints = [v for v in c.sizes.values() if isinstance(v, int) and v > 0]
        return math.prod(ints) if ints else 0.0

    return max(visible, key=size)


def pick_config(task: Task, name: str | None) -> InputConfig:
    """The config called `name` (None: `largest_config`); ProfileError lists the names."""
    if name is None:
        return largest_config(task)
    for c in task.configs:
        if c.name == name:
            return c
    names = ", ".join(c.name for c in task.configs)
    raise ProfileError(f"task {task.id} has no config {name!r}; it has {names}")


def c_driver_source(task: Task, code: str) -> str:
    """One .cu: the evaluator's harness translation unit (with the candidate) plus `main()`."""
    from cudaperf.execute.c.harness import harness_source

    return harness_source(task, code) + f'#line 1 "{MAIN_FILE}"\n' + _MAIN


def write_c_inputs(task: Task, cfg: InputConfig, path: Path) -> int:
    """Write the driver's input file for `cfg`; returns its size in bytes."""
    from cudaperf.execute.c.harness import ROLE_CODES
    from cudaperf.tasks.inputs import make_inputs

    arrays = make_inputs(task, cfg, 0, 0)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<i", len(arrays)))
        for p, a in zip(task.signature, arrays, strict=True):
            data = a.tobytes()
            fh.write(struct.pack("<iq", ROLE_CODES[p.role], len(data)))
            fh.write(data)
    return path.stat().st_size


def build_c_driver(task: Task, code: str, arch: str, nvcc: str, out: Path) -> Path:
    """Compile the C→CUDA driver into `out`/driver; ProfileError with nvcc's message if not."""
    src, exe = out / "driver.cu", out / "driver"
    src.write_text(c_driver_source(task, code))
    cmd = [nvcc, "-O3", f"-arch={arch}", "-lineinfo", "-o", str(exe), str(src)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except FileNotFoundError as e:
        raise ProfileError(f"{nvcc} not found; install the CUDA toolkit") from e
    if p.returncode != 0:
        from cudaperf.execute.build import first_error

        raise ProfileError(f"building the profiling driver failed: {first_error(p.stderr)}")
    return exe


def torch_driver_spec(task: Task, cfg: InputConfig, code: str) -> dict:
    """What the PyTorch→CUDA driver needs: the task module, the config's sizes, the candidate."""
    return {"task": task.id, "source": task.source, "sizes": dict(cfg.sizes), "code": code}


@functools.cache
def _ncu_version(ncu: str) -> str:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = out.stdout.strip().splitlines()
    return lines[-1] if lines else "unknown"


def _gpu_name() -> str:
    from cudaperf.execute.build import detect_gpus

    gpus = detect_gpus()
    if not gpus:
        raise ProfileError("no NVIDIA GPU visible (nvidia-smi lists none); profiling needs one")
    return gpus[0].name


def _cache_path(cache_dir: Path, *parts: str) -> Path:
    h = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
    return cache_dir / "ncu" / f"{h}.json"


def profile_candidate(
    code: str,
    task: Task,
    kernels: list[str],
    cfg: AnalyzeConfig,
    config_name: str | None = None,
    ncu: str | None = None,
) -> dict[str, dict[str, float]]:
    """Metric sums per kernel of `code` run on `task`'s config (default: the largest visible)."""
    ncu = ncu or find_ncu()
    if ncu is None:
        raise ProfileError(
            "ncu not found; install Nsight Compute or put ncu on PATH (it ships with the CUDA "
            "toolkit in /usr/local/cuda/bin or /opt/nvidia/nsight-compute)"
        )
    if not kernels:
        raise ProfileError("the candidate defines no __global__ kernel to profile")
    ic = pick_config(task, config_name)
    key = [
        code,
        task.model_dump_json(exclude={"implementations"}),
        ic.model_dump_json(),
        _gpu_name(),
        _ncu_version(ncu),
        cfg.arch,
        ",".join(ALL_METRICS),
    ]
    root = Path(cfg.cache_dir) if cfg.cache_dir else Path.home() / ".cache" / "cudaperf" / "analyze"
    cache = _cache_path(root, *key)
    if cache.exists():
        return json.loads(cache.read_text())
    with tempfile.TemporaryDirectory(prefix="cudaperf-ncu-") as tmp:
        cmd = _driver_command(code, task, ic, cfg, Path(tmp))
        result = profile_command(cmd, kernels, ncu=ncu, extra=["--profile-from-start", "off"])
    replace_text(cache, json.dumps(result))
    return result


def _driver_command(code: str, task: Task, ic, cfg: AnalyzeConfig, tmp: Path) -> list[str]:
    if task.kind.value == "c2cuda":
        exe = build_c_driver(task, code, cfg.arch, cfg.nvcc, tmp)
        inputs = tmp / "inputs.bin"
        write_c_inputs(task, ic, inputs)
        return [str(exe), str(inputs)]
    spec = tmp / "spec.json"
    spec.write_text(json.dumps(torch_driver_spec(task, ic, code)))
    return [sys.executable, "-m", "cudaperf.analyze.drivers", str(spec)]


def run_torch_driver(spec: dict) -> None:
    """The PyTorch→CUDA driver's body: warm-up forward, then one profiled forward."""
    import torch

    from cudaperf.execute.pytorch.runtime import load_module

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ref_mod = load_module(spec["source"], "cudaperf_profile_ref", spec["sizes"])
    cand = load_module(spec["code"], "cudaperf_profile_cand")
    torch.manual_seed(0)
    init = ref_mod.get_init_inputs()
    model = cand.ModelNew(*init).cuda().eval()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref_mod.get_inputs()]
    with torch.no_grad():
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print("cudaperf profile driver: ok")


if __name__ == "__main__":
    run_torch_driver(json.loads(Path(sys.argv[1]).read_text()))
