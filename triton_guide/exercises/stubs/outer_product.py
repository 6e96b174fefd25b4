"""The outer_product exercise: ``out[i, j] = x[i] * y[j]``. Fill in the kernel's body.

Check it with: python -m triton_guide.exercises check outer_product THIS_FILE
"""

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
    # TODO: rows from program_id(0), columns from program_id(1); load BLOCK_M values of x
    # and BLOCK_N of y (with their strides and masks); multiply them as a column times a
    # row; store the tile at rows[:, None] * N + cols[None, :] with a 2-D mask.
    pass


def solve(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor, M: int, N: int):
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    outer_product_kernel[grid](x, y, out, M, N, x.stride(0), y.stride(0),
                               BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
