"""A solution of the transpose_strided exercise: ``out = x.T`` for any strides."""

import torch
import triton
import triton.language as tl

BLOCK_M = 32
BLOCK_N = 32


@triton.jit
def transpose_kernel(
    x_ptr, out_ptr, M, N,
    stride_x_row, stride_x_col, stride_out_row, stride_out_col,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # rows of x
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # columns of x
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tile = tl.load(x_ptr + rows[:, None] * stride_x_row + cols[None, :] * stride_x_col,
                   mask=mask)
    # x[i, j] goes to out[j, i]: the same tile, written with the roles of the strides swapped.
    tl.store(out_ptr + cols[None, :] * stride_out_row + rows[:, None] * stride_out_col,
             tile, mask=mask)


def solve(x: torch.Tensor, out: torch.Tensor, M: int, N: int):
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    transpose_kernel[grid](x, out, M, N, x.stride(0), x.stride(1),
                           out.stride(0), out.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
