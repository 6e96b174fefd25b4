"""A solution of the scaled_add exercise: ``out = alpha * x + y``."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024


@triton.jit
def scaled_add_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)


def solve(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor, alpha: float, n: int):
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    scaled_add_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE=BLOCK_SIZE)
