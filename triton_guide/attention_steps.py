"""The attention page's ladder: from the PyTorch reference to the production kernel of
:mod:`triton_guide.attention`, one idea at a time, each step a tested kernel.

1. :func:`triton_guide.attention_reference`: PyTorch, the whole score matrix in memory.
2. :func:`attention_two_pass`: one program per block of query rows. A first pass over
   the key blocks finds each row's maximum and normaliser; a second pass recomputes the
   scores and adds up ``softmax @ v``. Nothing of size ``seq x seq`` is stored, but
   every score is computed twice and the keys are read twice.
3. :func:`attention_online`: one pass, the online softmax: the running output is
   rescaled whenever a block raises a row's maximum. Plain ``exp``, masks on every
   block, one fixed block shape.
4. :func:`triton_guide.attention`: ``exp2``, masks only where needed, causal masking,
   autotuned block shapes, and a backward pass.

Steps 2 and 3 are forward only and not causal; q, k and v are copied to contiguous
memory. Their float32 ``tl.dot`` follows PyTorch's float32 matmul setting
(:mod:`triton_guide.precision`).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .attention import MIN_HEAD_DIM
from .precision import dot_input_precision
from .runtime import interpreting
from .validation import check_same_dtype, check_same_shape, check_tensor

# The steps hold a whole (rows, head_dim) tile of q, k and v at once; the production
# kernel's wider limit (256) is not tested for them.
MAX_HEAD_DIM = 128


@triton.jit
def load_rows(base, rows, offs_d, seq_len, HEAD_DIM: tl.constexpr):
    """Rows ``rows`` of a contiguous (seq_len, HEAD_DIM) matrix, zero past its edges."""
    mask = (rows[:, None] < seq_len) & (offs_d[None, :] < HEAD_DIM)
    pointers = base + rows[:, None] * HEAD_DIM + offs_d[None, :]
    return tl.load(pointers, mask=mask, other=0.0)


@triton.jit
def block_scores(q, k, cols, seq_len, sm_scale, INPUT_PRECISION: tl.constexpr):
    """Scaled scores of the query rows ``q`` against one block of keys ``k``; keys at or
    past ``seq_len`` score ``-inf``, so that they get no weight."""
    scores = tl.dot(q, tl.trans(k), input_precision=INPUT_PRECISION) * sm_scale
    return tl.where(cols[None, :] < seq_len, scores, -float("inf"))


@triton.jit
def attention_two_pass_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr,  # contiguous (batch * heads, seq_len, HEAD_DIM)
    seq_len, sm_scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,  # HEAD_DIM rounded up to a power of two
    BLOCK_M: tl.constexpr,  # query rows per program
    BLOCK_N: tl.constexpr,  # keys per step
    INPUT_PRECISION: tl.constexpr,  # tl.dot's for float32 operands (triton_guide.precision)
):
    head_offset = tl.program_id(1).to(tl.int64) * seq_len * HEAD_DIM
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    q = load_rows(q_ptr + head_offset, rows, offs_d, seq_len, HEAD_DIM)

    # Pass 1: each row's maximum and normaliser (the softmax page's online softmax).
    row_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    for start_n in range(0, seq_len, BLOCK_N):
        cols = start_n + offs_n
        k = load_rows(k_ptr + head_offset, cols, offs_d, seq_len, HEAD_DIM)
        scores = block_scores(q, k, cols, seq_len, sm_scale, INPUT_PRECISION)
        new_max = tl.maximum(row_max, tl.max(scores, axis=1))
        probs = tl.exp(scores - new_max[:, None])
        row_sum = row_sum * tl.exp(row_max - new_max) + tl.sum(probs, axis=1)
        row_max = new_max

    # Pass 2: the final probabilities, block by block, times the values.
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start_n in range(0, seq_len, BLOCK_N):
        cols = start_n + offs_n
        k = load_rows(k_ptr + head_offset, cols, offs_d, seq_len, HEAD_DIM)
        scores = block_scores(q, k, cols, seq_len, sm_scale, INPUT_PRECISION)
        probs = tl.exp(scores - row_max[:, None]) / row_sum[:, None]
        v = load_rows(v_ptr + head_offset, cols, offs_d, seq_len, HEAD_DIM)
        acc = tl.dot(probs.to(v.dtype), v, acc, input_precision=INPUT_PRECISION)

    out_ptrs = out_ptr + head_offset + rows[:, None] * HEAD_DIM + offs_d[None, :]
    out_mask = (rows[:, None] < seq_len) & (offs_d[None, :] < HEAD_DIM)
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=out_mask)


@triton.jit
def attention_online_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr,  # contiguous (batch * heads, seq_len, HEAD_DIM)
    seq_len, sm_scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,  # HEAD_DIM rounded up to a power of two
    BLOCK_M: tl.constexpr,  # query rows per program
    BLOCK_N: tl.constexpr,  # keys per step
    INPUT_PRECISION: tl.constexpr,  # tl.dot's for float32 operands (triton_guide.precision)
):
    head_offset = tl.program_id(1).to(tl.int64) * seq_len * HEAD_DIM
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    q = load_rows(q_ptr + head_offset, rows, offs_d, seq_len, HEAD_DIM)

    # One pass: the output is kept unnormalised and rescaled whenever the maximum grows.
    row_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start_n in range(0, seq_len, BLOCK_N):
        cols = start_n + offs_n
        k = load_rows(k_ptr + head_offset, cols, offs_d, seq_len, HEAD_DIM)
        scores = block_scores(q, k, cols, seq_len, sm_scale, INPUT_PRECISION)
        new_max = tl.maximum(row_max, tl.max(scores, axis=1))
        probs = tl.exp(scores - new_max[:, None])
        correction = tl.exp(row_max - new_max)  # 1 if the maximum did not move
        row_sum = row_sum * correction + tl.sum(probs, axis=1)
        v = load_rows(v_ptr + head_offset, cols, offs_d, seq_len, HEAD_DIM)
        acc = tl.dot(probs.to(v.dtype), v, acc * correction[:, None],
                     input_precision=INPUT_PRECISION)
        row_max = new_max

    acc = acc / row_sum[:, None]  # normalise once, at the end
    out_ptrs = out_ptr + head_offset + rows[:, None] * HEAD_DIM + offs_d[None, :]
    out_mask = (rows[:, None] < seq_len) & (offs_d[None, :] < HEAD_DIM)
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=out_mask)


def step_blocks(dtype: torch.dtype) -> dict[str, int]:
    """The block shape of steps 2 and 3 (the production kernel autotunes its own)."""
    if interpreting():
        return {"BLOCK_M": 16, "BLOCK_N": 16}
    # float32 tiles take twice the shared memory of float16 ones: halve the key block.
    return {"BLOCK_M": 64, "BLOCK_N": 64 if dtype != torch.float32 else 32}


def _launch(kernel, q, k, v, sm_scale):
    q, k, v = (check_tensor(name, value, ndim=4)
               for name, value in (("q", q), ("k", k), ("v", v)))
    check_same_shape("q", q, "k", k)
    check_same_shape("q", q, "v", v)
    check_same_dtype("q", q, "k", k)
    check_same_dtype("q", q, "v", v)
    batch, heads, seq_len, head_dim = q.shape
    if not MIN_HEAD_DIM <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(
            f"head_dim (q.shape[-1]) must be between {MIN_HEAD_DIM} and "
            f"{MAX_HEAD_DIM}, got {head_dim}"
        )
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    q, k, v = (t.contiguous() for t in (q, k, v))
    out = torch.empty_like(q)
    blocks = step_blocks(q.dtype)
    grid = (triton.cdiv(seq_len, blocks["BLOCK_M"]), batch * heads)
    kernel[grid](
        q, k, v, out, seq_len, float(sm_scale),
        HEAD_DIM=head_dim, BLOCK_D=triton.next_power_of_2(head_dim), **blocks,
        INPUT_PRECISION=dot_input_precision(q.dtype), num_warps=4, num_stages=2,
    )
    return out


def attention_two_pass(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float | None = None
) -> torch.Tensor:
    """Step 2: ``softmax(q @ k^T * sm_scale) @ v``, not causal, in two passes over keys.

    ``q``, ``k``, ``v``: one shape (batch, heads, seq, head_dim), one floating dtype,
    ``head_dim`` from 16 to 128. ``sm_scale`` defaults to ``1 / sqrt(head_dim)``.
    """
    return _launch(attention_two_pass_kernel, q, k, v, sm_scale)


def attention_online(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float | None = None
) -> torch.Tensor:
    """Step 3: as :func:`attention_two_pass`, in one pass with the online softmax."""
    return _launch(attention_online_kernel, q, k, v, sm_scale)
