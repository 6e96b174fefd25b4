"""The scaled_add exercise: ``out = alpha * x + y``. Fill in the kernel's body.

Check it with: python -m triton_guide.exercises check scaled_add THIS_FILE
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024


@triton.jit
def scaled_add_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK_SIZE: tl.constexpr):
    # TODO: the offsets this program owns, a mask for the ones < n, two loads,
    # and one store of alpha * x + y.
    pass


def solve(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor, alpha: float, n: int):
    # TODO: the grid, a tuple: enough programs of BLOCK_SIZE elements to cover all n
    # (round up, not down).
    grid = ...
    scaled_add_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE=BLOCK_SIZE)
