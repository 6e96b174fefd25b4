"""
Flash attention forward: tiles plus online softmax
==================================================

Attention, ``softmax(Q K^T / sqrt(d)) V``, is the kernel that made Triton famous. Computed
the obvious way it writes an N x N matrix to memory and reads it back, and that traffic,
not the arithmetic, sets its speed. Flash attention never stores that matrix: it streams
blocks of keys and values past a block of queries, using the online softmax of the
previous page. This page builds the forward pass in four executed steps, from PyTorch to
the production kernel of ``triton_guide/attention.py``; the
:ref:`next page <sphx_glr_auto_examples_core_kernels_04_flash_attention_backward.py>` takes
its backward pass and its speed against cuDNN.

You will learn:

* why naive attention is memory bound, in bytes;
* why normalising the softmax inside each key tile is **wrong**, with numbers;
* the online-softmax fix, by hand, then in a two-pass and a one-pass Triton kernel, each
  checked against PyTorch in float64;
* what the production kernel adds: tensor descriptors, ``exp2``, masks only where needed;
* what each step buys in TFLOP/s, next to PyTorch's ``scaled_dot_product_attention``.
"""

# %%
import math

import torch
import triton

from triton_guide import attention, attention_reference, runtime
from triton_guide.attention_steps import attention_online, attention_two_pass, step_blocks
from triton_guide.benchmark import (Benchmark, attention_sweep, print_at_ceilings,
                                    print_memory_cap, print_ratios, print_step_gains)
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
# recorded on the others. Whichever of the two times is the longer sets the pace: where
# it is the traffic, the naive version is bound by memory, however fast the tensor cores:

BATCH, HEADS, HEAD_DIM, N = 4, 32, 128, 16384
element_bytes = 2  # float16


def attention_flops(n):  # two products, Q K^T and P V, of n x n x HEAD_DIM per head
    return 4 * BATCH * HEADS * n * n * HEAD_DIM


inputs_and_output = 4 * BATCH * HEADS * N * HEAD_DIM * element_bytes  # q, k, v and out
scores_per_head = N * N * element_bytes
scores_all_heads = BATCH * HEADS * scores_per_head
flops = attention_flops(N)
print(f"B={BATCH} H={HEADS} N={N} D={HEAD_DIM}, float16")
print(f"  q, k, v and out, all heads:          {inputs_and_output / 1e9:6.2f} GB")
print(f"  one N x N score matrix, one head:    {scores_per_head / 1e9:6.2f} GB")
print(f"  the score matrices of all {BATCH * HEADS} heads: {scores_all_heads / 1e9:6.2f} GB")
print(f"  arithmetic: {flops / 1e12:.1f} TFLOP")
print_at_ceilings(bench, {"the naive traffic alone": (4 * scores_all_heads, "copy"),
                          "the math": (flops, "gemm_fp16")})

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
# checked against (in float64) and, on a GPU, timed next to.
# :func:`~triton_guide.attention_reference` first repeats the key and value heads for
# grouped-query attention; then it materialises the scores, masks them and takes the
# softmax:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: attention_reference
#    :start-at: scores = (q @ k
#    :end-at: out = (torch.softmax
#    :dedent: 4

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
#   ``TensorDescriptor`` objects (base address, shape, strides, tile shape), and the kernel
#   reads a tile with ``desc.load([batch, head, row, 0])``: on Hopper GPUs, one instruction
#   of the Tensor Memory Accelerator (TMA), which copies the tile into shared memory while
#   the warps compute; rows past the end of a head arrive as zeros. Older GPUs get
#   ordinary loads from the same code.
# * **Blocks and pipeline depth, tuned.** ``@autotune("forward")`` tries four block shapes
#   and pipeline depths per range of head sizes (``TUNED`` in
#   ``triton_guide/attention_tiles.py``) and keeps the best per sequence length.
# * **exp2, scaled in the exponent.** The hardware computes ``2^x``, so the kernel works
#   in base 2 with ``c = sm_scale * log2(e)``. It keeps the running maximum ``m`` of the
#   *raw* scores ``x`` and computes ``exp2((x - m) * c)``: the difference is at most 0
#   before it is scaled, so no ``sm_scale`` can push it past float32's range.
# * **Masks only where needed.** ``tl.constexpr`` flags switch the masks on for the
#   partial key block at the end and, when causal, for the blocks on the diagonal; blocks
#   past the diagonal are never visited (the next page counts them).
# * **Attention as models call it**: fewer key and value heads than query heads
#   (grouped-query attention), and more or fewer keys than queries.
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
# each row's log-sum-exp and, for the backward pass, the raw maximum ``m`` and
# ``log2(l)``:
#
# .. literalinclude:: /../triton_guide/attention.py
#    :pyobject: attention_forward_kernel

