"""What Triton compiles for the FP8 matmul kernel on sm_90 when b is stored by columns
(K-major, what wgmma takes) and by rows: shared-memory stores, byte permutes and spills in
the PTX of one 128 x 128 x 128 tile with 4 warps (static counts over the whole kernel).
No GPU needed.

    env -u TRITON_INTERPRET TRITON_GUIDE_COMPILE_ONLY=1 TRITON_DEFAULT_FP_FUSION=1 \\
        PYTHONPATH=$PWD python lab/fp8_b_layout.py

Seen with triton 3.9 (2026-11-28): by columns 18 st.shared, 0 prmt, no spills; by rows
146 st.shared, 96 prmt, 16 bytes of spills (255 registers both).
"""
import re

import torch

from triton_guide.compiled import compile_kernel
from triton_guide.fp8_matmul import fp8_matmul_kernel

M = N = K = 4096
a = torch.empty(64, dtype=torch.float8_e4m3fn)
c = torch.empty(64, dtype=torch.bfloat16)
s = torch.empty(4, dtype=torch.float32)
meta = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, GROUP_SIZE_M=8,
            SCALE_A_ROWS=True, SCALE_B_COLUMNS=True, FAST_ACCUMULATION=False,
            num_warps=4, num_stages=4)
for name, (stride_bk, stride_bn) in {"b by columns": (1, K), "b by rows": (N, 1)}.items():
    args = [a, a, c, s, s, M, N, K, K, 1, stride_bk, stride_bn, N, 1, 1, 1]
    r = compile_kernel(fp8_matmul_kernel.fn, args, meta)
    counts = {k: len(re.findall(k, r["ptx"]))
              for k in ("wgmma.mma_async", "st.shared", "ld.shared", "bar.sync", "prmt")}
    print(f"{name}: {r['registers']} registers, {r['local_bytes']} bytes of spills, "
          f"{r['shared']} bytes of shared memory, {counts}")
