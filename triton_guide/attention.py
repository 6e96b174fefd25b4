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

All kernels read their tiles of q, k, v and grad_out through tensor descriptors, which Hopper
GPUs serve with the TMA copy engine (see ``_tma_layout`` for the layouts it accepts).

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
from triton.tools.tensor_descriptor import TensorDescriptor

from .hardware import TMA_ALIGNMENT
from .runtime import interpreting
from .launch import cdiv, fast_launch, next_power_of_2, unchecked_descriptor
from .library import Operator
from .registry import register
from .validation import (
    INT32_MAX,
    check_bool,
    check_grid_axis,
    check_positive_number,
    check_same_dtype,
    check_same_shape,
    check_tensor,
    needs_int64_offsets,
)

MIN_HEAD_DIM, MAX_HEAD_DIM = 16, 128
LOG2E = tl.constexpr(1.4426950408889634)  # log2(e): exp(x) = exp2(x * LOG2E)


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


def _set_block_shapes(nargs):
    """Before each launch: make the descriptors' tiles match the configuration's blocks
    (queries and their gradients in BLOCK_M rows, keys and values in BLOCK_N)."""
    for name, rows in (("q_desc", "BLOCK_M"), ("do_desc", "BLOCK_M"),
                       ("k_desc", "BLOCK_N"), ("v_desc", "BLOCK_N")):
        if name in nargs:
            nargs[name].block_shape = [1, 1, nargs[rows], nargs["BLOCK_D"]]


def _config(block_m: int, block_n: int, stages: int, warps: int) -> triton.Config:
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n}, num_stages=stages,
                         num_warps=warps, pre_hook=_set_block_shapes)


# (BLOCK_M, BLOCK_N, num_stages, num_warps) that the autotuner tries, for head_dim up to 64
# and above 64: the four fastest of 8-10 candidates per kernel, each timed on its own on an
# H100 over the attention page's shapes. The forward and dq
# kernels need BLOCK_M to be a multiple of BLOCK_N, dkdv the reverse. Float32 tiles take
# twice the shared memory of float16 ones, and most of these overflow an H100's 227 KiB
# at head_dim 128: float32 gets one smaller configuration per kernel instead.
TUNED = {
    "forward": {64: [(128, 128, 3, 4), (128, 64, 3, 4), (128, 64, 4, 4), (64, 64, 3, 4)],
                128: [(128, 64, 2, 4), (128, 128, 3, 8), (256, 64, 3, 8), (64, 64, 3, 4)]},
    "dkdv": {64: [(32, 64, 3, 4), (64, 64, 3, 4), (64, 64, 4, 4), (32, 128, 5, 4)],
             128: [(64, 128, 3, 8), (64, 128, 4, 8), (64, 128, 5, 8), (32, 64, 3, 4)]},
    "dq": {64: [(128, 64, 4, 8), (128, 64, 3, 8), (64, 64, 2, 4), (64, 64, 3, 4)],
           128: [(128, 64, 3, 8), (128, 64, 4, 8), (128, 64, 5, 8), (128, 128, 2, 8)]},
}
FLOAT32 = {"forward": (64, 32, 2, 4), "dkdv": (32, 64, 2, 4), "dq": (64, 32, 2, 4)}
INTERPRETER_BLOCKS = {"forward": (32, 16), "dkdv": (16, 32), "dq": (32, 16)}  # small, quick
MAX_BLOCK = max(max(c[:2]) for table in TUNED.values() for cs in table.values() for c in cs)


