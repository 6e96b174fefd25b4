"""Flash attention (FlashAttention-2 style): forward and backward, as models call it.

``softmax(q @ k^T * sm_scale) @ v`` for ``q`` of shape (batch, heads, num_queries,
head_dim) and ``k``, ``v`` of shape (batch, kv_heads, num_keys, head_dim), computed tile by
tile without ever holding the ``num_queries x num_keys`` score matrix in memory:

* grouped heads: ``heads`` is a multiple of ``kv_heads``, and query head ``h`` reads key
  and value head ``h // (heads // kv_heads)`` (grouped-query attention; multi-query when
  ``kv_heads`` is 1).
* masks, aligned bottom-right: with ``causal``, query ``i`` sees key ``j`` when
  ``j <= i + num_keys - num_queries`` (the last query sees every key, as when new queries
  are appended to a KV cache); a ``window`` W keeps only keys with
  ``j > i + num_keys - num_queries - W``. A query that sees no key gets zeros.
* forward: each program owns ``BLOCK_M`` query rows and streams over the keys and values
  it can see in blocks of ``BLOCK_N``, keeping a running row maximum ``m`` of the raw
  scores, a running normaliser ``l`` and an unnormalised output ``acc``; when a block
  raises the maximum, ``l`` and ``acc`` are rescaled by ``exp(sm_scale * (m_old - m_new))``.
  Blocks that every row sees whole skip the mask. It stores each row's ``m`` and
  ``log2(l)`` for the backward pass, and its log-sum-exp.
* decode (at most 16 queries): flash-decoding, in :mod:`triton_guide.attention_decode`.
* backward: softmax probabilities are recomputed from q, k and the stored ``m`` and
  ``log2(l)``. One kernel owns a block of keys of one key/value head and accumulates ``dk``
  and ``dv`` over every query head of its group and every query block; another owns a block
  of queries and accumulates ``dq`` over the key blocks; neither needs atomics.

The main kernels read their tiles of q, k, v and grad_out through tensor descriptors, which
Hopper GPUs serve with the TMA copy engine; their block sizes and the blocks each program
visits are in :mod:`triton_guide.attention_tiles`.

Differences from the paper: exponentials are base 2 (``exp2``, with ``log2(e)`` folded into
the scale), of raw scores minus their raw maximum (see :mod:`triton_guide.attention_decode`
for why).
Dropout and attention bias are not implemented.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .attention_decode import (
    attention_decode,
    check_scale,
    new_outputs,
    online_softmax_step,
    qk_scale_of,
    store_rows,
    uses_decode,
    visible,
    visible_keys,
)
from .attention_tiles import (
    autotune,
    descriptor,
    key_ranges,
    needs_int64_rows,
    query_ranges,
    tma_layout,
)
from .runtime import interpreting
from .launch import cdiv, fast_launch, next_power_of_2
from .library import Operator
from .precision import dot_input_precision
from .registry import register
from .validation import (
    check_bool,
    check_grid_axis,
    check_int,
    check_same_dtype,
    check_tensor,
    needs_int64_offsets,
)

MIN_HEAD_DIM, MAX_HEAD_DIM = 16, 256
# A probability this close to 1 (within 4 units in float32's last place) leaves the others
# a total of at most 2**-22: see attention_backward's SETTLE_ONE_HOT.
ONE_HOT = tl.constexpr(1.0 - 2.0 ** -22)


def attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
    sm_scale: float | None = None, window: int | None = None, return_lse: bool = False,
):
    """What :func:`attention` computes, written out in PyTorch (materialises the scores).

    Works in any floating dtype (float64 for checking) and is differentiable, the
    log-sum-exp included. Takes the same arguments as :func:`attention`, unchecked.
    """
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(q.shape[-1])
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)  # autograd sums the copies' gradients
    v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-2, -1)) * sm_scale
    seen = visible_keys(q.shape[-2], k.shape[-2], causal, window, q.device)
    # A row that sees no key gives 0 and log-sum-exp -inf. Its scores are left finite so
    # that neither the forward nor the backward computes -inf - (-inf).
    sees_any = seen.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~seen & sees_any, float("-inf"))
    out = (torch.softmax(scores, dim=-1) * sees_any) @ v
    if not return_lse:
        return out
    lse = torch.logsumexp(scores, dim=-1).masked_fill(~sees_any[:, 0], float("-inf"))
    return out, lse


@triton.jit
def _rows(desc, batch, head, first_row, BLOCK: tl.constexpr, BLOCK_D: tl.constexpr):
    """Rows ``first_row .. first_row + BLOCK`` of one (batch, head), zeros past the end."""
    return desc.load([batch, head, first_row, 0]).reshape(BLOCK, BLOCK_D)


@triton.jit
def _forward_block_loop(
    acc, row_sum, row_max,  # running output, normaliser and max (of raw scores) of the rows
    q, k_desc, v_desc, batch, kv_head, offs_m, qk_scale,
    start, end,  # key range to visit: [start, end), start a multiple of BLOCK_N
    num_keys, diagonal, window,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,  # hide the keys visible hides (blocks at the range's edges)
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    BLOCK_D: tl.constexpr = q.shape[1]
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(start, end, BLOCK_N):
        k = _rows(k_desc, batch, kv_head, start_n, BLOCK_N, BLOCK_D)
        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)  # unscaled
        if MASKED:
            keep = visible(offs_m[:, None], (start_n + offs_n)[None, :], num_keys, diagonal,
                            window, CAUSAL, WINDOW)
            scores = tl.where(keep, scores, -float("inf"))
        probs, correction, row_max, row_sum = online_softmax_step(
            scores, row_max, row_sum, qk_scale, MASKED)
        v = _rows(v_desc, batch, kv_head, start_n, BLOCK_N, BLOCK_D)
        acc = tl.dot(probs.to(v.dtype), v, acc * correction[:, None],
                     input_precision=DOT_PRECISION)
    return acc, row_sum, row_max


@autotune("forward")
@triton.jit
def attention_forward_kernel(
    q_desc, k_desc, v_desc,  # tensor descriptors over (batch, heads, seq, head_dim)
    out_ptr,  # (batch, heads, num_queries, HEAD_DIM), contiguous
    lse_ptr, max_ptr, log2sum_ptr,  # (batch * heads, num_queries) float32: see store_rows
    num_heads, group_size,  # query heads, and query heads per key/value head
    num_queries, num_keys, window, qk_scale,  # qk_scale = sm_scale * log2(e)
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,  # HEAD_DIM rounded up to a power of two
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
    DOT_PRECISION: tl.constexpr,  # tl.dot's input_precision (float32 inputs): see dot_precision
    BLOCK_M: tl.constexpr,  # query rows per program
    BLOCK_N: tl.constexpr,  # keys per step; BLOCK_M is a multiple of it
    INT64_OFFSETS: tl.constexpr = False,  # row * HEAD_DIM can pass 2**31 - 1: use int64
):
    block_index = tl.program_id(0)
    if CAUSAL:
        # Blocks near the end of the queries have the most keys to visit: start them first.
        block_index = tl.num_programs(0) - 1 - block_index
    batch_head = tl.program_id(1)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    kv_head = head // group_size
    first_row = block_index * BLOCK_M
    offs_m = first_row + tl.arange(0, BLOCK_M)
    q = _rows(q_desc, batch, head, first_row, BLOCK_M, BLOCK_D)
    diagonal = num_keys - num_queries

    row_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    lo, full_lo, full_hi, hi = key_ranges(first_row, num_keys, diagonal, window, BLOCK_M,
                                           BLOCK_N, CAUSAL, WINDOW)
    # The window's leading edge, the keys every row sees, then the causal diagonal and the
    # last partial block of keys (the descriptor reads its missing rows as zeros, which
    # would score 0).
    acc, row_sum, row_max = _forward_block_loop(
        acc, row_sum, row_max, q, k_desc, v_desc, batch, kv_head, offs_m, qk_scale,
        lo, full_lo, num_keys, diagonal, window, BLOCK_N, True, CAUSAL, WINDOW, DOT_PRECISION)
    acc, row_sum, row_max = _forward_block_loop(
        acc, row_sum, row_max, q, k_desc, v_desc, batch, kv_head, offs_m, qk_scale,
        full_lo, full_hi, num_keys, diagonal, window, BLOCK_N, False, CAUSAL, WINDOW,
        DOT_PRECISION)
    acc, row_sum, row_max = _forward_block_loop(
        acc, row_sum, row_max, q, k_desc, v_desc, batch, kv_head, offs_m, qk_scale,
        full_hi, hi, num_keys, diagonal, window, BLOCK_N, True, CAUSAL, WINDOW, DOT_PRECISION)

    if INT64_OFFSETS:
        offs_m = offs_m.to(tl.int64)
    head_rows = batch_head.to(tl.int64) * num_queries  # this head's first row
    store_rows(out_ptr, lse_ptr, max_ptr, log2sum_ptr, acc, row_sum, row_max, head_rows,
                offs_m, offs_m < num_queries, qk_scale, HEAD_DIM)


@triton.jit
def attention_backward_preprocess_kernel(
    out_ptr, grad_out_ptr,  # (batch * heads * num_queries, HEAD_DIM), contiguous
    grad_lse_ptr,  # (batch * heads * num_queries) float32, the log-sum-exp's gradient
    delta_ptr,  # (batch * heads * num_queries) float32
    num_rows,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
    HAS_GRAD_LSE: tl.constexpr,
    INT64_OFFSETS: tl.constexpr = False,
):
    # delta_i = sum_d out[i, d] * grad_out[i, d] - grad_lse[i], the row term of the softmax
    # gradient (d lse_i / d score_ij is the probability p_ij, so grad_lse enters there).
    block_index = tl.program_id(0)
    if INT64_OFFSETS:
        block_index = block_index.to(tl.int64)
    offs_m = block_index * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m[:, None] < num_rows) & (offs_d[None, :] < HEAD_DIM)
    offsets = offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    out = tl.load(out_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    grad_out = tl.load(grad_out_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    delta = tl.sum(out * grad_out, axis=1)
    if HAS_GRAD_LSE:
        delta -= tl.load(grad_lse_ptr + offs_m, mask=offs_m < num_rows, other=0.0)
    tl.store(delta_ptr + offs_m, delta, mask=offs_m < num_rows)


@triton.jit
def _dkdv_block_loop(
    dk, dv, k, v,  # accumulators and this program's keys and values, (BLOCK_N, BLOCK_D)
    q_desc, do_desc, max_base, log2sum_base, delta_base, batch, head, offs_n, qk_scale,
    start, end,  # query range to visit, start a multiple of BLOCK_M
    num_queries, num_keys, diagonal, window, BLOCK_M: tl.constexpr, MASKED: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, DOT_PRECISION: tl.constexpr,
    SETTLE_ONE_HOT: tl.constexpr,
):
    # Query rows past num_queries load as zeros (q, grad_out, delta) with statistics
    # (0, +inf), so their probabilities are 0 and they add exactly zero to dk and dv.
    BLOCK_D: tl.constexpr = k.shape[1]
    offs_m0 = tl.arange(0, BLOCK_M)
    for start_m in range(start, end, BLOCK_M):
        offs_m = start_m + offs_m0
        row_mask = offs_m < num_queries
        q = _rows(q_desc, batch, head, start_m, BLOCK_M, BLOCK_D)
        row_max = tl.load(max_base + offs_m, mask=row_mask, other=0.0)
        log2_sum = tl.load(log2sum_base + offs_m, mask=row_mask, other=float("inf"))
        # Work with transposed tiles (keys along rows) so the results land in dk, dv rows.
        scores_t = tl.dot(k, tl.trans(q), input_precision=DOT_PRECISION)
        if MASKED:
            keep = visible(offs_m[None, :], offs_n[:, None], num_keys, diagonal, window,
                            CAUSAL, WINDOW)
            scores_t = tl.where(keep, scores_t, -float("inf"))
        probs_t = tl.math.exp2((scores_t - row_max[None, :]) * qk_scale - log2_sum[None, :])
        do = _rows(do_desc, batch, head, start_m, BLOCK_M, BLOCK_D)
        dv = tl.dot(probs_t.to(do.dtype), do, dv, input_precision=DOT_PRECISION)
        delta = tl.load(delta_base + offs_m, mask=row_mask, other=0.0)
        dprobs_t = tl.dot(v, tl.trans(do), input_precision=DOT_PRECISION)
        dscores_t = probs_t * (dprobs_t - delta[None, :])
        if SETTLE_ONE_HOT:
            dscores_t = tl.where(probs_t >= ONE_HOT, 0.0, dscores_t)
        dk = tl.dot(dscores_t.to(q.dtype), q, dk, input_precision=DOT_PRECISION)
    return dk, dv


@autotune("dkdv")
@triton.jit
def attention_backward_dkdv_kernel(
    q_desc, k_desc, v_desc, do_desc,  # descriptors over (batch, heads, seq, head_dim)
    max_ptr, log2sum_ptr, delta_ptr,  # (batch * heads, num_queries) float32
    dk_ptr, dv_ptr,  # (batch, kv_heads, num_keys, HEAD_DIM), contiguous
    num_kv_heads, group_size, num_queries, num_keys, window, qk_scale, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr,
    WINDOW: tl.constexpr, DOT_PRECISION: tl.constexpr,
    SETTLE_ONE_HOT: tl.constexpr,  # see attention_backward
    BLOCK_M: tl.constexpr,  # query rows per step
    BLOCK_N: tl.constexpr,  # keys per program; a multiple of BLOCK_M
    INT64_OFFSETS: tl.constexpr = False,
):
    block_index = tl.program_id(0)
    batch_kv_head = tl.program_id(1)
    batch = batch_kv_head // num_kv_heads
    kv_head = batch_kv_head % num_kv_heads
    diagonal = num_keys - num_queries

    first_key = block_index * BLOCK_N
    offs_n = first_key + tl.arange(0, BLOCK_N)
    k = _rows(k_desc, batch, kv_head, first_key, BLOCK_N, BLOCK_D)
    v = _rows(v_desc, batch, kv_head, first_key, BLOCK_N, BLOCK_D)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    lo, full_lo, full_hi, hi = query_ranges(first_key, num_queries, diagonal, window,
                                             BLOCK_N, BLOCK_M, CAUSAL, WINDOW)
    # Every query head of the group reads these keys: their gradients add up here.
    for member in range(group_size):
        head = kv_head * group_size + member
        head_rows = (batch * num_kv_heads * group_size + head).to(tl.int64) * num_queries
        max_base = max_ptr + head_rows
        log2sum_base = log2sum_ptr + head_rows
        delta_base = delta_ptr + head_rows
        # Queries on the causal diagonal, those that see the whole block, those at the
        # window's trailing edge.
        dk, dv = _dkdv_block_loop(
            dk, dv, k, v, q_desc, do_desc, max_base, log2sum_base, delta_base, batch, head,
            offs_n, qk_scale, lo, full_lo, num_queries, num_keys, diagonal, window, BLOCK_M,
            True, CAUSAL, WINDOW, DOT_PRECISION, SETTLE_ONE_HOT)
        dk, dv = _dkdv_block_loop(
            dk, dv, k, v, q_desc, do_desc, max_base, log2sum_base, delta_base, batch, head,
            offs_n, qk_scale, full_lo, full_hi, num_queries, num_keys, diagonal, window,
            BLOCK_M, False, CAUSAL, WINDOW, DOT_PRECISION, SETTLE_ONE_HOT)
        dk, dv = _dkdv_block_loop(
            dk, dv, k, v, q_desc, do_desc, max_base, log2sum_base, delta_base, batch, head,
            offs_n, qk_scale, full_hi, hi, num_queries, num_keys, diagonal, window, BLOCK_M,
            True, CAUSAL, WINDOW, DOT_PRECISION, SETTLE_ONE_HOT)

    if INT64_OFFSETS:
        offs_n = offs_n.to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    head_keys = batch_kv_head.to(tl.int64) * num_keys
    offsets = head_keys * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    tile_mask = (offs_n[:, None] < num_keys) & (offs_d[None, :] < HEAD_DIM)
    tl.store(dk_ptr + offsets, (dk * sm_scale).to(dk_ptr.dtype.element_ty), mask=tile_mask)
    tl.store(dv_ptr + offsets, dv.to(dv_ptr.dtype.element_ty), mask=tile_mask)


@triton.jit
def _dq_block_loop(
    dq, q, do, row_max, log2_sum, delta,  # accumulator and this program's rows
    k_desc, v_desc, batch, kv_head, offs_m, qk_scale,
    start, end,  # key range to visit, start a multiple of BLOCK_N
    num_keys, diagonal, window, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, DOT_PRECISION: tl.constexpr,
    SETTLE_ONE_HOT: tl.constexpr,
):
    BLOCK_D: tl.constexpr = q.shape[1]
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in range(start, end, BLOCK_N):
        offs_n = start_n + offs_n0
        k = _rows(k_desc, batch, kv_head, start_n, BLOCK_N, BLOCK_D)
        v = _rows(v_desc, batch, kv_head, start_n, BLOCK_N, BLOCK_D)
        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)
        if MASKED:
            # Also hides zero keys past the end, which would score 0, and exp2 of that can
            # overflow.
            keep = visible(offs_m[:, None], offs_n[None, :], num_keys, diagonal, window,
                            CAUSAL, WINDOW)
            scores = tl.where(keep, scores, -float("inf"))
        probs = tl.math.exp2((scores - row_max[:, None]) * qk_scale - log2_sum[:, None])
        dprobs = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)
        dscores = probs * (dprobs - delta[:, None])
        if SETTLE_ONE_HOT:
            dscores = tl.where(probs >= ONE_HOT, 0.0, dscores)
        dq = tl.dot(dscores.to(k.dtype), k, dq, input_precision=DOT_PRECISION)
    return dq


@autotune("dq")
@triton.jit
def attention_backward_dq_kernel(
    q_desc, k_desc, v_desc, do_desc,  # descriptors over (batch, heads, seq, head_dim)
    max_ptr, log2sum_ptr, delta_ptr,  # (batch * heads, num_queries) float32
    dq_ptr,  # (batch, heads, num_queries, HEAD_DIM), contiguous
    num_heads, group_size, num_queries, num_keys, window, qk_scale, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr,
    WINDOW: tl.constexpr, DOT_PRECISION: tl.constexpr,
    SETTLE_ONE_HOT: tl.constexpr,  # see attention_backward
    BLOCK_M: tl.constexpr,  # query rows per program; a multiple of BLOCK_N
    BLOCK_N: tl.constexpr,  # keys per step
    INT64_OFFSETS: tl.constexpr = False,
):
    block_index = tl.program_id(0)
    batch_head = tl.program_id(1)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    kv_head = head // group_size
    head_rows = batch_head.to(tl.int64) * num_queries  # this head's first row
    diagonal = num_keys - num_queries

    first_row = block_index * BLOCK_M
    offs_m = first_row + tl.arange(0, BLOCK_M)
    row_mask = offs_m < num_queries
    q = _rows(q_desc, batch, head, first_row, BLOCK_M, BLOCK_D)
    do = _rows(do_desc, batch, head, first_row, BLOCK_M, BLOCK_D)
    row_max = tl.load(max_ptr + head_rows + offs_m, mask=row_mask, other=0.0)
    log2_sum = tl.load(log2sum_ptr + head_rows + offs_m, mask=row_mask, other=float("inf"))
    delta = tl.load(delta_ptr + head_rows + offs_m, mask=row_mask, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)

    lo, full_lo, full_hi, hi = key_ranges(first_row, num_keys, diagonal, window, BLOCK_M,
                                           BLOCK_N, CAUSAL, WINDOW)
    dq = _dq_block_loop(dq, q, do, row_max, log2_sum, delta, k_desc, v_desc, batch, kv_head,
                        offs_m, qk_scale, lo, full_lo, num_keys, diagonal, window, BLOCK_N,
                        True, CAUSAL, WINDOW, DOT_PRECISION, SETTLE_ONE_HOT)
    dq = _dq_block_loop(dq, q, do, row_max, log2_sum, delta, k_desc, v_desc, batch, kv_head,
                        offs_m, qk_scale, full_lo, full_hi, num_keys, diagonal, window, BLOCK_N,
                        False, CAUSAL, WINDOW, DOT_PRECISION, SETTLE_ONE_HOT)
    dq = _dq_block_loop(dq, q, do, row_max, log2_sum, delta, k_desc, v_desc, batch, kv_head,
                        offs_m, qk_scale, full_hi, hi, num_keys, diagonal, window, BLOCK_N,
                        True, CAUSAL, WINDOW, DOT_PRECISION, SETTLE_ONE_HOT)

    if INT64_OFFSETS:
        offs_m = offs_m.to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    dq_ptrs = dq_ptr + head_rows * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    tile_mask = row_mask[:, None] & (offs_d[None, :] < HEAD_DIM)
    tl.store(dq_ptrs, (dq * sm_scale).to(dq_ptr.dtype.element_ty), mask=tile_mask)


def attention_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float,
    window: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Launch the forward kernel (or, for few queries, flash-decoding); return the output,
    each row's log-sum-exp (natural log), and the statistics the backward needs: each row's
    raw score maximum and the log2 of its normaliser, stacked in one (2, batch, heads,
    num_queries) float32 tensor. ``window`` 0 means no window."""
    if uses_decode(q, k):
        return attention_decode(q, k, v, causal, sm_scale, window)
    batch, heads, num_queries, head_dim = q.shape
    kv_heads, num_keys = k.shape[1], k.shape[2]
    out, lse, stats = new_outputs(q)
    block_d = next_power_of_2(head_dim)
    # The autotuner's pre-hook sets each descriptor's tile to the configuration's blocks.
    q_desc, k_desc, v_desc = (descriptor(tma_layout(t), 1, block_d) for t in (q, k, v))

    def grid(meta):
        return (cdiv(num_queries, meta["BLOCK_M"]), batch * heads)

    fast_launch(attention_forward_kernel)[grid](
        q_desc, k_desc, v_desc, out, lse, stats[0], stats[1], heads, heads // kv_heads,
        num_queries, num_keys, window, qk_scale_of(sm_scale),
        HEAD_DIM=head_dim, BLOCK_D=block_d, CAUSAL=causal, WINDOW=window > 0,
        DOT_PRECISION=dot_input_precision(q.dtype),
        INT64_OFFSETS=needs_int64_rows(num_queries, head_dim),
    )
    return out, lse, stats


