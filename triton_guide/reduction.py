"""Summing a whole vector across many programs: two stages, or one stage with atomics.

One program can only reduce what it holds. To sum a vector longer than one block, each
program first sums its own share (:func:`program_sum`). The per-program sums are then
combined either by a second, one-program kernel (:func:`sum_partials_kernel`): the
*two-stage* reduction, deterministic; or by every program adding its sum into one
float32 cell with ``tl.atomic_add`` (:func:`atomic_sum_kernel`): one launch, but the
additions happen in whatever order the programs finish, so on a GPU the last bits of the
result can change from run to run.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .registry import register
from .validation import check_block_size, check_contiguous, check_int, check_tensor

# The most programs (and so partial sums) the first stage launches: few enough that the
# second stage sums them all in one block, enough to keep every SM of a large GPU busy.
MAX_PARTIALS = 1024


def vector_sum_reference(x: torch.Tensor) -> torch.Tensor:
    """What :func:`vector_sum` computes, in plain PyTorch."""
    return x.sum()


@triton.jit
def program_sum(
    x_ptr,  # pointer to the first element of the (flattened) input
    num_elements,
    BLOCK_SIZE: tl.constexpr,  # elements each program reads per step; a power of two
):
    """This program's share of the sum, in float32.

    Program ``p`` of ``P`` reads blocks ``p, p + P, p + 2P, ...``: at every step the
    programs together read one contiguous stretch of ``P * BLOCK_SIZE`` elements.
    """
    program_id = tl.program_id(0)
    num_programs = tl.num_programs(0)
    lanes = tl.arange(0, BLOCK_SIZE)
    # One running sum per lane, added across lanes once at the end.
    accumulator = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    num_steps = tl.cdiv(num_elements, num_programs * BLOCK_SIZE)
    for step in range(0, num_steps):
        # int64: near 2**31 elements, the last step's offsets would overflow int32.
        block_start = (step * num_programs + program_id).to(tl.int64) * BLOCK_SIZE
        offsets = block_start + lanes
        mask = offsets < num_elements
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
        accumulator += x.to(tl.float32)
    return tl.sum(accumulator, axis=0)


@triton.jit
def partial_sums_kernel(
    x_ptr,
    partials_ptr,  # float32, one cell per program
    num_elements,
    BLOCK_SIZE: tl.constexpr,
):
    """Stage 1: every program writes its sum to its own cell; no two share a cell."""
    total = program_sum(x_ptr, num_elements, BLOCK_SIZE)
    tl.store(partials_ptr + tl.program_id(0), total)


@triton.jit
def sum_partials_kernel(
    partials_ptr,
    out_ptr,  # one float32 cell
    num_partials,
    BLOCK_SIZE: tl.constexpr,  # a power of two >= num_partials
):
    """Stage 2: one program adds the partial sums, always in the same order."""
    offsets = tl.arange(0, BLOCK_SIZE)
    partials = tl.load(partials_ptr + offsets, mask=offsets < num_partials, other=0.0)
    tl.store(out_ptr, tl.sum(partials, axis=0))


@triton.jit
def atomic_sum_kernel(
    x_ptr,
    out_ptr,  # one float32 cell, zero before the launch
    num_elements,
    BLOCK_SIZE: tl.constexpr,
):
    """One stage: every program adds its sum into the same cell, atomically."""
    total = program_sum(x_ptr, num_elements, BLOCK_SIZE)
    # A read-modify-write that no other program can interleave with; the order in which
    # programs get there is up to the hardware.
    tl.atomic_add(out_ptr, total)


def vector_sum(
    x: torch.Tensor,
    *,
    method: str = "two_stage",
    block_size: int = 1024,
    num_programs: int | None = None,
) -> torch.Tensor:
    """Sum of all elements of ``x`` (a 0-d tensor of ``x``'s dtype), added in float32.

    ``method`` is ``"two_stage"`` (a partial sum per program, then one program adds
    them: the same bits every run) or ``"atomic"`` (every program ``tl.atomic_add``-s
    its sum into one cell: one launch, order decided at run time). ``num_programs``
    defaults to one per block, at most :data:`MAX_PARTIALS`.
    """
    x = check_tensor("x", x)
    check_contiguous("x", x)
    if method not in ("two_stage", "atomic"):
        raise ValueError(f"method must be 'two_stage' or 'atomic', got {method!r}")
    block_size = check_block_size("block_size", block_size)
    num_elements = x.numel()
    blocks = triton.cdiv(num_elements, block_size)
    if num_programs is None:
        num_programs = min(blocks, MAX_PARTIALS)
    else:
        num_programs = check_int("num_programs", num_programs)
        if not 1 <= num_programs <= MAX_PARTIALS:
            raise ValueError(
                f"num_programs must be between 1 and {MAX_PARTIALS}, got {num_programs}"
            )
    if method == "two_stage":
        out = torch.empty((), dtype=torch.float32, device=x.device)  # stage 2 writes it
        partials = torch.empty(num_programs, dtype=torch.float32, device=x.device)
        partial_sums_kernel[(num_programs,)](
            x, partials, num_elements, BLOCK_SIZE=block_size
        )
        sum_partials_kernel[(1,)](
            partials, out, num_programs, BLOCK_SIZE=triton.next_power_of_2(num_programs)
        )
    else:
        out = torch.zeros((), dtype=torch.float32, device=x.device)  # the programs add to it
        atomic_sum_kernel[(num_programs,)](x, out, num_elements, BLOCK_SIZE=block_size)
    return out.to(x.dtype)


def _example(device):
    return (torch.randn(1000, device=device),), {}


register("vector_sum", vector_sum, vector_sum_reference, example=_example,
         differentiable=False, compile_safe=False)
