"""A solution of the outer_product exercise: ``out[i, j] = x[i] * y[j]``."""

import torch
import triton
import triton.language as tl

BLOCK_M = 32
BLOCK_N = 32


@triton.jit
def outer_product_kernel(
    x_ptr, y_ptr, out_ptr, M, N, stride_x, stride_y,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + rows * stride_x, mask=rows < M)
    y = tl.load(y_ptr + cols * stride_y, mask=cols < N)
    # (BLOCK_M, 1) times (1, BLOCK_N) broadcasts to a (BLOCK_M, BLOCK_N) tile.
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], x[:, None] * y[None, :], mask=mask)


def solve(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor, M: int, N: int):
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    outer_product_kernel[grid](x, y, out, M, N, x.stride(0), y.stride(0),
                               BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
