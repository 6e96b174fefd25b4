"""The column_max exercise: ``out[j] = max over i of x[i, j]``. Fill in the kernel's body.

Check it with: python -m triton_guide.exercises check column_max THIS_FILE
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 32  # rows per tile
BLOCK_N = 64  # columns per program


@triton.jit
def column_max_kernel(
    x_ptr, out_ptr, M, N, stride_row, stride_col,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # TODO: this program's BLOCK_N columns; a running maximum per column starting at -inf;
    # a loop over the rows BLOCK_M at a time, loading a (BLOCK_M, BLOCK_N) tile with
    # rows[:, None] and cols[None, :] (masked lanes must read -inf); then store.
    pass


def solve(x: torch.Tensor, out: torch.Tensor, M: int, N: int):
    grid = (triton.cdiv(N, BLOCK_N),)
    column_max_kernel[grid](x, out, M, N, x.stride(0), x.stride(1),
                            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
