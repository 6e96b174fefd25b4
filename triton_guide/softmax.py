"""Softmax along the last dimension: a one-pass kernel and an online (streaming) kernel.

Every row is handled by one program. When a whole row fits in one block, the program loads it
once, normalises it in registers and writes it once (:func:`softmax_kernel`). A longer row is
streamed through in blocks twice (:func:`softmax_online_kernel`): the first pass keeps a
running maximum and a running sum, rescaling the sum whenever the maximum grows; the second
writes ``exp(x - max) / sum``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .validation import check_tensor

# The widest row the one-pass kernel takes (elements); longer rows go to the online kernel.
# At 16384 fp32 elements a row is 64 KiB, held in the registers of 16 warps.
MAX_ONE_PASS_BLOCK = 16384
# Columns the online kernel reads per step.
ONLINE_BLOCK = 4096


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    """What :func:`softmax` computes, in plain PyTorch."""
    return torch.softmax(x, dim=-1)


def softmax_naive(x: torch.Tensor) -> torch.Tensor:
    """Softmax as five separate PyTorch operations, each a kernel with its own memory trip.

    For an ``M x N`` input this reads ``5MN + 2M`` elements and writes ``3MN + 2M``, against
    ``MN`` read and ``MN`` written by a fused kernel.
    """
    row_max = x.max(dim=-1, keepdim=True).values  # read MN, write M
    shifted = x - row_max  # read MN + M, write MN
    numerator = torch.exp(shifted)  # read MN, write MN
    denominator = numerator.sum(dim=-1, keepdim=True)  # read MN, write M
    return numerator / denominator  # read MN + M, write MN


@triton.jit
def softmax_kernel(
    input_ptr,
    output_ptr,
    input_row_stride,  # elements between the starts of two input rows
    output_row_stride,
    num_cols,  # length of a row
    BLOCK_SIZE: tl.constexpr,  # a power of two >= num_cols: the whole row in one block
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < num_cols
    # Lanes past the end of the row read -inf, so they change neither the max nor the sum.
    x = tl.load(input_ptr + row * input_row_stride + cols, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=0))
    result = numerator / tl.sum(numerator, axis=0)
    tl.store(output_ptr + row * output_row_stride + cols, result, mask=mask)


@triton.jit
def softmax_online_kernel(
    input_ptr,
    output_ptr,
    input_row_stride,
    output_row_stride,
    num_cols,
    BLOCK_SIZE: tl.constexpr,  # columns per step; the row may be any number of blocks long
):
    row = tl.program_id(0)
    input_row = input_ptr + row * input_row_stride
    output_row = output_ptr + row * output_row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    # Pass 1. Each lane keeps the running max and running sum of the columns it has seen
    # (lane i sees columns i, i + BLOCK_SIZE, ...), so no cross-lane reduction is needed
    # inside the loop.
    running_max = tl.full([BLOCK_SIZE], -float("inf"), tl.float32)
    running_sum = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, num_cols, BLOCK_SIZE):
        mask = start + cols < num_cols
        x = tl.load(input_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        new_max = tl.maximum(running_max, x)
        # A lane that has seen only -inf keeps max -inf; shifting by 0 instead of by -inf
        # avoids exp(-inf - -inf) = nan there, and its sum stays 0.
        shift = tl.where(new_max == -float("inf"), 0.0, new_max)
        running_sum = running_sum * tl.exp(running_max - shift) + tl.exp(x - shift)
        running_max = new_max

    # Merge the lanes: rescale every lane's sum to the row's max.
    row_max = tl.max(running_max, axis=0)
    lane_scale = tl.where(running_max == -float("inf"), 0.0, tl.exp(running_max - row_max))
    row_sum = tl.sum(running_sum * lane_scale, axis=0)

    # Pass 2: read the row again and write the normalised values.
    for start in range(0, num_cols, BLOCK_SIZE):
        mask = start + cols < num_cols
        x = tl.load(input_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(output_row + start + cols, tl.exp(x - row_max) / row_sum, mask=mask)


def _num_warps(block_size: int) -> int:
    # More warps for wider rows keep the per-thread register load bounded.
    if block_size >= 16384:
        return 16
    if block_size >= 2048:
        return 8
    return 4


def softmax(x: torch.Tensor, *, method: str = "auto", block_size: int | None = None) -> torch.Tensor:
    """Softmax of ``x`` along its last dimension.

    ``x`` may have any rank; its leading dimensions are flattened into rows. Rows may be
    strided (a column slice of a larger matrix, say), but the last dimension must have
    stride 1.

    ``method`` is ``"one_pass"``, ``"online"`` or ``"auto"`` (one pass when a row fits in
    :data:`MAX_ONE_PASS_BLOCK` elements). ``block_size`` sets the online kernel's step
    (a power of two; default :data:`ONLINE_BLOCK`).
    """
    check_tensor("x", x, min_ndim=1)
    if x.stride(-1) != 1:
        raise ValueError(
            f"x must have stride 1 along its last dimension, got strides {x.stride()}; "
            "pass x.contiguous()"
        )
    num_cols = x.shape[-1]
    try:
        rows = x.view(-1, num_cols)
    except RuntimeError:
        raise ValueError(
            f"the leading dimensions of x (strides {x.stride()}) cannot be flattened into "
            "rows without a copy; pass x.contiguous()"
        ) from None
    one_pass_block = triton.next_power_of_2(num_cols)
    if method == "auto":
        method = "one_pass" if one_pass_block <= MAX_ONE_PASS_BLOCK else "online"
    if method not in ("one_pass", "online"):
        raise ValueError(f"method must be 'auto', 'one_pass' or 'online', got {method!r}")
    if method == "one_pass" and one_pass_block > MAX_ONE_PASS_BLOCK:
        raise ValueError(
            f"rows of {num_cols} elements do not fit the one-pass kernel "
            f"(at most {MAX_ONE_PASS_BLOCK}); use method='online'"
        )
    if block_size is not None and method != "online":
        raise ValueError("block_size applies to method='online' only")
    step = ONLINE_BLOCK if block_size is None else block_size
    if step < 1 or step & (step - 1):
        raise ValueError(f"block_size must be a power of two, got {block_size}")

    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    out_rows = out.view(-1, num_cols)
    grid = (rows.shape[0],)
    if method == "one_pass":
        softmax_kernel[grid](
            rows, out_rows, rows.stride(0), out_rows.stride(0), num_cols,
            BLOCK_SIZE=one_pass_block, num_warps=_num_warps(one_pass_block),
        )
    else:
        softmax_online_kernel[grid](
            rows, out_rows, rows.stride(0), out_rows.stride(0), num_cols,
            BLOCK_SIZE=step, num_warps=_num_warps(step),
        )
    return out
