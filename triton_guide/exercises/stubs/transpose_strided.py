"""The transpose_strided exercise: ``out = x.T`` for any strides. Fill in the kernel's body.

Check it with: python -m triton_guide.exercises check transpose_strided THIS_FILE
"""

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
    # TODO: the (BLOCK_M, BLOCK_N) tile of x this program owns (rows from program_id(0),
    # columns from program_id(1)); load it with x's strides and a 2-D mask; store it so that
    # x[i, j] lands at out[j, i], using out's strides.
    pass


def solve(x: torch.Tensor, out: torch.Tensor, M: int, N: int):
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    transpose_kernel[grid](x, out, M, N, x.stride(0), x.stride(1),
                           out.stride(0), out.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
