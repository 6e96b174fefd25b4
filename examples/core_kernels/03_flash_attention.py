"""
Flash attention: tiles plus online softmax
==========================================

Attention, ``softmax(Q K^T / sqrt(d)) V``, is the kernel that made Triton famous. Computed
the obvious way it writes an N x N matrix to memory and reads it back, and that traffic,
not the arithmetic, sets its speed. Flash attention never stores that matrix: it streams
blocks of keys and values past a block of queries, using the online softmax of the
previous page. This page gets there in four executed steps, from PyTorch to the
production kernel of ``triton_guide/attention.py``.

You will learn:

* why naive attention is memory bound, in bytes;
* why normalising the softmax inside each key tile is **wrong**, with numbers;
* the online-softmax fix, run by hand, then in a first Triton kernel (two passes) and a
  one-pass kernel, each checked against PyTorch;
* what the production kernel adds: ``exp2``, masks only where needed, causal masking;
* how many bytes flash attention moves: keys and values are read once per query block,
  and how the measured speed shows that the L2 cache serves many of those re-reads;
* the backward pass: recomputing probabilities instead of storing them;
* what each step buys, and TFLOP/s next to PyTorch's ``scaled_dot_product_attention``
  (its flash and cuDNN backends).
"""

# %%
import math

import torch
import torch.nn.functional as F
import triton

from triton_guide import attention, attention_reference, runtime
from triton_guide.benchmark import Benchmark, tflop_per_s
from triton_guide.testing import assert_close, tolerance

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()  # timings: live on a GPU, else the recorded ones
print(bench.stamp())
device = runtime.device()

# %%
# Naive attention moves an N x N matrix
# -------------------------------------
# ``S = Q K^T`` has one score per (query, key) pair (unscaled: the softmax takes
# ``S / sqrt(d)``). A naive implementation writes ``S``, reads it for the softmax, writes
# ``P``, and reads ``P`` again for ``P V``: four passes over N x N matrices at the least
# (PyTorch's reference in step 1 below makes more, since scaling the scores is a pass of
# its own). For a typical long-context shape those matrices dwarf the inputs. The rates
# that turn bytes and FLOPs into time are each GPU's two ceilings, a 1 GiB
# device-to-device copy and a large cuBLAS product, measured live on this build's GPU or
# recorded on the others:

