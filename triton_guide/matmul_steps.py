"""The matmul page's ladder: the production kernels of :mod:`triton_guide.matmul`, built
up one idea at a time, each step a kernel that runs and is tested.

1. :func:`matmul_row_major`: one program per output tile, a loop over K with ``tl.dot``,
   programs numbered row by row, one fixed tile shape.
2. :func:`matmul_grouped`: the same, with programs numbered in groups of tile rows
   (:func:`triton_guide.matmul.tile_of_program`) so that programs running together share
   input tiles in L2.
3. :func:`matmul_pointer_loads`: tile shapes chosen by ``triton.autotune``, and the
   launcher's alignment hints: :func:`triton_guide.matmul.matmul_kernel`.
4. :func:`triton_guide.matmul`: the same loop with its tiles read through tensor
   descriptors (:func:`triton_guide.matmul.matmul_tma_kernel`), wherever the GPU has TMA
   (large products whose rows a descriptor cannot read are copied first).

:func:`program_tiles` runs the grouped-order helper on its own, to show which tile each
program computes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .matmul import aligned_if_worth_it, check_pair, product, tile_of_program
from .precision import dot_input_precision
from .runtime import device, interpreting


@triton.jit
def tile_product(
    a_ptr, b_ptr, pid_m, pid_n, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,  # tl.dot's for float32 operands (triton_guide.precision)
):
    """One tile of ``a @ b``, accumulated in float32 along K."""
    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        # Past any edge the loads give zeros, which add nothing to the dot product.
        k_remaining = K - k * BLOCK_SIZE_K
        a_mask = (offs_m[:, None] < M) & (offs_k[None, :] < k_remaining)
        b_mask = (offs_k[:, None] < k_remaining) & (offs_n[None, :] < N)
        a = tl.load(a_ptrs, mask=a_mask, other=0.0)
        b = tl.load(b_ptrs, mask=b_mask, other=0.0)
        accumulator = tl.dot(a, b, accumulator, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    return accumulator


@triton.jit
def store_tile(
    c_ptr, c, pid_m, pid_n, M, N, stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
):
    """Write tile ``(pid_m, pid_n)`` of c, leaving out the part past the edges."""
    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, c.to(c_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def matmul_row_major_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    # Step 1: programs 0, 1, 2, ... fill the first row of tiles of c, then the next row.
    program_id = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pid_m = program_id // num_pid_n
    pid_n = program_id % num_pid_n
    c = tile_product(
        a_ptr, b_ptr, pid_m, pid_n, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
        BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, INPUT_PRECISION,
    )
    store_tile(
        c_ptr, c, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_SIZE_M, BLOCK_SIZE_N
    )


@triton.jit
def matmul_grouped_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, INPUT_PRECISION: tl.constexpr,
):
    # Step 2: the same tile product; only the program -> tile mapping changes.
    program_id = tl.program_id(axis=0)
    pid_m, pid_n = tile_of_program(
        program_id, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M
    )
    c = tile_product(
        a_ptr, b_ptr, pid_m, pid_n, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
        BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, INPUT_PRECISION,
    )
    store_tile(
        c_ptr, c, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_SIZE_M, BLOCK_SIZE_N
    )


@triton.jit
def program_tiles_kernel(
    tiles_ptr,  # (number of programs, 2) int32: the (pid_m, pid_n) of every program
    M, N,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
):
    program_id = tl.program_id(axis=0)
    pid_m, pid_n = tile_of_program(
        program_id, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M
    )
    tl.store(tiles_ptr + 2 * program_id, pid_m)
    tl.store(tiles_ptr + 2 * program_id + 1, pid_n)


# One fixed tile shape for steps 1 and 2 (one of the autotuner's candidates on a GPU),
# so that step 3 differs from step 2 by its autotuning and alignment hints, not a tile.
FIXED_TILE = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32}
FIXED_LAUNCH = {"num_warps": 4, "num_stages": 4}
INTERPRETER_TILE = {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32}


def _launch(kernel, a: torch.Tensor, b: torch.Tensor, **extra) -> torch.Tensor:
    a, b = check_pair(a, b)
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    tile = INTERPRETER_TILE if interpreting() else FIXED_TILE
    grid = (
        triton.cdiv(M, tile["BLOCK_SIZE_M"]) * triton.cdiv(N, tile["BLOCK_SIZE_N"]),
    )
    kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        **tile, **extra, **FIXED_LAUNCH, INPUT_PRECISION=dot_input_precision(a.dtype),
    )
    return c


def matmul_row_major(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Step 1: ``a @ b`` with one fixed tile shape and programs in row-major order."""
    return _launch(matmul_row_major_kernel, a, b)


def matmul_grouped(
    a: torch.Tensor, b: torch.Tensor, group_size_m: int = 8
) -> torch.Tensor:
    """Step 2: as :func:`matmul_row_major`, with programs in groups of ``group_size_m``
    tile rows."""
    if not isinstance(group_size_m, int) or group_size_m < 1:
        raise ValueError(f"group_size_m must be a positive int, got {group_size_m!r}")
    return _launch(matmul_grouped_kernel, a, b, GROUP_SIZE_M=group_size_m)


def matmul_pointer_loads(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Step 3: :func:`triton_guide.matmul` with every tile read through pointers
    (:func:`triton_guide.matmul.matmul_kernel`), whatever the layout of ``b``: the same
    launcher, aligned copies included, without step 4's choice of kernel. Like steps 1 and
    2 it does not record for autograd.
    """
    a, b = check_pair(a, b)
    return product(*aligned_if_worth_it(a, b), descriptors=False)


def program_tiles(
    num_tile_rows: int, num_tile_cols: int, group_size_m: int
) -> torch.Tensor:
    """Run :func:`triton_guide.matmul.tile_of_program` for every program of a launch
    over ``num_tile_rows x num_tile_cols`` tiles of c.

    Returns an int32 tensor of shape (number of programs, 2) on the CPU: row ``i`` is
    the (tile row, tile column) that program ``i`` computes.
    """
    arguments = {
        "num_tile_rows": num_tile_rows,
        "num_tile_cols": num_tile_cols,
        "group_size_m": group_size_m,
    }
    for name, value in arguments.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    num_programs = num_tile_rows * num_tile_cols
    tiles = torch.full((num_programs, 2), -1, dtype=torch.int32, device=device())
    # Tiles of 1 x 1 elements: M and N count tiles, so the mapping is the kernel's own.
    program_tiles_kernel[(num_programs,)](
        tiles, num_tile_rows, num_tile_cols,
        BLOCK_SIZE_M=1, BLOCK_SIZE_N=1, GROUP_SIZE_M=group_size_m,
    )
    return tiles.cpu()
