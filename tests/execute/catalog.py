"""Small C→CUDA tasks and candidates (good, wrong, faulty, cheating) for tests and benchmarks.

Imported by tests/execute/* and by bench/eval_*.py (which add this folder to sys.path).
"""

from __future__ import annotations

from cudaperf.tasks.model import Implementation, InputConfig, Param, Role, Task, Tolerance

SAXPY_C = """
void saxpy(int n, float a, const float* x, float* y) {
  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}
"""

SAXPY_NAIVE = """
__global__ void k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
  k<<<(n + 255) / 256, 256>>>(n, a, x, y);
}
"""

# grid-stride variant: `{body}` is the loop body (lets faults and variants share the shell)
SAXPY_TEMPLATE = """
#include <cstdio>
#include <cstdlib>
__global__ void k(int n, float a, const float* x, float* y) {{
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {{
    {body}
  }}
}}
extern "C" void saxpy(int n, float a, const float* x, float* y) {{
  {host}
  k<<<{blocks}, {threads}>>>(n, a, x, y);
}}
"""


def saxpy_variant(
    body: str = "y[i] = a * x[i] + y[i];", host: str = "", blocks: str = "1024", threads: int = 256
) -> str:
    return SAXPY_TEMPLATE.format(body=body, host=host, blocks=blocks, threads=threads)


def saxpy_task(sizes: tuple[int, ...] = (1000, 100_003), held_out: int = 4096) -> Task:
    configs = [
        InputConfig(name=f"n{n}", sizes={"n": n, "a": 2.5}, seed=i) for i, n in enumerate(sizes)
    ]
    configs.append(InputConfig(name="heldout", sizes={"n": held_out, "a": -1.5}, held_out=True))
    return Task(
        id="test/c2cuda/saxpy",
        kind="c2cuda",
        family="saxpy",
        source=SAXPY_C,
        entry="saxpy",
        signature=[
            Param(name="n", ctype="int", role=Role.SCALAR),
            Param(name="a", ctype="float", role=Role.SCALAR),
            Param(name="x", ctype="float", role=Role.IN, length="n"),
            Param(name="y", ctype="float", role=Role.INOUT, length="n"),
        ],
        configs=configs,
        tolerance=Tolerance(atol=1e-5, rtol=1e-5),
        implementations=[Implementation(id="naive", code=SAXPY_NAIVE, strategies=["naive"])],
    )


ROWSUM_C = """
void rowsum(int rows, int cols, const float* m, float* out) {
  for (int r = 0; r < rows; ++r) {
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += m[r * cols + c];
    out[r] = s;
  }
}
"""

ROWSUM_NAIVE = """
__global__ void k(int rows, int cols, const float* m, float* out) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) { float s = 0.f; for (int c = 0; c < cols; ++c) s += m[r * cols + c]; out[r] = s; }
}
extern "C" void rowsum(int rows, int cols, const float* m, float* out) {
  k<<<(rows + 127) / 128, 128>>>(rows, cols, m, out);
}
"""

ROWSUM_WARP = """
__global__ void k(int rows, int cols, const float* m, float* out) {
  int r = blockIdx.x;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += 32) s += m[(size_t)r * cols + c];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
  if (threadIdx.x == 0) out[r] = s;
}
extern "C" void rowsum(int rows, int cols, const float* m, float* out) {
  k<<<rows, 32>>>(rows, cols, m, out);
}
"""


def rowsum_task(shapes: tuple[tuple[int, int], ...] = ((64, 100), (1024, 1000))) -> Task:
    configs = [
        InputConfig(name=f"r{r}c{c}", sizes={"rows": r, "cols": c}, seed=i)
        for i, (r, c) in enumerate(shapes)
    ]
    configs.append(InputConfig(name="heldout", sizes={"rows": 33, "cols": 77}, held_out=True))
    return Task(
        id="test/c2cuda/rowsum",
        kind="c2cuda",
        family="rowsum",
        source=ROWSUM_C,
        entry="rowsum",
        signature=[
            Param(name="rows", ctype="int", role=Role.SCALAR),
            Param(name="cols", ctype="int", role=Role.SCALAR),
            Param(name="m", ctype="float", role=Role.IN, length="rows*cols"),
            Param(name="out", ctype="float", role=Role.OUT, length="rows"),
        ],
        configs=configs,
        tolerance=Tolerance(atol=1e-3, rtol=1e-4),
        implementations=[
            Implementation(id="naive", code=ROWSUM_NAIVE, strategies=["naive"]),
            Implementation(id="warp", code=ROWSUM_WARP, strategies=["warp_shuffle"]),
        ],
    )


