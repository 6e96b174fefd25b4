"""A solution of the persistent_matmul exercise: ``c = a @ b`` on a fixed grid of programs."""

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
    """The tile row and column of tile number ``tile`` in grouped order."""
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
    pid = tl.program_id(0)
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in range(pid, num_tiles, tl.num_programs(0)):
        pid_m, pid_n = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_SIZE_M)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        accumulator = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for start in range(0, K, BLOCK_K):
            ks = start + tl.arange(0, BLOCK_K)
            a = tl.load(a_ptr + rows[:, None] * stride_a_row + ks[None, :] * stride_a_col,
                        mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
            b = tl.load(b_ptr + ks[:, None] * stride_b_row + cols[None, :] * stride_b_col,
                        mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
            accumulator = tl.dot(a, b, accumulator)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        tl.store(c_ptr + rows[:, None] * N + cols[None, :], accumulator, mask=mask)


def solve(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int,
          num_programs: int):
    grid = (num_programs,)
    persistent_matmul_kernel[grid](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_SIZE_M=GROUP_SIZE_M)
