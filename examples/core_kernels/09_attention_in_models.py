"""
Attention in real models: grouped heads and decoding
=====================================================

The :ref:`flash attention page <sphx_glr_auto_examples_core_kernels_03_flash_attention.py>`
gave every query head its own keys and values, and as many queries as keys. In a language
model, query heads share key and value heads, and each step of generating text adds one
token (or a few) whose queries attend to every key cached before: 1-16 queries against
thousands of keys. This page follows ``triton_guide.attention`` through that call.

You will learn:

* what grouped-query and multi-query attention save: the bytes a decoding step reads,
  counted from the shapes and measured;
* why decoding is memory-bound, placed on the roofline;
* flash-decoding in steps: one program per block of queries leaves the GPU idle, so
  split the keys across programs and merge the partial results by their log-sum-exp;
  what the split buys, measured;
* the causal mask aligned bottom-right, drawn from the kernel's own output;
* the checks against float64 of each case a model's call brings in.

How these kernels compare with PyTorch's ``scaled_dot_product_attention`` on a decoding
step, in GPU time and as a program calls them, is the decode table of
``benchmarks/report.py``.
"""

# %%
import functools

import torch

from triton_guide import attention, attention_reference, runtime
from triton_guide.attention_decode import (attention_decode, decode_block_n, decode_splits,
                                           uses_decode, visible_keys)
from triton_guide.benchmark import (Benchmark, draw_key_masks, gb_per_s, on_cold_copies,
                                    place_on_roofline, print_ratios)
from triton_guide.hardware import multiprocessors
from triton_guide.testing import assert_close, tolerance
from triton_guide.traffic import Cost

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()  # timings: live on a GPU, else the recorded ones
print(bench.stamp())
device = runtime.device()

# %%
# Grouped heads: fewer keys and values to read
# --------------------------------------------
# In multi-head attention (MHA) each of the ``H`` query heads has its own key and value
# head. Grouped-query attention (GQA) gives ``H / Hk`` query heads one key and value head
# between them: query head ``h`` reads key head ``h // (H / Hk)``. Multi-query attention
# (MQA) is the extreme, one key and value head for all. ``attention`` takes ``k`` and
# ``v`` of shape ``(batch, Hk, Nk, d)`` beside ``q`` of shape ``(batch, H, Nq, d)``
# (``decode_inputs`` makes random ones, for the timings and the checks below).
#
# A decoding step multiplies a few query rows by every cached key and value, so it must
# read the layer's whole cache, ``2 Hk Nk d`` numbers per sequence, for ``4 H Nq Nk d``
# FLOPs. Fewer key heads mean fewer bytes for the same arithmetic. For 32 query heads of
# dimension 128 in bfloat16, 8 sequences of 32768 cached tokens, one layer:

HEADS, HEAD_DIM, DTYPE, BATCH, CACHED = 32, 128, torch.bfloat16, 8, 32768


def decode_cost(batch, heads, kv_heads, num_queries, num_keys, head_dim, element_size=2):
    """FLOPs, and bytes moved at least: k, v and q read once, the output written once."""
    kv = 2 * batch * kv_heads * num_keys * head_dim
    q_and_out = 2 * batch * heads * num_queries * head_dim
    return Cost(flops=4 * batch * heads * num_queries * num_keys * head_dim,
                bytes=(kv + q_and_out) * element_size)


def decode_inputs(batch, heads, kv_heads, num_queries, num_keys, head_dim=HEAD_DIM,
                  dtype=DTYPE):
    q = torch.randn(batch, heads, num_queries, head_dim, device=device, dtype=dtype)
    k, v = (torch.randn(batch, kv_heads, num_keys, head_dim, device=device, dtype=dtype)
            for _ in "kv")
    return q, k, v


CASES = {"MHA 32:32, 1 query": (32, 1), "GQA 8:1, 1 query": (4, 1),  # (key heads, queries)
         "MQA 32:1, 1 query": (1, 1), "GQA 8:1, 16 queries": (4, 16)}
costs = {name: decode_cost(BATCH, HEADS, kv_heads, queries, CACHED, HEAD_DIM)
         for name, (kv_heads, queries) in CASES.items()}
for name, cost in costs.items():
    print(f"{name:<20} reads {cost.bytes / 1e9:5.2f} GB for {cost.flops / 1e9:5.1f} GFLOP: "
          f"{cost.intensity:6.2f} FLOP/byte")