# %%
# Check against PyTorch
# ---------------------
# Fresh random inputs with a sequence length that is not a multiple of any block, a head
# dimension of 64, causal (query ``i`` sees keys ``0..i``) and not; the reference is
# computed in float64.

for causal in (False, True):
    for dtype in (torch.float32, torch.float16):
        q, k, v = (torch.randn(step_shape, device=device, dtype=dtype) for _ in range(3))
        out = attention(q, k, v, causal=causal)
        expected = attention_reference(q.double(), k.double(), v.double(),
                                       causal=causal)
        error = assert_close(out, expected, rtol=tolerance(dtype, tensor_cores=True))
        print(f"causal={causal!s:<5} {str(dtype)[6:]:<7} {tuple(step_shape)}: "
              f"relative error {error:.1e}")

# %%
# What each step buys
# -------------------
# Every step, forward and not causal, in float16 at N = 4096, next to PyTorch's
# ``scaled_dot_product_attention`` forced onto its FlashAttention-2 backend (written for
# the GPUs before Hopper: no TMA, no ``wgmma``, Hopper's warp-group matrix multiply) and
# its cuDNN backend (which uses both), timed in the same run on fresh q, k and v
# (:func:`~triton_guide.benchmark.attention_sweep` adds both backends; :doc:`/measuring`
# says how calls are timed). FLOPs count ``4 B H N^2 D`` for every variant. The sweep
# against SDPA further down times N = 4096 again, in a run of its own: the same call's
# two readings can differ by a few percent.

ladder_steps = {"step 1 PyTorch": attention_reference, "step 2 two passes": attention_two_pass,
                "step 3 one pass": attention_online, "step 4 production": attention}
ladder = attention_sweep(bench, ladder_steps, [4096], batch=BATCH, heads=HEADS,
                         head_dim=HEAD_DIM, title="steps ladder")

# %%
# Each step over the one before, and step 3 against the most that memory alone allows.
# Step 3 reads through 64-row query blocks on a GPU, so per head it reads K and V
# ``cdiv(N, 64)`` times, ``2 N d`` elements each time, besides Q and the output once: had
# every read come from memory, the copy ceiling would cap it at

STEP_BLOCK_M = 64  # step_blocks(torch.float16)["BLOCK_M"] on a GPU, checked there
if not runtime.interpreting():
    assert step_blocks(torch.float16)["BLOCK_M"] == STEP_BLOCK_M


def step_3_bytes(n):  # K and V once per query block, Q and the output once, float16
    return BATCH * HEADS * 2 * n * HEAD_DIM * (triton.cdiv(n, STEP_BLOCK_M) + 1) * 2


print_step_gains(ladder, list(ladder_steps))
print_memory_cap(ladder, "step 3 one pass", step_3_bytes, bench.ceilings("copy"),
                 work=attention_flops)

# %%
# Step 2 to step 3 drops the first pass over the keys: a third of the matrix products and
# a second exponential of every score. Where step 3 ran faster than memory alone allows,
# part of its reads came from the L2 cache (50 MiB on an H100), since the programs of one
# head run together and read the same K and V: memory could deliver only
# ``cap / measured`` of the bytes in the time, so at least ``1 - cap / measured`` came
# from L2.

# %%
# Against SDPA, over sequence lengths
# -----------------------------------
# Step 4 against both backends from N = 1024 to 16384, with the ceiling: cuBLAS on one
# large (8192^3) float16 product, since attention is at best as fast as a matrix product.
# Calls are timed host included, so at the shortest length the host's work (a launch,
# three tensor descriptors) is part of the time.

forward = attention_sweep(bench, {"triton_guide": attention}, [1024, 2048, 4096, 8192, 16384],
                          batch=BATCH, heads=HEADS, head_dim=HEAD_DIM)
forward.plot()
forward.compare("triton_guide", "SDPA cuDNN", work=attention_flops)
print_ratios(forward, "triton_guide", "SDPA flash")

# %%
# Takeaways
# ---------
# * Never normalise per tile: carry ``m``, ``l`` and an unnormalised ``acc`` across tiles
#   and divide once at the end.
# * Flash attention never writes the N x N score matrix. It still reads K and V once per
#   query block; the L2 cache serves part of those re-reads (where the measured rate
#   passes what memory alone allows, above), and larger query blocks cut that traffic.
# * Build a kernel up in steps that each run and are checked: two passes, then one pass,
#   then the masks, ``exp2``, descriptors and autotuning that make it fast.
# * On Hopper, read tiles through tensor descriptors: the TMA unit fetches them while
#   the warps compute.
#
# Used here: :func:`~triton_guide.attention.attention`,
# :func:`triton_guide.attention_reference`,
# :func:`triton_guide.attention_steps.attention_two_pass`,
# :func:`triton_guide.attention_steps.attention_online`,
# :func:`triton_guide.testing.assert_close`, :class:`triton_guide.benchmark.Benchmark`,
# :func:`triton_guide.benchmark.attention_sweep`.