# Faulty saxpy candidates → the status each must get. The static checks reject the last two.
FAULTS: dict[str, tuple[str, str]] = {
    "kernel_hang": (
        saxpy_variant(body="volatile float* v = y; while (v[i] == v[i]) {}"),
        "timeout",
    ),
    "host_hang": (saxpy_variant(host="volatile int s = 1; while (s) {}"), "timeout"),
    "illegal_address": (saxpy_variant(body="((float*)0x10)[i] = 1.0f;"), "runtime_error"),
    "host_segfault": (saxpy_variant(host="*(volatile int*)0 = 1;"), "runtime_error"),
    "huge_alloc": (
        saxpy_variant(host="float* p; cudaMalloc(&p, (size_t)1 << 50); y = p;"),
        "runtime_error",
    ),
    "stdout_flood": (
        saxpy_variant(host='for (long j = 0; j < (1L << 28); ++j) printf("flood %ld\\n", j);'),
        "runtime_error",
    ),
    "wrong_output": (saxpy_variant(body="y[i] = a * x[i];"), "wrong_output"),
    "partial_write": (saxpy_variant(body="if (i % 2) y[i] = a * x[i] + y[i];"), "wrong_output"),
    "fork": (saxpy_variant(host="if (fork() == 0) { while (1) {} }"), "rejected"),
    "write_outside": (
        saxpy_variant(host='FILE* f = fopen("/tmp/cudaperf_escape.txt", "w"); fclose(f);'),
        "rejected",
    ),
}


# Variants that are correct: different launch shapes (distinct code, distinct builds).
def good_saxpy(i: int) -> str:
    return saxpy_variant(blocks=str(64 * (1 + i % 32)), threads=128 * (1 + i % 4)) + f"// v{i}\n"


WINDOW_DOT_C = """
void window_dot(int n, const float* a, const float* b, float* y) {
  for (int i = 0; i < n; ++i) {
    double acc = 0.0;
    for (int k = 0; k < 256; ++k) acc += (double)a[(i + k) % n] * (double)b[(i * 7 + k) % n];
    y[i] = (float)acc;
  }
}
"""

# The same sums in float, one thread per output: correct, with float rounding.
WINDOW_DOT_FLOAT = """
__global__ void k(int n, const float* a, const float* b, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < 256; ++k) acc += a[(i + k) % n] * b[(i * 7 + k) % n];
  y[i] = acc;
}
extern "C" void window_dot(int n, const float* a, const float* b, float* y) {
  k<<<(n + 255) / 256, 256>>>(n, a, b, y);
}
"""


def window_dot_task(n: int = 8192) -> Task:
    """Sums of 256 products per output (the C reference accumulates in double), inputs in
    [0.5, 1.5] and the datagen tolerance for 256 terms: on the signed inputs that separate
    functions some sums cancel to near zero."""
    from cudaperf.datagen.base import tolerance_for
    from cudaperf.tasks.model import Distribution

    return Task(
        id="test/c2cuda/window_dot",
        kind="c2cuda",
        family="window_dot",
        source=WINDOW_DOT_C,
        entry="window_dot",
        tolerance=tolerance_for("float", 256),
        signature=[Param(name="n", ctype="int", role=Role.SCALAR)]
        + [
            Param(name=a, ctype="float", role=Role(r), length="n")
            for a, r in (("a", "in"), ("b", "in"), ("y", "out"))
        ],
        configs=[
            InputConfig(
                name=f"n{n}",
                sizes={"n": n},
                distribution=Distribution(kind="uniform", low=0.5, high=1.5),
            )
        ],
    )
