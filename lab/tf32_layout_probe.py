"""Why float32 under TF32 runs at a quarter of cuBLAS (report.py --only precision, H100,
4096^3: ours 86 TFLOP/s, cuBLAS 344): compile the package's matmul for sm_90 on a CPU
(triton_guide.compiled) with b stored by rows and by columns, and count what the inner loop
does. Run with the triton to check on PYTHONPATH first, e.g. a 3.6.0 wheel unpacked to
/tmp/t36site:

    PYTHONPATH=/tmp/t36site:$PWD python lab/tf32_layout_probe.py
"""
import torch
import triton

import triton_guide as tg
from triton_guide import compiled

torch.set_float32_matmul_precision("high")
a, b = torch.randn(512, 512), torch.randn(512, 512)
CONFIG = triton.Config(dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=32, GROUP_SIZE_M=8),
                       num_stages=3, num_warps=8)
print(f"triton {triton.__version__}, float32 matmul precision 'high', tile 128x128x32")
for name, y in {"b by rows": b, "b by columns": b.t().contiguous().t()}.items():
    for kernel, launch in compiled.record_kernels(tg.matmul, a, y).items():
        (result,) = compiled.compile_for([launch.with_config(CONFIG) if launch.configs else launch])
        loop = compiled.instruction_counts(result.loop()).most_common(8)
        print(f"{name:<13} {kernel}: {result.registers} registers, inner loop {loop}")
