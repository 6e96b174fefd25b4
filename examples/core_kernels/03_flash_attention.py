"""
Flash attention: tiles plus online softmax
==========================================

Attention, ``softmax(Q K^T / sqrt(d)) V``, is the kernel that made Triton famous. Computed
the obvious way it writes an N x N matrix to memory and reads it back, and that traffic, not
the arithmetic, sets its speed. Flash attention never stores that matrix: it streams blocks
of keys and values past a block of queries, using the online softmax of the previous page.

You will learn:

* why naive attention is memory bound, in bytes;
* why normalising the softmax inside each key tile is **wrong**, with numbers;
* the online-softmax fix, run by hand, then the forward kernel that does it;
* causal masking, and which blocks need it;
* the backward pass: recomputing probabilities instead of storing them;
* TFLOP/s next to PyTorch's ``scaled_dot_product_attention`` (its flash and cuDNN backends).
"""

# %%
import math

import torch
import torch.nn.functional as F

from triton_guide import attention, attention_reference, runtime
from triton_guide.benchmark import Benchmark, tflop_per_s
from triton_guide.testing import assert_close, tolerance

bench = Benchmark()  # timings: live on a GPU, else the recordings in results/
print(bench.stamp())
device = runtime.device()

# %%
# Naive attention moves an N x N matrix
# -------------------------------------
# ``S = Q K^T`` has one score per (query, key) pair. A naive implementation writes ``S``,
# reads it for the softmax, writes ``P``, and reads ``P`` again for ``P V``. For a typical
# long-context shape that matrix dwarfs the inputs:

B, H, N, D = 4, 32, 16384, 128
inputs_and_output = 4 * B * H * N * D * 2  # q, k, v, out in float16
score_matrix = B * H * N * N * 2
flops = 4 * B * H * N * N * D
print(f"B={B} H={H} N={N} D={D}, float16")
print(f"  q, k, v and out: {inputs_and_output / 1e9:6.1f} GB")
print(f"  one N x N matrix per head: {score_matrix / 1e9:6.1f} GB, written and read twice (S and P)")
print(f"  arithmetic: {flops / 1e12:.1f} TFLOP; at ~3 TB/s the naive traffic alone takes "
      f"{4 * score_matrix / 3e12 * 1e3:.0f} ms, the math at ~600 TFLOP/s {flops / 600e12 * 1e3:.0f} ms")

# %%
# A tempting mistake: softmax per tile
# ------------------------------------
# Suppose a program takes a block of queries and one tile of keys, computes the softmax of
# that tile's scores, multiplies by the tile's values and writes the result (a "simplified
# flash attention" that circulates in tutorials). Each tile's weights then sum to 1 on their
# own, so each tile's output is an average over *that tile only*. Whether the last tile's
# result overwrites the others or the per-tile results are added up, the answer is wrong:


