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
* decode (few queries against many keys): one program per block of query rows would leave
  most of the GPU idle, so the keys are split across programs (flash-decoding): each
  program reads one range of keys for all the query heads of one key/value head, writes a
  partial ``(acc, m, l)``, and a second kernel combines the partials.
* backward: softmax probabilities are recomputed from q, k and the stored ``m`` and
  ``log2(l)``. One kernel owns a block of keys of one key/value head and accumulates ``dk``
  and ``dv`` over every query head of its group and every query block; another owns a block
  of queries and accumulates ``dq`` over the key blocks; neither needs atomics.

The main kernels read their tiles of q, k, v and grad_out through tensor descriptors, which
Hopper GPUs serve with the TMA copy engine (see ``_tma_layout`` for the layouts it accepts).

Differences from the paper: exponentials are base 2 (``exp2``, with ``log2(e)`` folded into
the scale). Scores are exponentiated as ``exp2((s - m) * scale)`` from raw scores ``s`` and
their raw maximum ``m``, not as ``exp2(s * scale - m * scale)``: the product of a large
score and a large scale is rounded in float32 (and a fused multiply-add rounds it
differently from the maximum), so the difference of two such products can be off by far
more than 1 and ``exp2`` of it overflow; ``s - m`` is 0 for the maximum at any scale.
Dropout and attention bias are not implemented.
"""

from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from .runtime import interpreting
from .launch import cdiv, fast_launch, next_power_of_2
from .library import refuse_double_backward, through_operator
from .validation import (
    INT32_MAX,
    check_bool,
    check_grid_axis,
    check_int,
    check_positive_number,
    check_same_dtype,
    check_tensor,
    needs_int64_offsets,
)

MIN_HEAD_DIM, MAX_HEAD_DIM = 16, 256
LOG2E = tl.constexpr(1.4426950408889634)  # log2(e): exp(x) = exp2(x * LOG2E)
LN2 = tl.constexpr(0.6931471805599453)  # ln(2): log(x) = log2(x) * LN2
# The kernels scale scores by sm_scale * log2(e) in float32. Below float32's smallest
# normal number that product would round to 0 (or be flushed to 0 as a subnormal), and
# 0 * -inf, a masked score times the scale, is NaN. A smaller scale is raised to it: the
# softmax is then uniform to float32 precision for every score below 2**100 in magnitude,
# as it is at the requested scale.
MIN_QK_SCALE = 2.0 ** -126
# A probability this close to 1 (within 4 units in float32's last place) leaves the others
# a total of at most 2**-22: see attention_backward's SETTLE_ONE_HOT.
ONE_HOT = tl.constexpr(1.0 - 2.0 ** -22)
FLOAT32_MAX = torch.finfo(torch.float32).max
MAX_SM_SCALE = FLOAT32_MAX / 1.4426950408889634

# tl.dot's input precision for float32 tiles under each of PyTorch's float32 matmul
# precision settings (torch.set_float32_matmul_precision): "highest" asks for full float32
# accuracy, which tf32x3 gives from three tf32 products (hi*hi + hi*lo + lo*hi) at about a
# third of tf32's speed; "high" and "medium" allow tf32. 16-bit inputs ignore it.
DOT_PRECISION = {"highest": "tf32x3", "high": "tf32", "medium": "tf32"}


def dot_precision(dtype: torch.dtype) -> str:
    """``tl.dot``'s ``input_precision`` for inputs of ``dtype``, from PyTorch's setting."""
    if dtype != torch.float32:
        return "tf32"  # Triton's default; it only affects float32 operands
    return DOT_PRECISION[torch.get_float32_matmul_precision()]


def visible_keys(num_queries: int, num_keys: int, causal: bool = False,
                 window: int | None = None, device=None) -> torch.Tensor:
    """A (num_queries, num_keys) bool tensor: True where query ``i`` sees key ``j``."""
    rows = torch.arange(num_queries, device=device)[:, None]
    cols = torch.arange(num_keys, device=device)[None, :]
    diagonal = num_keys - num_queries  # query i's own position among the keys
    visible = torch.ones(num_queries, num_keys, dtype=torch.bool, device=device)
    if causal:
        visible &= cols <= rows + diagonal
    if window is not None:
        visible &= cols > rows + diagonal - window
    return visible


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
    visible = visible_keys(q.shape[-2], k.shape[-2], causal, window, q.device)
    # A row that sees no key gives 0 and log-sum-exp -inf. Its scores are left finite so
    # that neither the forward nor the backward computes -inf - (-inf).
    sees_any = visible.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~visible & sees_any, float("-inf"))
    out = (torch.softmax(scores, dim=-1) * sees_any) @ v
    if not return_lse:
        return out
    lse = torch.logsumexp(scores, dim=-1).masked_fill(~sees_any[:, 0], float("-inf"))
    return out, lse


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


# (BLOCK_M, BLOCK_N, num_stages, num_warps) that the autotuner tries, for head_dim up to 64,
# up to 128 and up to 256. Up to 128: the four fastest of 8-10 candidates per kernel in
# `benchmarks/tune.py attention` on an H100. The forward and dq kernels need BLOCK_M to be a
# multiple of BLOCK_N, dkdv the reverse. Above 128 the tiles are twice as wide: these are
# smaller blocks that fit an H100's 227 KiB of shared memory, not tuned (a configuration
# that does not fit is skipped by the autotuner). Float32 tiles take twice the shared
# memory of float16 ones: float32 gets smaller configurations instead.
TUNED = {
    "forward": {64: [(128, 128, 3, 4), (128, 64, 3, 4), (128, 64, 4, 4), (64, 64, 3, 4)],
                128: [(128, 64, 2, 4), (128, 128, 3, 8), (256, 64, 3, 8), (64, 64, 3, 4)],
                256: [(128, 32, 2, 8), (64, 64, 2, 8), (64, 32, 2, 4)]},
    "dkdv": {64: [(32, 64, 3, 4), (64, 64, 3, 4), (64, 64, 4, 4), (32, 128, 5, 4)],
             128: [(64, 128, 3, 8), (64, 128, 4, 8), (64, 128, 5, 8), (32, 64, 3, 4)],
             256: [(32, 64, 2, 8), (16, 64, 2, 4), (16, 32, 2, 4)]},
    "dq": {64: [(128, 64, 4, 8), (128, 64, 3, 8), (64, 64, 2, 4), (64, 64, 3, 4)],
           128: [(128, 64, 3, 8), (128, 64, 4, 8), (128, 64, 5, 8), (128, 128, 2, 8)],
           256: [(64, 32, 2, 8), (64, 16, 2, 4), (32, 32, 2, 4)]},
}
FLOAT32 = {"forward": {128: [(64, 32, 2, 4)], 256: [(32, 32, 2, 4), (32, 16, 2, 4)]},
           "dkdv": {128: [(32, 64, 2, 4)], 256: [(16, 32, 2, 4), (16, 16, 2, 4)]},
           "dq": {128: [(64, 32, 2, 4)], 256: [(32, 16, 2, 4), (16, 16, 2, 4)]}}
INTERPRETER_BLOCKS = {"forward": (32, 16), "dkdv": (16, 32), "dq": (32, 16)}  # small, quick
MAX_BLOCK = max(max(c[:2]) for table in TUNED.values() for cs in table.values() for c in cs)
AUTOTUNE_KEY = ["num_queries", "num_keys", "HEAD_DIM", "CAUSAL", "WINDOW", "DOT_PRECISION"]


def _width(block_d: int) -> int:
    """The row of TUNED for a tile of ``block_d`` columns."""
    return 64 if block_d <= 64 else 128 if block_d <= 128 else 256


def _autotune(kernel: str):
    """``triton.autotune`` over the kernel's tuned configurations for the call's head_dim
    (or the ones for float32)."""
    if interpreting():
        return triton.autotune([_config(*INTERPRETER_BLOCKS[kernel], 1, 4)], key=AUTOTUNE_KEY)
    by_width = {width: [_config(*c) for c in cs] for width, cs in TUNED[kernel].items()}
    float32 = {width: [_config(*c) for c in cs] for width, cs in FLOAT32[kernel].items()}

    def for_head_dim(configs, named_args, **kwargs):
        width = _width(kwargs["BLOCK_D"])
        if named_args["q_desc"].base.dtype == torch.float32:
            return float32[max(width, 128)]
        return by_width[width]

    every = [c for cs in by_width.values() for c in cs] + [c for cs in float32.values() for c in cs]
    return triton.autotune(every, key=AUTOTUNE_KEY,
                           prune_configs_by={"early_config_prune": for_head_dim})


@triton.jit
def _rows(desc, batch, head, first_row, BLOCK: tl.constexpr, BLOCK_D: tl.constexpr):
    """Rows ``first_row .. first_row + BLOCK`` of one (batch, head), zeros past the end."""
    return desc.load([batch, head, first_row, 0]).reshape(BLOCK, BLOCK_D)


@triton.jit
def _visible(rows, cols, num_keys, diagonal, window,
             CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
    """Whether query ``rows`` sees key ``cols`` (broadcast against each other): keys that
    exist, not after the query's own position ``row + diagonal`` if causal, and fewer than
    ``window`` positions before it if windowed."""
    keep = cols < num_keys
    if CAUSAL:
        keep = keep & (cols <= rows + diagonal)
    if WINDOW:
        keep = keep & (cols > rows + diagonal - window)
    return keep


@triton.jit
def _key_ranges(first_row, num_keys, diagonal, window, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
    """The keys that query rows ``first_row .. first_row + BLOCK_M`` see, as block starts
    ``lo <= full_lo <= full_hi <= hi``: some row sees keys in ``[lo, hi)``, every row sees
    every key of the blocks in ``[full_lo, full_hi)`` (no mask needed there)."""
    last_row = first_row + BLOCK_M - 1
    lo = 0
    hi = num_keys
    full_lo = 0
    full_hi = (num_keys // BLOCK_N) * BLOCK_N  # a last partial block needs the bounds mask
    if CAUSAL:
        hi = tl.minimum(hi, tl.maximum(last_row + diagonal + 1, 0))
        full_hi = tl.minimum(full_hi, (tl.maximum(first_row + diagonal + 1, 0) // BLOCK_N) * BLOCK_N)
    if WINDOW:
        lo = (tl.maximum(first_row + diagonal - window + 1, 0) // BLOCK_N) * BLOCK_N
        full_lo = tl.cdiv(tl.maximum(last_row + diagonal - window + 1, 0), BLOCK_N) * BLOCK_N
    hi = tl.maximum(hi, lo)
    full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
    full_hi = tl.minimum(tl.maximum(full_hi, full_lo), hi)
    return lo, full_lo, full_hi, hi


@triton.jit
def _online_softmax_step(scores, row_max, row_sum, qk_scale, MASKED: tl.constexpr):
    """One block of raw ``scores`` into the running maximum and normaliser: returns the
    block's probabilities (relative to the new maximum), the factor that rescales what was
    accumulated before, and the new maximum and normaliser."""
    new_max = tl.maximum(row_max, tl.max(scores, axis=1))
    if MASKED:
        # A row that has seen no key yet keeps the maximum -inf: subtract 0 there instead,
        # so that its masked scores give exp2(-inf) = 0 and not exp2(NaN).
        shift = tl.where(new_max == -float("inf"), 0.0, new_max)
    else:
        shift = new_max
    probs = tl.math.exp2((scores - shift[:, None]) * qk_scale)
    correction = tl.math.exp2((row_max - shift) * qk_scale)  # 0 while row_max is -inf
    return probs, correction, new_max, row_sum * correction + tl.sum(probs, axis=1)


@triton.jit
def _forward_block_loop(
    acc, row_sum, row_max,  # running output, normaliser and max (of raw scores) of the rows
    q, k_desc, v_desc, batch, kv_head, offs_m, qk_scale,
    start, end,  # key range to visit: [start, end), start a multiple of BLOCK_N
    num_keys, diagonal, window,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,  # hide the keys _visible hides (blocks at the range's edges)
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    BLOCK_D: tl.constexpr = q.shape[1]
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(start, end, BLOCK_N):
        k = _rows(k_desc, batch, kv_head, start_n, BLOCK_N, BLOCK_D)
        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)  # unscaled
        if MASKED:
            keep = _visible(offs_m[:, None], (start_n + offs_n)[None, :], num_keys, diagonal,
                            window, CAUSAL, WINDOW)
            scores = tl.where(keep, scores, -float("inf"))
        probs, correction, row_max, row_sum = _online_softmax_step(
            scores, row_max, row_sum, qk_scale, MASKED)
        v = _rows(v_desc, batch, kv_head, start_n, BLOCK_N, BLOCK_D)
        acc = tl.dot(probs.to(v.dtype), v, acc * correction[:, None],
                     input_precision=DOT_PRECISION)
    return acc, row_sum, row_max


@triton.jit
def _store_rows(out_ptr, lse_ptr, max_ptr, log2sum_ptr, acc, row_sum, row_max, head_rows,
                offs_m, row_mask, qk_scale, HEAD_DIM: tl.constexpr):
    """Normalise and store finished rows: the output, the log-sum-exp (natural log), and
    the raw maximum and log2 of the normaliser that the backward recomputes the
    probabilities from. A row that saw no key stores zeros, log-sum-exp -inf, and the
    statistics (0, +inf), which give it probability exp2(-inf) = 0 in the backward."""
    BLOCK_D: tl.constexpr = acc.shape[1]
    empty = row_sum == 0.0
    acc = acc / tl.where(empty, 1.0, row_sum)[:, None]
    log2_sum = tl.math.log2(tl.where(empty, 1.0, row_sum))  # replaced below where empty
    # In natural-log units from the start: row_max * qk_scale alone is log2(e) times
    # larger, and can overflow where the log-sum-exp does not.
    lse = tl.where(empty, -float("inf"), row_max * (qk_scale * LN2) + log2_sum * LN2)
    tl.store(lse_ptr + head_rows + offs_m, lse, mask=row_mask)
    tl.store(max_ptr + head_rows + offs_m, tl.where(empty, 0.0, row_max), mask=row_mask)
    tl.store(log2sum_ptr + head_rows + offs_m, tl.where(empty, float("inf"), log2_sum),
             mask=row_mask)
    offs_d = tl.arange(0, BLOCK_D)
    out_ptrs = out_ptr + head_rows * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    tile_mask = row_mask[:, None] & (offs_d < HEAD_DIM)[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=tile_mask)


@_autotune("forward")
@triton.jit
def attention_forward_kernel(
    q_desc, k_desc, v_desc,  # tensor descriptors over (batch, heads, seq, head_dim)
    out_ptr,  # (batch, heads, num_queries, HEAD_DIM), contiguous
    lse_ptr, max_ptr, log2sum_ptr,  # (batch * heads, num_queries) float32: see _store_rows
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
    lo, full_lo, full_hi, hi = _key_ranges(first_row, num_keys, diagonal, window, BLOCK_M,
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
    _store_rows(out_ptr, lse_ptr, max_ptr, log2sum_ptr, acc, row_sum, row_max, head_rows,
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
def _query_ranges(first_key, num_queries, diagonal, window, BLOCK_N: tl.constexpr,
                  BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
    """The queries that see keys ``first_key .. first_key + BLOCK_N``, as block starts
    ``lo <= full_lo <= full_hi <= hi`` (as :func:`_key_ranges`, from the keys' side)."""
    last_key = first_key + BLOCK_N - 1
    lo = 0
    hi = num_queries
    full_lo = 0
    full_hi = num_queries  # rows past num_queries load as zeros and add nothing
    if CAUSAL:
        lo = (tl.maximum(first_key - diagonal, 0) // BLOCK_M) * BLOCK_M
        full_lo = tl.cdiv(tl.maximum(last_key - diagonal, 0), BLOCK_M) * BLOCK_M
    if WINDOW:
        hi = tl.minimum(hi, tl.maximum(last_key - diagonal + window, 0))
        full_hi = (tl.maximum(first_key - diagonal + window, 0) // BLOCK_M) * BLOCK_M
    hi = tl.maximum(hi, lo)
    full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
    full_hi = tl.minimum(tl.maximum(full_hi, full_lo), hi)
    return lo, full_lo, full_hi, hi


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
            keep = _visible(offs_m[None, :], offs_n[:, None], num_keys, diagonal, window,
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


@_autotune("dkdv")
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
    lo, full_lo, full_hi, hi = _query_ranges(first_key, num_queries, diagonal, window,
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
            keep = _visible(offs_m[:, None], offs_n[None, :], num_keys, diagonal, window,
                            CAUSAL, WINDOW)
            scores = tl.where(keep, scores, -float("inf"))
        probs = tl.math.exp2((scores - row_max[:, None]) * qk_scale - log2_sum[:, None])
        dprobs = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)
        dscores = probs * (dprobs - delta[:, None])
        if SETTLE_ONE_HOT:
            dscores = tl.where(probs >= ONE_HOT, 0.0, dscores)
        dq = tl.dot(dscores.to(k.dtype), k, dq, input_precision=DOT_PRECISION)
    return dq


@_autotune("dq")
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

    lo, full_lo, full_hi, hi = _key_ranges(first_row, num_keys, diagonal, window, BLOCK_M,
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


@triton.jit
def _partials(partial_ptr, num_programs, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    """The split kernel's partial results in one float32 buffer, one block of BLOCK_R rows
    per (batch, kv_head, split) program: the unnormalised outputs (BLOCK_D columns), then
    the rows' maxima, then their normalisers."""
    rows = num_programs.to(tl.int64) * BLOCK_R
    return partial_ptr, partial_ptr + rows * BLOCK_D, partial_ptr + rows * (BLOCK_D + 1)


@triton.jit
def attention_decode_split_kernel(
    q_ptr, k_ptr, v_ptr,  # q (batch, heads, num_queries, HEAD_DIM), k, v (batch, kv_heads, num_keys, HEAD_DIM)
    partial_ptr,  # float32: see _partials
    q_stride_b, q_stride_h, q_stride_m,  # strides in elements; the last dimension's is 1
    k_stride_b, k_stride_h, k_stride_n,
    v_stride_b, v_stride_h, v_stride_n,
    num_kv_heads, group_size, num_queries, num_keys, window, qk_scale,
    keys_per_split,  # a multiple of BLOCK_N
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_R: tl.constexpr,  # group_size * num_queries rounded up to a power of two, >= 16
    BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    # One program: one range of keys of one (batch, kv_head), against every query of every
    # query head in its group, packed as rows r = member * num_queries + query. The keys
    # and values are read once for the whole group.
    split = tl.program_id(0)
    batch_kv_head = tl.program_id(1)
    batch = batch_kv_head // num_kv_heads
    kv_head = batch_kv_head % num_kv_heads
    rows = tl.arange(0, BLOCK_R)
    queries = rows % num_queries  # position among the queries, for the masks
    heads = kv_head * group_size + rows // num_queries
    row_mask = rows < group_size * num_queries
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < HEAD_DIM
    q_ptrs = (q_ptr + batch.to(tl.int64) * q_stride_b + heads[:, None].to(tl.int64) * q_stride_h
              + queries[:, None].to(tl.int64) * q_stride_m + offs_d[None, :])
    q = tl.load(q_ptrs, mask=row_mask[:, None] & d_mask[None, :], other=0.0)
    k_base = k_ptr + batch.to(tl.int64) * k_stride_b + kv_head.to(tl.int64) * k_stride_h
    v_base = v_ptr + batch.to(tl.int64) * v_stride_b + kv_head.to(tl.int64) * v_stride_h
    diagonal = num_keys - num_queries

    # This split's keys; with a window, none before the first that a query sees (the
    # last query sees the last key, so causal masking leaves the end as it is).
    start = split * keys_per_split
    end = tl.minimum(start + keys_per_split, num_keys)
    if WINDOW:
        first_seen = tl.maximum(diagonal - window + 1, 0)
        start = tl.maximum(start, (first_seen // BLOCK_N) * BLOCK_N)

    row_max = tl.full([BLOCK_R], -float("inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_R], tl.float32)
    acc = tl.zeros([BLOCK_R, BLOCK_D], tl.float32)
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in range(start, end, BLOCK_N):
        offs_n = start_n + offs_n0
        key_mask = (offs_n < end)[:, None] & d_mask[None, :]
        k = tl.load(k_base + offs_n[:, None].to(tl.int64) * k_stride_n + offs_d[None, :],
                    mask=key_mask, other=0.0)
        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)
        keep = _visible(queries[:, None], offs_n[None, :], end, diagonal, window, CAUSAL, WINDOW)
        scores = tl.where(keep, scores, -float("inf"))
        probs, correction, row_max, row_sum = _online_softmax_step(
            scores, row_max, row_sum, qk_scale, True)
        v = tl.load(v_base + offs_n[:, None].to(tl.int64) * v_stride_n + offs_d[None, :],
                    mask=key_mask, other=0.0)
        acc = tl.dot(probs.to(v.dtype), v, acc * correction[:, None],
                     input_precision=DOT_PRECISION)

    partial_acc_ptr, partial_max_ptr, partial_sum_ptr = _partials(
        partial_ptr, tl.num_programs(1) * tl.num_programs(0), BLOCK_R, BLOCK_D)
    partial = (batch_kv_head * tl.num_programs(0) + split).to(tl.int64) * BLOCK_R + rows
    tl.store(partial_max_ptr + partial, row_max)
    tl.store(partial_sum_ptr + partial, row_sum)
    tl.store(partial_acc_ptr + partial[:, None] * BLOCK_D + offs_d[None, :], acc)


@triton.jit
def attention_decode_combine_kernel(
    partial_ptr,  # as the split kernel wrote it
    out_ptr,  # (batch, heads, num_queries, HEAD_DIM), contiguous
    lse_ptr, max_ptr, log2sum_ptr,  # (batch * heads, num_queries) float32: see _store_rows
    num_splits, num_rows,  # num_rows = group_size * num_queries
    qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R: tl.constexpr,
    ROWS: tl.constexpr,  # rows per program
):
    # Merge the splits' (acc, max, sum) as the online softmax merges blocks of keys.
    batch_kv_head = tl.program_id(0)
    partial_acc_ptr, partial_max_ptr, partial_sum_ptr = _partials(
        partial_ptr, tl.num_programs(0) * num_splits, BLOCK_R, BLOCK_D)
    rows = tl.program_id(1) * ROWS + tl.arange(0, ROWS)
    offs_d = tl.arange(0, BLOCK_D)
    row_max = tl.full([ROWS], -float("inf"), tl.float32)
    row_sum = tl.zeros([ROWS], tl.float32)
    acc = tl.zeros([ROWS, BLOCK_D], tl.float32)
    for split in range(num_splits):
        partial = (batch_kv_head * num_splits + split).to(tl.int64) * BLOCK_R + rows
        split_max = tl.load(partial_max_ptr + partial)
        split_sum = tl.load(partial_sum_ptr + partial)
        split_acc = tl.load(partial_acc_ptr + partial[:, None] * BLOCK_D + offs_d[None, :])
        new_max = tl.maximum(row_max, split_max)
        shift = tl.where(new_max == -float("inf"), 0.0, new_max)
        old_weight = tl.math.exp2((row_max - shift) * qk_scale)
        split_weight = tl.math.exp2((split_max - shift) * qk_scale)
        row_sum = row_sum * old_weight + split_sum * split_weight
        acc = acc * old_weight[:, None] + split_acc * split_weight[:, None]
        row_max = new_max
    # The group's rows are consecutive rows of out (heads kv_head * group_size onwards).
    head_rows = batch_kv_head.to(tl.int64) * num_rows
    _store_rows(out_ptr, lse_ptr, max_ptr, log2sum_ptr, acc, row_sum, row_max, head_rows,
                rows, rows < num_rows, qk_scale, HEAD_DIM)


# q, k, v (and, in the backward, the output's gradient) are read through tensor
# descriptors (``triton.tools.tensor_descriptor``): a host-side record of a tensor's base,
# shape and strides that lets ``desc.load`` fetch a whole tile. On Hopper (sm_90) that load
# is one TMA instruction, an asynchronous copy engine that fills shared memory without
# using the warps' registers or address arithmetic, and rows past the end of a head come
# back as zeros. Elsewhere Triton lowers it to ordinary loads. TMA needs the base and
# every stride but the last to be multiples of 16 bytes.
TMA_ALIGNMENT = 16


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
    return TensorDescriptor(t, list(t.shape), strides, [1, 1, block_rows, block_d])


def _needs_int64_rows(num_rows: int, head_dim: int) -> bool:
    """Whether ``row * head_dim`` within one head can pass int32 (the kernels' stores index
    rows up to a block, at most MAX_BLOCK rows, past the last)."""
    return (num_rows + MAX_BLOCK) * head_dim > INT32_MAX


def _outputs(q: torch.Tensor):
    """Empty output, log-sum-exp and statistics (row maximum, log2 of the normaliser)."""
    batch, heads, num_queries, _ = q.shape
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((batch, heads, num_queries), dtype=torch.float32, device=q.device)
    stats = torch.empty((2, batch, heads, num_queries), dtype=torch.float32, device=q.device)
    return out, lse, stats


def _qk_scale(sm_scale: float) -> float:
    """The kernels' score scale, ``sm_scale * log2(e)``, at least MIN_QK_SCALE."""
    return max(sm_scale * 1.4426950408889634, MIN_QK_SCALE)


# Decode: flash-decoding (split the keys, combine the partials) for at most this many
# queries, and while one program's packed rows (group_size * num_queries, padded) times
# the tile width stay within 128 x 128 float32 accumulators.
DECODE_MAX_QUERIES = 16
DECODE_MAX_TILE = 128 * 128
# Fewest keys per split: shorter splits would write partials about as large as the keys
# they read, and the combine would cost more than the split saves.
DECODE_MIN_KEYS_PER_SPLIT = 128


@functools.cache
def _multiprocessors(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def decode_rows(q: torch.Tensor, k: torch.Tensor) -> int:
    """Rows of one decode program: every query of every query head of a group, at least
    16 (tl.dot's smallest tile), a power of two."""
    return max(16, next_power_of_2((q.shape[1] // k.shape[1]) * q.shape[2]))


def uses_decode(q: torch.Tensor, k: torch.Tensor) -> bool:
    """Whether :func:`attention_forward` takes the flash-decoding path for these shapes."""
    return (q.shape[2] <= DECODE_MAX_QUERIES
            and decode_rows(q, k) * next_power_of_2(q.shape[3]) <= DECODE_MAX_TILE)


def decode_block_n(block_d: int, element_size: int) -> int:
    """Keys per step of the decode kernel: 16 KiB of keys and as many of values per
    pipeline stage (64 keys at head_dim 128 in 16 bits), 16 to 128."""
    return max(16, min(128, 16384 // (block_d * element_size)))


def decode_splits(batch_kv_heads: int, num_keys: int, block_n: int,
                  multiprocessors: int) -> tuple[int, int]:
    """``(num_splits, keys_per_split)`` for flash-decoding: as many splits as keep the
    programs within two per SM (two of the decode kernel's 96 KiB of pipeline buffers fit
    an H100's SM at once, so they run in one wave, with no tail of a few programs after
    it), no split shorter than DECODE_MIN_KEYS_PER_SPLIT keys, each a whole number of key
    blocks."""
    wanted = max(1, 2 * multiprocessors // batch_kv_heads)
    most = cdiv(num_keys, DECODE_MIN_KEYS_PER_SPLIT)
    splits = max(1, min(wanted, most))
    keys_per_split = cdiv(cdiv(num_keys, splits), block_n) * block_n
    return cdiv(num_keys, keys_per_split), keys_per_split


def attention_decode(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float,
    window: int = 0, num_splits: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flash-decoding forward: the same results as :func:`attention_forward` (output,
    log-sum-exp, statistics). ``num_splits``: how many ranges to split the keys into
    (default: from the shape and the GPU's SM count, see :func:`decode_splits`)."""
    batch, heads, num_queries, head_dim = q.shape
    kv_heads, num_keys = k.shape[1], k.shape[2]
    group_size = heads // kv_heads
    block_d = next_power_of_2(head_dim)
    block_r = decode_rows(q, k)
    block_n = decode_block_n(block_d, q.element_size())
    if num_splits is None:
        multiprocessors = 4 if interpreting() else _multiprocessors(
            q.device.index if q.device.index is not None else torch.cuda.current_device())
        num_splits, keys_per_split = decode_splits(batch * kv_heads, num_keys, block_n,
                                                   multiprocessors)
    else:
        keys_per_split = cdiv(cdiv(num_keys, num_splits), block_n) * block_n
        num_splits = cdiv(num_keys, keys_per_split)
    q, k, v = (t if t.stride(3) == 1 else t.contiguous() for t in (q, k, v))
    partials = torch.empty(batch * kv_heads * num_splits * block_r * (block_d + 2),
                           dtype=torch.float32, device=q.device)  # see _partials
    qk_scale = _qk_scale(sm_scale)
    flags = dict(HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_R=block_r)
    warps = 4 if block_r * block_d <= 32 * 128 else 8
    fast_launch(attention_decode_split_kernel)[(num_splits, batch * kv_heads)](
        q, k, v, partials, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
        kv_heads, group_size, num_queries, num_keys, window, qk_scale, keys_per_split,
        BLOCK_N=block_n, CAUSAL=causal, WINDOW=window > 0,
        DOT_PRECISION=dot_precision(q.dtype), num_warps=warps, num_stages=3, **flags,
    )
    out, lse, stats = _outputs(q)
    rows = min(block_r, 16)
    fast_launch(attention_decode_combine_kernel)[(batch * kv_heads, cdiv(group_size * num_queries, rows))](
        partials, out, lse, stats[0], stats[1],
        num_splits, group_size * num_queries, qk_scale, ROWS=rows, **flags,
    )
    return out, lse, stats


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
    out, lse, stats = _outputs(q)
    block_d = next_power_of_2(head_dim)
    # The autotuner's pre-hook sets each descriptor's tile to the configuration's blocks.
    q_desc, k_desc, v_desc = (_descriptor(_tma_layout(t), 1, block_d) for t in (q, k, v))

    def grid(meta):
        return (cdiv(num_queries, meta["BLOCK_M"]), batch * heads)

    fast_launch(attention_forward_kernel)[grid](
        q_desc, k_desc, v_desc, out, lse, stats[0], stats[1], heads, heads // kv_heads,
        num_queries, num_keys, window, _qk_scale(sm_scale),
        HEAD_DIM=head_dim, BLOCK_D=block_d, CAUSAL=causal, WINDOW=window > 0,
        DOT_PRECISION=dot_precision(q.dtype),
        INT64_OFFSETS=_needs_int64_rows(num_queries, head_dim),
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
    descriptors = [_descriptor(_tma_layout(t), 1, block_d) for t in (q, k, v, grad_out)]
    # dS = p * (dP - delta), and dq, dk are sm_scale times sums of it. Where a row's
    # softmax is one-hot (p rounds to 1 for one key), the exact bracket is at most a few
    # units in float32's last place of dP, but dP and delta are computed in different
    # orders, so the bracket comes out as rounding noise of that size: negligible times a
    # scale up to 1, but 1e20 times it swamps the answer (about 0) or overflows float16.
    # Above scale 1, such entries are set to 0, which is within that noise of the exact
    # value; at or below it, the kernels skip the test.
    common = dict(HEAD_DIM=head_dim, BLOCK_D=block_d, CAUSAL=causal, WINDOW=window > 0,
                  DOT_PRECISION=dot_precision(q.dtype), SETTLE_ONE_HOT=sm_scale > 1.0,
                  INT64_OFFSETS=_needs_int64_rows(max(num_queries, num_keys), head_dim))
    qk_scale = _qk_scale(sm_scale)

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


# Forward and backward are registered as PyTorch operators: autograd records the forward
# and calls the backward operator, and torch.compile sees each as one node whose outputs'
# shapes the fake implementations give.
@torch.library.custom_op("triton_guide::attention_forward", mutates_args=())
def _attention_forward_op(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float,
    window: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return attention_forward(q, k, v, causal, sm_scale, window)


@_attention_forward_op.register_fake
def _(q, k, v, causal, sm_scale, window=0):
    return _outputs(q)


@torch.library.custom_op("triton_guide::attention_backward", mutates_args=())
def _attention_backward_op(
    grad_out: torch.Tensor, grad_lse: torch.Tensor | None, q: torch.Tensor, k: torch.Tensor,
    v: torch.Tensor, out: torch.Tensor, stats: torch.Tensor, causal: bool, sm_scale: float,
    window: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return attention_backward(grad_out, grad_lse, q, k, v, out, stats, causal, sm_scale,
                              window)


@_attention_backward_op.register_fake
def _(grad_out, grad_lse, q, k, v, out, stats, causal, sm_scale, window=0):
    return tuple(torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))


def _save_for_backward(ctx, inputs, output):
    q, k, v, causal, sm_scale, *window = inputs
    out, lse, stats = output
    ctx.save_for_backward(q, k, v, out, stats)
    ctx.causal = causal
    ctx.sm_scale = sm_scale
    ctx.window = window[0] if window else 0
    ctx.mark_non_differentiable(stats)


def _attention_grad(ctx, grad_out, grad_lse, grad_stats):
    # stats is internal, never handed to the caller: its gradient is always None.
    q, k, v, out, stats = ctx.saved_tensors
    if grad_out is None:  # only the log-sum-exp was used
        grad_out = torch.zeros_like(out)
    dq, dk, dv = _attention_backward_op(grad_out, grad_lse, q, k, v, out, stats, ctx.causal,
                                        ctx.sm_scale, ctx.window)
    return dq, dk, dv, None, None, None


_attention_forward_op.register_autograd(_attention_grad, setup_context=_save_for_backward)
refuse_double_backward(_attention_backward_op, "attention")


def _check_scale(sm_scale: object) -> float:
    """``sm_scale`` as a float the kernels can use, or an error naming it."""
    try:
        scale = check_positive_number("sm_scale", sm_scale)
    except OverflowError:  # an int too large for a float, such as 10**400
        raise ValueError(
            f"sm_scale must be a positive finite number no larger than {MAX_SM_SCALE:.3g} "
            f"(the kernels scale scores in float32), got an int of "
            f"{len(str(abs(sm_scale)))} digits"
        ) from None
    if scale > MAX_SM_SCALE:
        raise ValueError(
            f"sm_scale is {scale:g}, but the kernels scale scores by sm_scale * log2(e) in "
            f"float32, which cannot represent that above {MAX_SM_SCALE:.3g}: pass a smaller "
            f"sm_scale, or use attention_reference in float64"
        )
    return scale


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
    sm_scale = _check_scale(sm_scale)
    if through_operator(q, k, v):  # autograd or torch.compile: see triton_guide.library
        out, lse, _ = _attention_forward_op(q, k, v, causal, sm_scale, window)
    else:
        out, lse, _ = attention_forward(q, k, v, causal, sm_scale, window)
    return (out, lse) if return_lse else out
