"""Run one case once inside an NVTX range named ``profile``, for Nsight Compute.

    ncu --clock-control none --nvtx --nvtx-include "profile/" --set full \\
        python lab/profile_case.py CASE

Each case first runs twice outside the range (compilation and autotuning happen there), so
the profile holds only the kernels of one steady-state call. ``--list`` prints the cases.
A working tool for performance work, not part of the site; what it found is in
``lab/NOTES.md``. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import triton_guide as tg  # noqa: E402
from tune import row_padded_view  # noqa: E402  (lab/tune.py, beside this script)


def matmul_case(shape, ours: bool, padded: bool):
    M, N, K = shape
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    if padded:
        a, b = row_padded_view(a), row_padded_view(b)
    if ours:
        return lambda: tg.matmul(a, b)
    return lambda: a @ b


def attention_case(batch, heads, seq, ours: bool, dim=128):
    """The forward only: autograd runs the backward on a thread of its own, outside the
    NVTX range of this one."""
    q, k, v = (torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.float16)
               for _ in range(3))

    def forward():
        if ours:
            return tg.attention(q, k, v)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v)

    return forward


CASES = {
    "matmul_rows": lambda: matmul_case((2000, 3000, 1000), True, False),
    "matmul_padded": lambda: matmul_case((2000, 3000, 1000), True, True),
    "cublas_rows": lambda: matmul_case((2000, 3000, 1000), False, False),
    "cublas_padded": lambda: matmul_case((2000, 3000, 1000), False, True),
    "matmul_3072": lambda: matmul_case((3072, 3072, 3072), True, False),
    "cublas_3072": lambda: matmul_case((3072, 3072, 3072), False, False),
    "fwd_ours_2048": lambda: attention_case(16, 16, 2048, True),
    "fwd_cudnn_2048": lambda: attention_case(16, 16, 2048, False),
    "fwd_ours_16384": lambda: attention_case(2, 16, 16384, True),
    "fwd_cudnn_16384": lambda: attention_case(2, 16, 16384, False),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", nargs="?", choices=sorted(CASES))
    parser.add_argument("--list", action="store_true", help="print the cases and stop")
    args = parser.parse_args()
    if args.list or args.case is None:
        print("\n".join(CASES))
        return
    torch.manual_seed(0)
    run = CASES[args.case]()
    run()
    run()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("profile")
    run()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
