"""A solution of the matvec exercise: ``out = a @ x``."""

import torch
import triton
import triton.language as tl

BLOCK_M = 16
BLOCK_K = 128


@triton.jit
def matvec_kernel(
    a_ptr, x_ptr, out_ptr, M, K, stride_a_row, stride_a_col,
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    total = tl.zeros([BLOCK_M], dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        ks = start + tl.arange(0, BLOCK_K)
        k_mask = ks < K
        tile = tl.load(a_ptr + rows[:, None] * stride_a_row + ks[None, :] * stride_a_col,
                       mask=row_mask[:, None] & k_mask[None, :], other=0.0)
        x = tl.load(x_ptr + ks, mask=k_mask, other=0.0)
        total += tl.sum(tile * x[None, :], axis=1)
    tl.store(out_ptr + rows, total, mask=row_mask)


def solve(a: torch.Tensor, x: torch.Tensor, out: torch.Tensor, M: int, K: int):
    grid = (triton.cdiv(M, BLOCK_M),)
    matvec_kernel[grid](a, x, out, M, K, a.stride(0), a.stride(1),
                        BLOCK_M=BLOCK_M, BLOCK_K=BLOCK_K)
