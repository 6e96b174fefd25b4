"""Host time per call of each launcher on small inputs, where the kernel takes a few
microseconds: the wall time of many back-to-back calls, through Triton's own launch path
(``kernel[grid]``) and through the cached launch (``triton_guide.launch``), next to the
torch call; then a cProfile of the slowest with the cached launch.

    python benchmarks/launch_overhead.py      (CUDA GPU)
    python benchmarks/launch_overhead.py --matmul-shapes
    python benchmarks/launch_overhead.py --attention

``--matmul-shapes`` goes through ``report.py``'s matmul shapes in its order instead: host
time per call of ``tg.matmul``, how many of those calls took Triton's own path, and the
``as called`` time (``do_bench``), with a cProfile of any shape slower than 50 us a call;
then the attention's. ``--attention`` times only the attention page's first sweep point
(see ``attention``). Host times are ``triton_guide.benchmark.host_us``: the median of 5
rounds of 200 calls by default; the two options time one round (300 and 100 calls), so
that the count of calls through Triton's path covers those calls and the warm-up call.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import triton_guide as tg  # noqa: E402
from triton_guide import launch  # noqa: E402
from triton_guide.benchmark import host_us  # noqa: E402


def print_profile(fn, calls, lines):
    """A cProfile of ``calls`` calls of ``fn``: the ``lines`` functions with most own time."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        fn()
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(lines)


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
        print(f"\n--- {name}: 500 calls with the cached launch, by own time")
        print_profile(calls[name], 500, 18)


def matmul_shapes():
    from benchmarks.report import MATMUL_SHAPES
    from triton_guide.benchmark import median_ms, tflop_per_s

    slow_path = {"calls": 0}
    through_triton = launch.FastLauncher._launch_through_triton

    def counted(self, *args, **kwargs):
        slow_path["calls"] += 1
        return through_triton(self, *args, **kwargs)

    launch.FastLauncher._launch_through_triton = counted
    print(f"{'matmul':<24} {'host us/call':>12} {'Triton path':>11} {'kept':>5} "
          f"{'as called TFLOP/s':>18}")
    for dtype in (torch.float16, torch.bfloat16):
        for m, n, k in MATMUL_SHAPES:
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(k, n, device="cuda", dtype=dtype)
            tg.matmul(a, b)  # tunes
            slow_path["calls"] = 0
            host = host_us(lambda: tg.matmul(a, b), calls=300, repeats=1)
            through = slow_path["calls"]
            module = sys.modules["triton_guide.matmul"]
            kept = sum(len(launcher.compiled) for launcher in (
                getattr(kernel, "_triton_guide_launcher", None)
                for kernel in (module.matmul_kernel, module.matmul_tma_kernel)) if launcher)
            called = tflop_per_s(2 * m * n * k, median_ms(lambda: tg.matmul(a, b)))
            name = f"{str(dtype)[6:]} {m}x{n}x{k}"
            print(f"{name:<24} {host:12.1f} {through:>11} {kept:>5} {called:18.1f}", flush=True)
            if host > 50:
                print_profile(lambda: tg.matmul(a, b), 200, 8)
    attention(slow_path)


def attention(slow_path=None):
    """The attention page's first sweep point, B4 H32 N1024 d128 float16: host time per
    call of the forward (without and with autograd recording it) and of the backward, the
    ``as called`` time, and a cProfile of each."""
    from triton_guide.benchmark import median_ms

    q, k, v = (torch.randn(4, 32, 1024, 128, device="cuda", dtype=torch.float16,
                           requires_grad=True) for _ in range(3))
    out = tg.attention(q, k, v)
    grad = torch.randn_like(out)
    plain = [t.detach() for t in (q, k, v)]
    calls = {"attention forward": lambda: tg.attention(*plain),
             "attention forward, grad": lambda: tg.attention(q, k, v),
             "attention backward": lambda: torch.autograd.grad(out, (q, k, v), grad,
                                                               retain_graph=True)}
    for name, fn in calls.items():
        if slow_path is not None:
            slow_path["calls"] = 0
        host = host_us(fn, calls=100, repeats=1)
        through = slow_path["calls"] if slow_path is not None else "-"
        print(f"{name:<24} {host:12.1f} {through:>11} {'':>5} "
              f"{median_ms(fn):15.3f} ms", flush=True)
    for name, fn in calls.items():
        print(f"\n--- {name}: 100 calls, by own time")
        print_profile(fn, 100, 14)


if __name__ == "__main__":
    if "--matmul-shapes" in sys.argv:
        matmul_shapes()
    elif "--attention" in sys.argv:
        attention()
    else:
        main()
