"""Search tuning choices on a GPU: which configuration wins at which shape, against the baseline.

    python benchmarks/tune.py matmul|softmax|attention [--quick]

A working tool for performance work, not part of the site: it times each candidate
configuration of a kernel directly (bypassing ``triton.autotune``), checks it against torch,
and prints per shape the best candidate, its rate and the baseline's from the same run.
What it found, and what did not help, is kept in ``benchmarks/NOTES.md``.
"""

from __future__ import annotations

import argparse
import math
import time

import torch
import triton
import triton.language as tl

from triton_guide.benchmark import gb_per_s, median_ms, tflop_per_s

# ---------------------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------------------

# (M, N, K): square (powers of two and not), LLM projections (4096 tokens, hidden 4096:
# QKV 3x, MLP up 4x and down, a 32000-word vocabulary), decode (few rows), ragged sizes.
MATMUL_SHAPES = [
    (512, 512, 512), (1000, 1000, 1000), (1024, 1024, 1024), (2048, 2048, 2048),
    (3072, 3072, 3072), (4096, 4096, 4096), (8192, 8192, 8192),
    (4096, 12288, 4096), (4096, 16384, 4096), (4096, 4096, 16384), (4096, 32000, 4096),
    (1, 4096, 4096), (16, 4096, 4096), (64, 12288, 4096), (128, 4096, 16384),
    (4095, 4097, 4093), (1023, 1025, 1027), (127, 4096, 4096),
]


def _mm_cfg(m, n, k, g, s, w):
    return (m, n, k, g, s, w)


MATMUL_CANDIDATES = [
    _mm_cfg(128, 256, 64, 8, 3, 8), _mm_cfg(256, 128, 64, 8, 3, 8),
    _mm_cfg(128, 128, 64, 8, 4, 8), _mm_cfg(128, 128, 64, 8, 4, 4),
    _mm_cfg(128, 128, 64, 8, 5, 4), _mm_cfg(128, 128, 128, 8, 3, 8),
    _mm_cfg(128, 64, 64, 8, 4, 4), _mm_cfg(64, 128, 64, 8, 4, 4),
    _mm_cfg(64, 64, 64, 8, 4, 4), _mm_cfg(64, 64, 128, 8, 3, 4),
    _mm_cfg(64, 128, 128, 8, 3, 4), _mm_cfg(64, 256, 64, 8, 3, 8),
    _mm_cfg(32, 128, 128, 8, 4, 4), _mm_cfg(16, 128, 128, 1, 4, 4),
    _mm_cfg(16, 64, 256, 1, 3, 4), _mm_cfg(32, 64, 128, 8, 4, 4),
    _mm_cfg(128, 32, 64, 8, 4, 4), _mm_cfg(64, 32, 128, 8, 4, 4),
    _mm_cfg(16, 32, 256, 1, 4, 4), _mm_cfg(16, 32, 512, 1, 3, 4),
]


