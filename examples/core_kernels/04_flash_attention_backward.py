"""
Flash attention backward, and how fast it runs
==============================================

The :ref:`forward page <sphx_glr_auto_examples_core_kernels_03_flash_attention.py>` built
flash attention's forward pass without ever storing the N x N matrix of probabilities.
Training needs gradients too, and the textbook backward pass reads exactly that matrix.
This page shows how the backward kernels of ``triton_guide/attention.py`` do without it,
checks their gradients against PyTorch in float64, and measures both passes against
PyTorch's ``scaled_dot_product_attention`` on its FlashAttention-2 and cuDNN backends.

You will learn:

* which two numbers per query row the forward pass leaves for the backward, and how the
  backward recomputes the probabilities from them;
* the gradients ``dV``, ``dK`` and ``dQ``, and the row term ``Delta`` that needs only the
  output and its gradient;
* how the work splits between one kernel per block of keys and one per block of queries,
  with no atomics;
* how much of the work a causal mask skips, counted in blocks;
* how both passes compare with cuDNN and FlashAttention-2, causal and not, against the
  GEMM ceiling.

On a GPU build the timings are live. On a CPU build they are the ones recorded on an H100
and an H200 by the forward page, which measured them before this page was split from it
(the first line printed below says which recordings).
"""

# %%
import math

import torch
import triton

from triton_guide import attention, attention_reference, runtime
from triton_guide.attention import attention_forward
from triton_guide.benchmark import (Benchmark, attention_sweep, print_ratio_range,
                                    print_ridge_points, print_share_of)
from triton_guide.testing import assert_close, tolerance

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
# timings: live on a GPU, else recorded; these benchmarks were recorded by the forward
# page (the page this one was split from), so it also recalls that page's recordings
bench = Benchmark(recordings_from="flash_attention")
print(bench.stamp())
device = runtime.device()

# %%
# What the forward pass leaves behind
# -----------------------------------
# With ``c = sm_scale * log2(e)``, the forward kernel ends each query row with its raw
# score maximum ``m`` and its normaliser ``l = sum_j exp2((S_ij - m) * c)``, and stores
# ``m`` and ``log2(l)``: two floats per row, where the probabilities would take N. Any
# probability can be rebuilt from them and one score:
# ``P_ij = exp2((S_ij - m_i) * c - log2(l_i))``. Here is that rebuild in float64, from the
# statistics our forward kernel stored, against PyTorch's softmax:

small = (1, 2, 97, 64)  # on every build: this only shows what is kept
q, k, v = (torch.randn(small, device=device) for _ in range(3))
sm_scale = 1 / math.sqrt(small[-1])
out, _, (row_max, log2_sum) = attention_forward(q, k, v, causal=False, sm_scale=sm_scale)
scores = q.double() @ k.double().transpose(-2, -1)
c = sm_scale * math.log2(math.e)
rebuilt = torch.exp2((scores - row_max.double()[..., None]) * c
                     - log2_sum.double()[..., None])
exact = torch.softmax(scores * sm_scale, dim=-1)
rtol = tolerance(torch.float32, tensor_cores=True)  # m and l come from the kernel's tl.dot
print(f"q, k, v {small} float32; kept per (batch, head): {2 * small[2]} floats, "
      f"against {small[2] ** 2} probabilities")
print(f"P rebuilt from m and log2(l) against PyTorch's softmax: relative error "
      f"{assert_close(rebuilt, exact, rtol=rtol):.1e}")

# %%
# The gradients
# -------------
# With ``s`` the softmax scale, ``P = softmax(s S)``, ``O = P V``, upstream gradient
# ``dO``, and ``dS`` the gradient with respect to the scaled scores ``s S``:
#
# .. math::
#
#    dV = P^T dO, \quad dP = dO\, V^T, \quad dS = P \circ (dP - \Delta), \quad
#    dQ = dS\, K \cdot s, \quad dK = dS^T Q \cdot s
#
# where ``Delta`` is subtracted from every entry of its row, and
#
# .. math::
#
#    \Delta_i = \sum_j P_{ij}\, dP_{ij} = \sum_j P_{ij} \sum_d dO_{id}\, V_{jd}
#    = \sum_d O_{id}\, dO_{id}
#
# The last form needs only ``O`` and ``dO``, one row each, so ``Delta`` is computed without
# ``P``. Both forms, in float64 on the rows above:

grad_out = torch.randn_like(out)
d_probs = grad_out.double() @ v.double().transpose(-2, -1)
delta_from_p = (exact * d_probs).sum(-1)
delta_from_o = (out.double() * grad_out.double()).sum(-1)
print(f"Delta from O and dO (O: our float32 output) against Delta from P and dP: relative "
      f"error {assert_close(delta_from_o, delta_from_p, rtol=rtol):.1e}")

