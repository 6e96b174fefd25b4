"""Copies: the simplest memory-bound kernels, for measuring how access patterns cost.

A copy does no arithmetic, so its speed is the memory system's: block size, warps, the
order in which lanes touch addresses and the bounds check are all that vary. Two ops:

* :func:`copy`: a flat copy, with the bounds handled three ways (``bounds=``): a mask on
  every block, a branch that masks only the last block, or no check at all (only when
  the length is a multiple of the block); and :data:`copy_autotuned_kernel`'s
  configurations.
* :func:`copy_matrix`: a 2D copy whose programs walk along rows (neighbouring lanes read
  neighbouring addresses) or down columns (neighbouring lanes are a row apart).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .runtime import interpreting
from .validation import check_block_size, check_contiguous, check_int, check_tensor

BOUNDS = ("mask", "branch", "none")
WALKS = ("rows", "columns")


def copy_reference(x: torch.Tensor) -> torch.Tensor:
    """What :func:`copy` and :func:`copy_matrix` compute, in plain PyTorch."""
    return x.clone()


@triton.jit
def copy_kernel(
    input_ptr,
    output_ptr,
    num_elements,
    BLOCK_SIZE: tl.constexpr,
    BOUNDS: tl.constexpr,  # "mask", "branch" or "none": how the end is handled
):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if BOUNDS == "mask":
        # Every block is masked, although only the last one can run past the end.
        mask = offsets < num_elements
        values = tl.load(input_ptr + offsets, mask=mask)
        tl.store(output_ptr + offsets, values, mask=mask)
    elif BOUNDS == "branch":
        # A branch on a scalar, the same for the whole program: full blocks skip the
        # mask.
        if (tl.program_id(0) + 1) * BLOCK_SIZE <= num_elements:
            tl.store(output_ptr + offsets, tl.load(input_ptr + offsets))
        else:
            mask = offsets < num_elements
            values = tl.load(input_ptr + offsets, mask=mask)
            tl.store(output_ptr + offsets, values, mask=mask)
    else:
        # No check: correct only when num_elements is a multiple of BLOCK_SIZE.
        tl.store(output_ptr + offsets, tl.load(input_ptr + offsets))


# What the autotuned copy tries on a GPU: every block size with every warp count.
AUTOTUNE_BLOCK_SIZES = (256, 1024, 4096)
AUTOTUNE_NUM_WARPS = (2, 4, 8)


def _autotune_configs() -> list[triton.Config]:
    if interpreting():  # the interpreter cannot time configurations: give it one
        return [triton.Config({"BLOCK_SIZE": 1024}, num_warps=4)]
    return [
        triton.Config({"BLOCK_SIZE": block_size}, num_warps=num_warps)
        for block_size in AUTOTUNE_BLOCK_SIZES
        for num_warps in AUTOTUNE_NUM_WARPS
    ]


# copy_kernel's code under triton.autotune: on a GPU, the first launch for a new
# num_elements times every configuration and keeps the fastest for the later ones. It is
# jitted anew so that its compiled variants are its own, not shared with copy_kernel's.
copy_autotuned_kernel = triton.autotune(
    configs=_autotune_configs(), key=["num_elements"]
)(triton.jit(copy_kernel.fn))


@triton.jit
def copy_rows_kernel(
    input_ptr,
    output_ptr,
    num_rows,
    num_cols,
    row_stride,  # elements between the starts of two rows (both tensors are contiguous)
    BLOCK_SIZE: tl.constexpr,
):
    """Program (row, j) copies columns ``j * BLOCK_SIZE ...`` of one row: lane i reads
    the element right after lane i - 1's, so a warp reads one unbroken stretch."""
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    offsets = row.to(tl.int64) * row_stride + cols
    mask = cols < num_cols
    tl.store(output_ptr + offsets, tl.load(input_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def copy_columns_kernel(
    input_ptr,
    output_ptr,
    num_rows,
    num_cols,
    row_stride,
    BLOCK_SIZE: tl.constexpr,
):
    """Program (col, i) copies rows ``i * BLOCK_SIZE ...`` of one column: lane i reads
    an element ``row_stride`` elements after lane i - 1's: a memory segment per lane."""
    col = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    offsets = rows.to(tl.int64) * row_stride + col
    mask = rows < num_rows
    tl.store(output_ptr + offsets, tl.load(input_ptr + offsets, mask=mask), mask=mask)


def _check_num_warps(num_warps: object) -> int:
    num_warps = check_int("num_warps", num_warps)
    if num_warps not in (1, 2, 4, 8, 16, 32):
        raise ValueError(
            f"num_warps must be a power of two from 1 to 32, got {num_warps!r}"
        )
    return num_warps


def copy(
    x: torch.Tensor,
    *,
    block_size: int = 1024,
    num_warps: int = 4,
    bounds: str = "mask",
    autotune: bool = False,
) -> torch.Tensor:
    """A copy of the contiguous tensor ``x`` made by :func:`copy_kernel`.

    ``bounds`` chooses how the last, partial block is handled (see :data:`BOUNDS`);
    ``"none"`` needs ``x.numel()`` to be a multiple of ``block_size``. With
    ``autotune=True`` the block size and warps come from ``copy_autotuned_kernel``
    (``block_size`` and ``num_warps`` must then be left at their defaults) and bounds
    are masked.
    """
    x = check_tensor("x", x)
    check_contiguous("x", x)
    if bounds not in BOUNDS:
        raise ValueError(f"bounds must be one of {BOUNDS}, got {bounds!r}")
    num_warps = _check_num_warps(num_warps)
    block_size = check_block_size("block_size", block_size, num_warps=num_warps)
    num_elements = x.numel()
    out = torch.empty_like(x)
    if autotune:
        if (block_size, num_warps, bounds) != (1024, 4, "mask"):
            raise ValueError(
                "autotune=True chooses block_size and num_warps itself and masks the "
                "bounds; leave block_size, num_warps and bounds at their defaults"
            )
        def grid(meta):
            return (triton.cdiv(num_elements, meta["BLOCK_SIZE"]),)

        copy_autotuned_kernel[grid](x, out, num_elements, BOUNDS="mask")
        return out
    if bounds == "none" and num_elements % block_size:
        raise ValueError(
            f"bounds='none' needs x.numel() ({num_elements}) to be a multiple of "
            f"block_size ({block_size}); use bounds='mask' or 'branch'"
        )
    grid = (triton.cdiv(num_elements, block_size),)
    copy_kernel[grid](
        x, out, num_elements, BLOCK_SIZE=block_size, BOUNDS=bounds, num_warps=num_warps
    )
    return out


def copy_matrix(
    x: torch.Tensor, *, walk: str = "rows", block_size: int = 1024
) -> torch.Tensor:
    """A copy of the contiguous 2D tensor ``x``, its programs walking along ``"rows"``
    or down ``"columns"`` (the same result; a different order of memory accesses)."""
    x = check_tensor("x", x, ndim=2)
    check_contiguous("x", x)
    if walk not in WALKS:
        raise ValueError(f"walk must be one of {WALKS}, got {walk!r}")
    block_size = check_block_size("block_size", block_size)
    num_rows, num_cols = x.shape
    out = torch.empty_like(x)
    if walk == "rows":
        grid = (num_rows, triton.cdiv(num_cols, block_size))
        kernel = copy_rows_kernel
    else:
        grid = (num_cols, triton.cdiv(num_rows, block_size))
        kernel = copy_columns_kernel
    kernel[grid](x, out, num_rows, num_cols, x.stride(0), BLOCK_SIZE=block_size)
    return out
