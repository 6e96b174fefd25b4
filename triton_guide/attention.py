"""Flash attention (FlashAttention-2 style): forward and backward, causal or not.

``softmax(q @ k^T * sm_scale) @ v`` for ``q, k, v`` of shape (batch, heads, seq, head_dim),
computed tile by tile without ever holding the ``seq x seq`` score matrix in memory:

* forward: each program owns ``BLOCK_M`` query rows and streams over the keys and values in
  blocks of ``BLOCK_N``, keeping a running row maximum ``m``, running normaliser ``l`` and an
  unnormalised output ``acc``; when a block raises the maximum, ``l`` and ``acc`` are rescaled
  by ``exp(m_old - m_new)``. It also stores each row's log-sum-exp for the backward pass.
* backward: softmax probabilities are recomputed from q, k and that log-sum-exp. One kernel
  owns a block of keys and accumulates ``dk`` and ``dv`` over all query blocks; another owns a
  block of queries and accumulates ``dq`` over all key blocks; neither needs atomics.

Differences from the paper: exponentials are base 2 (``exp2``, with ``log2(e)`` folded into
the scale), which is what the hardware computes natively; the causal mask is aligned top-left
(query i sees keys 0..i), as in ``torch.nn.functional.scaled_dot_product_attention``. q, k and
v must have the same shape: cross-attention with a different key length, dropout, and
attention bias are not implemented.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .runtime import interpreting
from .launch import cdiv, fast_launch, next_power_of_2
from .library import refuse_double_backward, through_operator
from .validation import (
    check_bool,
    check_grid_axis,
    check_positive_number,
    check_same_dtype,
    check_same_shape,
    check_tensor,
    needs_int64_offsets,
)

MIN_HEAD_DIM, MAX_HEAD_DIM = 16, 128


def attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
    sm_scale: float | None = None,
) -> torch.Tensor:
    """What :func:`attention` computes, written out in PyTorch (materialises the scores)."""
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * sm_scale
    if causal:
        seq_len = q.shape[-2]
        future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _config(block_m: int, block_n: int, stages: int, warps: int) -> triton.Config:
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n}, num_stages=stages, num_warps=warps)


def _forward_configs() -> list[triton.Config]:
    if interpreting():
        return [_config(32, 16, 1, 4)]
    return [
        _config(128, 64, 3, 4),
        _config(128, 64, 4, 8),
        _config(128, 128, 3, 8),
        _config(64, 64, 3, 4),
        _config(64, 32, 2, 4),  # small enough for float32 at head_dim 128
    ]


def _dkdv_configs() -> list[triton.Config]:
    # BLOCK_N keys per program, stepping over queries BLOCK_M at a time (BLOCK_N a multiple
    # of BLOCK_M).
    if interpreting():
        return [_config(16, 16, 1, 4)]
    return [
        _config(32, 128, 3, 4),
        _config(64, 128, 3, 8),
        _config(32, 64, 3, 4),
        _config(32, 32, 2, 4),
    ]


def _dq_configs() -> list[triton.Config]:
    # BLOCK_M queries per program, stepping over keys BLOCK_N at a time (BLOCK_M a multiple
    # of BLOCK_N).
    if interpreting():
        return [_config(16, 16, 1, 4)]
    return [
        _config(128, 32, 3, 4),
        _config(128, 64, 3, 8),
        _config(64, 32, 3, 4),
        _config(32, 32, 2, 4),
    ]


@triton.jit
def _forward_block_loop(
    acc, row_sum, row_max,  # running output, normaliser and max (base 2) of the query rows
    q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
    offs_m, offs_d, seq_len, qk_scale,
    start, end,  # key range to visit: [start, end), start a multiple of BLOCK_N
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL_MASK: tl.constexpr,  # hide keys after the query (blocks on the diagonal)
    BOUNDS_MASK: tl.constexpr,  # hide keys at or past seq_len (the last, partial block)
    INT64_OFFSETS: tl.constexpr = False,  # offsets can pass 2**31 - 1: compute them in int64
):
    offs_n = tl.arange(0, BLOCK_N)
    if INT64_OFFSETS:
        offs_n = offs_n.to(tl.int64)
    d_mask = offs_d < HEAD_DIM
    for start_n in range(start, end, BLOCK_N):
        cols = start_n + offs_n
        kv_mask = (cols[:, None] < seq_len) & d_mask[None, :]
        k = tl.load(k_base + cols[:, None] * stride_kn + offs_d[None, :] * stride_kd, mask=kv_mask, other=0.0)
        scores = tl.dot(q, tl.trans(k)) * qk_scale  # (BLOCK_M, BLOCK_N), in log2 units
        if CAUSAL_MASK:
            scores = tl.where(offs_m[:, None] >= cols[None, :], scores, -float("inf"))
        if BOUNDS_MASK:
            scores = tl.where(cols[None, :] < seq_len, scores, -float("inf"))
        new_max = tl.maximum(row_max, tl.max(scores, axis=1))
        probs = tl.math.exp2(scores - new_max[:, None])
        correction = tl.math.exp2(row_max - new_max)  # 0 on the first block (row_max = -inf)
        row_sum = row_sum * correction + tl.sum(probs, axis=1)
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=kv_mask, other=0.0)
        acc = tl.dot(probs.to(v.dtype), v, acc * correction[:, None])
        row_max = new_max
    return acc, row_sum, row_max


@triton.autotune(configs=_forward_configs(), key=["seq_len", "HEAD_DIM", "CAUSAL"])
@triton.jit
def attention_forward_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr,
    lse_ptr,  # (batch * heads, seq_len) float32: log2-sum-exp of each row's scaled scores
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_on, stride_od,
    num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,  # HEAD_DIM rounded up to a power of two
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows per program
    BLOCK_N: tl.constexpr,  # keys per step; BLOCK_M is a multiple of it
    INT64_OFFSETS: tl.constexpr = False,  # offsets within a head can pass 2**31 - 1: use int64
):
    block_index = tl.program_id(0)
    if CAUSAL:
        # Blocks near the end of the sequence have the most keys to visit: start them first.
        block_index = tl.num_programs(0) - 1 - block_index
    if INT64_OFFSETS:
        block_index = block_index.to(tl.int64)
    batch_head = tl.program_id(1)
    batch = (batch_head // num_heads).to(tl.int64)
    head = (batch_head % num_heads).to(tl.int64)
    q_base = q_ptr + batch * stride_qb + head * stride_qh
    k_base = k_ptr + batch * stride_kb + head * stride_kh
    v_base = v_ptr + batch * stride_vb + head * stride_vh
    out_base = out_ptr + batch * stride_ob + head * stride_oh

    first_row = block_index * BLOCK_M
    offs_m = first_row + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    if INT64_OFFSETS:
        offs_d = offs_d.to(tl.int64)
    row_mask = offs_m < seq_len
    tile_mask = row_mask[:, None] & (offs_d < HEAD_DIM)[None, :]
    q = tl.load(q_base + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd, mask=tile_mask, other=0.0)

    qk_scale = sm_scale * 1.4426950408889634  # fold log2(e) in once: exp2 replaces exp
    row_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    if CAUSAL:
        # Keys before this block of queries are visible to every row in it: no mask needed.
        acc, row_sum, row_max = _forward_block_loop(
            acc, row_sum, row_max, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, offs_d, seq_len, qk_scale, 0, first_row,
            HEAD_DIM, BLOCK_N, CAUSAL_MASK=False, BOUNDS_MASK=False, INT64_OFFSETS=INT64_OFFSETS,
        )
        # The diagonal block: each row sees the keys up to its own position.
        diagonal_end = tl.minimum(first_row + BLOCK_M, seq_len)
        acc, row_sum, row_max = _forward_block_loop(
            acc, row_sum, row_max, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, offs_d, seq_len, qk_scale, first_row, diagonal_end,
            HEAD_DIM, BLOCK_N, CAUSAL_MASK=True, BOUNDS_MASK=True, INT64_OFFSETS=INT64_OFFSETS,
        )
    else:
        full_end = (seq_len // BLOCK_N) * BLOCK_N
        acc, row_sum, row_max = _forward_block_loop(
            acc, row_sum, row_max, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, offs_d, seq_len, qk_scale, 0, full_end,
            HEAD_DIM, BLOCK_N, CAUSAL_MASK=False, BOUNDS_MASK=False, INT64_OFFSETS=INT64_OFFSETS,
        )
        # At most one partial block of keys remains past the last full one.
        acc, row_sum, row_max = _forward_block_loop(
            acc, row_sum, row_max, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, offs_d, seq_len, qk_scale, full_end, seq_len,
            HEAD_DIM, BLOCK_N, CAUSAL_MASK=False, BOUNDS_MASK=True, INT64_OFFSETS=INT64_OFFSETS,
        )

    acc = acc / row_sum[:, None]
    tl.store(lse_ptr + batch_head * seq_len + offs_m, row_max + tl.math.log2(row_sum), mask=row_mask)
    out_ptrs = out_base + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=tile_mask)


@triton.jit
def attention_backward_preprocess_kernel(
    out_ptr, grad_out_ptr, delta_ptr,  # out and grad_out contiguous; delta (batch*heads, seq)
    seq_len,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
    INT64_OFFSETS: tl.constexpr = False,
):
    # delta_i = sum_d out[i, d] * grad_out[i, d], the row term of the softmax gradient.
    block_index = tl.program_id(0)
    if INT64_OFFSETS:
        block_index = block_index.to(tl.int64)
    batch_head = tl.program_id(1).to(tl.int64)
    offs_m = block_index * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    if INT64_OFFSETS:
        offs_d = offs_d.to(tl.int64)
    mask = (offs_m[:, None] < seq_len) & (offs_d[None, :] < HEAD_DIM)
    offsets = batch_head * seq_len * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    out = tl.load(out_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    grad_out = tl.load(grad_out_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(delta_ptr + batch_head * seq_len + offs_m, tl.sum(out * grad_out, axis=1), mask=offs_m < seq_len)


@triton.jit
def _dkdv_block_loop(
    dk, dv, k, v,
    q_base, do_base, lse_base, delta_base, stride_qn, stride_qd, stride_don, stride_dod,
    offs_n, offs_d, seq_len, qk_scale,
    start, end,  # query range to visit, start a multiple of BLOCK_M
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, CAUSAL_MASK: tl.constexpr,
    INT64_OFFSETS: tl.constexpr = False,
):
    # Query rows past seq_len load as zeros (q, grad_out, lse and delta), so they add exactly
    # zero to dk and dv: no bounds mask is needed here.
    offs_m0 = tl.arange(0, BLOCK_M)
    if INT64_OFFSETS:
        offs_m0 = offs_m0.to(tl.int64)
    d_mask = offs_d < HEAD_DIM
    for start_m in range(start, end, BLOCK_M):
        offs_m = start_m + offs_m0
        row_mask = offs_m < seq_len
        tile_mask = row_mask[:, None] & d_mask[None, :]
        q = tl.load(q_base + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd, mask=tile_mask, other=0.0)
        lse = tl.load(lse_base + offs_m, mask=row_mask, other=0.0)
        # Work with transposed tiles (keys along rows) so the results land in dk, dv rows.
        scores_t = tl.dot(k, tl.trans(q)) * qk_scale
        if CAUSAL_MASK:
            scores_t = tl.where(offs_m[None, :] >= offs_n[:, None], scores_t, -float("inf"))
        probs_t = tl.math.exp2(scores_t - lse[None, :])
        do = tl.load(do_base + offs_m[:, None] * stride_don + offs_d[None, :] * stride_dod, mask=tile_mask, other=0.0)
        dv = tl.dot(probs_t.to(do.dtype), do, dv)
        delta = tl.load(delta_base + offs_m, mask=row_mask, other=0.0)
        dprobs_t = tl.dot(v, tl.trans(do))
        dscores_t = probs_t * (dprobs_t - delta[None, :])
        dk = tl.dot(dscores_t.to(q.dtype), q, dk)
    return dk, dv


@triton.autotune(configs=_dkdv_configs(), key=["seq_len", "HEAD_DIM", "CAUSAL"])
@triton.jit
def attention_backward_dkdv_kernel(
    q_ptr, k_ptr, v_ptr, grad_out_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_don, stride_dod,
    stride_dkb, stride_dkh, stride_dkn, stride_dkd,  # dk and dv share one layout
    num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows per step
    BLOCK_N: tl.constexpr,  # keys per program; a multiple of BLOCK_M
    INT64_OFFSETS: tl.constexpr = False,
):
    block_index = tl.program_id(0)
    if INT64_OFFSETS:
        block_index = block_index.to(tl.int64)
    batch_head = tl.program_id(1)
    batch = (batch_head // num_heads).to(tl.int64)
    head = (batch_head % num_heads).to(tl.int64)
    q_base = q_ptr + batch * stride_qb + head * stride_qh
    do_base = grad_out_ptr + batch * stride_dob + head * stride_doh
    lse_base = lse_ptr + batch_head.to(tl.int64) * seq_len
    delta_base = delta_ptr + batch_head.to(tl.int64) * seq_len

    first_key = block_index * BLOCK_N
    offs_n = first_key + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    if INT64_OFFSETS:
        offs_d = offs_d.to(tl.int64)
    tile_mask = (offs_n[:, None] < seq_len) & (offs_d[None, :] < HEAD_DIM)
    k = tl.load(k_ptr + batch * stride_kb + head * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd, mask=tile_mask, other=0.0)
    v = tl.load(v_ptr + batch * stride_vb + head * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=tile_mask, other=0.0)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e), as in the forward kernel

    if CAUSAL:
        # Queries before first_key see none of these keys; those on the diagonal see some.
        diagonal_end = tl.minimum(first_key + BLOCK_N, seq_len)
        dk, dv = _dkdv_block_loop(
            dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qn, stride_qd, stride_don, stride_dod,
            offs_n, offs_d, seq_len, qk_scale, first_key, diagonal_end, HEAD_DIM, BLOCK_M, CAUSAL_MASK=True,
            INT64_OFFSETS=INT64_OFFSETS,
        )
        rest_start = first_key + BLOCK_N
    else:
        rest_start = 0
    dk, dv = _dkdv_block_loop(
        dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qn, stride_qd, stride_don, stride_dod,
        offs_n, offs_d, seq_len, qk_scale, rest_start, seq_len, HEAD_DIM, BLOCK_M, CAUSAL_MASK=False,
        INT64_OFFSETS=INT64_OFFSETS,
    )

    out_offsets = batch * stride_dkb + head * stride_dkh + offs_n[:, None] * stride_dkn + offs_d[None, :] * stride_dkd
    tl.store(dk_ptr + out_offsets, (dk * sm_scale).to(dk_ptr.dtype.element_ty), mask=tile_mask)
    tl.store(dv_ptr + out_offsets, dv.to(dv_ptr.dtype.element_ty), mask=tile_mask)


@triton.jit
def _dq_block_loop(
    dq, q, do, lse, delta,
    k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
    offs_m, offs_d, seq_len, qk_scale,
    start, end,  # key range to visit, start a multiple of BLOCK_N
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL_MASK: tl.constexpr, BOUNDS_MASK: tl.constexpr, INT64_OFFSETS: tl.constexpr,
):
    offs_n0 = tl.arange(0, BLOCK_N)
    if INT64_OFFSETS:
        offs_n0 = offs_n0.to(tl.int64)
    d_mask = offs_d < HEAD_DIM
    for start_n in range(start, end, BLOCK_N):
        offs_n = start_n + offs_n0
        kv_mask = (offs_n[:, None] < seq_len) & d_mask[None, :]
        k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd, mask=kv_mask, other=0.0)
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=kv_mask, other=0.0)
        scores = tl.dot(q, tl.trans(k)) * qk_scale
        if CAUSAL_MASK:
            scores = tl.where(offs_m[:, None] >= offs_n[None, :], scores, -float("inf"))
        if BOUNDS_MASK:
            # A zero key past the end scores 0, and exp2(0 - lse) can overflow: hide it.
            scores = tl.where(offs_n[None, :] < seq_len, scores, -float("inf"))
        probs = tl.math.exp2(scores - lse[:, None])
        dprobs = tl.dot(do, tl.trans(v))
        dscores = probs * (dprobs - delta[:, None])
        dq = tl.dot(dscores.to(k.dtype), k, dq)
    return dq


@triton.autotune(configs=_dq_configs(), key=["seq_len", "HEAD_DIM", "CAUSAL"])
@triton.jit
def attention_backward_dq_kernel(
    q_ptr, k_ptr, v_ptr, grad_out_ptr, lse_ptr, delta_ptr, dq_ptr,
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_don, stride_dod,
    stride_dqb, stride_dqh, stride_dqn, stride_dqd,
    num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows per program; a multiple of BLOCK_N
    BLOCK_N: tl.constexpr,  # keys per step
    INT64_OFFSETS: tl.constexpr = False,
):
    block_index = tl.program_id(0)
    if INT64_OFFSETS:
        block_index = block_index.to(tl.int64)
    batch_head = tl.program_id(1)
    batch = (batch_head // num_heads).to(tl.int64)
    head = (batch_head % num_heads).to(tl.int64)
    k_base = k_ptr + batch * stride_kb + head * stride_kh
    v_base = v_ptr + batch * stride_vb + head * stride_vh

    first_row = block_index * BLOCK_M
    offs_m = first_row + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    if INT64_OFFSETS:
        offs_d = offs_d.to(tl.int64)
    row_mask = offs_m < seq_len
    tile_mask = row_mask[:, None] & (offs_d[None, :] < HEAD_DIM)
    q = tl.load(q_ptr + batch * stride_qb + head * stride_qh + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd, mask=tile_mask, other=0.0)
    do = tl.load(grad_out_ptr + batch * stride_dob + head * stride_doh + offs_m[:, None] * stride_don + offs_d[None, :] * stride_dod, mask=tile_mask, other=0.0)
    lse = tl.load(lse_ptr + batch_head.to(tl.int64) * seq_len + offs_m, mask=row_mask, other=0.0)
    delta = tl.load(delta_ptr + batch_head.to(tl.int64) * seq_len + offs_m, mask=row_mask, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e), as in the forward kernel

    if CAUSAL:
        dq = _dq_block_loop(
            dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, offs_d, seq_len, qk_scale, 0, first_row, HEAD_DIM, BLOCK_N,
            CAUSAL_MASK=False, BOUNDS_MASK=False, INT64_OFFSETS=INT64_OFFSETS,
        )
        dq = _dq_block_loop(
            dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, offs_d, seq_len, qk_scale, first_row, tl.minimum(first_row + BLOCK_M, seq_len),
            HEAD_DIM, BLOCK_N, CAUSAL_MASK=True, BOUNDS_MASK=True, INT64_OFFSETS=INT64_OFFSETS,
        )
    else:
        full_end = (seq_len // BLOCK_N) * BLOCK_N
        dq = _dq_block_loop(
            dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, offs_d, seq_len, qk_scale, 0, full_end, HEAD_DIM, BLOCK_N,
            CAUSAL_MASK=False, BOUNDS_MASK=False, INT64_OFFSETS=INT64_OFFSETS,
        )
        dq = _dq_block_loop(
            dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, offs_d, seq_len, qk_scale, full_end, seq_len, HEAD_DIM, BLOCK_N,
            CAUSAL_MASK=False, BOUNDS_MASK=True, INT64_OFFSETS=INT64_OFFSETS,
        )

    dq_ptrs = dq_ptr + batch * stride_dqb + head * stride_dqh + offs_m[:, None] * stride_dqn + offs_d[None, :] * stride_dqd
    tl.store(dq_ptrs, (dq * sm_scale).to(dq_ptr.dtype.element_ty), mask=tile_mask)


def _strides(t: torch.Tensor) -> tuple[int, int, int, int]:
    return t.stride(0), t.stride(1), t.stride(2), t.stride(3)


def attention_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch the forward kernel; return the output and each row's log2-sum-exp."""
    batch, heads, seq_len, head_dim = q.shape
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((batch * heads, seq_len), dtype=torch.float32, device=q.device)

    def grid(meta):
        return (cdiv(seq_len, meta["BLOCK_M"]), batch * heads)

    fast_launch(attention_forward_kernel)[grid](
        q, k, v, out, lse, *_strides(q), *_strides(k), *_strides(v), *_strides(out),
        heads, seq_len, sm_scale,
        HEAD_DIM=head_dim, BLOCK_D=next_power_of_2(head_dim), CAUSAL=causal,
        INT64_OFFSETS=needs_int64_offsets(q, k, v, out, lse),
    )
    return out, lse


