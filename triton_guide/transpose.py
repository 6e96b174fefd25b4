"""Matrix transpose with a 2D grid of 2D tiles: the smallest kernel that needs ``[:, None]``."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .validation import check_tensor


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
):
    # A 2D grid: axis 0 walks down the rows of the input, axis 1 across its columns.
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
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
    """Return ``x.t()`` as a new contiguous tensor. ``x`` is 2D, with any strides."""
    check_tensor("x", x, ndim=2)
    for name, value in (("block_rows", block_rows), ("block_cols", block_cols)):
        if value < 1 or value & (value - 1):
            raise ValueError(f"{name} must be a power of two, got {value}")
    num_rows, num_cols = x.shape
    out = torch.empty((num_cols, num_rows), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(num_rows, block_rows), triton.cdiv(num_cols, block_cols))
    transpose_kernel[grid](
        x, out, num_rows, num_cols, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
        BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols,
    )
    return out
