"""Matrix transpose with a 2D grid of 2D tiles: the smallest kernel that needs ``[:, None]``."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import cdiv, fast_launch, next_power_of_2
from .library import Operator
from .registry import register
from .validation import (
    DEFAULT_NUM_WARPS,
    MAX_BLOCK_ELEMENTS,
    MAX_GRID_AXIS_1,
    check_block_size,
    check_elements_per_thread,
    check_grid_axis,
    check_tensor,
    max_block_size,
    needs_int64_offsets,
)


def transpose_reference(x: torch.Tensor) -> torch.Tensor:
    """What :func:`transpose` computes, in plain PyTorch."""
    return x.t().contiguous()


@triton.jit
def transpose_kernel(
    input_ptr,
    output_ptr,
    num_rows, num_cols,  # shape of the input; the output is num_cols x num_rows
    input_row_stride, input_col_stride,  # elements to step one row down / one column right
    output_row_stride, output_col_stride,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    INT64_OFFSETS: tl.constexpr = False,  # offsets can pass 2**31 - 1: compute them in int64
):
    # A 2D grid: axis 0 walks down the rows of the input, axis 1 across its columns.
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    if INT64_OFFSETS:
        rows = rows.to(tl.int64)
        cols = cols.to(tl.int64)
    # rows[:, None] is a column vector and cols[None, :] a row vector: combined, they
    # broadcast to a BLOCK_ROWS x BLOCK_COLS tile of offsets, and of masks.
    mask = (rows[:, None] < num_rows) & (cols[None, :] < num_cols)
    tile = tl.load(
        input_ptr + rows[:, None] * input_row_stride + cols[None, :] * input_col_stride,
        mask=mask,
    )
    # Element (r, c) of the input goes to (c, r) of the output: swap the strides' roles.
    tl.store(
        output_ptr + cols[None, :] * output_row_stride + rows[:, None] * output_col_stride,
        tile,
        mask=mask,
    )


def transpose(x: torch.Tensor, *, block_rows: int = 32, block_cols: int = 32) -> torch.Tensor:
    """Return ``x.t()`` as a new contiguous tensor, differentiable. ``x`` is 2D, any strides."""
    x = check_tensor("x", x, ndim=2)
    block_rows = check_block_size("block_rows", block_rows)
    block_cols = check_block_size("block_cols", block_cols)
    if block_rows * block_cols > MAX_BLOCK_ELEMENTS:
        raise ValueError(
            f"a tile of block_rows x block_cols = {block_rows} x {block_cols} holds "
            f"{block_rows * block_cols} elements, but a Triton block holds at most "
            f"{MAX_BLOCK_ELEMENTS}; make the product {MAX_BLOCK_ELEMENTS} or less"
        )
    check_elements_per_thread(
        f"a tile of block_rows x block_cols = {block_rows} x {block_cols}",
        block_rows * block_cols, DEFAULT_NUM_WARPS,
        f"make the product {max_block_size(DEFAULT_NUM_WARPS)} or less",
    )
    check_grid_axis(
        "x", triton.cdiv(x.shape[1], block_cols),
        f"pass a larger block_cols (x has {x.shape[1]} columns)",
    )
    return _transpose(x, block_rows, block_cols)


def _launch(x: torch.Tensor, block_rows: int, block_cols: int) -> torch.Tensor:
    num_rows, num_cols = x.shape
    out = torch.empty((num_cols, num_rows), dtype=x.dtype, device=x.device)
    grid = (cdiv(num_rows, block_rows), cdiv(num_cols, block_cols))
    fast_launch(transpose_kernel)[grid](
        x, out, num_rows, num_cols, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
        BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols, INT64_OFFSETS=needs_int64_offsets(x, out),
    )
    return out


def _fake(x, block_rows, block_cols):
    return torch.empty((x.shape[1], x.shape[0]), dtype=x.dtype, device=x.device)


def _grad(ctx, grad_out):
    # The gradient of a transpose is the transpose of the gradient. grad_out has as many
    # columns as x had rows: widen the tiles so that grid axis 1 stays within its limit.
    block_cols = max(32, next_power_of_2(cdiv(grad_out.shape[1], MAX_GRID_AXIS_1)))
    block_rows = min(32, max(1, max_block_size(DEFAULT_NUM_WARPS) // block_cols))
    return _transpose(grad_out, block_rows, block_cols), None, None


# Autograd and torch.compile: see triton_guide.library. The backward is the op again, so
# it differentiates too.
_transpose = Operator("transpose", _launch, fake=_fake, backward=_grad)


def _example(device):
    return (torch.randn(19, 40, device=device),), {}


register("transpose", transpose, transpose_reference, example=_example,
         differentiable=True, compile_safe=True)