@triton.jit
def matmul_aligned_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
    stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, ALIGN: tl.constexpr,
):
    # The candidate: the package's kernel plus divisibility hints that the launcher proves.
    N = tl.multiple_of(N, ALIGN)
    K = tl.multiple_of(K, ALIGN)
    stride_am = tl.multiple_of(stride_am, ALIGN)
    stride_bk = tl.multiple_of(stride_bk, ALIGN)
    stride_cm = tl.multiple_of(stride_cm, ALIGN)
    program_id = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = program_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((program_id % num_pid_in_group) % group_size_m)
    pid_n = (program_id % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_remaining = K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def _padded(x, multiple):
    """x copied into a buffer whose row stride (and columns) round up to ``multiple``."""
    rows, cols = x.shape
    padded_cols = triton.cdiv(cols, multiple) * multiple
    buffer = torch.zeros(rows, padded_cols, device=x.device, dtype=x.dtype)
    buffer[:, :cols] = x
    return buffer


def tune_matmul_aligned(shapes, dtypes):
    """Hints (and, for strides that are not multiples of 8, padded copies) vs the plain kernel."""
    print("matmul with alignment hints / padding: best candidate (TFLOP/s) vs cuBLAS")
    for dtype in dtypes:
        for M, N, K in shapes:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            ref = a.float() @ b.float()
            flops = 2 * M * N * K
            base = tflop_per_s(flops, median_ms(lambda: a @ b))
            aligned = K % 8 == 0 and N % 8 == 0
            results = []
            for m, n, k, g, s, w in MATMUL_CANDIDATES:
                grid = (triton.cdiv(M, m) * triton.cdiv(N, n),)

                def run():
                    if aligned:
                        a2, b2, n_pad = a, b, N
                    else:  # pad K and N up to multiples of 8 (zeros add nothing)
                        a2 = _padded(a, 8)
                        b2 = _padded(torch.nn.functional.pad(b, (0, 0, 0, a2.shape[1] - K)), 8)
                        n_pad = b2.shape[1]
                    c = torch.empty(M, n_pad, device="cuda", dtype=dtype)
                    matmul_aligned_kernel[grid](
                        a2, b2, c, M, n_pad, a2.shape[1], a2.stride(0), a2.stride(1),
                        b2.stride(0), b2.stride(1), c.stride(0), c.stride(1),
                        BLOCK_SIZE_M=m, BLOCK_SIZE_N=n, BLOCK_SIZE_K=k, GROUP_SIZE_M=g,
                        ALIGN=8, num_stages=s, num_warps=w)
                    return c[:, :N]
                try:
                    out = run()
                    err = ((out.float() - ref).norm() / ref.norm()).item()
                    if not err < 2e-2:
                        results.append((0.0, (m, n, k, g, s, w)))
                        continue
                    results.append((tflop_per_s(flops, median_ms(run)), (m, n, k, g, s, w)))
                except Exception:
                    results.append((0.0, (m, n, k, g, s, w)))
            results.sort(reverse=True)
            top3 = "  ".join(f"{r:6.1f}@{c}" for r, c in results[:3])
            how = "hints" if aligned else "padded"
            print(f"{str(dtype)[6:]:>8} {M:>5}x{N:>5}x{K:>5} {how:<6} cuBLAS {base:6.1f}  best "
                  f"{results[0][0] / base:5.2f}x | {top3}", flush=True)


def tune_matmul(shapes, dtypes):
    from triton_guide.matmul import matmul_kernel

    kernel = matmul_kernel.fn  # the jit function under the autotuner
    print("matmul: best candidate per shape (TFLOP/s), cuBLAS in the same run")
    ratios = {}
    for dtype in dtypes:
        for M, N, K in shapes:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            c = torch.empty(M, N, device="cuda", dtype=dtype)
            ref = (a.float() @ b.float())
            flops = 2 * M * N * K
            base = tflop_per_s(flops, median_ms(lambda: a @ b))
            results = []
            for m, n, k, g, s, w in MATMUL_CANDIDATES:
                grid = (triton.cdiv(M, m) * triton.cdiv(N, n),)

                def run():
                    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                                 b.stride(1), c.stride(0), c.stride(1), BLOCK_SIZE_M=m,
                                 BLOCK_SIZE_N=n, BLOCK_SIZE_K=k, GROUP_SIZE_M=g,
                                 num_stages=s, num_warps=w)
                try:
                    c.fill_(float("nan"))
                    run()
                    err = ((c.float() - ref).norm() / ref.norm()).item()
                    if not err < 2e-2:
                        results.append((0.0, (m, n, k, g, s, w), f"wrong {err:.1e}"))
                        continue
                    results.append((tflop_per_s(flops, median_ms(run)), (m, n, k, g, s, w), ""))
                except Exception as e:  # out of shared memory, say
                    results.append((0.0, (m, n, k, g, s, w), type(e).__name__))
            results.sort(reverse=True)
            best = results[0]
            ratios[(str(dtype)[6:], M, N, K)] = best[0] / base
            top3 = "  ".join(f"{r:6.1f}@{c}" for r, c, _ in results[:3])
            print(f"{str(dtype)[6:]:>8} {M:>5}x{N:>5}x{K:>5}  cuBLAS {base:6.1f}  best "
                  f"{best[0] / base:5.2f}x | {top3}", flush=True)
    geo = math.exp(sum(math.log(max(r, 1e-6)) for r in ratios.values()) / len(ratios))
    print(f"matmul: geometric mean of best/cuBLAS over {len(ratios)} cases: {geo:.3f}")


