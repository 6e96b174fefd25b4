"""Element-wise addition of two tensors: the smallest complete Triton kernel."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .validation import check_contiguous, check_same_dtype, check_same_shape, check_tensor


def vector_add_reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """What :func:`vector_add` computes, in plain PyTorch."""
    return x + y


@triton.jit
def vector_add_kernel(
    x_ptr,  # pointer to the first element of x
    y_ptr,  # pointer to the first element of y
    out_ptr,  # pointer to the first element of the output
    num_elements,  # how many elements the three tensors hold
    BLOCK_SIZE: tl.constexpr,  # elements per program; a power of two
):
    program_id = tl.program_id(axis=0)
    offsets = program_id * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    # The last program may reach past the end: the mask switches those lanes off.
    mask = offsets < num_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor, *, block_size: int = 1024) -> torch.Tensor:
    """Return ``x + y`` computed by :func:`vector_add_kernel`.

    ``x`` and ``y`` must be contiguous tensors of the same shape and floating dtype, on the
    device the kernels run on (see :func:`triton_guide.runtime.device`).
    """
    check_tensor("x", x)
    check_tensor("y", y)
    check_same_shape("x", x, "y", y)
    check_same_dtype("x", x, "y", y)
    check_contiguous("x", x)
    check_contiguous("y", y)
    if block_size < 1 or block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two, got {block_size}")
    out = torch.empty_like(x)
    num_elements = x.numel()
    grid = (triton.cdiv(num_elements, block_size),)
    vector_add_kernel[grid](x, y, out, num_elements, BLOCK_SIZE=block_size)
    return out