# %%
# A small kernel computes ``Delta`` for every row:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: attention_backward_preprocess_kernel
#
# Then one kernel owns a block of keys and accumulates ``dK`` and ``dV`` over all query
# blocks. It rebuilds ``P`` transposed (keys along rows), from the stored ``m`` and
# ``log2(l)``, reading the query and ``dO`` tiles through tensor descriptors as the
# forward reads keys:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: _dkdv_block_loop
#
# Another owns a block of queries and accumulates ``dQ`` over all key blocks, rebuilding
# ``P`` and ``dP`` once more:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: _dq_block_loop
#
# Each output block has exactly one owner, so no atomics are needed; the price is that
# ``Q K^T`` and ``dO V^T`` are computed twice, once in each kernel. The forward and backward
# launchers are each registered as a PyTorch operator with ``torch.library.custom_op``,
# and ``register_autograd`` makes the backward operator the forward's gradient, so
# ``loss.backward()`` just works; the
# :ref:`next page <sphx_glr_auto_examples_core_kernels_05_autograd_and_compile.py>` shows
# how to register a kernel this way.

# %%
# Check against PyTorch
# ---------------------
# Fresh float32 inputs, a sequence length that is not a multiple of any block, causal and
# not; the reference gradients come from autograd through the PyTorch definition in
# float64:

shape = runtime.pick(interpreter=(1, 2, 97, 64), gpu=(2, 8, 3001, 64))
for causal in (False, True):
    q, k, v = (torch.randn(shape, device=device, requires_grad=True) for _ in range(3))
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    grad_out = torch.randn(shape, device=device)
    attention(q, k, v, causal=causal).backward(grad_out)
    attention_reference(q64, k64, v64, causal=causal).backward(grad_out.double())
    errors = [assert_close(ours.grad, ref.grad, rtol=rtol, atol=1e-3)
              for ours, ref in ((q, q64), (k, k64), (v, v64))]
    print(f"causal={causal!s:<5} float32 gradients: relative error dq {errors[0]:.1e}, "
          f"dk {errors[1]:.1e}, dv {errors[2]:.1e}")

# %%
# Causal attention: the blocks it skips
# -------------------------------------
# With ``causal=True`` and as many queries as keys, query ``i`` sees keys ``0..i``. (With
# ``Nk`` keys and ``Nq`` queries the mask is aligned bottom-right, as in FlashAttention
# 2.1 and later: query ``i`` sees keys up to ``i + Nk - Nq``, so the last query sees every
# key, as a decoding step must.) For a block of queries starting at row
# ``r``, keys before ``r`` are visible to every row (no mask), keys from ``r`` to the end of
# the block need the triangular mask, and later keys are skipped entirely, which takes the
# work to a little over half (the diagonal blocks are visited whole, so the share falls
# towards half as N grows). The same split appears in the backward kernels. Counted for
# 128-row query blocks and 64-key blocks, one of the forward's configurations:


def block_pairs(n, block_m, block_n, causal):
    """(key blocks visited, of which masked) over all query blocks of one head."""
    visited = masked = 0
    for first_row in range(0, n, block_m):
        if not causal:
            visited += triton.cdiv(n, block_n)
            continue
        end = min(first_row + block_m, n)  # keys past the block's last row are skipped
        visited += triton.cdiv(end, block_n)
        masked += triton.cdiv(end, block_n) - first_row // block_n  # those from row r on
    return visited, masked


print("key blocks visited per (batch, head), all its query blocks together:")
for n in (1024, 4096, 16384):
    full, _ = block_pairs(n, 128, 64, causal=False)
    visited, masked = block_pairs(n, 128, 64, causal=True)
    print(f"  N = {n:>5}: full attention {full:>6}, causal {visited:>6} "
          f"({visited / full:.1%}), of which {masked} need the mask")


# %%
# Which roof: bytes or FLOPs
# --------------------------
# Per (batch, head), flash attention reads its query blocks and writes the output once,
# but reads all of K and V once per block of ``BLOCK_M`` query rows: ``2 N d cdiv(N,
# BLOCK_M)`` elements. Counted as if every one of those reads came from memory, it moves
# between about as many bytes as the naive kernel (S and P written and read, ``4 N^2``)
# and half as many, and would be memory bound. The programs of one head run together and
# read the same K and V, which are small next to the L2 cache (50 MiB on an H100), and the
# :ref:`forward page <sphx_glr_auto_examples_core_kernels_03_flash_attention.py>` measured
# its one-pass kernel running faster than memory alone allows. Where re-reads hit in L2,
# each input leaves memory once (last column), and the FLOPs per byte pass what a GPU
# needs to be compute bound: the roof is then the matrix units.

def flash_bytes(n, d, block_m, element_bytes=2):
    """Bytes one (batch, head) moves if every read of K and V came from memory."""
    return (2 * n * d * triton.cdiv(n, block_m) + 2 * n * d) * element_bytes