# ---------------------------------------------------------------------------------------
# softmax
# ---------------------------------------------------------------------------------------


@triton.jit
def softmax_rows_kernel(input_ptr, output_ptr, input_row_stride, output_row_stride,
                        num_rows, num_cols, BLOCK_ROWS: tl.constexpr,
                        BLOCK_COLS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_COLS)
    mask = (rows[:, None] < num_rows) & (cols[None, :] < num_cols)
    x = tl.load(input_ptr + rows[:, None] * input_row_stride + cols[None, :], mask=mask,
                other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=1)[:, None])
    result = numerator / tl.sum(numerator, axis=1)[:, None]
    tl.store(output_ptr + rows[:, None] * output_row_stride + cols[None, :], result, mask=mask)


SOFTMAX_SHAPES = [(32768, 128), (4096, 256), (16384, 256), (4096, 512), (4096, 1024),
                  (4096, 2048), (4096, 4096), (4096, 8192), (4096, 16384), (2048, 32768),
                  (1024, 65536), (256, 262144)]


def _softmax_candidates(block_cols):
    """(rows per program, warps): tiles of 2k-8k elements for short rows, one row otherwise."""
    if block_cols > 32768:
        return []
    if block_cols <= 2048:
        return [(tile // block_cols, warps) for tile in (2048, 4096, 8192) for warps in (4, 8)]
    return [(1, warps) for warps in ((4, 8) if block_cols <= 4096 else (8, 16, 32))]


def tune_softmax(shapes, dtypes):
    import triton_guide as tg

    print("softmax: GB/s (read + write once); torch.softmax and copy in the same run")
    for dtype in dtypes:
        for rows, cols in shapes:
            x = torch.randn(rows, cols, device="cuda", dtype=dtype)
            y = torch.empty_like(x)
            nbytes = 2 * x.numel() * x.element_size()
            ref = torch.softmax(x.float(), dim=-1)
            base = gb_per_s(nbytes, median_ms(lambda: torch.softmax(x, dim=-1)))
            copy = gb_per_s(nbytes, median_ms(lambda: y.copy_(x)))
            ours = gb_per_s(nbytes, median_ms(lambda: tg.softmax(x)))
            variants = []
            block_cols = triton.next_power_of_2(cols)
            for block_rows, warps in _softmax_candidates(block_cols):
                grid = (triton.cdiv(rows, block_rows),)

                def run():
                    softmax_rows_kernel[grid](x, y, x.stride(0), y.stride(0), rows, cols,
                                              BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols,
                                              num_warps=warps)
                try:
                    y.fill_(float("nan"))
                    run()
                    if not torch.allclose(y.float(), ref, atol=1e-2, rtol=1e-2):
                        variants.append((0.0, (block_rows, warps), "wrong"))
                        continue
                    variants.append((gb_per_s(nbytes, median_ms(run)), (block_rows, warps), ""))
                except Exception as e:
                    variants.append((0.0, (block_rows, warps), type(e).__name__))
            variants.sort(reverse=True)
            top = "  ".join(f"{r:6.0f}@rows{c[0]}w{c[1]}" for r, c, _ in variants[:3])
            print(f"{str(dtype)[6:]:>8} {rows:>6}x{cols:<6} copy {copy:5.0f} torch {base:5.0f} "
                  f"ours {ours:5.0f} ({ours / base:4.2f}x) | {top}", flush=True)


# ---------------------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------------------

ATTENTION_FORWARD_CANDIDATES = [
    (128, 64, 3, 4), (128, 64, 4, 8), (128, 128, 3, 8), (128, 128, 2, 8), (128, 64, 2, 4),
    (64, 64, 3, 4), (64, 64, 4, 4), (128, 32, 3, 4), (64, 32, 3, 4),
]


def tune_attention_forward(cases):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    from triton_guide.attention import attention_forward_kernel

    kernel = attention_forward_kernel.fn
    print("attention forward: best candidate (TFLOP/s), cuDNN and flash in the same run")
    for dtype, batch, heads, seq, dim, causal in cases:
        if True:
            q, k, v = (torch.randn(batch, heads, seq, dim, device="cuda", dtype=dtype)
                       for _ in range(3))
            out = torch.empty_like(q)
            lse = torch.empty(batch * heads, seq, device="cuda", dtype=torch.float32)
            flops = 4 * batch * heads * seq * seq * dim * (0.5 if causal else 1.0)
            base = {}
            for name, backend in (("cuDNN", SDPBackend.CUDNN_ATTENTION),
                                  ("flash", SDPBackend.FLASH_ATTENTION)):
                def sdpa():
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                base[name] = tflop_per_s(flops, median_ms(sdpa))
            ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            results = []
            for bm, bn, s, w in ATTENTION_FORWARD_CANDIDATES:
                grid = (triton.cdiv(seq, bm), batch * heads)

                def run():
                    kernel[grid](q, k, v, out, lse, *q.stride(), *k.stride(), *v.stride(),
                                 *out.stride(), heads, seq, 1 / math.sqrt(dim), HEAD_DIM=dim,
                                 BLOCK_D=dim, CAUSAL=causal, BLOCK_M=bm, BLOCK_N=bn,
                                 num_stages=s, num_warps=w)
                try:
                    run()
                    err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
                    if not err < 2e-2:
                        results.append((0.0, (bm, bn, s, w)))
                        continue
                    results.append((tflop_per_s(flops, median_ms(run)), (bm, bn, s, w)))
                except Exception:
                    results.append((0.0, (bm, bn, s, w)))
            results.sort(reverse=True)
            top = "  ".join(f"{r:5.0f}@{c}" for r, c in results[:3])
            tag = f"B{batch} H{heads} N{seq} d{dim} {'causal' if causal else 'full'}"
            print(f"{str(dtype)[6:]:>8} {tag:<28} cuDNN {base['cuDNN']:5.0f} flash "
                  f"{base['flash']:5.0f} best {results[0][0] / base['cuDNN']:4.2f}x cuDNN | {top}",
                  flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="+",
                        choices=["matmul", "matmul_aligned", "softmax", "attention"])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    start = time.time()
    if "matmul" in args.what:
        shapes = MATMUL_SHAPES[:4] if args.quick else MATMUL_SHAPES
        tune_matmul(shapes, (torch.float16, torch.bfloat16))
    if "matmul_aligned" in args.what:
        shapes = [(1000, 1000, 1000), (1023, 1025, 1027), (4095, 4097, 4093), (127, 4096, 4096),
                  (1, 4096, 4096), (3072, 3072, 3072)]
        tune_matmul_aligned(shapes, (torch.float16,))
    if "softmax" in args.what:
        tune_softmax(SOFTMAX_SHAPES, (torch.float32, torch.float16, torch.bfloat16))
    if "attention" in args.what:
        f16, bf16 = torch.float16, torch.bfloat16
        cases = [(f16, 16, 16, 1024, 64, True), (bf16, 16, 16, 1024, 64, True),
                 (f16, 16, 16, 1024, 64, False), (f16, 4, 32, 4096, 64, True),
                 (f16, 4, 32, 4096, 128, False), (f16, 4, 32, 16384, 128, False),
                 (f16, 4, 32, 16384, 128, True), (f16, 4, 32, 16384, 64, False),
                 (f16, 16, 16, 1024, 128, True), (bf16, 4, 32, 4096, 128, False)]
        tune_attention_forward(cases)
    print(f"done in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
