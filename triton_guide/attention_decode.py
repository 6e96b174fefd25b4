"""Flash-decoding, and the pieces of attention that do not depend on how the keys are tiled.

With few queries (decode: 1-16 new tokens against a KV cache of thousands of keys), one
program per block of query rows would leave most of the GPU idle. Flash-decoding splits the
keys across programs instead: each program reads one range of keys and values for every
query of every query head of one key/value head (the group's heads packed as rows of one
tile, so the cache is read once per group), and writes a partial ``(acc, m, l)``: its
unnormalised output, the rows' maxima and normalisers. A second kernel merges the partials
as the online softmax merges blocks of keys. The number of splits comes from the shape and
the GPU's SM count (:func:`decode_splits`).

The pieces shared with the main kernels of :mod:`triton_guide.attention`: which keys a
query sees (:func:`visible_keys` in PyTorch, :func:`visible` in a kernel), one step of the
online softmax (:func:`online_softmax_step`), a finished row's epilogue
(:func:`store_rows`) and the score scale (:func:`qk_scale_of`, :func:`check_scale`).

Scores are exponentiated as ``exp2((s - m) * scale)`` from raw scores ``s`` and their raw
maximum ``m``, not as ``exp2(s * scale - m * scale)``: the product of a large score and a
large scale is rounded in float32 (and a fused multiply-add rounds it differently from the
maximum), so the difference of two such products can be off by far more than 1 and exp2 of
it overflow; ``s - m`` is 0 for the maximum at any scale.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .hardware import multiprocessors
from .launch import cdiv, fast_launch, next_power_of_2
from .precision import dot_input_precision
from .runtime import interpreting
from .validation import check_positive_number

LOG2E = tl.constexpr(1.4426950408889634)  # log2(e): exp(x) = exp2(x * LOG2E)
LN2 = tl.constexpr(0.6931471805599453)  # ln(2): log(x) = log2(x) * LN2
# The kernels scale scores by sm_scale * log2(e) in float32. Below float32's smallest
# normal number that product would round to 0 (or be flushed to 0 as a subnormal), and
# 0 * -inf, a masked score times the scale, is NaN. A smaller scale is raised to it: the
# softmax is then uniform to float32 precision for every score below 2**100 in magnitude,
# as it is at the requested scale.
MIN_QK_SCALE = 2.0 ** -126
FLOAT32_MAX = torch.finfo(torch.float32).max
MAX_SM_SCALE = FLOAT32_MAX / 1.4426950408889634

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



@triton.jit
def visible(rows, cols, num_keys, diagonal, window,
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
def online_softmax_step(scores, row_max, row_sum, qk_scale, MASKED: tl.constexpr):
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
def store_rows(out_ptr, lse_ptr, max_ptr, log2sum_ptr, acc, row_sum, row_max, head_rows,
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
    partial_ptr,  # float32: see _partials (unused where FINAL)
    out_ptr, lse_ptr, max_ptr, log2sum_ptr,  # written here where FINAL: see store_rows
    q_stride_b, q_stride_h, q_stride_m,  # strides in elements; the last dimension's is 1
    k_stride_b, k_stride_h, k_stride_n,
    v_stride_b, v_stride_h, v_stride_n,
    num_kv_heads, group_size, num_queries, num_keys, window, qk_scale,
    keys_per_split,  # a multiple of BLOCK_N
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_R: tl.constexpr,  # group_size * num_queries rounded up to a power of two, >= 16
    BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    FINAL: tl.constexpr,  # one split: store the finished rows, no partials, no combine
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
        keep = visible(queries[:, None], offs_n[None, :], end, diagonal, window, CAUSAL, WINDOW)
        scores = tl.where(keep, scores, -float("inf"))
        probs, correction, row_max, row_sum = online_softmax_step(
            scores, row_max, row_sum, qk_scale, True)
        v = tl.load(v_base + offs_n[:, None].to(tl.int64) * v_stride_n + offs_d[None, :],
                    mask=key_mask, other=0.0)
        acc = tl.dot(probs.to(v.dtype), v, acc * correction[:, None],
                     input_precision=DOT_PRECISION)

    if FINAL:
        # The group's rows are consecutive rows of out (heads kv_head * group_size onwards).
        head_rows = batch_kv_head.to(tl.int64) * (group_size * num_queries)
        store_rows(out_ptr, lse_ptr, max_ptr, log2sum_ptr, acc, row_sum, row_max, head_rows,
                   rows, row_mask, qk_scale, HEAD_DIM)
    else:
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
    lse_ptr, max_ptr, log2sum_ptr,  # (batch * heads, num_queries) float32: see store_rows
    num_splits, num_rows,  # num_rows = group_size * num_queries
    qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R: tl.constexpr,
    BLOCK_S: tl.constexpr,  # splits merged per step, a power of two
):
    # One program: one row of one (batch, kv_head) group. It merges the splits' (acc, max,
    # sum) as the online softmax merges blocks of keys, BLOCK_S splits at a time loaded as
    # one tile: the loads of a step are independent, so a few steps cover every split
    # where a loop over single splits would wait on each load in turn.
    batch_kv_head = tl.program_id(0)
    partial_acc_ptr, partial_max_ptr, partial_sum_ptr = _partials(
        partial_ptr, tl.num_programs(0) * num_splits, BLOCK_R, BLOCK_D)
    row = tl.program_id(1)
    rows = row + tl.arange(0, 1)  # a block of one row, the shape store_rows takes
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    row_max = tl.full([1], -float("inf"), tl.float32)
    row_sum = tl.zeros([1], tl.float32)
    acc = tl.zeros([1, BLOCK_D], tl.float32)
    for first in range(0, num_splits, BLOCK_S):
        splits = first + offs_s
        partial = (batch_kv_head * num_splits + splits).to(tl.int64) * BLOCK_R + row
        present = splits < num_splits
        split_max = tl.load(partial_max_ptr + partial, mask=present, other=-float("inf"))
        split_sum = tl.load(partial_sum_ptr + partial, mask=present, other=0.0)
        split_acc = tl.load(partial_acc_ptr + partial[:, None] * BLOCK_D + offs_d[None, :],
                            mask=present[:, None], other=0.0)
        new_max = tl.maximum(row_max, tl.max(split_max, axis=0))
        shift = tl.where(new_max == -float("inf"), 0.0, new_max)
        old_weight = tl.math.exp2((row_max - shift) * qk_scale)
        split_weight = tl.math.exp2((split_max - shift) * qk_scale)  # 0 where absent
        row_sum = row_sum * old_weight + tl.sum(split_sum * split_weight, axis=0)
        acc = acc * old_weight[:, None] + tl.sum(split_acc * split_weight[:, None], axis=0)[None, :]
        row_max = new_max
    head_rows = batch_kv_head.to(tl.int64) * num_rows
    store_rows(out_ptr, lse_ptr, max_ptr, log2sum_ptr, acc, row_sum, row_max, head_rows,
               rows, rows < num_rows, qk_scale, HEAD_DIM)


def new_outputs(q: torch.Tensor):
    """Empty output, log-sum-exp and statistics (row maximum, log2 of the normaliser)."""
    batch, heads, num_queries, _ = q.shape
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    # Separate tensors: outputs of a PyTorch operator may not alias one another.
    lse = torch.empty((batch, heads, num_queries), dtype=torch.float32, device=q.device)
    stats = torch.empty((2, batch, heads, num_queries), dtype=torch.float32, device=q.device)
    return out, lse, stats


def qk_scale_of(sm_scale: float) -> float:
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
                  sm_count: int) -> tuple[int, int]:
    """``(num_splits, keys_per_split)`` for flash-decoding: as many splits as keep the
    programs within two per SM (two of the decode kernel's 96 KiB of pipeline buffers fit
    an H100's SM at once, so they run in one wave, with no tail of a few programs after
    it), no split shorter than DECODE_MIN_KEYS_PER_SPLIT keys, each a whole number of key
    blocks."""
    wanted = max(1, 2 * sm_count // batch_kv_heads)
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
        # Under the interpreter: as if 4 SMs, so that small tests split the keys too.
        sms = 4 if interpreting() else multiprocessors(q.device)
        num_splits, keys_per_split = decode_splits(batch * kv_heads, num_keys, block_n, sms)
    else:
        keys_per_split = cdiv(cdiv(num_keys, num_splits), block_n) * block_n
        num_splits = cdiv(num_keys, keys_per_split)
    q, k, v = (t if t.stride(3) == 1 else t.contiguous() for t in (q, k, v))
    final = num_splits == 1
    out, lse, stats = new_outputs(q)
    partials = out if final else torch.empty(  # see _partials
        batch * kv_heads * num_splits * block_r * (block_d + 2),
        dtype=torch.float32, device=q.device)
    qk_scale = qk_scale_of(sm_scale)
    flags = dict(HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_R=block_r)
    warps = 4 if block_r * block_d <= 32 * 128 else 8
    fast_launch(attention_decode_split_kernel)[(num_splits, batch * kv_heads)](
        q, k, v, partials, out, lse, stats[0], stats[1],
        *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
        kv_heads, group_size, num_queries, num_keys, window, qk_scale, keys_per_split,
        BLOCK_N=block_n, CAUSAL=causal, WINDOW=window > 0,
        DOT_PRECISION=dot_input_precision(q.dtype), FINAL=final, num_warps=warps,
        num_stages=3, **flags,
    )
    if not final:
        # Up to 4096 float32 of partial outputs per step of a program (32 KiB of loads).
        block_s = min(next_power_of_2(num_splits), max(1, 4096 // block_d))
        fast_launch(attention_decode_combine_kernel)[(batch * kv_heads, group_size * num_queries)](
            partials, out, lse, stats[0], stats[1],
            num_splits, group_size * num_queries, qk_scale, BLOCK_S=block_s, **flags,
        )
    return out, lse, stats



def check_scale(sm_scale: object) -> float:
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
