"""The Python our launchers run per call, with the kernel launches themselves stubbed out:
what a CPU machine can measure of #36's host time (the rest is Triton's launcher and the
CUDA driver, which need a GPU).

Every module's ``fast_launch`` is replaced by a stand-in whose launch does nothing, so a call
runs the checks, the allocations, the autograd wrapper and the launch-argument assembly, and
stops where the kernel would be queued. Inputs live on the CPU (the interpreter's device), so
paths that exist only on a GPU (tensor descriptors, TMA) are not taken: on an H100 the matmul
and attention launchers do more than this measures.

    python lab/host_python_cost.py            # the table
    python lab/host_python_cost.py --profile attention_decode   # where one case's time goes
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import pstats
import time

import torch
import torch.nn.functional as F

import triton_guide as tg

MODULES = ["vector_add", "softmax", "matmul", "attention", "attention_decode",
           "cross_entropy", "norms", "transpose"]


class _NoLaunch:
    def __getitem__(self, grid):
        return self

    def __call__(self, *args, **kwargs):
        return None


def stub_launches() -> None:
    for name in MODULES:
        module = importlib.import_module(f"triton_guide.{name}")
        if hasattr(module, "fast_launch"):
            module.fast_launch = lambda kernel: _NoLaunch()


def cases() -> dict:
    x, y = torch.randn(4096), torch.randn(4096)
    rows = torch.randn(4096, 256)
    a, b = (torch.randn(512, 512, dtype=torch.float16) for _ in "ab")
    q = torch.randn(1, 32, 1, 128, dtype=torch.float16)
    k, v = (torch.randn(1, 4, 4096, 128, dtype=torch.float16) for _ in "kv")
    qf, kf, vf = (torch.randn(1, 8, 256, 64, dtype=torch.float16) for _ in "qkv")
    logits, target = torch.randn(64, 1000), torch.randint(0, 1000, (64,))
    hidden, weight, bias = torch.randn(64, 1024), torch.randn(1024), torch.randn(1024)
    leaf = rows.clone().requires_grad_()
    return {
        "vector_add 4096": lambda: tg.vector_add(x, y),
        "softmax 4096x256": lambda: tg.softmax(rows),
        "softmax 4096x256, recorded": lambda: tg.softmax(leaf),
        "matmul 512^3 fp16": lambda: tg.matmul(a, b),
        "attention_decode B1 GQA 8:1 Nk4096": lambda: tg.attention(q, k, v),
        "attention B1 H8 N256 d64": lambda: tg.attention(qf, kf, vf),
        "cross_entropy 64x1000": lambda: tg.cross_entropy(logits, target),
        "layer_norm 64x1024": lambda: tg.layer_norm(hidden, weight, bias),
        "rms_norm 64x1024": lambda: tg.rms_norm(hidden, weight),
        # torch's own CPU calls of similar size, for scale (they compute on the CPU)
        "torch: x + y 4096": lambda: x + y,
        "torch: empty_like 4096": lambda: torch.empty_like(x),
        "torch: F.layer_norm 64x1024": lambda: F.layer_norm(hidden, (1024,), weight, bias),
    }


def us_per_call(fn, calls: int = 2000, repeats: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", help="a case name (prefix) to profile")
    args = parser.parse_args()
    stub_launches()
    table = cases()
    if args.profile:
        name = next(n for n in table if n.startswith(args.profile))
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(2000):
            table[name]()
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)
        return
    print("Python per call, launches stubbed (best of 5 x 2000 calls, CPU tensors):")
    for name, fn in table.items():
        print(f"  {name:<40} {us_per_call(fn):7.2f} us")


if __name__ == "__main__":
    main()
