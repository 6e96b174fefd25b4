"""Time every op against its PyTorch baseline at sizes that fill the GPU; print one table.

    python benchmarks/report.py [--quick]

Ratios are ours / baseline, both measured in this run. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import triton_guide as tg
from triton_guide.benchmark import gb_per_s, measure_ceiling, median_ms, tflop_per_s


def row(what, ours, baselines, unit):
    cells = "  ".join(f"{name} {value:7.1f}" for name, value in baselines.items())
    ratios = "  ".join(f"{ours / value:5.2f}x {name}" for name, value in baselines.items())
    print(f"{what:<42} ours {ours:7.1f} {unit:<7} | {cells} | {ratios}", flush=True)


def ceilings():
    roofs = [measure_ceiling(kind) for kind in ("copy", "gemm_bf16", "gemm_fp16")]
    print("ceilings: " + ", ".join(f"{roof.label} {roof.value:.0f} {roof.unit}" for roof in roofs))


def vector_add():
    n = 2**26
    x, y = torch.randn(2, n, device="cuda").unbind(0)
    nbytes = 3 * n * 4
    row(f"vector_add fp32 n=2^26", gb_per_s(nbytes, median_ms(lambda: tg.vector_add(x, y))),
        {"torch": gb_per_s(nbytes, median_ms(lambda: x + y))}, "GB/s")


def softmax(cols_list):
    for dtype, cols in [(torch.float32, c) for c in cols_list] + [(torch.float16, 4096)]:
        x = torch.randn(4096, cols, device="cuda", dtype=dtype)
        nbytes = 2 * x.numel() * x.element_size()
        row(f"softmax {str(dtype)[6:]} 4096x{cols}", gb_per_s(nbytes, median_ms(lambda: tg.softmax(x))),
            {"torch": gb_per_s(nbytes, median_ms(lambda: torch.softmax(x, dim=-1)))}, "GB/s")
    x = torch.randn(1024, 65536, device="cuda")
    nbytes = 2 * x.numel() * 4
    row("softmax fp32 1024x65536 (online)", gb_per_s(nbytes, median_ms(lambda: tg.softmax(x))),
        {"torch": gb_per_s(nbytes, median_ms(lambda: torch.softmax(x, dim=-1)))}, "GB/s")


def matmul(sizes):
    for dtype in (torch.float16, torch.bfloat16):
        for n in sizes:
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            flops = 2 * n**3
            row(f"matmul {str(dtype)[6:]} {n}^3", tflop_per_s(flops, median_ms(lambda: tg.matmul(a, b))),
                {"cuBLAS": tflop_per_s(flops, median_ms(lambda: a @ b))}, "TFLOP/s")
    a = torch.randn(4095, 4097, device="cuda", dtype=torch.float16)
    b = torch.randn(4097, 4093, device="cuda", dtype=torch.float16)
    flops = 2 * 4095 * 4097 * 4093
    row("matmul float16 4095x4097x4093", tflop_per_s(flops, median_ms(lambda: tg.matmul(a, b))),
        {"cuBLAS": tflop_per_s(flops, median_ms(lambda: a @ b))}, "TFLOP/s")


def sdpa(backend, causal):
    def run(q, k, v):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


def attention(configs):
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cuDNN": SDPBackend.CUDNN_ATTENTION}
    for batch, heads, seq, head_dim in configs:
        for causal in (False, True):
            shape = (batch, heads, seq, head_dim)
            q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
            flops = 4 * batch * heads * seq * seq * head_dim * (0.5 if causal else 1.0)
            ours = lambda: tg.attention(q, k, v, causal=causal)  # noqa: E731
            base = {name: sdpa(b, causal) for name, b in backends.items()}
            tag = f"B{batch} H{heads} N{seq} d{head_dim} {'causal' if causal else 'full'}"
            row(f"attention fwd {tag}", tflop_per_s(flops, median_ms(ours)),
                {n: tflop_per_s(flops, median_ms(lambda f=f: f(q, k, v))) for n, f in base.items()}, "TFLOP/s")
            grad = torch.randn(shape, device="cuda", dtype=torch.float16)

            def backward_of(fn):
                out = fn()
                return lambda: out.backward(grad, retain_graph=True)

            row(f"attention bwd {tag}", tflop_per_s(2.5 * flops, median_ms(backward_of(ours))),
                {n: tflop_per_s(2.5 * flops, median_ms(backward_of(lambda f=f: f(q, k, v)))) for n, f in base.items()},
                "TFLOP/s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes")
    parser.add_argument("--only", nargs="*", default=None, help="ops to run: add softmax matmul attention")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("benchmarks/report.py needs a CUDA GPU")
    print(tg.runtime.describe())
    only = set(args.only or ["add", "softmax", "matmul", "attention"])
    ceilings()
    if "add" in only:
        vector_add()
    if "softmax" in only:
        softmax([1024, 4096] if args.quick else [1024, 2048, 4096, 8192, 16384])
    if "matmul" in only:
        matmul([4096] if args.quick else [2048, 4096, 8192])
    if "attention" in only:
        attention([(4, 32, 4096, 64), (4, 32, 4096, 128)] if args.quick else
                  [(4, 32, 16384, 64), (4, 32, 16384, 128), (4, 32, 4096, 128)])


if __name__ == "__main__":
    main()