B, H, N, D = 4, 32, 16384, 128
element_bytes = 2  # float16
inputs_and_output = 4 * B * H * N * D * element_bytes  # q, k, v and out
scores_per_head = N * N * element_bytes
scores_all_heads = B * H * scores_per_head
flops = 4 * B * H * N * N * D
print(f"B={B} H={H} N={N} D={D}, float16")
print(f"  q, k, v and out, all heads:          {inputs_and_output / 1e9:6.2f} GB")
print(f"  one N x N score matrix, one head:    {scores_per_head / 1e9:6.2f} GB")
print(f"  the score matrices of all {B * H} heads: {scores_all_heads / 1e9:6.2f} GB")
print("  (S and P, each written once and read once: 4 passes)")
print(f"  arithmetic: {flops / 1e12:.1f} TFLOP")
gemm_roofs, copy_roofs = bench.ceilings("gemm_fp16"), bench.ceilings("copy")
for gpu in sorted(gemm_roofs.keys() & copy_roofs.keys()):
    gbps, tflops = copy_roofs[gpu].value, gemm_roofs[gpu].value
    naive_ms = 4 * scores_all_heads / (gbps * 1e9) * 1e3
    math_ms = flops / (tflops * 1e12) * 1e3
    print(f"  {gpu} ({gbps:.0f} GB/s, {tflops:.0f} TFLOP/s): the naive traffic alone takes "
          f"{naive_ms:.0f} ms, the math {math_ms:.0f} ms")

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

    Returns the last tile's output, the sum of all tiles' outputs, and the total weight
    each query row gives its values (1 for a real softmax).
    """
    outputs, weights = [], 0
    scale = 1 / math.sqrt(q.shape[-1])
    for start in range(0, k.shape[-2], tile):
        scores = q @ k[..., start:start + tile, :].transpose(-2, -1) * scale
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
print(f"  per-tile sums added: relative error {rel(summed):.2f}")
print(f"  each row's weights add up to {weights.min().item():.3f}.."
      f"{weights.max().item():.3f} instead of 1")

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


online_error = rel(online_attention(q, k, v, tile))
print(f"online softmax over the same tiles: relative error {online_error:.1e}")

# %%
# Step 1: the PyTorch reference
# -----------------------------
# The first rung of the ladder is the definition itself, which every later step is
# checked against (in float64) and, on a GPU, timed next to:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: attention_reference

# %%
# Step 2: a first Triton kernel, in two passes
# --------------------------------------------
# One program per block of ``BLOCK_M`` query rows of one (batch, head): the grid is
# ``(cdiv(N, BLOCK_M), batch * heads)``. The program loads its query block once and
# walks over the keys in blocks of ``BLOCK_N``. Two small helpers load a block of rows
# (zeros past the end) and score the queries against a block of keys (``-inf`` past the
# end, so those keys get no weight):
#
# .. literalinclude:: /../triton_guide/attention_steps.py
#    :pyobject: load_rows
#
# .. literalinclude:: /../triton_guide/attention_steps.py
#    :pyobject: block_scores
#
# The simplest correct kernel walks the keys twice. The first pass finds each row's
# maximum and normaliser with the online softmax of the previous page, which needs only
# two numbers per row. The second pass recomputes the scores, turns them into final
# probabilities and multiplies by the values. Nothing of size N x N is ever stored, but
# every score is computed twice and the keys are read twice:
#
# .. literalinclude:: /../triton_guide/attention_steps.py
#    :pyobject: attention_two_pass_kernel

from triton_guide.attention_steps import (  # noqa: E402
    attention_online,
    attention_two_pass,
    step_blocks,
)

step_shape = runtime.pick(interpreter=(1, 2, 97, 64), gpu=(2, 8, 3001, 64))


def check_step(step, name):
    for dtype in (torch.float32, torch.float16):
        q, k, v = (torch.randn(step_shape, device=device, dtype=dtype)
                   for _ in range(3))
        expected = attention_reference(q.double(), k.double(), v.double())
        error = assert_close(step(q, k, v), expected,
                             rtol=tolerance(dtype, tensor_cores=True))
        print(f"{name}: {str(dtype)[6:]:<7} {tuple(step_shape)}: "
              f"relative error {error:.1e}")


print("blocks of steps 2 and 3 here:", step_blocks(torch.float16))
check_step(attention_two_pass, "step 2 (two passes)")

# %%
# Step 3: one pass, with the online softmax
# -----------------------------------------
# ``online_attention`` above, written as a kernel: the output ``acc`` stays unnormalised,
# is rescaled by ``exp(m - m')`` whenever a key block raises a row's maximum, and is
# divided by the normaliser once at the end. Each score is now computed once and the
# keys and values are read once per program:
#
# .. literalinclude:: /../triton_guide/attention_steps.py
#    :pyobject: attention_online_kernel

check_step(attention_online, "step 3 (one pass) ")

# %%
# Step 4: the production kernel
# -----------------------------
# ``triton_guide.attention`` is step 3 with the changes that make it fast and complete,
# one idea each:
#
# * **Tiles through tensor descriptors.** The launcher wraps q, k and v in
#   ``TensorDescriptor`` objects (base address, shape, strides and the tile to fetch), and
#   the kernel reads a tile with ``desc.load([batch, head, row, 0])``. On Hopper GPUs that
#   is one instruction of the SM's Tensor Memory Accelerator (TMA), a unit that moves the
#   whole tile into shared memory while the warps compute, with no address arithmetic or
#   masks in registers, and rows past the end of a head arrive as zeros. On older GPUs
#   Triton turns the same code into ordinary loads. TMA wants 16-byte aligned strides; an
#   input that has others is first copied into a layout that has them.
# * **Pipeline depth, tuned.** Steps 2 and 3 already pipeline their loads: their launcher
#   passes ``num_stages=2``, so the compiler loads the next key and value tiles while the
#   tensor cores use the current ones. ``num_stages`` is the number of buffers per tile,
#   so about ``num_stages - 1`` loads run ahead of the computation. Step 4 lets the
#   autotuner choose that depth together with the block shapes.
# * **exp2, scaled in the exponent.** The hardware computes ``2^x``, and
#   ``e^y = 2^(y * log2(e))``, so the kernel works in base 2 with
#   ``c = sm_scale * log2(e)``. It keeps each row's running maximum ``m`` of the *raw*
#   scores ``x`` and scales only inside the exponent, ``exp2((x - m) * c)``: the
#   difference is at most 0 before it is scaled, so a huge ``sm_scale`` cannot push an
#   intermediate value past float32's range (scaling ``x`` first could, and gave NaN at
#   ``sm_scale=1e20``).
# * **Masks only where needed.** ``tl.constexpr`` flags, compiled away when off, switch the
#   masks on for the one partial key block at the end of the sequence and, when causal,
#   for the blocks on the diagonal; blocks past the diagonal are never visited.
# * **Configurations per head size.** ``triton.autotune`` tries four block shapes and
#   pipeline depths for ``head_dim`` up to 64 and four above, the fastest of a sweep on an
#   H100 (``TUNED`` in ``triton_guide/attention_tiles.py``), and keeps the best per
#   sequence length. The kernel's decorator ``@autotune("forward")`` builds that
#   ``triton.autotune`` from the ``TUNED`` list for the forward kernel.
# * **Attention as models call it.** Keys and values may have fewer heads than the queries
#   (grouped-query attention: query head ``h`` reads key head ``h // group_size``), and
#   fewer or more rows than the queries, as a decoding step with a cache of keys has.
#
# A tile is one (batch, head)'s rows, read through a descriptor, and the loop over key
# blocks is a helper called once per range of keys:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: _rows
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: _forward_block_loop
#
# The kernel loads its query block once, runs that loop over three key ranges (the edges
# that need masks, and the keys every row sees, which need none), and stores the output,
# each row's log-sum-exp (natural log, as ``online_attention`` gives it) and, for the
# backward pass, the raw maximum ``m`` and ``log2(l)``:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: attention_forward_kernel

# %%
# Causal attention
# ----------------
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
# Check against PyTorch: forward
# ------------------------------
# Fresh random inputs with a sequence length that is not a multiple of any block, a head
# dimension of 64, causal and not; the reference is computed in float64.

shape = runtime.pick(interpreter=(1, 2, 97, 64), gpu=(2, 8, 3001, 64))
for causal in (False, True):
    for dtype in (torch.float32, torch.float16):
        q, k, v = (torch.randn(shape, device=device, dtype=dtype) for _ in range(3))
        out = attention(q, k, v, causal=causal)
        expected = attention_reference(q.double(), k.double(), v.double(),
                                       causal=causal)
        error = assert_close(out, expected, rtol=tolerance(dtype, tensor_cores=True))
        print(f"causal={causal!s:<5} {str(dtype)[6:]:<7} {tuple(shape)}: "
              f"relative error {error:.1e}")

# %%
# The bytes flash attention moves
# -------------------------------
# Per (batch, head), each of the ``cdiv(N, BLOCK_M)`` programs reads its block of Q once,
# then *all* of K and V, and writes its block of the output. So K and V are read once per
# query block: ``2 N d * cdiv(N, BLOCK_M)`` elements, plus ``2 N d`` for Q and the output.
# That still grows as ``N^2``: against the naive kernel's ``4 N^2`` (S and P, each
# written and read) it is smaller by a factor of about ``2 BLOCK_M / d``, and nothing of
# size N x N is ever written. The arithmetic, ``4 N^2 d`` FLOPs per head, is the same for
# both:

def flash_bytes(n, d, block_m, element_bytes=2):
    """Bytes one (batch, head) moves if every read of K and V came from memory."""
    return (2 * n * d * triton.cdiv(n, block_m) + 2 * n * d) * element_bytes


def naive_bytes(n, d, element_bytes=2):
    return (4 * n * d + 4 * n * n) * element_bytes


d = 128
print(f"per (batch, head), d = {d}, float16; FLOP/B = FLOPs per byte moved")
print("      N |  naive: MB  FLOP/B | BLOCK_M  flash: MB  FLOP/B | naive / flash")
for n in (1024, 4096, 16384):
    head_flops = 4 * n * n * d
    for block_m in (64, 128):
        naive, flash = naive_bytes(n, d), flash_bytes(n, d, block_m)
        print(f"{n:>7} | {naive / 1e6:10.1f} {head_flops / naive:7.0f} | {block_m:>7} "
              f"{flash / 1e6:10.1f} {head_flops / flash:7.0f} | {naive / flash:9.1f}x")

for gpu in sorted(gemm_roofs.keys() & copy_roofs.keys()):
    print(f"{gpu} needs {gemm_roofs[gpu].value * 1e3 / copy_roofs[gpu].value:.0f} FLOP/B to "
          "be compute bound")

# %%
# Counted this way, as if every read of K and V came from memory, flash attention would
# move between about as many bytes as the naive kernel (64-row query blocks) and half as
# many (128-row blocks; last column), and stay memory bound. Most of those reads do not
# reach memory. The grid's first axis is the query block, so the programs of one head are
# launched together, and they read the same K and V, which are small next to the L2 cache
# (50 MB on an H100, per NVIDIA's H100 specification). Re-reads that hit in L2 leave
# memory with Q, K, V and the output, each moved once per head, and the FLOPs per byte of
# *that* grow with N:

for n in (1024, 4096, 16384):
    once = 4 * n * d * 2  # q, k, v and out of one head, float16
    print(f"N = {n:>5}: K and V of one head {2 * n * d * 2 / 1e6:4.1f} MB; q, k, v, out once "
          f"{once / 1e6:4.1f} MB, {4 * n * n * d / once:5.0f} FLOP/B")

# %%
# Once this count passes the FLOPs per byte a GPU needs to be compute bound (printed
# above, per GPU), the work is bound by the matrix units, not by memory. The section
# "What each step buys" below checks which count holds: step 3 runs faster than its blocks
# would allow if every read of K and V came from memory. The tiles still
# matter: every read of K and V, from L2 or not, costs bandwidth inside the chip, and a
# program does about ``BLOCK_M`` FLOPs per byte of K and V it reads, which is why larger
# query blocks pay. Flash attention's own gain is the N x N traffic it never makes, and the
# memory that would hold it.

# %%
# The backward pass
# -----------------
# With ``s`` the softmax scale (``sm_scale``), ``P = softmax(s S)``, ``O = P V`` and
# upstream gradient ``dO``, and ``dS`` the gradient with respect to the scaled scores
# ``s S``:
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
#    = \sum_d (P V)_{id}\, dO_{id} = \sum_d O_{id}\, dO_{id}
#
# The last form needs only ``O`` and ``dO``, one row each, so ``Delta`` is computed without
# ``P``. Storing ``P`` would bring back the N x N matrix, so the backward kernels recompute
# it from ``Q``, ``K`` and the saved base-2 log-sum-exp: ``P = exp2(S * c - lse)``, with
# ``c = s * log2(e)`` as in the forward. A small kernel first computes ``Delta``. Then one
# kernel owns a block of keys and accumulates ``dK`` and ``dV`` over all query blocks,
# reading the query and ``dO`` tiles through descriptors as the forward reads keys:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: _dkdv_block_loop
#
# and another owns a block of queries and accumulates ``dQ`` over all key blocks:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: _dq_block_loop
#
# Each output block has exactly one owner, so no atomics are needed. The forward and the
# backward launchers are each registered as a PyTorch operator with
# ``torch.library.custom_op``, and ``register_autograd`` makes the backward operator the
# forward's gradient. When an input requires gradients, ``attention`` calls the forward
# operator, so ``loss.backward()`` just works. The
# :ref:`next page <sphx_glr_auto_examples_core_kernels_04_autograd_and_compile.py>` shows
# how to register a kernel this way:

for causal in (False, True):
    q, k, v = (torch.randn(shape, device=device, requires_grad=True) for _ in range(3))
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    grad_out = torch.randn(shape, device=device)
    attention(q, k, v, causal=causal).backward(grad_out)
    attention_reference(q64, k64, v64, causal=causal).backward(grad_out.double())
    rtol = tolerance(torch.float32, tensor_cores=True)
    errors = [assert_close(ours.grad, ref.grad, rtol=rtol, atol=1e-3)
              for ours, ref in ((q, q64), (k, k64), (v, v64))]
    print(f"causal={causal!s:<5} float32 gradients: relative error dq {errors[0]:.1e}, "
          f"dk {errors[1]:.1e}, dv {errors[2]:.1e}")

# %%
# What each step buys
# -------------------
# Every step of the ladder, forward only and not causal, in float16 at a size that fills
# the GPU with programs, next to PyTorch's ``scaled_dot_product_attention`` forced onto
# its FlashAttention-2 and cuDNN backends, timed in the same run. FLOPs count
# ``4 B H N^2 D`` for every variant (step 2 does more work, for the same result).
# FlashAttention-2 was written for the GPUs before Hopper: it uses neither the Tensor
# Memory Accelerator (TMA) nor Hopper's warpgroup matrix instructions (``wgmma``:
# tensor-core instructions that four warps issue together, which ``tl.dot`` emits on
# Hopper). That is why a Triton kernel compiled for Hopper can pass it. cuDNN's kernels
# use both. The tables give each variant's TFLOP/s, one table per GPU; the lines under
# them give each variant as a share of the two SDPA backends, each step over the one
# before, and step 4's share of the GEMM ceiling.
#
# How the site times these calls, and what a recording holds: :doc:`/measuring`.

from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

ladder_shape = (4, 32, 4096, 128)


def sdpa_backend(backend):
    def sdpa(q, k, v):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v)
    return sdpa


ladder_steps = {
    "step 1 PyTorch": attention_reference,
    "step 2 two passes": attention_two_pass,
    "step 3 one pass": attention_online,
    "step 4 production": attention,
    "SDPA flash": sdpa_backend(SDPBackend.FLASH_ATTENTION),
    "SDPA cuDNN": sdpa_backend(SDPBackend.CUDNN_ATTENTION),
}


def prepared(fn):
    def prepare(n):
        batch, heads, _, head_dim = ladder_shape
        q, k, v = (torch.randn(batch, heads, n, head_dim, device=device,
                               dtype=torch.float16) for _ in range(3))
        fn(q, k, v)  # compile and autotune outside the timed region
        return lambda: fn(q, k, v)
    return prepare

# %%
# The sweep, and each variant as a share of the two SDPA backends:

batch, heads, ladder_n, head_dim = ladder_shape
ladder = bench.sweep(
    "steps ladder", [ladder_n], {name: prepared(fn) for name, fn in ladder_steps.items()},
    lambda n, ms: tflop_per_s(4 * batch * heads * n * n * head_dim, ms), label="N",
    unit="TFLOP/s", ceiling="gemm_fp16", xlabel="sequence length (float16)",
)
print(f"B={batch} H={heads} N={ladder_n} D={head_dim} float16, forward, not causal; "
      "each variant's TFLOP/s (tables above) as a share of each SDPA backend's:")
for run in ladder:
    print(run.gpu)
    for name in ladder_steps:
        value = run[name][0]
        print(f"  {name:<18} {value / run['SDPA flash'][0]:6.1%} of SDPA flash  "
              f"{value / run['SDPA cuDNN'][0]:6.1%} of SDPA cuDNN")
    steps = list(ladder_steps)[:4]
    print("  each step over the one before: " + ", ".join(
        f"{later.split()[1]} / {earlier.split()[1]} {run[later][0] / run[earlier][0]:.2f}x"
        for earlier, later in zip(steps, steps[1:]))
          + (f"; step 4 at {run['step 4 production'][0] / run.ceiling.value:.0%} of the "
             f"GEMM ceiling" if run.ceiling else ""))

# %%
# Step 3 reads through 64-row query blocks on a GPU. Had every one of its reads of K and V
# come from memory (the count of "The bytes flash attention moves"), the copy ceiling would
# cap it at:

STEP_BLOCK_M = 64  # step_blocks(torch.float16)["BLOCK_M"] on a GPU, checked there
if not runtime.interpreting():
    assert step_blocks(torch.float16)["BLOCK_M"] == STEP_BLOCK_M
ladder_flops = 4 * batch * heads * ladder_n**2 * head_dim
every_read = batch * heads * flash_bytes(ladder_n, head_dim, STEP_BLOCK_M)
for run in ladder:
    if run.gpu not in copy_roofs:
        continue
    gbps = copy_roofs[run.gpu].value
    cap = tflop_per_s(ladder_flops, every_read / (gbps * 1e9) * 1e3)
    measured = run["step 3 one pass"][0]
    verdict = (f"faster than memory alone allows: at least {1 - cap / measured:.0%} of "
               "the reads came from L2" if measured > cap else
               "within what memory alone allows")
    print(f"{run.gpu}: {every_read / 1e9:.1f} GB at {gbps:.0f} GB/s allow at most {cap:.0f} "
          f"TFLOP/s; step 3 measured {measured:.0f}, {verdict}")

# %%
# Where step 3 runs faster than memory alone allows, part of its reads of K and V came
# from the L2 cache. In the time it took, HBM could deliver only ``cap / measured`` of the
# bytes, so at least ``1 - cap / measured`` of them came from L2 (printed above). That is
# a lower bound; how much more came from L2 is not measured here. Step 2 to step 3 removes the first pass over the keys, a third of the matrix
# products (step 2 computes ``Q K^T`` twice), and with it work that is not a matrix
# product: a second read of the keys, a second exponential of every score, and a division
# of every probability by its row's sum. Step 3 to step 4 is the production kernel's
# tiles, ``exp2`` and masks only where needed, TMA loads, and autotuned blocks and
# pipeline depths.

# %%
# Performance
# -----------
# float16, batch 4, 32 heads, head dimension 128, sequence length from 1024 to 16384; the
# baselines are PyTorch's ``scaled_dot_product_attention`` forced onto its FlashAttention-2
# backend and onto its cuDNN backend, timed in the same run. FLOPs count
# ``4 B H N^2 D`` for the forward pass (halved when causal) and 2.5 times that for the
# backward pass: the forward's two matrix products against the backward's five (our
# backward kernels compute two of those twice, once for dK and dV and once for dQ, and that
# extra work is not counted). The ceiling is cuBLAS on one large (8192^3) float16 product, measured
# in the same run: attention is at best as fast as a plain matrix product. Each page
# measures it in its own run, so the matmul page's figure for the same GPU differs by several
# percent.
#
# Each call is timed as a program makes it, host included. At the shortest length our
# host work (for the backward: autograd, the registered operator, four tensor descriptors
# and three kernel launches) can take longer than the kernels, so that point measures
# partly the host's CPU, and differs between GPUs whose hosts differ:
# ``python benchmarks/launch_overhead.py --attention`` times the host alone, and
# ``benchmarks/report.py`` gives GPU time beside the time as called.

lengths = [1024, 2048, 4096, 8192, 16384]
HEAD_DIM, BATCH, HEADS = 128, 4, 32


def sdpa_with(backend):
    def sdpa(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return sdpa


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
        # autograd.grad returns the gradients as a layer receives them; out.backward would
        # also add them into q.grad, k.grad, v.grad: 3 more kernels in every timing.
        return lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
    return prepare

# %%
# One sweep per pass and mask, drawn and tabulated with ours against both SDPA backends:


def benchmark(backward, causal):
    """One sweep: plotted, then tabulated for every GPU, with ours against both SDPAs."""
    pass_name = "backward" if backward else "forward"
    title = f"attention {pass_name}, {'causal' if causal else 'full'}, d={HEAD_DIM}"
    work = 2.5 if backward else 1.0
    flop_scale = work * 4 * BATCH * HEADS * HEAD_DIM * (0.5 if causal else 1)
    results = bench.sweep(
        title, lengths,
        {name: make_variant(fn, causal, backward) for name, fn in implementations.items()},
        lambda n, ms: tflop_per_s(flop_scale * n * n, ms), label="N", unit="TFLOP/s",
        ceiling="gemm_fp16", xlabel="sequence length")
    results.plot()
    results.summary(ratios=[("triton_guide", "SDPA flash"), ("triton_guide", "SDPA cuDNN")])
    return f"{pass_name}, {'causal' if causal else 'full'}", results


# %%
# Forward, full attention:

sweeps = [benchmark(backward=False, causal=False)]

# %%
# The steps ladder above timed the same kernels at the same shape (N = 4096), the same
# way, earlier in the run. Two readings of one call differ by the run's spread, so compare
# ratios within one sweep, not rates across sweeps:

for run in sweeps[0][1]:
    rung = next((r for r in ladder if r.slug == run.slug), None)
    if rung is None or ladder_n not in run.xs:
        continue
    i = run.xs.index(ladder_n)
    pairs = [("ours", rung["step 4 production"][0], run["triton_guide"][i]),
             ("SDPA cuDNN", rung["SDPA cuDNN"][0], run["SDPA cuDNN"][i])]
    print(f"{run.gpu}, N = {ladder_n}, ladder / this sweep: " + "; ".join(
        f"{name} {first:.1f} / {second:.1f} TFLOP/s ({first / second - 1:+.1%})"
        for name, first, second in pairs))

# %%
# Forward, causal:

sweeps.append(benchmark(backward=False, causal=True))

# %%
# Backward, full attention:

sweeps.append(benchmark(backward=True, causal=False))

# %%
# Backward, causal:

sweeps.append(benchmark(backward=True, causal=True))

# %%
# The four sweeps at a glance: ours over each baseline, the lowest and highest ratio over
# the sequence lengths with the length where it is lowest, and the ratio to cuDNN at the
# longest length, where the host's share is smallest.


def ratio_range(run, baseline):
    ratios = [ours / theirs for ours, theirs in zip(run["triton_guide"], run[baseline])]
    low = min(range(len(ratios)), key=ratios.__getitem__)
    return f"{min(ratios):.2f}-{max(ratios):.2f}x (lowest at N = {run.xs[low]})"


for name, results in sweeps:
    for run in results:
        print(f"{name}, {run.gpu}: ours / SDPA flash {ratio_range(run, 'SDPA flash')}\n"
              f"  ours / SDPA cuDNN {ratio_range(run, 'SDPA cuDNN')}; at N = "
              f"{run.xs[run.largest]} {run.ratio('triton_guide', 'SDPA cuDNN'):.2f}x")

# %%
# Where ours falls below a baseline at the shortest length, the host's share (above) is
# the first suspect. At the longest length, compare the forward's ratio to cuDNN with the
# backward's: our backward does seven matrix products where cuDNN's counts five (two of
# them computed twice, see "The backward pass"), and the FLOP rate counts only the five.

# %%
# Takeaways
# ---------
# * Never normalise per tile: carry ``m``, ``l`` and an unnormalised ``acc`` across tiles
#   and divide once at the end.
# * Flash attention never writes the N x N score matrix. It still reads K and V once per
#   query block, ``2 N^2 d / BLOCK_M`` elements per head; the L2 cache serves part of those
#   re-reads (the measured rate passes what memory alone allows), and larger query blocks
#   cut that traffic.
# * Build a kernel up in steps that each run and are checked: two passes, then one pass,
#   then the masks, ``exp2`` and autotuning that make it fast.
# * The backward pass trades memory for arithmetic: recompute ``P`` from the log-sum-exp.
# * Mask only the blocks that need it, and skip the blocks a causal mask hides completely.
# * On Hopper, read tiles through tensor descriptors: the TMA unit fetches them while
#   the warps compute.
#
# Used here: :func:`~triton_guide.attention.attention`,
# :func:`triton_guide.attention_reference`,
# :func:`triton_guide.attention_steps.attention_two_pass`,
# :func:`triton_guide.attention_steps.attention_online`,
# :func:`triton_guide.testing.assert_close`, :class:`triton_guide.benchmark.Benchmark`.
