"""PyTorch→CUDA embedding lookups with their epilogue: y = table[ids] * scale (+ learned
positional embedding[s]) (+ shift), optionally with a padding row (2–4 ops). A gather of
whole rows: implementations are one thread per token (a row apart: uncoalesced), one
thread per output element, and one warp per token with float4."""

from __future__ import annotations

import random

from cudaperf.datagen.base import family, fill, impl, torch_task
from cudaperf.datagen.families.torch2cuda.torch_common import (
    draw_chain,
    native_module,
    reference_template,
    torch_configs,
)
from cudaperf.tasks.model import TaskKind, Tolerance

_REF = reference_template(
    {"batch_size": "b", "seq_len": "s", "vocab_size": "v", "embed_dim": "d"},
    """
    def __init__(self, vocab_size: int, embed_dim: int, max_len: int):
        super().__init__()
$init
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        y = self.embed(ids) * $scale
$body        return y


def get_inputs():
    return [torch.randint(0, vocab_size, (batch_size, seq_len))]


def get_init_inputs():
    return [vocab_size, embed_dim, seq_len]
""",
)

_DEV = r"""
${post_fn}#define USE_POS $use_pos
// Output element (token t at position s, column j) from its table row.
__device__ __forceinline__ float emb_out(float e, float scale, const float* pos, int s, int j,
                                         int D) {
    float v = e * scale;
#if USE_POS
    v = v + pos[(long long)s * D + j];
#endif
    (void)pos;
    (void)s;
    (void)j;
    (void)D;
    return post_op($shift);
}
"""

_TOKEN = r"""
// One thread per token, looping over the row: the lanes of a warp are D floats apart on
// every load and store (uncoalesced, weak on purpose).
__global__ void emb_token(const long long* ids, const float* table, const float* pos, float* y,
                          long long ntok, int S, int D, float scale) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ntok) return;
    const float* row = table + ids[t] * D;
    int s = (int)(t % S);
    for (int j = 0; j < D; ++j) y[t * D + j] = emb_out(row[j], scale, pos, s, j, D);
}

extern "C" void embed(const long long* ids, const float* table, const float* pos, float* y,
                      long long ntok, int S, int D, float scale) {
    if (ntok > 0 && D > 0)
        emb_token<<<(unsigned)((ntok + $block - 1) / $block), $block>>>(ids, table, pos, y, ntok,
                                                                        S, D, scale);
}
"""

_FLAT = r"""
// One thread per output element: coalesced stores and row reads; every thread re-reads its
// token id (a broadcast within the row).
__global__ void emb_flat(const long long* __restrict__ ids, const float* __restrict__ table,
                         const float* __restrict__ pos, float* __restrict__ y, long long total,
                         int S, int D, float scale) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    long long t = i / D;
    int j = (int)(i % D);
    y[i] = emb_out(table[ids[t] * D + j], scale, pos, (int)(t % S), j, D);
}

extern "C" void embed(const long long* ids, const float* table, const float* pos, float* y,
                      long long ntok, int S, int D, float scale) {
    long long total = ntok * D;
    if (total > 0)
        emb_flat<<<(unsigned)((total + $block - 1) / $block), $block>>>(ids, table, pos, y, total,
                                                                        S, D, scale);
}
"""

_WARP = r"""
// One warp per token ($wpb per block): the id is read once, the row copied with float4
// loads and stores when D % 4 == 0 (rows then 16-byte aligned), scalar otherwise.
__global__ void emb_warp(const long long* __restrict__ ids, const float* __restrict__ table,
                         const float* __restrict__ pos, float* __restrict__ y, long long ntok,
                         int S, int D, float scale) {
    long long t = (long long)blockIdx.x * $wpb + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (t >= ntok) return;
    const float* row = table + ids[t] * D;
    float* out = y + t * D;
    int s = (int)(t % S);
    if ((D & 3) == 0) {
        const float4* r4 = reinterpret_cast<const float4*>(row);
        float4* o4 = reinterpret_cast<float4*>(out);
        for (int q = lane; q < D / 4; q += 32) {
            float4 e = r4[q];
            int j = 4 * q;
            o4[q] = make_float4(emb_out(e.x, scale, pos, s, j, D),
                                emb_out(e.y, scale, pos, s, j + 1, D),
                                emb_out(e.z, scale, pos, s, j + 2, D),
                                emb_out(e.w, scale, pos, s, j + 3, D));
        }
    } else {
        for (int j = lane; j < D; j += 32) out[j] = emb_out(row[j], scale, pos, s, j, D);
    }
}

extern "C" void embed(const long long* ids, const float* table, const float* pos, float* y,
                      long long ntok, int S, int D, float scale) {
    if (ntok > 0 && D > 0)
        emb_warp<<<(unsigned)((ntok + $wpb - 1) / $wpb), $wpb * 32>>>(ids, table, pos, y, ntok,
                                                                      S, D, scale);
}
"""


