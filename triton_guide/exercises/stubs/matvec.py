"""The matvec exercise: ``out = a @ x``. Fill in the kernel's body.

Check it with: python -m triton_guide.exercises check matvec THIS_FILE
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 16
BLOCK_K = 128


@triton.jit
def matvec_kernel(
    a_ptr, x_ptr, out_ptr, M, K, stride_a_row, stride_a_col,
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
):
    # TODO: this program's BLOCK_M rows; a float32 accumulator per row; a loop over K in
    # steps of BLOCK_K loading a (BLOCK_M, BLOCK_K) tile of a and BLOCK_K values of x (both
    # masked, other=0.0); add tl.sum(tile * x[None, :], axis=1); store the rows.
    pass


def solve(a: torch.Tensor, x: torch.Tensor, out: torch.Tensor, M: int, K: int):
    grid = (triton.cdiv(M, BLOCK_M),)
    matvec_kernel[grid](a, x, out, M, K, a.stride(0), a.stride(1),
                        BLOCK_M=BLOCK_M, BLOCK_K=BLOCK_K)
