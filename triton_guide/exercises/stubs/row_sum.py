"""The row_sum exercise: ``out[i] = x[i, :].sum()``. Fill in the kernel's body.

Check it with: python -m triton_guide.exercises check row_sum THIS_FILE
"""

import torch
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, N, stride_row, stride_col, BLOCK_SIZE: tl.constexpr):
    # TODO: one program per row. Walk the row in blocks of BLOCK_SIZE columns
    # (for start in range(0, N, BLOCK_SIZE)), load each block with a mask and other=0.0
    # (address: row * stride_row + col * stride_col), accumulate, then store the sum.
    pass


def solve(x: torch.Tensor, out: torch.Tensor, M: int, N: int):
    block_size = min(1024, triton.next_power_of_2(N))
    row_sum_kernel[(M,)](x, out, N, x.stride(0), x.stride(1), BLOCK_SIZE=block_size)
