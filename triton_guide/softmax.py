"""Softmax along the last dimension: a one-pass kernel and an online (streaming) kernel.

When a whole row fits in one block, a program loads it once, normalises it in registers and
writes it once (:func:`softmax_kernel`); short rows are taken several to a program, so that
every thread still has a few elements to work on. A longer row is streamed through in
blocks twice, one row per program (:func:`softmax_online_kernel`): the first pass keeps a
running maximum and a running sum, rescaling the sum whenever the maximum grows; the second
writes ``exp(x - max) / sum``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .hardware import num_warps_for
from .launch import cdiv, fast_launch, next_power_of_2
from .library import Operator
from .registry import register
from .validation import (
    MAX_ELEMENTS_PER_THREAD_EXP,
    check_block_size,
    check_tensor,
    needs_int64_offsets,
)

# The widest row the one-pass kernel takes (elements); longer rows go to the online kernel.
# At 32768 fp32 elements a row is 128 KiB, held in the registers of 32 warps. Measured on an
# H100, 2048 x 32768 float32 ran 2874 GB/s in one pass against 1933
# for the online kernel's two reads; at 65536 the one-pass tile no longer fits.
MAX_ONE_PASS_BLOCK = 32768
# Elements per program the one-pass kernel aims for when rows are short: rows of 128 are
# taken 16 to a program. One 128-element row per program left 0.58-0.69x torch's speed
# (H100); tiles of 2048-8192 elements came within a few percent of the
# best tile for every short-row shape measured.
ONE_PASS_TILE = 2048
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
    input_col_stride,  # elements between neighbours in a row (1 unless x is a strided view)
    output_row_stride,
    num_rows,
    num_cols,  # length of a row
    BLOCK_ROWS: tl.constexpr,  # rows per program: 1 for long rows, more for short ones
    BLOCK_SIZE: tl.constexpr,  # a power of two >= num_cols: the whole row in one block
    INT64_OFFSETS: tl.constexpr = False,  # offsets can pass 2**31 - 1: compute them in int64
):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_SIZE)
    if INT64_OFFSETS:
        rows = rows.to(tl.int64)
        cols = cols.to(tl.int64)
    # The last program's tile may hang past the last row: those lanes re-read the last row
    # (so every row they reduce is a real one) and store nothing.
    rows_read = tl.minimum(rows, num_rows - 1)
    in_row = cols[None, :] < num_cols
    # Lanes past the end of the row read -inf, so they change neither the max nor the sum.
    x = tl.load(
        input_ptr + rows_read[:, None] * input_row_stride + cols[None, :] * input_col_stride,
        mask=in_row, other=-float("inf"),
    )
    x = x.to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=1)[:, None])  # one max and one sum per row
    result = numerator / tl.sum(numerator, axis=1)[:, None]
    tl.store(output_ptr + rows[:, None] * output_row_stride + cols[None, :], result,
             mask=(rows[:, None] < num_rows) & in_row)


@triton.jit
def softmax_online_kernel(
    input_ptr,
    output_ptr,
    input_row_stride,
    input_col_stride,
    output_row_stride,
    num_cols,
    BLOCK_SIZE: tl.constexpr,  # columns per step; the row may be any number of blocks long
    INT64_OFFSETS: tl.constexpr = False,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    if INT64_OFFSETS:
        row = row.to(tl.int64)
        cols = cols.to(tl.int64)
    input_row = input_ptr + row * input_row_stride
    output_row = output_ptr + row * output_row_stride

    # Pass 1. Each lane keeps the running max and running sum of the columns it has seen
    # (lane i sees columns i, i + BLOCK_SIZE, ...), so no cross-lane reduction is needed
    # inside the loop.
    running_max = tl.full([BLOCK_SIZE], -float("inf"), tl.float32)
    running_sum = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, num_cols, BLOCK_SIZE):
        mask = start + cols < num_cols
        x = tl.load(
            input_row + (start + cols) * input_col_stride, mask=mask, other=-float("inf")
        ).to(tl.float32)
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
        x = tl.load(
            input_row + (start + cols) * input_col_stride, mask=mask, other=-float("inf")
        ).to(tl.float32)
        tl.store(output_row + start + cols, tl.exp(x - row_max) / row_sum, mask=mask)


@triton.jit
def softmax_backward_kernel(
    output_ptr,  # y = softmax(x), saved by the forward pass; rows contiguous
    grad_output_ptr,  # dL/dy, any strides
    grad_input_ptr,  # dL/dx, written here; rows contiguous like y
    output_row_stride,
    grad_output_row_stride,
    grad_output_col_stride,
    num_cols,
    BLOCK_SIZE: tl.constexpr,  # columns per step
    INT64_OFFSETS: tl.constexpr = False,
):
    # dx_j = y_j * (dy_j - sum_k dy_k * y_k): one dot product per row, then one
    # element-wise pass. A row that fits in one block is read from memory once and from
    # the cache the second time.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    if INT64_OFFSETS:
        row = row.to(tl.int64)
        cols = cols.to(tl.int64)
    output_row = output_ptr + row * output_row_stride
    grad_output_row = grad_output_ptr + row * grad_output_row_stride
    grad_input_row = grad_input_ptr + row * output_row_stride

    # Pass 1: the row's dot product, accumulated per lane and reduced once at the end.
    products = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, num_cols, BLOCK_SIZE):
        mask = start + cols < num_cols
        y = tl.load(output_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(
            grad_output_row + (start + cols) * grad_output_col_stride, mask=mask, other=0.0
        ).to(tl.float32)
        products += y * dy
    row_dot = tl.sum(products, axis=0)

    # Pass 2: the gradient, element by element.
    for start in range(0, num_cols, BLOCK_SIZE):
        mask = start + cols < num_cols
        y = tl.load(output_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(
            grad_output_row + (start + cols) * grad_output_col_stride, mask=mask, other=0.0
        ).to(tl.float32)
        tl.store(grad_input_row + start + cols, y * (dy - row_dot), mask=mask)


def one_pass_rows(block_size: int) -> int:
    """Rows per program for the one-pass kernel: enough for :data:`ONE_PASS_TILE` elements."""
    return max(1, ONE_PASS_TILE // block_size)


def softmax(x: torch.Tensor, *, method: str = "auto", block_size: int | None = None) -> torch.Tensor:
    """Softmax of ``x`` along its last dimension, differentiable.

    ``x`` may have any rank and any strides; its leading dimensions are flattened into rows
    (without a copy when the strides allow it).

    ``method`` is ``"one_pass"``, ``"online"`` or ``"auto"`` (one pass when a row fits in
    :data:`MAX_ONE_PASS_BLOCK` elements). ``block_size`` sets the online kernel's step
    (a power of two; default :data:`ONLINE_BLOCK`).
    """
    x = check_tensor("x", x, min_ndim=1)
    num_cols = x.shape[-1]
    one_pass_block = next_power_of_2(num_cols)
    if not isinstance(method, str):
        raise TypeError(
            f"method must be a str ('auto', 'one_pass' or 'online'), got {type(method).__name__}"
        )
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
    if method == "online":
        block_size = (ONLINE_BLOCK if block_size is None
                      else check_block_size("block_size", block_size, num_warps=num_warps_for,
                                           per_thread=MAX_ELEMENTS_PER_THREAD_EXP))
    else:
        block_size = one_pass_block
    return _softmax(x, method, block_size)


def _launch(x: torch.Tensor, method: str, block_size: int) -> torch.Tensor:
    num_cols = x.shape[-1]
    rows = x.reshape(-1, num_cols)  # a view when the strides allow, else a copy
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    out_rows = out.view(-1, num_cols)
    num_rows = rows.shape[0]
    int64_offsets = needs_int64_offsets(rows, out_rows)
    strides = (rows.stride(0), rows.stride(1), out_rows.stride(0))
    if method == "one_pass":
        block_rows = one_pass_rows(block_size)
        fast_launch(softmax_kernel)[(cdiv(num_rows, block_rows),)](
            rows, out_rows, *strides, num_rows, num_cols, BLOCK_ROWS=block_rows,
            BLOCK_SIZE=block_size, num_warps=num_warps_for(block_rows * block_size),
            INT64_OFFSETS=int64_offsets,
        )
    else:
        fast_launch(softmax_online_kernel)[(num_rows,)](
            rows, out_rows, *strides, num_cols, BLOCK_SIZE=block_size,
            num_warps=num_warps_for(block_size), INT64_OFFSETS=int64_offsets,
        )
    return out


def softmax_backward(out: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    """The gradient of softmax's input, from its output ``out`` and the output's gradient.

    ``out`` is what :func:`softmax` returned (contiguous); ``grad_out`` has its shape and
    any strides.
    """
    num_cols = out.shape[-1]
    out_rows = out.view(-1, num_cols)
    grad_out_rows = grad_out.reshape(-1, num_cols)
    grad_in = torch.empty(out.shape, dtype=out.dtype, device=out.device)
    block_size = min(next_power_of_2(num_cols), ONLINE_BLOCK)
    fast_launch(softmax_backward_kernel)[(out_rows.shape[0],)](
        out_rows, grad_out_rows, grad_in, out_rows.stride(0),
        grad_out_rows.stride(0), grad_out_rows.stride(1), num_cols,
        BLOCK_SIZE=block_size, num_warps=num_warps_for(block_size),
        INT64_OFFSETS=needs_int64_offsets(out_rows, grad_out_rows),
    )
    return grad_in


def _fake(x, method, block_size):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _launch_backward(out: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    return softmax_backward(out, grad_out)


def _fake_backward(out, grad_out):
    return torch.empty(out.shape, dtype=out.dtype, device=out.device)


def _save_output(ctx, inputs, output):
    ctx.save_for_backward(output)


def _grad(ctx, grad_out):
    (out,) = ctx.saved_tensors
    return _softmax_backward(out, grad_out), None, None


# Autograd and torch.compile: see triton_guide.library. The backward kernel has no
# derivative of its own: a second backward through it raises.
_softmax_backward = Operator("softmax_backward", _launch_backward, fake=_fake_backward,
                             refuse_name="softmax")
_softmax = Operator("softmax", _launch, fake=_fake, backward=_grad,
                    setup_context=_save_output)


def _example(device):
    return (torch.randn(5, 33, device=device) * 3,), {}


register("softmax", softmax, softmax_reference, example=_example, differentiable=True,
         compile_safe=True)
