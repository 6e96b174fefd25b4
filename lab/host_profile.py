"""Host time per call of every op at small sizes, ours against torch's equivalent, with and
without autograd recording, and where our time goes (cProfile, by own time).

    python lab/host_profile.py [--profile] [--json out.json]
"""

from __future__ import annotations

import cProfile
import json
import pstats
import sys
import time

import torch
import torch.nn.functional as F

import triton_guide as tg


def host_us(fn, calls=300, repeats=5):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return sorted(times)[len(times) // 2]


def cases():
    dev = "cuda"
    h = torch.float16
    v = torch.randn(4096, device=dev)
    s = torch.randn(4096, 256, device=dev, dtype=h)
    a = torch.randn(512, 512, device=dev, dtype=h)
    q = torch.randn(1, 4, 256, 64, device=dev, dtype=h)
    logits = torch.randn(256, 1024, device=dev)
    target = torch.randint(0, 1024, (256,), device=dev)
    xn = torch.randn(256, 1024, device=dev, dtype=h)
    w = torch.randn(1024, device=dev, dtype=h)
    b = torch.randn(1024, device=dev, dtype=h)
    ours = {
        "vector_add 4096": (lambda: tg.vector_add(v, v), lambda: v + v),
        "softmax 4096x256 fp16": (lambda: tg.softmax(s), lambda: torch.softmax(s, -1)),
        "matmul 512^3 fp16": (lambda: tg.matmul(a, a), lambda: a @ a),
        "attention fwd 1x4x256x64": (lambda: tg.attention(q, q, q),
                                     lambda: F.scaled_dot_product_attention(q, q, q)),
        "cross_entropy fwd 256x1024": (lambda: tg.cross_entropy(logits, target),
                                       lambda: F.cross_entropy(logits, target)),
        "layer_norm 256x1024": (lambda: tg.layer_norm(xn, w, b),
                                lambda: F.layer_norm(xn, (1024,), w, b)),
        "rms_norm 256x1024": (lambda: tg.rms_norm(xn, w), lambda: F.rms_norm(xn, (1024,), w)),
    }
    # With autograd recording: forward only, and forward + backward.
    sg = s.clone().requires_grad_()
    qg = q.clone().requires_grad_()
    lg = logits.clone().requires_grad_()
    xg = xn.clone().requires_grad_()
    gs = torch.randn_like(s)
    ours.update({
        "softmax fwd, grad on": (lambda: tg.softmax(sg), lambda: torch.softmax(sg, -1)),
        "softmax fwd+bwd": (lambda: tg.softmax(sg).backward(gs),
                            lambda: torch.softmax(sg, -1).backward(gs)),
        "attention fwd+bwd": (lambda: tg.attention(qg, qg, qg).sum().backward(),
                              lambda: F.scaled_dot_product_attention(qg, qg, qg).sum().backward()),
        "cross_entropy fwd+bwd": (lambda: tg.cross_entropy(lg, target).backward(),
                                  lambda: F.cross_entropy(lg, target).backward()),
        "rms_norm fwd+bwd": (lambda: tg.rms_norm(xg, w).sum().backward(),
                             lambda: F.rms_norm(xg, (1024,), w).sum().backward()),
    })
    return ours


def main():
    rows = {}
    print(f"{'host us per call':<30} {'ours':>8} {'torch':>8} {'ratio':>6}")
    table = cases()
    for name, (mine, theirs) in table.items():
        m, t = host_us(mine), host_us(theirs)
        rows[name] = {"ours_us": m, "torch_us": t}
        print(f"{name:<30} {m:8.1f} {t:8.1f} {m / t:6.2f}", flush=True)
    if "--profile" in sys.argv:
        for name, (mine, _) in table.items():
            print(f"\n--- {name}: 300 calls, by own time")
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(300):
                mine()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(12)
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
