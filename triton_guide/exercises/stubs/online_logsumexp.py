"""The online_logsumexp exercise: log-sum-exp of every row. Fill in the kernel's body.

Check it with: python -m triton_guide.exercises check online_logsumexp THIS_FILE
"""

import torch
import triton
import triton.language as tl


@triton.jit
def logsumexp_kernel(x_ptr, out_ptr, N, stride_row, stride_col, BLOCK_SIZE: tl.constexpr):
    # TODO: one program per row. Walk the row in blocks (masked lanes read -inf), keeping a
    # running maximum and a running sum of exp(x - maximum); when the maximum grows, rescale
    # the sum. At the end store maximum + log(sum). Mind rows that are all -inf.
    pass


def solve(x: torch.Tensor, out: torch.Tensor, M: int, N: int):
    block_size = min(1024, triton.next_power_of_2(N))
    logsumexp_kernel[(M,)](x, out, N, x.stride(0), x.stride(1), BLOCK_SIZE=block_size)