d = 128
print(f"per (batch, head), d = {d}, float16: MB moved, FLOPs per byte (FLOP/B)")
print("      N |     naive     |  BLOCK_M 64   |  BLOCK_M 128  |  each once")
for n in (1024, 4096, 16384):
    naive = (4 * n * d + 4 * n * n) * 2
    moved = [naive, flash_bytes(n, d, 64), flash_bytes(n, d, 128), 4 * n * d * 2]
    print(f"{n:>7} | " + " | ".join(f"{b / 1e6:7.1f} {4 * n * n * d / b:5.0f}" for b in moved))
print_ridge_points(bench)  # what each GPU needs to be compute bound

# %%
# Performance
# -----------
# float16, batch 4, 32 heads, head dimension 128, sequence length from 1024 to 16384,
# against PyTorch's ``scaled_dot_product_attention`` forced onto its FlashAttention-2 and
# cuDNN backends, on fresh q, k and v, timed in the same run (the forward, not causal, is
# on the forward page); the backward is ``torch.autograd.grad`` of the output, which
# returns the gradients as a layer receives them. FLOPs count ``4 B H N^2 D`` for the
# forward pass (halved when causal) and 2.5 times that for the backward: the forward's
# two matrix products against the backward's five. Our backward computes two of them
# twice (above), and that extra work is not counted. The ceiling is cuBLAS on one large
# (8192^3) float16 product: attention is at best as fast as a plain matrix product. How
# the site times these calls: :doc:`/measuring`.
#
# Each call is timed as a program makes it, host included. At the shortest length our
# host work (for the backward: autograd, the registered operator, four tensor descriptors
# and three kernel launches) can take longer than the kernels, so that point measures
# partly the host's CPU: ``python benchmarks/launch_overhead.py --attention`` times the
# host alone, and ``benchmarks/report.py`` gives GPU time beside the time as called.
#
# One sweep per pass and mask (:func:`~triton_guide.benchmark.attention_sweep`), drawn
# with ours against both SDPA backends and the ceiling, tabulated per GPU:

BATCH, HEADS, HEAD_DIM, LENGTHS = 4, 32, 128, [1024, 2048, 4096, 8192, 16384]


def sweep(backward, causal):
    results = attention_sweep(bench, {"triton_guide": attention}, LENGTHS, batch=BATCH,
                              heads=HEADS, head_dim=HEAD_DIM, causal=causal, backward=backward)
    results.plot()
    return results


# %%
# Forward, causal:

sweeps = {"forward, causal": sweep(backward=False, causal=True)}

# %%
# Backward, full attention:

sweeps["backward, full"] = sweep(backward=True, causal=False)

# %%
# Backward, causal:

sweeps["backward, causal"] = sweep(backward=True, causal=True)

# %%
# The three sweeps at a glance: ours over each baseline, the lowest and highest ratio over
# the sequence lengths with the length where it is lowest; then, at the longest length,
# where the host's share is smallest, each variant as a share of cuDNN's rate:

for name, results in sweeps.items():
    print_ratio_range(results, "triton_guide", ["SDPA flash", "SDPA cuDNN"], context=name)
    print_share_of(results, "SDPA cuDNN", context=name)

# %%
# At the shortest length, each call is timed with the host's work in it (autograd, the
# launches); ``benchmarks/report.py`` prints GPU time beside it. At the longest length,
# compare the forward's ratio to cuDNN with the backward's: our backward does seven matrix
# products where the FLOP count has five, so at the same speed per product it would show
# 5/7, about 0.71, of the rate of a backward that does five.

# %%
# Takeaways
# ---------
# * The backward pass trades memory for arithmetic: keep two floats per query row
#   (``m`` and ``log2(l)``) and recompute ``P`` from them, instead of storing N x N.
# * ``Delta``, the softmax gradient's row term, is a row sum of ``O * dO``: no ``P``
#   needed.
# * Give each output block one owner (a key block for ``dK``, ``dV``; a query block for
#   ``dQ``) and no atomics are needed, at the cost of computing two products twice.
# * Mask only the blocks that need it, and skip the blocks a causal mask hides completely.
#
# Next: :ref:`attention in real models <sphx_glr_auto_examples_core_kernels_09_attention_in_models.py>`
# takes these kernels to the shapes models call them
# with: grouped heads, a few queries against a long cache, and masks aligned bottom-right.
#
# Used here: :func:`~triton_guide.attention.attention`,
# :func:`~triton_guide.attention.attention_forward`,
# :func:`triton_guide.attention_reference`, :func:`triton_guide.testing.assert_close`,
# :class:`triton_guide.benchmark.Benchmark` (with ``recordings_from``),
# :func:`triton_guide.benchmark.attention_sweep`.
