"""The tiled_matmul exercise: ``c = a @ b`` with ``tl.dot``. Fill in the kernel's body.

Check it with: python -m triton_guide.exercises check tiled_matmul THIS_FILE
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 32
BLOCK_N = 32
BLOCK_K = 32


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_a_row, stride_a_col, stride_b_row, stride_b_col,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    # TODO: the tile's rows (program_id(0)) and columns (program_id(1)); a float32
    # (BLOCK_M, BLOCK_N) accumulator; for each BLOCK_K slice of K, load a (BLOCK_M, BLOCK_K)
    # tile of a and a (BLOCK_K, BLOCK_N) tile of b, masked with other=0.0, and
    # accumulator = tl.dot(a, b, accumulator); store the tile of c (contiguous, row * N).
    pass


def solve(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int):
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