def _autotune(kernel: str):
    """``triton.autotune`` over the kernel's tuned configurations for the call's head_dim
    (or the one for float32)."""
    if interpreting():
        return triton.autotune([_config(*INTERPRETER_BLOCKS[kernel], 1, 4)],
                               key=["seq_len", "HEAD_DIM", "CAUSAL"])
    by_width = {width: [_config(*c) for c in cs] for width, cs in TUNED[kernel].items()}
    float32 = [_config(*FLOAT32[kernel])]

    def for_head_dim(configs, named_args, **kwargs):
        if named_args["q_desc"].base.dtype == torch.float32:
            return float32
        return by_width[64 if kwargs["BLOCK_D"] <= 64 else 128]

    return triton.autotune([c for cs in by_width.values() for c in cs] + float32,
                           key=["seq_len", "HEAD_DIM", "CAUSAL"],
                           prune_configs_by={"early_config_prune": for_head_dim})


@triton.jit
def _rows(desc, batch, head, first_row, BLOCK: tl.constexpr, BLOCK_D: tl.constexpr):
    """Rows ``first_row .. first_row + BLOCK`` of one (batch, head), zeros past the end."""
    return desc.load([batch, head, first_row, 0]).reshape(BLOCK, BLOCK_D)


@triton.jit
def _forward_block_loop(
    acc, row_sum, row_max,  # running output, normaliser and max (base 2) of the query rows
    q, k_desc, v_desc, batch, head, offs_m, qk_scale,
    start, end,  # key range to visit: [start, end), start a multiple of BLOCK_N
    seq_len,
    BLOCK_N: tl.constexpr,
    CAUSAL_MASK: tl.constexpr,  # hide keys after the query (blocks on the diagonal)
    BOUNDS_MASK: tl.constexpr,  # hide keys at or past seq_len (the last, partial block)
):
    BLOCK_D: tl.constexpr = q.shape[1]
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(start, end, BLOCK_N):
        k = _rows(k_desc, batch, head, start_n, BLOCK_N, BLOCK_D)
        scores = tl.dot(q, tl.trans(k))  # (BLOCK_M, BLOCK_N), unscaled
        cols = start_n + offs_n
        if CAUSAL_MASK:
            scores = tl.where(offs_m[:, None] >= cols[None, :], scores, -float("inf"))
        if BOUNDS_MASK:
            scores = tl.where(cols[None, :] < seq_len, scores, -float("inf"))
        # Scale the row maxima rather than every score: max(s) * c = max(s * c) for c > 0,
        # and the exponent becomes one fused multiply-add per score.
        new_max = tl.maximum(row_max, tl.max(scores, axis=1) * qk_scale)
        probs = tl.math.exp2(scores * qk_scale - new_max[:, None])
        correction = tl.math.exp2(row_max - new_max)  # 0 on the first block (row_max = -inf)
        row_sum = row_sum * correction + tl.sum(probs, axis=1)
        v = _rows(v_desc, batch, head, start_n, BLOCK_N, BLOCK_D)
        acc = tl.dot(probs.to(v.dtype), v, acc * correction[:, None])
        row_max = new_max
    return acc, row_sum, row_max