def attention_backward(
    grad_out: torch.Tensor, grad_lse: torch.Tensor | None, q: torch.Tensor, k: torch.Tensor,
    v: torch.Tensor, out: torch.Tensor, stats: torch.Tensor, causal: bool, sm_scale: float,
    window: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Launch the three backward kernels; return the gradients of q, k and v
    (``grad_lse``: the log-sum-exp's gradient, or None)."""
    batch, heads, num_queries, head_dim = q.shape
    kv_heads, num_keys = k.shape[1], k.shape[2]
    block_d = next_power_of_2(head_dim)
    grad_out = grad_out.contiguous()
    delta = torch.empty((batch * heads, num_queries), dtype=torch.float32, device=q.device)
    if grad_lse is not None:
        grad_lse = grad_lse.to(torch.float32).contiguous()
    # Rows per program of the delta kernel: 64 rows of out and grad_out are 32 KiB at
    # head_dim 128 in float16, enough loads in flight per program for a kernel that only
    # streams them once (16 keeps the interpreter quick). Not tuned.
    preprocess_block = (64 if head_dim <= 128 else 32) if not interpreting() else 16
    num_rows = batch * heads * num_queries
    fast_launch(attention_backward_preprocess_kernel)[(cdiv(num_rows, preprocess_block),)](
        out, grad_out, grad_lse if grad_lse is not None else delta, delta, num_rows,
        HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=preprocess_block,
        HAS_GRAD_LSE=grad_lse is not None,
        INT64_OFFSETS=needs_int64_offsets(out, grad_out, largest_index=(num_rows + 64) * head_dim),
    )
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    # One descriptor each for q, k, v and grad_out, shared by both kernels; the pre-hook
    # sets their tiles before each launch.
    descriptors = [descriptor(tma_layout(t), 1, block_d) for t in (q, k, v, grad_out)]
    # dS = p * (dP - delta), and dq, dk are sm_scale times sums of it. Where a row's
    # softmax is one-hot (p rounds to 1 for one key), the exact bracket is at most a few
    # units in float32's last place of dP, but dP and delta are computed in different
    # orders, so the bracket comes out as rounding noise of that size: negligible times a
    # scale up to 1, but 1e20 times it swamps the answer (about 0) or overflows float16.
    # Above scale 1, such entries are set to 0, which is within that noise of the exact
    # value; at or below it, the kernels skip the test.
    common = dict(HEAD_DIM=head_dim, BLOCK_D=block_d, CAUSAL=causal, WINDOW=window > 0,
                  DOT_PRECISION=dot_input_precision(q.dtype), SETTLE_ONE_HOT=sm_scale > 1.0,
                  INT64_OFFSETS=needs_int64_rows(max(num_queries, num_keys), head_dim))
    qk_scale = qk_scale_of(sm_scale)

    def dkdv_grid(meta):
        return (cdiv(num_keys, meta["BLOCK_N"]), batch * kv_heads)

    fast_launch(attention_backward_dkdv_kernel)[dkdv_grid](
        *descriptors, stats[0], stats[1], delta, dk, dv, kv_heads, heads // kv_heads,
        num_queries, num_keys, window, qk_scale, sm_scale, **common,
    )

    def dq_grid(meta):
        return (cdiv(num_queries, meta["BLOCK_M"]), batch * heads)

    fast_launch(attention_backward_dq_kernel)[dq_grid](
        *descriptors, stats[0], stats[1], delta, dq, heads, heads // kv_heads,
        num_queries, num_keys, window, qk_scale, sm_scale, **common,
    )
    return dq, dk, dv


def _fake_forward(q, k, v, causal, sm_scale, window=0):
    return new_outputs(q)


def _fake_backward(grad_out, grad_lse, q, k, v, out, stats, causal, sm_scale, window=0):
    return tuple(torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))


def _save_for_backward(ctx, inputs, output):
    q, k, v, causal, sm_scale, *window = inputs
    out, lse, stats = output
    ctx.save_for_backward(q, k, v, out, stats)
    ctx.causal = causal
    ctx.sm_scale = sm_scale
    ctx.window = window[0] if window else 0
    ctx.mark_non_differentiable(stats)


def _grad(ctx, grad_out, grad_lse, grad_stats):
    # stats is internal, never handed to the caller: its gradient is always None.
    q, k, v, out, stats = ctx.saved_tensors
    if grad_out is None:  # only the log-sum-exp was used
        grad_out = torch.zeros_like(out)
    dq, dk, dv = _attention_backward(grad_out, grad_lse, q, k, v, out, stats, ctx.causal,
                                     ctx.sm_scale, ctx.window)
    return dq, dk, dv, None, None, None


# Autograd and torch.compile: see triton_guide.library. The backward kernels have no
# derivative of their own: a second backward through them raises.
_attention_backward = Operator("attention_backward", attention_backward,
                               fake=_fake_backward, refuse_name="attention")
_attention_forward = Operator("attention_forward", attention_forward, fake=_fake_forward,
                              backward=_grad, setup_context=_save_for_backward)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
    sm_scale: float | None = None, window: int | None = None, return_lse: bool = False,
):
    """``softmax(q @ k^T * sm_scale) @ v`` by flash attention, differentiable once.

    ``q``: (batch, heads, num_queries, head_dim); ``k`` and ``v``: (batch, kv_heads,
    num_keys, head_dim), with ``heads`` a multiple of ``kv_heads`` (query head ``h`` uses
    key/value head ``h // (heads // kv_heads)``: grouped-query attention, multi-query with
    one key/value head). Any ``num_queries`` and ``num_keys``; ``head_dim`` from 16 to 256;
    one floating dtype; any strides (a layout TMA cannot read, such as rows that are not a
    multiple of 16 bytes, costs a copy of that input). The gradients of ``k`` and ``v``
    are summed over the query heads that share them.

    ``causal`` (a bool, numpy's included): mask aligned bottom-right, as in FlashAttention
    2.1+ and ``torch.nn.attention.bias.causal_lower_right``: query ``i`` sees key ``j`` when
    ``j <= i + num_keys - num_queries``, so the last query sees every key (new queries
    appended to a KV cache). With more queries than keys the first
    ``num_queries - num_keys`` queries see no key; such a row of the output is 0.

    ``window`` (a positive int, with ``causal=True`` only): a sliding window. Query ``i``
    also hides key ``j`` unless ``j > i + num_keys - num_queries - window``, so each query
    sees at most ``window`` keys, ending at its own position (itself included), as in
    Mistral's sliding-window attention.

    ``sm_scale`` (a positive real number, at most about 2.4e38) defaults to
    ``1 / sqrt(head_dim)``. Any such scale gives a finite output and finite gradients;
    scales below about 8e-39 are computed as that (the softmax is uniform to float32
    precision either way). With 16-bit inputs the gradients' error grows with the scale
    where the softmax is neither one-hot nor uniform: the backward uses the output rounded
    to the input dtype, as FlashAttention does, and the scale multiplies that rounding.

    ``return_lse``: also return each row's log-sum-exp ``log(sum_j exp(sm_scale * q_i . k_j))``
    in the natural log, float32, shape (batch, heads, num_queries); -inf for a row that sees
    no key, +inf where it exceeds float32's range. It is differentiable too.

    Float32 inputs follow ``torch.get_float32_matmul_precision()`` on a GPU: "highest" (the
    default) multiplies in tf32x3 (three tf32 products per product, float32 accuracy),
    "high" and "medium" in tf32 (10-bit mantissas: faster, errors of order 1e-3). Each
    setting compiles its own kernels. With fewer than 17 queries the forward splits the keys
    across programs (flash-decoding). A second derivative (``create_graph=True``, then
    backward through the gradient) raises a RuntimeError.
    """
    q = check_tensor("q", q, ndim=4)
    k = check_tensor("k", k, ndim=4)
    v = check_tensor("v", v, ndim=4)
    check_same_dtype("q", q, "k", k)
    check_same_dtype("q", q, "v", v)
    batch, heads, _, head_dim = q.shape
    if k.shape != v.shape:
        raise ValueError(
            f"k and v must have the same shape (batch, kv_heads, num_keys, head_dim), got "
            f"{tuple(k.shape)} and {tuple(v.shape)}"
        )
    if k.shape[0] != batch or k.shape[3] != head_dim:
        raise ValueError(
            f"k must have q's batch size and head_dim, (batch, kv_heads, num_keys, head_dim) "
            f"= ({batch}, *, *, {head_dim}); got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if heads % k.shape[1]:
        raise ValueError(
            f"q's number of heads ({heads}) must be a multiple of k's and v's ({k.shape[1]}): "
            f"each key/value head serves a group of consecutive query heads"
        )
    if not MIN_HEAD_DIM <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(
            f"head_dim (q.shape[-1]) must be between {MIN_HEAD_DIM} and {MAX_HEAD_DIM}, "
            f"got {head_dim}"
        )
    check_grid_axis(
        "q", batch * heads,
        "one program column per (batch, head) pair: split the batch into smaller calls",
    )
    causal = check_bool("causal", causal)
    return_lse = check_bool("return_lse", return_lse)
    if window is None:
        window = 0
    else:
        window = check_int("window", window, expected="an int or None")
        if window < 1:
            raise ValueError(f"window must be a positive number of keys, or None; got {window}")
        if not causal:
            raise ValueError(
                "window is supported with causal=True only (each query sees the `window` "
                "keys ending at its own position); got causal=False"
            )
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    sm_scale = check_scale(sm_scale)
    out, lse, _ = _attention_forward(q, k, v, causal, sm_scale, window)
    return (out, lse) if return_lse else out


def _example(device):
    # Grouped heads (4 query heads on 2), fewer queries than keys, causal bottom-right.
    q = torch.randn(1, 4, 13, 16, device=device)
    k, v = (torch.randn(1, 2, 21, 16, device=device) for _ in range(2))
    return (q, k, v), {"causal": True}


register("attention", attention, attention_reference, example=_example,
         differentiable=True, compile_safe=True)