def per_tile_softmax(q, k, v, tile):
    """The mistake: normalise the scores inside each key tile.

    Returns the last tile's output, the sum of all tiles' outputs, and the total weight each
    query row gives its values (1 for a real softmax).
    """
    outputs, weights = [], 0
    for start in range(0, k.shape[-2], tile):
        scores = q @ k[..., start:start + tile, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        probs = torch.softmax(scores, dim=-1)
        outputs.append(probs @ v[..., start:start + tile, :])
        weights = weights + probs.sum(dim=-1)
    return outputs[-1], sum(outputs), weights


q, k, v = (torch.randn(1, 1, 256, 64, dtype=torch.float64) for _ in range(3))
exact = attention_reference(q, k, v)
tile = 64
last, summed, weights = per_tile_softmax(q, k, v, tile)
rel = lambda a: ((a - exact).norm() / exact.norm()).item()  # noqa: E731
print(f"{k.shape[-2]} keys in tiles of {tile}, float64 (no rounding to blame):")
print(f"  last tile wins:      relative error {rel(last):.2f}")
print(f"  per-tile sums added: relative error {rel(summed):.2f}; each row's weights add up to "
      f"{weights.min().item():.3f}..{weights.max().item():.3f} instead of 1")

# %%
# The fix: carry the softmax across tiles
# ---------------------------------------
# Keep, for each query row, the running maximum ``m``, the running normaliser ``l`` and an
# *unnormalised* output ``acc``. When a tile raises the maximum from ``m`` to ``m'``, scale
# both ``l`` and ``acc`` by ``exp(m - m')``; divide by ``l`` once, at the very end. In plain
# PyTorch, tile by tile:


def online_attention(q, k, v, tile):
    scale = 1 / math.sqrt(q.shape[-1])
    m = torch.full(q.shape[:-1], -math.inf, dtype=q.dtype)
    l = torch.zeros(q.shape[:-1], dtype=q.dtype)
    acc = torch.zeros_like(q)
    for start in range(0, k.shape[-2], tile):
        scores = q @ k[..., start:start + tile, :].transpose(-2, -1) * scale
        new_m = torch.maximum(m, scores.amax(dim=-1))
        p = torch.exp(scores - new_m[..., None])
        correction = torch.exp(m - new_m)
        l = l * correction + p.sum(dim=-1)
        acc = acc * correction[..., None] + p @ v[..., start:start + tile, :]
        m = new_m
    return acc / l[..., None]


print(f"online softmax over the same tiles: relative error {rel(online_attention(q, k, v, tile)):.1e}")

# %%
# The forward kernel
# ------------------
# One program per block of ``BLOCK_M`` query rows of one (batch, head). The loop over key
# blocks is the function above, in Triton, with two changes: exponentials are base 2
# (``exp2``, with ``log2(e)`` folded into the scale once, as the hardware computes ``2^x``
# natively), and the two products run on the tensor cores with ``tl.dot``:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: _forward_block_loop
#
# The kernel loads its query block once, runs that loop over the key range, and stores the
# normalised output together with each row's log-sum-exp (``m + log2(l)``), which the
# backward pass needs:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: attention_forward_kernel
#
# Masks cost time, so the loop is called with masking switched on (``tl.constexpr`` flags,
# compiled away when off) only where it is needed: the one partial key block at the end of
# the sequence, and, when causal, the blocks on the diagonal.

# %%
# Causal attention
# ----------------
# With ``causal=True`` query ``i`` sees keys ``0..i``. For a block of queries starting at row
# ``r``, keys before ``r`` are visible to every row (no mask), keys from ``r`` to the end of
# the block need the triangular mask, and later keys are skipped entirely, which halves the
# work. The same split appears in the backward kernels.

num_blocks = 8
visited = sum(i + 1 for i in range(num_blocks))
print(f"with {num_blocks} query blocks and {num_blocks} key blocks: full attention visits "
      f"{num_blocks * num_blocks} block pairs, causal {visited}, of which {num_blocks} need a mask")

# %%
# Check against PyTorch: forward
# ------------------------------
# Fresh random inputs with a sequence length that is not a multiple of any block, a head
# dimension of 64, causal and not; the reference is computed in float64.

shape = runtime.pick(interpreter=(1, 2, 97, 64), gpu=(2, 8, 3001, 64))
for causal in (False, True):
    for dtype in (torch.float32, torch.float16):
        q, k, v = (torch.randn(shape, device=device, dtype=dtype) for _ in range(3))
        out = attention(q, k, v, causal=causal)
        expected = attention_reference(q.double(), k.double(), v.double(), causal=causal)
        error = assert_close(out, expected, rtol=tolerance(dtype, tensor_cores=True))
        print(f"causal={causal!s:<5} {str(dtype)[6:]:<7} {tuple(shape)}: relative error {error:.1e}")

# %%
# The backward pass
# -----------------
# With ``P = softmax(S)``, ``O = P V`` and upstream gradient ``dO``:
#
# .. math::
#
#    dV = P^T dO, \quad dP = dO\, V^T, \quad dS = P \circ (dP - \Delta), \quad
#    \Delta_i = \sum_d O_{id}\, dO_{id}, \quad dQ = dS\, K \cdot s, \quad dK = dS^T Q \cdot s
#
# where ``s`` is the softmax scale. Storing ``P`` would bring back the N x N matrix, so the
# backward kernels recompute it from ``Q``, ``K`` and the saved log-sum-exp:
# ``P = exp2(S * scale * log2(e) - lse)``. A small kernel first computes ``Delta``. Then one
# kernel owns a block of keys and accumulates ``dK`` and ``dV`` over all query blocks:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: _dkdv_block_loop
#
# and another owns a block of queries and accumulates ``dQ`` over all key blocks:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: _dq_block_loop
#
# Each output block has exactly one owner, so no atomics are needed. ``attention`` wraps the
# launches in a ``torch.autograd.Function``, so ``loss.backward()`` just works:

for causal in (False, True):
    q, k, v = (torch.randn(shape, device=device, requires_grad=True) for _ in range(3))
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    grad_out = torch.randn(shape, device=device)
    attention(q, k, v, causal=causal).backward(grad_out)
    attention_reference(q64, k64, v64, causal=causal).backward(grad_out.double())
    errors = [assert_close(ours.grad, ref.grad, rtol=tolerance(torch.float32, tensor_cores=True), atol=1e-3)
              for ours, ref in ((q, q64), (k, k64), (v, v64))]
    print(f"causal={causal!s:<5} float32 gradients: relative error dq {errors[0]:.1e}, "
          f"dk {errors[1]:.1e}, dv {errors[2]:.1e}")

# %%
# Performance
# -----------
# float16, batch 4, 32 heads, head dimension 128, sequence length from 1024 to 16384; the
# baselines are PyTorch's ``scaled_dot_product_attention`` forced onto its FlashAttention-2
# backend and onto its cuDNN backend, timed in the same run. FLOPs count
# ``4 B H N^2 D`` for the forward pass (halved when causal) and 2.5 times that for the
# backward pass. The ceiling is cuBLAS on one large (8192^3) float16 product, measured
# in the same run: attention is at best as fast as a plain matrix product.

from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

lengths = [1024, 2048, 4096, 8192, 16384]
HEAD_DIM, BATCH, HEADS = 128, 4, 32


def sdpa_with(backend):
    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


implementations = {
    "triton_guide": lambda q, k, v, causal: attention(q, k, v, causal=causal),
    "SDPA flash": sdpa_with(SDPBackend.FLASH_ATTENTION),
    "SDPA cuDNN": sdpa_with(SDPBackend.CUDNN_ATTENTION),
}


def make_variant(fn, causal, backward):
    def prepare(n):
        q, k, v = (torch.randn(BATCH, HEADS, n, HEAD_DIM, device=device, dtype=torch.float16,
                               requires_grad=backward) for _ in range(3))
        if not backward:
            return lambda: fn(q, k, v, causal)
        out = fn(q, k, v, causal)
        grad = torch.randn_like(out)
        return lambda: out.backward(grad, retain_graph=True)
    return prepare


for backward in (False, True):
    for causal in (False, True):
        pass_name = "backward" if backward else "forward"
        title = f"attention {pass_name}, {'causal' if causal else 'full'}, d={HEAD_DIM}"
        work = 2.5 if backward else 1.0
        flop_scale = work * 4 * BATCH * HEADS * HEAD_DIM * (0.5 if causal else 1)
        results = bench.sweep(
            title,
            lengths,
            {name: make_variant(fn, causal, backward) for name, fn in implementations.items()},
            lambda n, ms: tflop_per_s(flop_scale * n * n, ms),
            label="N",
            unit="TFLOP/s",
            ceiling="gemm_fp16",
            xlabel="sequence length",
        )
        results.plot()
        results.summary(ratios=[("triton_guide", "SDPA flash"),
                                ("triton_guide", "SDPA cuDNN")])

# %%
# Takeaways
# ---------
# * Never normalise per tile: carry ``m``, ``l`` and an unnormalised ``acc`` across tiles and
#   divide once at the end.
# * Flash attention moves ``O(N d)`` bytes per head instead of ``O(N^2)``: it turns a
#   memory-bound computation into a compute-bound one.
# * The backward pass trades memory for arithmetic: recompute ``P`` from the log-sum-exp.
# * Mask only the blocks that need it, and skip the blocks a causal mask hides completely.
