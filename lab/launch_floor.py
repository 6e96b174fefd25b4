"""Where a small call's host time goes, piece by piece, on the GPU machine's host: each
piece timed alone (``host_us``: 300 calls back to back), from torch's own ``x + y`` down to
Triton's launcher called with a kernel already compiled.

    python lab/launch_floor.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import triton_guide as tg  # noqa: E402
from triton_guide import launch, validation  # noqa: E402
from triton_guide.benchmark import host_us  # noqa: E402
from triton_guide.vector_add import vector_add_kernel  # noqa: E402


def main():
    x, y = torch.randn(2, 4096, device="cuda").unbind(0)
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    args = (x, y, out, 4096)
    tg.vector_add(x, y)
    launcher = launch.fast_launch(vector_add_kernel)
    compiled, tail, _ = next(iter(launcher.compiled.values()))
    stream = torch.cuda.current_stream().cuda_stream
    pieces = {
        "torch x + y": lambda: x + y,
        "torch.empty_like": lambda: torch.empty_like(x),
        "check_tensor": lambda: validation.check_tensor("x", x),
        "launch_key": lambda: launch.launch_key(args),
        "compiled.run (Triton's launcher)": lambda: compiled.run(
            4, 1, 1, stream, compiled.function, compiled.packed_metadata, None, None, None,
            *args, *tail),
        "fast_launch(...)[grid](...)": lambda: launcher[(4,)](
            *args, BLOCK_SIZE=1024, INT64_OFFSETS=False),
        "vector_add_kernel[grid] (Triton's path)": lambda: vector_add_kernel[(4,)](
            *args, BLOCK_SIZE=1024, INT64_OFFSETS=False),
        "tg.vector_add": lambda: tg.vector_add(x, y),
    }
    print(f"{torch.cuda.get_device_name()}: host time per call, us")
    for name, fn in pieces.items():
        print(f"  {name:<40} {host_us(fn, calls=300):7.2f}", flush=True)


if __name__ == "__main__":
    main()