@_autotune("forward")
@triton.jit
def attention_forward_kernel(
    q_desc, k_desc, v_desc,  # tensor descriptors over (batch, heads, seq_len, head_dim)
    out_ptr,  # (batch, heads, seq_len, HEAD_DIM), contiguous
    lse_ptr,  # (batch * heads, seq_len) float32: log2-sum-exp of each row's scaled scores
    num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,  # HEAD_DIM rounded up to a power of two
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows per program
    BLOCK_N: tl.constexpr,  # keys per step; BLOCK_M is a multiple of it
    INT64_OFFSETS: tl.constexpr = False,  # seq_len * HEAD_DIM can pass 2**31 - 1: use int64
):
    block_index = tl.program_id(0)
    if CAUSAL:
        # Blocks near the end of the sequence have the most keys to visit: start them first.
        block_index = tl.num_programs(0) - 1 - block_index
    batch_head = tl.program_id(1)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    first_row = block_index * BLOCK_M
    offs_m = first_row + tl.arange(0, BLOCK_M)
    q = _rows(q_desc, batch, head, first_row, BLOCK_M, BLOCK_D)

    qk_scale = sm_scale * LOG2E  # exp(x * sm_scale) = exp2(x * qk_scale)
    row_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    if CAUSAL:
        # Keys before this block of queries are visible to every row in it: no mask needed.
        acc, row_sum, row_max = _forward_block_loop(
            acc, row_sum, row_max, q, k_desc, v_desc, batch, head, offs_m, qk_scale,
            0, first_row, seq_len, BLOCK_N, CAUSAL_MASK=False, BOUNDS_MASK=False,
        )
        # The diagonal block: each row sees the keys up to its own position. Keys past
        # seq_len come after every real row, so the causal mask hides them too.
        acc, row_sum, row_max = _forward_block_loop(
            acc, row_sum, row_max, q, k_desc, v_desc, batch, head, offs_m, qk_scale,
            first_row, tl.minimum(first_row + BLOCK_M, seq_len), seq_len, BLOCK_N,
            CAUSAL_MASK=True, BOUNDS_MASK=False,
        )
    else:
        full_end = (seq_len // BLOCK_N) * BLOCK_N
        acc, row_sum, row_max = _forward_block_loop(
            acc, row_sum, row_max, q, k_desc, v_desc, batch, head, offs_m, qk_scale,
            0, full_end, seq_len, BLOCK_N, CAUSAL_MASK=False, BOUNDS_MASK=False,
        )
        # At most one partial block of keys remains past the last full one; the descriptor
        # reads its missing rows as zeros, which would score 0, so mask them.
        acc, row_sum, row_max = _forward_block_loop(
            acc, row_sum, row_max, q, k_desc, v_desc, batch, head, offs_m, qk_scale,
            full_end, seq_len, seq_len, BLOCK_N, CAUSAL_MASK=False, BOUNDS_MASK=True,
        )

    acc = acc / row_sum[:, None]
    if INT64_OFFSETS:
        offs_m = offs_m.to(tl.int64)
    row_mask = offs_m < seq_len
    head_rows = batch_head.to(tl.int64) * seq_len  # this head's first row in lse and out
    tl.store(lse_ptr + head_rows + offs_m, row_max + tl.math.log2(row_sum), mask=row_mask)
    offs_d = tl.arange(0, BLOCK_D)
    out_ptrs = out_ptr + head_rows * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    tile_mask = row_mask[:, None] & (offs_d < HEAD_DIM)[None, :]
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
    delta = tl.sum(out * grad_out, axis=1)
    tl.store(delta_ptr + batch_head * seq_len + offs_m, delta, mask=offs_m < seq_len)


@triton.jit
def _dkdv_block_loop(
    dk, dv, k, v,  # accumulators and this program's keys and values, (BLOCK_N, BLOCK_D)
    q_desc, do_desc, lse_base, delta_base, batch, head, offs_n, qk_scale,
    start, end,  # query range to visit, start a multiple of BLOCK_M
    seq_len, BLOCK_M: tl.constexpr, CAUSAL_MASK: tl.constexpr,
):
    # Query rows past seq_len load as zeros (q, grad_out, lse and delta), so they add exactly
    # zero to dk and dv: no bounds mask is needed here.
    BLOCK_D: tl.constexpr = k.shape[1]
    offs_m0 = tl.arange(0, BLOCK_M)
    for start_m in range(start, end, BLOCK_M):
        offs_m = start_m + offs_m0
        row_mask = offs_m < seq_len
        q = _rows(q_desc, batch, head, start_m, BLOCK_M, BLOCK_D)
        lse = tl.load(lse_base + offs_m, mask=row_mask, other=0.0)
        # Work with transposed tiles (keys along rows) so the results land in dk, dv rows.
        scores_t = tl.dot(k, tl.trans(q))
        if CAUSAL_MASK:
            scores_t = tl.where(offs_m[None, :] >= offs_n[:, None], scores_t, -float("inf"))
        probs_t = tl.math.exp2(scores_t * qk_scale - lse[None, :])
        do = _rows(do_desc, batch, head, start_m, BLOCK_M, BLOCK_D)
        dv = tl.dot(probs_t.to(do.dtype), do, dv)
        delta = tl.load(delta_base + offs_m, mask=row_mask, other=0.0)
        dprobs_t = tl.dot(v, tl.trans(do))
        dscores_t = probs_t * (dprobs_t - delta[None, :])
        dk = tl.dot(dscores_t.to(q.dtype), q, dk)
    return dk, dv


@_autotune("dkdv")
@triton.jit
def attention_backward_dkdv_kernel(
    q_desc, k_desc, v_desc, do_desc,  # descriptors over (batch, heads, seq_len, head_dim)
    lse_ptr, delta_ptr,  # (batch * heads, seq_len) float32
    dk_ptr, dv_ptr,  # (batch, heads, seq_len, HEAD_DIM), contiguous
    num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows per step
    BLOCK_N: tl.constexpr,  # keys per program; a multiple of BLOCK_M
    INT64_OFFSETS: tl.constexpr = False,
):
    block_index = tl.program_id(0)
    batch_head = tl.program_id(1)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    head_rows = batch_head.to(tl.int64) * seq_len  # this head's first row in lse, delta, dk, dv
    lse_base = lse_ptr + head_rows
    delta_base = delta_ptr + head_rows

    first_key = block_index * BLOCK_N
    offs_n = first_key + tl.arange(0, BLOCK_N)
    k = _rows(k_desc, batch, head, first_key, BLOCK_N, BLOCK_D)
    v = _rows(v_desc, batch, head, first_key, BLOCK_N, BLOCK_D)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    qk_scale = sm_scale * LOG2E  # as in the forward kernel

    if CAUSAL:
        # Queries before first_key see none of these keys; those on the diagonal see some.
        dk, dv = _dkdv_block_loop(
            dk, dv, k, v, q_desc, do_desc, lse_base, delta_base, batch, head, offs_n, qk_scale,
            first_key, tl.minimum(first_key + BLOCK_N, seq_len), seq_len, BLOCK_M,
            CAUSAL_MASK=True,
        )
        rest_start = first_key + BLOCK_N
    else:
        rest_start = 0
    dk, dv = _dkdv_block_loop(
        dk, dv, k, v, q_desc, do_desc, lse_base, delta_base, batch, head, offs_n, qk_scale,
        rest_start, seq_len, seq_len, BLOCK_M, CAUSAL_MASK=False,
    )

    if INT64_OFFSETS:
        offs_n = offs_n.to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    offsets = head_rows * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    tile_mask = (offs_n[:, None] < seq_len) & (offs_d[None, :] < HEAD_DIM)
    tl.store(dk_ptr + offsets, (dk * sm_scale).to(dk_ptr.dtype.element_ty), mask=tile_mask)
    tl.store(dv_ptr + offsets, dv.to(dv_ptr.dtype.element_ty), mask=tile_mask)


@triton.jit
def _dq_block_loop(
    dq, q, do, lse, delta,  # accumulator and this program's rows, (BLOCK_M, ...)
    k_desc, v_desc, batch, head, offs_m, qk_scale,
    start, end,  # key range to visit, start a multiple of BLOCK_N
    seq_len, BLOCK_N: tl.constexpr, CAUSAL_MASK: tl.constexpr, BOUNDS_MASK: tl.constexpr,
):
    BLOCK_D: tl.constexpr = q.shape[1]
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in range(start, end, BLOCK_N):
        offs_n = start_n + offs_n0
        k = _rows(k_desc, batch, head, start_n, BLOCK_N, BLOCK_D)
        v = _rows(v_desc, batch, head, start_n, BLOCK_N, BLOCK_D)
        scores = tl.dot(q, tl.trans(k))
        if CAUSAL_MASK:
            scores = tl.where(offs_m[:, None] >= offs_n[None, :], scores, -float("inf"))
        if BOUNDS_MASK:
            # A zero key past the end scores 0, and exp2(0 - lse) can overflow: hide it.
            scores = tl.where(offs_n[None, :] < seq_len, scores, -float("inf"))
        probs = tl.math.exp2(scores * qk_scale - lse[:, None])
        dprobs = tl.dot(do, tl.trans(v))
        dscores = probs * (dprobs - delta[:, None])
        dq = tl.dot(dscores.to(k.dtype), k, dq)
    return dq


@_autotune("dq")
@triton.jit
def attention_backward_dq_kernel(
    q_desc, k_desc, v_desc, do_desc,  # descriptors over (batch, heads, seq_len, head_dim)
    lse_ptr, delta_ptr,  # (batch * heads, seq_len) float32
    dq_ptr,  # (batch, heads, seq_len, HEAD_DIM), contiguous
    num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows per program; a multiple of BLOCK_N
    BLOCK_N: tl.constexpr,  # keys per step
    INT64_OFFSETS: tl.constexpr = False,
):
    block_index = tl.program_id(0)
    batch_head = tl.program_id(1)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    head_rows = batch_head.to(tl.int64) * seq_len  # this head's first row in lse, delta, dq

    first_row = block_index * BLOCK_M
    offs_m = first_row + tl.arange(0, BLOCK_M)
    row_mask = offs_m < seq_len
    q = _rows(q_desc, batch, head, first_row, BLOCK_M, BLOCK_D)
    do = _rows(do_desc, batch, head, first_row, BLOCK_M, BLOCK_D)
    lse = tl.load(lse_ptr + head_rows + offs_m, mask=row_mask, other=0.0)
    delta = tl.load(delta_ptr + head_rows + offs_m, mask=row_mask, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    qk_scale = sm_scale * LOG2E  # as in the forward kernel

    if CAUSAL:
        dq = _dq_block_loop(
            dq, q, do, lse, delta, k_desc, v_desc, batch, head, offs_m, qk_scale,
            0, first_row, seq_len, BLOCK_N, CAUSAL_MASK=False, BOUNDS_MASK=False,
        )
        # Keys past seq_len on the diagonal come after every real row: the causal mask
        # hides them.
        dq = _dq_block_loop(
            dq, q, do, lse, delta, k_desc, v_desc, batch, head, offs_m, qk_scale,
            first_row, tl.minimum(first_row + BLOCK_M, seq_len), seq_len, BLOCK_N,
            CAUSAL_MASK=True, BOUNDS_MASK=False,
        )
    else:
        full_end = (seq_len // BLOCK_N) * BLOCK_N
        dq = _dq_block_loop(
            dq, q, do, lse, delta, k_desc, v_desc, batch, head, offs_m, qk_scale,
            0, full_end, seq_len, BLOCK_N, CAUSAL_MASK=False, BOUNDS_MASK=False,
        )
        dq = _dq_block_loop(
            dq, q, do, lse, delta, k_desc, v_desc, batch, head, offs_m, qk_scale,
            full_end, seq_len, seq_len, BLOCK_N, CAUSAL_MASK=False, BOUNDS_MASK=True,
        )

    if INT64_OFFSETS:
        offs_m = offs_m.to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    dq_ptrs = dq_ptr + head_rows * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    tile_mask = row_mask[:, None] & (offs_d[None, :] < HEAD_DIM)
    tl.store(dq_ptrs, (dq * sm_scale).to(dq_ptr.dtype.element_ty), mask=tile_mask)


# q, k, v (and, in the backward, the output's gradient) are read through tensor
# descriptors (``triton.tools.tensor_descriptor``): a host-side record of a tensor's base,
# shape and strides that lets ``desc.load`` fetch a whole tile. On Hopper (sm_90) that load
# is one TMA instruction, an asynchronous copy engine that fills shared memory without
# using the warps' registers or address arithmetic, and rows past the end of a head come
# back as zeros. Elsewhere Triton lowers it to ordinary loads. TMA needs the base and
# every stride but the last to be multiples of 16 bytes (TMA_ALIGNMENT).


def _descriptor_ready(t: torch.Tensor) -> bool:
    """True when a (batch, heads, seq, head_dim) tensor meets TMA's alignment rules."""
    nbytes = t.element_size()
    return (t.stride(3) == 1 and t.data_ptr() % TMA_ALIGNMENT == 0
            and all(t.stride(i) > 0 and t.stride(i) * nbytes % TMA_ALIGNMENT == 0
                    for i in range(3) if t.shape[i] > 1))


def _tma_layout(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself when a descriptor can read it, else a copy that can: contiguous, with
    ``head_dim`` padded by zeros to a multiple of 16 bytes (zero columns add nothing to
    ``q @ k^T``, and the extra output columns they give ``p @ v`` are never stored)."""
    if _descriptor_ready(t):
        return t
    head_dim = t.shape[-1]
    per_row = TMA_ALIGNMENT // t.element_size()
    padded = torch.zeros((*t.shape[:-1], cdiv(head_dim, per_row) * per_row),
                         dtype=t.dtype, device=t.device)
    padded[..., :head_dim] = t
    return padded


def _descriptor(t: torch.Tensor, block_rows: int, block_d: int) -> TensorDescriptor:
    """A descriptor over (batch, heads, seq, head_dim) that loads [1, 1, block_rows, block_d]."""
    # A dimension of size 1 is never stepped along: any aligned stride describes it.
    strides = [stride if size > 1 else TMA_ALIGNMENT // t.element_size()
               for size, stride in zip(t.shape, t.stride())]
    strides[-1] = 1
    # _tma_layout has made t readable by TMA: skip the constructor's re-check of it.
    return unchecked_descriptor(t, list(t.shape), strides, [1, 1, block_rows, block_d])


def _needs_int64_rows(seq_len: int, head_dim: int) -> bool:
    """Whether ``row * head_dim`` within one head can pass int32 (the kernels' stores index
    rows up to a block, at most MAX_BLOCK rows, past seq_len)."""
    return (seq_len + MAX_BLOCK) * head_dim > INT32_MAX


def attention_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch the forward kernel; return the output and each row's log2-sum-exp."""
    batch, heads, seq_len, head_dim = q.shape
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((batch * heads, seq_len), dtype=torch.float32, device=q.device)
    block_d = next_power_of_2(head_dim)
    # The autotuner's pre-hook sets each descriptor's tile to the configuration's blocks.
    q_desc, k_desc, v_desc = (_descriptor(_tma_layout(t), 1, block_d) for t in (q, k, v))

    def grid(meta):
        return (cdiv(seq_len, meta["BLOCK_M"]), batch * heads)

    fast_launch(attention_forward_kernel)[grid](
        q_desc, k_desc, v_desc, out, lse, heads, seq_len, sm_scale,
        HEAD_DIM=head_dim, BLOCK_D=block_d, CAUSAL=causal,
        INT64_OFFSETS=_needs_int64_rows(seq_len, head_dim),
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
    # Rows per program of the delta kernel: 64 rows of out and grad_out are 32 KiB at
    # head_dim 128 in float16, enough loads in flight per program for a kernel that only
    # streams them once (16 keeps the interpreter quick). Not tuned.
    preprocess_block = 64 if not interpreting() else 16
    preprocess_grid = (cdiv(seq_len, preprocess_block), batch * heads)
    fast_launch(attention_backward_preprocess_kernel)[preprocess_grid](
        out, grad_out, delta, seq_len, HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=preprocess_block,
        INT64_OFFSETS=needs_int64_offsets(out, grad_out, lse),
    )
    dq, dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    # One descriptor each for q, k, v and grad_out, shared by both kernels; the pre-hook
    # sets their tiles before each launch.
    descriptors = [_descriptor(_tma_layout(t), 1, block_d) for t in (q, k, v, grad_out)]
    common = dict(HEAD_DIM=head_dim, BLOCK_D=block_d, CAUSAL=causal,
                  INT64_OFFSETS=_needs_int64_rows(seq_len, head_dim))

    def dkdv_grid(meta):
        return (cdiv(seq_len, meta["BLOCK_N"]), batch * heads)

    fast_launch(attention_backward_dkdv_kernel)[dkdv_grid](
        *descriptors, lse, delta, dk, dv, heads, seq_len, sm_scale, **common,
    )

    def dq_grid(meta):
        return (cdiv(seq_len, meta["BLOCK_M"]), batch * heads)

    fast_launch(attention_backward_dq_kernel)[dq_grid](
        *descriptors, lse, delta, dq, heads, seq_len, sm_scale, **common,
    )
    return dq, dk, dv


def _fake_forward(q, k, v, causal, sm_scale):
    batch, heads, seq_len, _ = q.shape
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((batch * heads, seq_len), dtype=torch.float32, device=q.device)
    return out, lse


def _fake_backward(grad_out, q, k, v, out, lse, causal, sm_scale):
    return tuple(torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))


def _save_for_backward(ctx, inputs, output):
    q, k, v, causal, sm_scale = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.causal = causal
    ctx.sm_scale = sm_scale
    ctx.mark_non_differentiable(lse)


def _grad(ctx, grad_out, grad_lse):
    # lse is an internal output, never handed to the caller: its gradient is always None.
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = _attention_backward(grad_out, q, k, v, out, lse, ctx.causal, ctx.sm_scale)
    return dq, dk, dv, None, None


# Autograd and torch.compile: see triton_guide.library. The backward kernels have no
# derivative of their own: a second backward through them raises.
_attention_backward = Operator("attention_backward", attention_backward,
                               fake=_fake_backward, refuse_name="attention")
_attention_forward = Operator("attention_forward", attention_forward, fake=_fake_forward,
                              backward=_grad, setup_context=_save_for_backward)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
    sm_scale: float | None = None,
) -> torch.Tensor:
    """``softmax(q @ k^T * sm_scale) @ v`` by flash attention, differentiable once.

    ``q``, ``k``, ``v``: tensors of one shape (batch, heads, seq, head_dim) and one floating
    dtype, any strides (a layout TMA cannot read, such as rows that are not a multiple of 16
    bytes, costs a copy of that input); ``head_dim`` from 16 to 128. On a GPU, float32
    inputs are multiplied as tf32 (Triton's default for ``tl.dot``), so large scores lose
    precision: prefer float16 or bfloat16. ``causal`` (a bool, numpy's included) hides
    from query ``i`` every key after position ``i``. ``sm_scale`` (any positive real
    number) defaults to ``1 / sqrt(head_dim)``. A second derivative
    (``create_graph=True``, then backward through the gradient) raises a RuntimeError.
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
            f"head_dim (q.shape[-1]) must be between {MIN_HEAD_DIM} and {MAX_HEAD_DIM}, "
            f"got {head_dim}"
        )
    check_grid_axis(
        "q", q.shape[0] * q.shape[1],
        "one program column per (batch, head) pair: split the batch into smaller calls",
    )
    causal = check_bool("causal", causal)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    sm_scale = check_positive_number("sm_scale", sm_scale)
    return _attention_forward(q, k, v, causal, sm_scale)[0]


def _example(device):
    q, k, v = (torch.randn(1, 2, 17, 16, device=device) for _ in range(3))
    return (q, k, v), {"causal": True}


register("attention", attention, attention_reference, example=_example,
         differentiable=True, compile_safe=True)