# %%
# Decoding is memory-bound
# ------------------------
# The bytes are per key head and the FLOPs per query head and per query, so the
# intensity is about ``(H / Hk) x Nq`` FLOPs per byte in 16-bit types: 1 for MHA with
# one query, 8 for GQA 8:1, 128 for GQA 8:1 with 16 queries (as when speculative
# decoding checks several draft tokens at once). A GPU's ridge point, where its roof
# turns from the memory bandwidth to the arithmetic rate, is the rate of a float16
# cuBLAS product (bfloat16 runs on the same tensor cores) over the copy bandwidth, both
# measured. On a GPU each case is timed (GPU time, on copies of the cache in rotation, so
# that each call reads its cache from memory) and placed at its intensity under each
# GPU's roof; below, each GPU's ridge point, then each case's rate as a share of its roof.
# The roof's slope is the bandwidth of a copy, which reads and writes as much; a call
# that almost only reads can beat it, and pass 100%.


def case_call(name):  # one decoding step of a case, on a fresh cache
    return functools.partial(attention, *decode_inputs(BATCH, HEADS, *CASES[name], CACHED))


placed = place_on_roofline(bench, "decoding on the roofline", costs, on_cold_copies(
    case_call, lambda name: costs[name].bytes), label="case", gpu_time=True)

# %%
# Below its ridge point a case can go no faster than it reads its bytes, so its share of
# the roof is the share of the copy bandwidth at which it reads them, and its time is its
# bytes over that rate. So two cases at the same share take times in the ratio of their
# bytes (MHA reads 8x the bytes of GQA 8:1, which reads 4x those of MQA), and a case at a
# lower share takes longer than its bytes alone say, by the ratio of the shares. GQA with
# 16 queries reads the bytes of GQA with one for 16x the FLOPs: at the same share it would
# take the same time; the printed shares say how close it comes.

# %%
# Flash-decoding, step 1: one program per block of queries
# --------------------------------------------------------
# The main forward kernel gives each program a block of ``BLOCK_M`` query rows of one
# (batch, head) and walks it over every key. With one query per head that is one
# program per query head, each reading all ``Nk`` keys of its group on its own, while the
# group's other heads read the same keys. The decode kernel's first change is to pack
# the group's queries (``group_size x Nq`` rows) into one tile, so that one program reads
# each key once for the whole group. That leaves one program per (batch, key head) on a
# GPU of over a hundred SMs (an H100's count below, the GPU's own on a GPU). The table
# counts the programs of a decoding step: one per query head, one per key head (packed),
# those per SM, and, ahead of step 2, what splitting the keys makes of them:

sms = multiprocessors(device) if device.type == "cuda" else 132
kv_heads, num_keys = 4, CACHED  # GQA 8:1
block_n = decode_block_n(HEAD_DIM, 2)  # keys per step, for head_dim 128 in 16 bits
print(f"the programs of one decoding step, on {sms} SMs:")
print("batch  one per query head  one per key head  per SM  split: splits x keys each = programs")
for batch in (1, 8, 64):
    splits, keys_per_split = decode_splits(batch * kv_heads, num_keys, block_n, sms)
    print(f"{batch:>5}  {batch * HEADS:>19}  {batch * kv_heads:>16}  "
          f"{batch * kv_heads / sms:>6.2f}  {splits:>13} x {keys_per_split:>10} = "
          f"{splits * batch * kv_heads}")

# %%
# Step 2: split the keys across programs
# --------------------------------------
# When one program per (batch, key head) cannot fill the GPU, the keys can be split:
# program ``(split, batch x key head)`` reads one range of ``keys_per_split`` keys and
# runs the online softmax over it alone. :func:`~triton_guide.attention_decode.decode_splits`
# picks the number of splits from the shape: up to two programs per SM, and no split
# shorter than 128 keys. Each program ends with a *partial* result for each row: the
# unnormalised output ``acc``, the running maximum ``m`` and the normaliser ``l``. The
# kernel up to that point (after it, the three are written to a float32 buffer, or, with
# one split, ``FINAL``, the finished rows are stored as the main kernel stores them):
#
# .. literalinclude:: /../triton_guide/attention_decode.py
#    :pyobject: attention_decode_split_kernel
#    :end-before: if FINAL:

