"""The relu exercise: ``out = max(x, 0)``. Fill in the kernel's body.

Check it with: python -m triton_guide.exercises check relu THIS_FILE
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    # TODO: offsets and a mask; load x, store max(x, 0). Both the load and the store
    # need the mask.
    pass


def solve(x: torch.Tensor, out: torch.Tensor, n: int):
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    relu_kernel[grid](x, out, n, BLOCK_SIZE=BLOCK_SIZE)