def attention_backward(
    grad_out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    out: torch.Tensor, lse: torch.Tensor, causal: bool, sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Launch the three backward kernels; return the gradients of q, k and v."""
    batch, heads, seq_len, head_dim = q.shape
    block_d = next_power_of_2(head_dim)
    grad_out = grad_out.contiguous()
    delta = torch.empty_like(lse)
    int64_offsets = needs_int64_offsets(q, k, v, out, grad_out, lse)
    preprocess_block = 64 if not interpreting() else 16
    preprocess_grid = (cdiv(seq_len, preprocess_block), batch * heads)
    fast_launch(attention_backward_preprocess_kernel)[preprocess_grid](
        out, grad_out, delta, seq_len, HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=preprocess_block,
        INT64_OFFSETS=int64_offsets,
    )
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    common = (*_strides(q), *_strides(k), *_strides(v), *_strides(grad_out))

    def dkdv_grid(meta):
        return (cdiv(seq_len, meta["BLOCK_N"]), batch * heads)

    fast_launch(attention_backward_dkdv_kernel)[dkdv_grid](
        q, k, v, grad_out, lse, delta, dk, dv, *common, *_strides(dk),
        heads, seq_len, sm_scale, HEAD_DIM=head_dim, BLOCK_D=block_d, CAUSAL=causal,
        INT64_OFFSETS=int64_offsets,
    )

    def dq_grid(meta):
        return (cdiv(seq_len, meta["BLOCK_M"]), batch * heads)

    fast_launch(attention_backward_dq_kernel)[dq_grid](
        q, k, v, grad_out, lse, delta, dq, *common, *_strides(dq),
        heads, seq_len, sm_scale, HEAD_DIM=head_dim, BLOCK_D=block_d, CAUSAL=causal,
        INT64_OFFSETS=int64_offsets,
    )
    return dq, dk, dv


# Forward and backward are registered as PyTorch operators: autograd records the forward
# and calls the backward operator, and torch.compile sees each as one node whose outputs'
# shapes the fake implementations give.
@torch.library.custom_op("triton_guide::attention_forward", mutates_args=())
def _attention_forward_op(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    return attention_forward(q, k, v, causal, sm_scale)


@_attention_forward_op.register_fake
def _(q, k, v, causal, sm_scale):
    batch, heads, seq_len, _ = q.shape
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((batch * heads, seq_len), dtype=torch.float32, device=q.device)
    return out, lse


@torch.library.custom_op("triton_guide::attention_backward", mutates_args=())
def _attention_backward_op(
    grad_out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    out: torch.Tensor, lse: torch.Tensor, causal: bool, sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return attention_backward(grad_out, q, k, v, out, lse, causal, sm_scale)


@_attention_backward_op.register_fake
def _(grad_out, q, k, v, out, lse, causal, sm_scale):
    return tuple(torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))


def _save_for_backward(ctx, inputs, output):
    q, k, v, causal, sm_scale = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.causal = causal
    ctx.sm_scale = sm_scale
    ctx.mark_non_differentiable(lse)


def _attention_grad(ctx, grad_out, grad_lse):
    # lse is an internal output, never handed to the caller: its gradient is always None.
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = _attention_backward_op(grad_out, q, k, v, out, lse, ctx.causal, ctx.sm_scale)
    return dq, dk, dv, None, None


_attention_forward_op.register_autograd(_attention_grad, setup_context=_save_for_backward)
refuse_double_backward(_attention_backward_op, "attention")


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
    sm_scale: float | None = None,
) -> torch.Tensor:
    """``softmax(q @ k^T * sm_scale) @ v`` by flash attention, differentiable once.

    ``q``, ``k``, ``v``: tensors of one shape (batch, heads, seq, head_dim) and one floating
    dtype, any strides; ``head_dim`` from 16 to 128. On a GPU, float32 inputs are multiplied
    as tf32 (Triton's default for ``tl.dot``), so large scores lose precision: prefer float16
    or bfloat16. ``causal`` (a bool, numpy's included) hides from query ``i`` every
    key after position ``i``. ``sm_scale`` (any positive real number) defaults to
    ``1 / sqrt(head_dim)``. A second derivative (``create_graph=True``, then backward
    through the gradient) raises a RuntimeError.
    """
    q = check_tensor("q", q, ndim=4)
    k = check_tensor("k", k, ndim=4)
    v = check_tensor("v", v, ndim=4)
    check_same_shape("q", q, "k", k)
    check_same_shape("q", q, "v", v)
    check_same_dtype("q", q, "k", k)
    check_same_dtype("q", q, "v", v)
    head_dim = q.shape[-1]
    if not MIN_HEAD_DIM <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(
            f"head_dim (q.shape[-1]) must be between {MIN_HEAD_DIM} and {MAX_HEAD_DIM}, got {head_dim}"
        )
    check_grid_axis(
        "q", q.shape[0] * q.shape[1],
        "one program column per (batch, head) pair: split the batch into smaller calls",
    )
    causal = check_bool("causal", causal)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    sm_scale = check_positive_number("sm_scale", sm_scale)
    if through_operator(q, k, v):  # autograd or torch.compile: see triton_guide.library
        return _attention_forward_op(q, k, v, causal, sm_scale)[0]
    return attention_forward(q, k, v, causal, sm_scale)[0]