# %%
# Step 3: merge the partial results by their log-sum-exp
# ------------------------------------------------------
# A split's ``m`` and ``l`` give its log-sum-exp, ``lse_s = sm_scale x m_s + log l_s``: the
# log of the total weight its keys got. The softmax over all keys weighs each split's
# normalised output by its share of the total weight, ``exp(lse_s - lse)``, where
# ``lse = log(sum_s exp(lse_s))``. The same merge, in PyTorch, on the outputs and
# log-sum-exps that ``attention`` returns for chunks of the keys:

q, k, v = decode_inputs(1, 8, 1, 1, 1000, head_dim=64, dtype=torch.float32)
parts = [attention(q, k[:, :, s:s + 250], v[:, :, s:s + 250], return_lse=True)
         for s in range(0, 1000, 250)]
lse = torch.logsumexp(torch.stack([part_lse for _, part_lse in parts]), dim=0)
merged = sum(torch.exp(part_lse - lse)[..., None] * out for out, part_lse in parts)
whole, whole_lse = attention(q, k, v, return_lse=True)
plain_mean = sum(out for out, _ in parts) / len(parts)
print(f"4 chunks of 250 keys merged by log-sum-exp: relative error "
      f"{(merged - whole).norm() / whole.norm():.1e}, lse off by at most "
      f"{(lse - whole_lse).abs().max():.1e}")
print(f"the chunks' outputs averaged instead: relative error "
      f"{(plain_mean - whole).norm() / whole.norm():.2f}")

# %%
# The combine kernel does the same from the unnormalised partials, as the online softmax
# merges blocks of keys: with ``m_new`` the largest maximum so far, what came before is
# rescaled by ``exp(sm_scale (m_old - m_new))`` and each split's part by
# ``exp(sm_scale (m_s - m_new))``, in base 2 as the main kernel works. One program per
# row of a group loads ``BLOCK_S`` splits at a time as one tile:
#
# .. literalinclude:: /../triton_guide/attention_decode.py
#    :pyobject: attention_decode_combine_kernel
#    :start-at: for first in range(0, num_splits, BLOCK_S):
#    :end-before: head_rows = batch_kv_head
#    :dedent: 4
#
# The kernels' merge on the same 1000 keys, split 2, 3 and 8 ways (the last split
# shorter than the others), against one program over all of them:

one_split = attention_decode(q, k, v, False, 64 ** -0.5, num_splits=1)[0]
for num_splits in (2, 3, 8):
    split_out = attention_decode(q, k, v, False, 64 ** -0.5, num_splits=num_splits)[0]
    print(f"keys split {num_splits} ways, merged by the combine kernel: relative "
          f"difference from one split {(split_out - one_split).norm() / one_split.norm():.1e}")

# %%
# What the split buys, timed on a GPU for one query of GQA 8:1 against 32768 keys, in
# bytes moved per second (GPU time; the cache is nearly all of them): all keys in one
# program per (batch, key head), which stores the finished rows (no combine), against
# the split that ``decode_splits`` picks:


step_costs = {batch: decode_cost(batch, HEADS, kv_heads, 1, num_keys, HEAD_DIM)
              for batch in (1, 8, 64)}


def split_step(num_splits):  # one query of GQA 8:1 per step, on fresh caches
    return on_cold_copies(lambda batch: functools.partial(
        attention_decode, *decode_inputs(batch, HEADS, kv_heads, 1, num_keys), False,
        HEAD_DIM ** -0.5, num_splits=num_splits), lambda batch: step_costs[batch].bytes)


steps = bench.sweep("flash-decoding: one program per key head, then split keys",
                    list(step_costs), {"one split": split_step(1), "split keys": split_step(None)},
                    lambda batch, ms: gb_per_s(step_costs[batch].bytes, ms),
                    label="batch", unit="GB/s", ceiling="copy", gpu_time=True)
print_ratios(steps, "split keys", "one split")  # above 1: splitting is faster

# %%
# Causal masking, aligned bottom-right
# ------------------------------------
# With a cache, the ``Nq`` new queries are the *last* ``Nq`` positions of the sequence,
# so a causal mask must line up their diagonal with the end of the keys: query ``i``
# sees key ``j`` when ``j <= i + Nk - Nq``. The last query sees every key, and with more
# queries than keys the first ``Nq - Nk`` see none (their output is 0). FlashAttention
# 2.1 and later do the same, as does PyTorch's ``causal_lower_right``; SDPA's
# ``is_causal=True`` aligns top-left instead. Both kernels ask one helper, with
# ``diagonal = Nk - Nq`` (the main kernel's ``key_ranges``, in ``attention_tiles.py``,
# also skips the key blocks past that diagonal):
#
# .. literalinclude:: /../triton_guide/attention_decode.py
#    :pyobject: visible
#
# The picture below is read off the kernels' output. With all scores equal, a query
# spreads its weight evenly over the keys it sees, and with the values one-hot (key
# ``j``'s value is the ``j``-th unit vector) output column ``j`` is non-zero exactly
# where the query sees key ``j``:


