"""Element-wise addition of two tensors: the smallest complete Triton kernel."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import cdiv, fast_launch
from .library import Operator
from .registry import register
from .validation import (
    check_block_size,
    check_contiguous,
    check_same_dtype,
    check_same_shape,
    check_tensor,
    needs_int64_offsets,
)


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
    INT64_OFFSETS: tl.constexpr = False,  # offsets can pass 2**31 - 1: compute them in int64
):
    program_id = tl.program_id(axis=0)
    if INT64_OFFSETS:
        program_id = program_id.to(tl.int64)
    offsets = program_id * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    # The last program may reach past the end: the mask switches those lanes off.
    mask = offsets < num_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor, *, block_size: int = 1024) -> torch.Tensor:
    """Return ``x + y`` computed by :func:`vector_add_kernel`, differentiable.

    ``x`` and ``y`` must be contiguous tensors of the same shape and floating dtype, on the
    device the kernels run on (see :func:`triton_guide.runtime.device`).
    """
    x = check_tensor("x", x)
    y = check_tensor("y", y)
    check_same_shape("x", x, "y", y)
    check_same_dtype("x", x, "y", y)
    check_contiguous("x", x)
    check_contiguous("y", y)
    block_size = check_block_size("block_size", block_size)
    return _vector_add(x, y, block_size)


def _launch(x: torch.Tensor, y: torch.Tensor, block_size: int) -> torch.Tensor:
    out = torch.empty_like(x)
    num_elements = x.numel()
    grid = (cdiv(num_elements, block_size),)
    # The last program forms indices up to grid * block_size - 1 before masking them.
    int64_offsets = needs_int64_offsets(x, y, out, largest_index=grid[0] * block_size - 1)
    fast_launch(vector_add_kernel)[grid](
        x, y, out, num_elements, BLOCK_SIZE=block_size, INT64_OFFSETS=int64_offsets
    )
    return out


def _fake(x, y, block_size):
    return torch.empty_like(x)


def _grad(ctx, grad_out):
    # d(x + y)/dx and d(x + y)/dy are the identity.
    return grad_out, grad_out, None


# Autograd and torch.compile: see triton_guide.library.
_vector_add = Operator("vector_add", _launch, fake=_fake, backward=_grad)


def _example(device):
    return (torch.randn(37, device=device), torch.randn(37, device=device)), {}


register("vector_add", vector_add, vector_add_reference, example=_example,
         differentiable=True, compile_safe=True)
