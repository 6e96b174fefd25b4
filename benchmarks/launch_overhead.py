"""Host time per call of each launcher on small inputs, where the kernel takes a few
microseconds: the wall time of many back-to-back calls, through Triton's own launch path
(``kernel[grid]``) and through the cached launch (``triton_guide.launch``), next to the
torch call; then a cProfile of the slowest with the cached launch.

    python benchmarks/launch_overhead.py      (CUDA GPU)
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import triton_guide as tg  # noqa: E402
from triton_guide import launch  # noqa: E402


def host_us(fn, calls=2000):
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return host


def main():
    x16 = torch.randn(4096, 512, device="cuda", dtype=torch.float16)
    a = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    v = torch.randn(4096, device="cuda")
    q = torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.float16)
    calls = {
        "softmax 4096x512 fp16": lambda: tg.softmax(x16),
        "torch.softmax": lambda: torch.softmax(x16, -1),
        "matmul 512^3 fp16": lambda: tg.matmul(a, a),
        "a @ a": lambda: a @ a,
        "vector_add 4096": lambda: tg.vector_add(v, v),
        "v + v": lambda: v + v,
        "attention 1x2x128x64": lambda: tg.attention(q, q, q),
    }
    print(f"{'host time per call (us)':<24} {'triton path':>12} {'cached':>8}")
    for name, fn in calls.items():
        launch.enabled = False
        slow = host_us(fn)
        launch.enabled = True
        print(f"{name:<24} {slow:12.1f} {host_us(fn):8.1f}", flush=True)
    for name in ("softmax 4096x512 fp16", "matmul 512^3 fp16"):
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(500):
            calls[name]()
        profile.disable()
        print(f"\n--- {name}: 500 calls with the cached launch, by own time")
        pstats.Stats(profile).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