def mask_of_kernel(num_queries, num_keys):
    q = torch.zeros(1, 1, num_queries, 16, device=device)
    k = torch.zeros(1, 1, num_keys, 16, device=device)
    v = torch.eye(num_keys, 16, device=device)[None, None]  # one-hot rows
    return (attention(q, k, v, causal=True)[0, 0, :, :num_keys] > 0).cpu()


masks = {}
for nq, nk in [(4, 16), (24, 16)]:
    seen = mask_of_kernel(nq, nk)
    assert torch.equal(seen, visible_keys(nq, nk, causal=True)), (nq, nk)
    path = "decode kernel" if nq <= 16 else "main kernel"
    masks[f"{nq} queries, {nk} keys ({path})"] = seen
    print(f"Nq={nq}, Nk={nk} ({path}): the kernel's mask equals visible_keys; rows that "
          f"see no key: {int((~seen.any(dim=1)).sum())}")
draw_key_masks(masks)  # each mask with the line j = i + Nk - Nq

# %%
# Checks against float64
# ----------------------
# Fresh random inputs for each case the model's call brings in: grouped heads, one query
# and several against odd numbers of keys (the decode path), more and fewer queries than
# keys with the causal mask (the main kernel), in float32 and a 16-bit type, against
# ``attention_reference`` in float64 (the path taken, and the relative errors):

cases = {  # name: (heads, kv_heads, num_queries, num_keys, causal)
    "GQA 8:1, 1 query": (16, 2, 1, 1001, False),
    "GQA 4:1, 5 queries, causal": (8, 2, 5, 777, True),
    "MQA, 37 queries, causal": (4, 1, 37, 301, True),
    "GQA 2:1, 50 queries on 20 keys, causal": (4, 2, 50, 20, True),
}
head_dim = runtime.pick(interpreter=64, gpu=128)
dtypes = runtime.pick(interpreter=(torch.float32, torch.float16),
                      gpu=(torch.float32, torch.bfloat16))
for name, (h, hk, nq, nk, causal) in cases.items():
    errors = []
    for dtype in dtypes:
        q, k, v = decode_inputs(2, h, hk, nq, nk, head_dim, dtype)
        expected = attention_reference(q.double(), k.double(), v.double(), causal=causal)
        errors.append(assert_close(attention(q, k, v, causal=causal), expected,
                                   rtol=tolerance(dtype, tensor_cores=True)))
    path = "decode" if uses_decode(q, k) else "main"
    print(f"{name:<38} {path:>6}: " + ", ".join(
        f"{str(dtype)[6:]} {error:.1e}" for dtype, error in zip(dtypes, errors)))

# %%
# Takeaways
# ---------
# * Grouped heads cut the bytes of keys and values a decoding step reads by the group
#   size, for the same arithmetic; how closely the time follows is each case's share of
#   its roof, printed above.
# * Decoding's intensity, about ``(H / Hk) x Nq`` FLOPs per byte, lies below every GPU's
#   ridge point printed here: the cache's bytes set the time.
# * Packing a group's queries into one tile reads each key once per group, but leaves a
#   decoding step ``batch x Hk`` programs. Split the keys across programs and merge the
#   partial results by their log-sum-exp, weighing each by ``exp(lse_s - lse)``;
#   averaging them is wrong. What the split buys is printed above for each batch.
# * With a cache, the causal mask is aligned bottom-right: query ``i`` sees keys up to
#   ``i + Nk - Nq``.
#
# Used here: :func:`~triton_guide.attention.attention`,
# :func:`triton_guide.attention_reference`,
# :func:`triton_guide.attention_decode.attention_decode`,
# :func:`triton_guide.attention_decode.decode_splits`,
# :func:`triton_guide.attention_decode.visible_keys`,
# :func:`triton_guide.benchmark.place_on_roofline`,
# :func:`triton_guide.benchmark.draw_key_masks`,
# :class:`triton_guide.benchmark.Benchmark`.
