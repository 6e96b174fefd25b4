"""A solution of the row_sum exercise: ``out[i] = x[i, :].sum()``."""

import torch
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, N, stride_row, stride_col, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    row_start = x_ptr + row * stride_row
    # One partial sum per lane; the lanes are added together once, after the loop.
    partial = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, N, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        partial += tl.load(row_start + cols * stride_col, mask=mask, other=0.0)
    tl.store(out_ptr + row, tl.sum(partial, axis=0))


def solve(x: torch.Tensor, out: torch.Tensor, M: int, N: int):
    block_size = min(1024, triton.next_power_of_2(N))
    row_sum_kernel[(M,)](x, out, N, x.stride(0), x.stride(1), BLOCK_SIZE=block_size)
