"""The atomic_sum exercise: ``out[0] = x.sum()``. Fill in the kernel's body, and solve.

Check it with: python -m triton_guide.exercises check atomic_sum THIS_FILE
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024


@triton.jit
def atomic_sum_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    # TODO: load this program's block (masked lanes read 0.0), sum it, and add the sum
    # into out_ptr with tl.atomic_add.
    pass


def solve(x: torch.Tensor, out: torch.Tensor, n: int):
    # TODO: out arrives filled with NaN; the kernel only adds to it.
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    atomic_sum_kernel[grid](x, out, n, BLOCK_SIZE=BLOCK_SIZE)