@family("torch_embedding", TaskKind.TORCH2CUDA, "gather")
def torch_embedding(rng: random.Random, index: int):
    b_l, s_l, d_l, v_l = rng.choice(
        [
            (32, 1024, 1024, 32000),
            (64, 512, 1024, 50257),
            (16, 2048, 1024, 32000),
            (32, 512, 2048, 32000),
        ]
    )
    use_pos = rng.random() < 0.7
    scale_kind = rng.choice(["sqrt", "const"])
    scale = {"sqrt": "math.sqrt(self.embed_dim)", "const": str(rng.choice([0.5, 2.0, 0.125]))}.get(
        scale_kind, "1.0"
    )
    shift = rng.choice([None, None, 0.1, -0.5])
    padding = rng.random() < 0.3
    pad = ", padding_idx=0" if padding else ""
    init = f"self.embed_dim = embed_dim\nself.embed = nn.Embedding(vocab_size, embed_dim{pad})\n"
    if use_pos:
        init += "self.pos = nn.Parameter(torch.randn(max_len, embed_dim) * 0.02)\n"
    body = "        y = y + self.pos[: ids.shape[1]]\n" if use_pos else ""
    body += f"        y = y + {shift}\n" if shift is not None else ""
    post = draw_chain(rng, 0, 2)
    body += post.torch("y")
    what = f"table[ids] * {scale.replace('self.embed_dim', 'embed_dim')}"
    what += " + positional[s]" if use_pos else ""
    what += f" + {shift}" if shift is not None else ""
    what += f", then {post.describe()}" if post else ""
    what += " (row 0 is the padding row)" if padding else ""
    doc = f"Embedding lookup of int64 ids (batch_size, seq_len): y = {what}, float32."
    src = fill(
        _REF,
        doc=doc,
        b=b_l,
        s=s_l,
        v=v_l,
        d=d_l,
        init="".join(f"        {ln}\n" for ln in init.splitlines()),
        scale=scale,
        body=body,
    )
    src = src.replace("import torch\n", "import math\n\nimport torch\n", 1)
    dev = fill(
        _DEV,
        post_fn=post.device("post_op"),
        use_pos=int(use_pos),
        shift="v" if shift is None else f"v + {shift}f",
    )
    fwd = (
        "ids = ids.contiguous()\n"
        "D = self.embed.weight.shape[1]\n"
        "y = torch.empty(ids.shape[0], ids.shape[1], D, device=ids.device, dtype=torch.float32)\n"
        f"pos = {'self.pos.contiguous()' if use_pos else 'self.embed.weight'}\n"
        "self.lib.embed(ids, self.embed.weight.contiguous(), pos, y, ids.numel(), ids.shape[1], D, "
        f"{scale})\n"
        "return y\n"
    )
    variants = [
        (
            "token_per_thread",
            _TOKEN,
            ["naive", "uncoalesced"],
            {"block": rng.choice([64, 128, 256])},
        ),
        ("flat", _FLAT, ["coalesced"], {"block": rng.choice([128, 256, 512])}),
        ("warp_per_token_vec4", _WARP, ["coalesced", "vectorized"], {"wpb": rng.choice([4, 8])}),
    ]
    impls = []
    for vid, tmpl, tags, extra in variants:
        cuda = dev + fill(tmpl, **extra)
        code = native_module(
            f"{doc} ({vid.replace('_', ' ')})",
            cuda,
            ", vocab_size: int, embed_dim: int, max_len: int",
            init,
            ", ids",
            fwd,
        )
        code = code.replace("import torch\n", "import math\n\nimport torch\n", 1)
        impls.append(impl(vid, code, tags))

    def sz(b: int, s: int, v: int, d: int) -> dict[str, int]:
        return {"batch_size": b, "seq_len": s, "vocab_size": v, "embed_dim": d}

    r = rng.randrange
    configs = torch_configs(
        sz(r(2, 5), r(5, 40), r(50, 500), r(33, 300, 2)),
        sz(8, 256, 8000, 512),
        sz(b_l, s_l, v_l, d_l),
        sz(r(3, 12), r(100, 700), r(1000, 20000), r(200, 1500)),
    )
    desc = (
        f"{doc} Memory-bound gather of whole rows; the ids are the only data-dependent "
        "addresses (the scale is a float argument)."
    )
    return torch_task(
        "torch_embedding", index, src, configs, Tolerance(atol=1e-5, rtol=1e-5), impls, desc
    )
