"""The persistent_matmul exercise: ``c = a @ b`` on a fixed grid of programs, each looping
over tiles in grouped order. Fill in the kernel's body.

Check it with: python -m triton_guide.exercises check persistent_matmul THIS_FILE
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 32
BLOCK_N = 32
BLOCK_K = 32
GROUP_SIZE_M = 4


@triton.jit
def grouped_tile(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 GROUP_SIZE_M: tl.constexpr):
    """The tile row and column of tile number ``tile`` in grouped order (the lesson's)."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_in_group = GROUP_SIZE_M * tl.cdiv(N, BLOCK_N)
    first_pid_m = (tile // num_pid_in_group) * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (tile % num_pid_in_group) % group_size_m
    pid_n = (tile % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def persistent_matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_a_row, stride_a_col, stride_b_row, stride_b_col,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # TODO: the number of tiles of c; a loop over this program's tiles, from
    # tl.program_id(0) in steps of tl.num_programs(0); for each, its tile row and column
    # from grouped_tile, then the tiled matmul's body: a float32 accumulator zeroed for
    # this tile, the loop over K with masked loads and tl.dot, one masked store into c.
    pass


def solve(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int,
          num_programs: int):
    grid = (num_programs,)
    persistent_matmul_kernel[grid](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_SIZE_M=GROUP_SIZE_M)
