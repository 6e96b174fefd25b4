"""Search tuning choices on a GPU: which configuration wins at which shape, against the baseline.

    python lab/tune.py matmul|softmax|attention [--quick]   (--help lists every sweep)

A working tool for performance work, not part of the site: it times each candidate
configuration of a kernel directly (bypassing ``triton.autotune``), checks it against torch,
and prints per shape the best candidate, its rate and the baseline's from the same run.
What it found, and what did not help, is kept in ``lab/NOTES.md``.
"""

from __future__ import annotations

import argparse
import importlib
import math
import time
from statistics import geometric_mean

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from triton_guide.attention import LOG2E, TUNED
from triton_guide.benchmark import gb_per_s, median_ms, tflop_per_s
from triton_guide.matmul import store_output_tile, tile_of_program
from triton_guide.testing import relative_error

# Copies of two jit helpers of triton_guide.attention (private there), for the attention
# variants below.
@triton.jit
def _rows(desc, batch, head, first_row, BLOCK: tl.constexpr, BLOCK_D: tl.constexpr):
    """Rows ``first_row .. first_row + BLOCK`` of one (batch, head), zeros past the end."""
    return desc.load([batch, head, first_row, 0]).reshape(BLOCK, BLOCK_D)


@triton.jit
def _forward_block_loop(acc, row_sum, row_max, q, k_desc, v_desc, batch, head, offs_m, qk_scale,
                        start, end, seq_len, BLOCK_N: tl.constexpr, CAUSAL_MASK: tl.constexpr,
                        BOUNDS_MASK: tl.constexpr):
    """The online-softmax loop over keys [start, end) of the package's forward kernel."""
    BLOCK_D: tl.constexpr = q.shape[1]
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(start, end, BLOCK_N):
        k = _rows(k_desc, batch, head, start_n, BLOCK_N, BLOCK_D)
        scores = tl.dot(q, tl.trans(k))
        cols = start_n + offs_n
        if CAUSAL_MASK:
            scores = tl.where(offs_m[:, None] >= cols[None, :], scores, -float("inf"))
        if BOUNDS_MASK:
            scores = tl.where(cols[None, :] < seq_len, scores, -float("inf"))
        new_max = tl.maximum(row_max, tl.max(scores, axis=1) * qk_scale)
        probs = tl.math.exp2(scores * qk_scale - new_max[:, None])
        correction = tl.math.exp2(row_max - new_max)
        row_sum = row_sum * correction + tl.sum(probs, axis=1)
        v = _rows(v_desc, batch, head, start_n, BLOCK_N, BLOCK_D)
        acc = tl.dot(probs.to(v.dtype), v, acc * correction[:, None])
        row_max = new_max
    return acc, row_sum, row_max


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
                    err = relative_error(out, ref)
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


def _launcher_hints(a, b):
    """The alignment hints the package's launcher gives for ``a @ b`` (c is contiguous)."""
    from triton_guide.matmul import alignment, layout

    return dict(A_ALIGN=layout(a)[1], B_ALIGN=layout(b)[1], C_ALIGN=alignment(b.shape[1]))


def tune_matmul(shapes, dtypes, candidates=MATMUL_CANDIDATES):
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
            aligned = _launcher_hints(a, b)
            base = tflop_per_s(flops, median_ms(lambda: a @ b))
            results = []
            for m, n, k, g, s, w in candidates:
                grid = (triton.cdiv(M, m) * triton.cdiv(N, n),)

                def run():
                    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                                 b.stride(1), c.stride(0), c.stride(1), BLOCK_SIZE_M=m,
                                 BLOCK_SIZE_N=n, BLOCK_SIZE_K=k, GROUP_SIZE_M=g,
                                 num_stages=s, num_warps=w, **aligned)
                try:
                    c.fill_(float("nan"))
                    run()
                    err = relative_error(c, ref)
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
    geo = geometric_mean(max(r, 1e-6) for r in ratios.values())
    print(f"matmul: geometric mean of best/cuBLAS over {len(ratios)} cases: {geo:.3f}")


def tune_matmul_picks(shapes, dtypes, repeats=4):
    """Is the autotuner's pick for a shape the best configuration, and the same pick on every
    tuning? Every configuration the launcher's pruning keeps is timed directly, then the
    autotuner tunes the shape ``repeats`` times from scratch; all in GPU time on cold inputs,
    as ``report.py`` times (the autotuner itself times with ``do_bench``)."""
    matmul_module = importlib.import_module("triton_guide.matmul")
    from triton_guide.benchmark import cold_matmul_inputs, gpu_ms, matmul_tflop_per_s

    tuner = matmul_module.matmul_kernel
    kernel = tuner.fn
    print("matmul: each kept configuration timed directly, then the autotuner's picks "
          "(TFLOP/s, GPU time, cold inputs; cuBLAS in the same run)")
    for dtype in dtypes:
        for M, N, K in shapes:
            pairs = cold_matmul_inputs(M, N, K, dtype)
            a, b = pairs[0]
            outs = [torch.empty(M, N, device="cuda", dtype=dtype) for _ in pairs]
            flops = 2 * M * N * K
            hints = _launcher_hints(a, b)
            ref = a.float() @ b.float()
            cublas = matmul_tflop_per_s(torch.matmul, pairs)
            kept = matmul_module.prune_configs(tuner.configs, {"M": M, "N": N, "a_ptr": a})
            direct = []
            for config in kept:
                meta = dict(config.kwargs, num_stages=config.num_stages,
                            num_warps=config.num_warps, **hints)
                tiles = triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"])
                grid = (tiles,)

                def run(x, y, out, meta=meta, grid=grid):
                    kernel[grid](x, y, out, M, N, K, x.stride(0), x.stride(1), y.stride(0),
                                 y.stride(1), out.stride(0), out.stride(1), **meta)
                outs[0].fill_(float("nan"))
                run(a, b, outs[0])
                err = relative_error(outs[0], ref)
                if not err < 2e-2:
                    raise AssertionError(f"{config} is wrong at {M}x{N}x{K}: {err:.1e}")
                rate = tflop_per_s(flops, gpu_ms([lambda x=x, y=y, o=o: run(x, y, o)
                                                  for (x, y), o in zip(pairs, outs)]))
                direct.append((rate, _config_name(config)))
            direct.sort(reverse=True)
            picks = []
            for _ in range(repeats):
                tuner.cache.clear()  # the autotuner's picks, and the launcher's copies of them
                launcher = getattr(tuner, "_triton_guide_launcher", None)
                if launcher is not None:
                    launcher.compiled.clear()
                matmul_module.matmul(a, b)  # tunes the shape from scratch
                picks.append((matmul_tflop_per_s(matmul_module.matmul, pairs),
                              _config_name(tuner.best_config)))
            best = direct[0][0]
            print(f"{str(dtype)[6:]:>8} {M:>5}x{N:>5}x{K:>5} cuBLAS {cublas:6.1f} | best kept "
                  f"{best:6.1f} {direct[0][1]} ({best / cublas:4.2f}x) | next "
                  + "  ".join(f"{r:6.1f} {c}" for r, c in direct[1:4]), flush=True)
            print("      picks: " + "  ".join(f"{r:6.1f} {c} ({r / cublas:4.2f}x)"
                                            for r, c in picks), flush=True)
            del pairs, outs, a, b
            torch.cuda.empty_cache()


def _config_name(config):
    m, n, k = (config.kwargs[f"BLOCK_SIZE_{axis}"] for axis in "MNK")
    return f"{m}x{n}x{k}/s{config.num_stages}w{config.num_warps}"


def tune_matmul_row_starts(shapes, dtype=torch.float16):
    """Is a ragged M, N or K slow because rows start off 128-byte boundaries? The package's
    matmul on the inputs as they are, then on views of buffers whose rows are padded to a
    multiple of 64 elements (same values, same sizes, only the row strides change)."""
    from triton_guide.benchmark import cold_matmul_inputs, matmul_tflop_per_s
    from triton_guide.matmul import matmul

    print("matmul: inputs as they are vs rows padded to 128 bytes (TFLOP/s, GPU time)")
    for M, N, K in shapes:
        pairs = cold_matmul_inputs(M, N, K, dtype)
        padded = [(row_padded_view(a), row_padded_view(b)) for a, b in pairs]
        ref = pairs[0][0].double() @ pairs[0][1].double()
        for a, b in (pairs[0], padded[0]):
            err = relative_error(matmul(a, b), ref)
            assert err < 1e-2, err
        rates = [matmul_tflop_per_s(f, inputs)
                 for f, inputs in ((matmul, pairs), (matmul, padded),
                                   (torch.matmul, pairs), (torch.matmul, padded))]
        print(f"{M:>5}x{N:>5}x{K:>5}  as they are {rates[0]:6.1f}  rows padded {rates[1]:6.1f}"
              f"  | cuBLAS {rates[2]:6.1f} / {rates[3]:6.1f}", flush=True)
        del pairs, padded
        torch.cuda.empty_cache()


def tune_matmul_layouts(cases):
    """The package's matmul against cuBLAS with a and b stored row by row or column by
    column. ``cases`` are (dtype, M, N, K, layout): layout "rr" is a and b row by row, "cr"
    a stored column by column (a transposed view, as in a backward pass), "rc" b so (as
    ``x @ weight.t()`` in a linear layer), "cc" both."""
    from triton_guide.benchmark import matmul_tflop_per_s
    from triton_guide.matmul import matmul

    print("matmul: a and b by rows (r) or by columns (c), TFLOP/s, GPU time")
    ratios = []
    for dtype, M, N, K, layout in cases:
        pairs = cold_pairs_laid_out(dtype, M, N, K, layout)
        for a, b in pairs[:2]:  # the first call tunes; the second reuses its choice
            ref = a.double() @ b.double()
            err = relative_error(matmul(a, b), ref)
            assert err < 1e-2, (dtype, M, N, K, layout, err)
        ours = matmul_tflop_per_s(matmul, pairs)
        cublas = matmul_tflop_per_s(torch.matmul, pairs)
        ratios.append(ours / cublas)
        print(f"{str(dtype)[6:]:>8} {M:>5}x{N:>5}x{K:>5} {layout}  ours {ours:6.1f}  "
              f"cuBLAS {cublas:6.1f}  {ours / cublas:4.2f}x", flush=True)
        del pairs
        torch.cuda.empty_cache()
    geo = geometric_mean(ratios)
    print(f"matmul layouts: geometric mean / cuBLAS {geo:.3f} over {len(ratios)} cases, "
          f"worst {min(ratios):.2f}")


HOST_TMA_CANDIDATES = [
    _mm_cfg(128, 256, 64, 8, 3, 8), _mm_cfg(256, 128, 64, 8, 3, 8),
    _mm_cfg(128, 128, 64, 8, 4, 8), _mm_cfg(128, 128, 64, 8, 4, 4),
    _mm_cfg(128, 128, 64, 8, 3, 4), _mm_cfg(128, 128, 32, 8, 4, 4),
    _mm_cfg(128, 128, 128, 8, 3, 8), _mm_cfg(64, 128, 128, 8, 3, 4),
    _mm_cfg(64, 64, 128, 8, 3, 4), _mm_cfg(128, 64, 128, 8, 3, 4),
]


def _host_tma_runner(a, b, c, cfg):
    """One launch of the package's matmul_tma_kernel (the jit function under its autotuner)
    for a @ b into c with the configuration ``cfg``, descriptors made as the launcher makes
    them; a and b may be transposed views."""
    from triton_guide.matmul import alignment, descriptor, layout, matmul_tma_kernel

    m, n, k, g, s, w = cfg
    M, K = a.shape
    N = b.shape[1]
    meta = dict(BLOCK_SIZE_M=m, BLOCK_SIZE_N=n, BLOCK_SIZE_K=k, GROUP_SIZE_M=g,
                A_COLUMNS=layout(a)[0], B_COLUMNS=layout(b)[0])
    a_desc, b_desc = descriptor(a), descriptor(b)
    # The tiles the kernel's pre-hook gives the descriptors (transposed for a stored by columns).
    a_desc.block_shape = [k, m] if meta["A_COLUMNS"] else [m, k]
    b_desc.block_shape = [n, k] if meta["B_COLUMNS"] else [k, n]
    grid = (triton.cdiv(M, m) * triton.cdiv(N, n),)

    def run():
        matmul_tma_kernel.fn[grid](a_desc, b_desc, c, M, N, K, c.stride(0), c.stride(1),
                                   C_ALIGN=alignment(N), num_stages=s, num_warps=w, **meta)
        return c
    return run


def laid_out(x, columns):
    """x itself, or (``columns``) the same values stored column by column."""
    return x.t().contiguous().t() if columns else x


def cold_pairs_laid_out(dtype, M, N, K, layout):
    """``cold_matmul_inputs`` with a and b stored as ``layout`` says ("rc": a by rows, b by
    columns; see tune_matmul_layouts)."""
    from triton_guide.benchmark import cold_matmul_inputs

    return [(laid_out(a, layout[0] == "c"), laid_out(b, layout[1] == "c"))
            for a, b in cold_matmul_inputs(M, N, K, dtype)]


def row_padded_view(x, multiple=64):
    """The same values as ``x`` in a buffer whose rows are padded to a multiple of
    ``multiple`` elements: a view of the same size, only the row stride differs."""
    return _padded(x, multiple)[:, :x.shape[1]]


def _host_tma_compile(jobs):
    """Launch each (dtype, M, N, K, layout, cfg) once: fills Triton's on-disk cache."""
    for dtype, M, N, K, layout, cfg in jobs:
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        b = laid_out(torch.randn(K, N, device="cuda", dtype=dtype), layout[1] == "c")
        if layout == "padded":
            a, b = row_padded_view(a), row_padded_view(b)
        try:
            _host_tma_runner(a, b, torch.empty(M, N, device="cuda", dtype=dtype), cfg)()
        except Exception:  # out of shared memory: the sweep reports it
            pass
    torch.cuda.synchronize()


def tune_matmul_host_tma(cases, candidates=HOST_TMA_CANDIDATES, workers=12):
    """The package's pointer kernel (matmul_steps.matmul_pointer_loads, autotuned) against
    its descriptor kernel (best of ``candidates``) and cuBLAS, all in GPU time on cold
    inputs. ``cases``: (dtype, M, N, K, layout), layout "rr" (a and b by rows), "rc" (b a
    transposed view) or "padded" (rows padded to 64 elements, views of the same sizes)."""
    import multiprocessing as mp

    from triton_guide.benchmark import gpu_ms, matmul_tflop_per_s
    from triton_guide.matmul_steps import matmul_pointer_loads as matmul

    start = time.time()
    jobs = [(*case, cfg) for case in cases for cfg in candidates]
    with mp.get_context("spawn").Pool(workers) as pool:
        pool.map(_host_tma_compile, [jobs[i::workers] for i in range(workers)])
    print(f"matmul through host-made descriptors: {len(jobs)} compiled in "
          f"{time.time() - start:.0f} s; TFLOP/s, GPU time, cold inputs")
    ratios = {"pointers": [], "descriptors": []}
    for dtype, M, N, K, layout in cases:
        pairs = cold_pairs_laid_out(dtype, M, N, K, layout)  # a by rows: layout[0] is not "c"
        if layout == "padded":
            pairs = [(row_padded_view(a), row_padded_view(b)) for a, b in pairs]
        ref = pairs[0][0].double() @ pairs[0][1].double()
        assert relative_error(matmul(*pairs[0]), ref) < 1e-2
        ours = matmul_tflop_per_s(matmul, pairs)
        cublas = matmul_tflop_per_s(torch.matmul, pairs)
        outs = [torch.empty(M, N, device="cuda", dtype=dtype) for _ in pairs]
        results = []
        for cfg in candidates:
            try:
                runs = [_host_tma_runner(a, b, c, cfg) for (a, b), c in zip(pairs, outs)]
                err = relative_error(runs[0](), ref)
                if not err < 1e-2:
                    results.append((0.0, cfg, f"wrong {err:.1e}"))
                    continue
                results.append((tflop_per_s(2 * M * N * K, gpu_ms(runs)), cfg, ""))
            except Exception as e:  # out of shared memory, say
                results.append((0.0, cfg, type(e).__name__))
        results.sort(key=lambda r: -r[0])
        ratios["pointers"].append(ours / cublas)
        ratios["descriptors"].append(results[0][0] / cublas)
        top3 = "  ".join(f"{r:6.1f}@{c[:3]}s{c[4]}w{c[5]}" for r, c, _ in results[:3])
        print(f"{str(dtype)[6:]:>8} {M:>5}x{N:>5}x{K:>5} {layout:<6} cuBLAS {cublas:6.1f} | "
              f"pointers {ours:6.1f} ({ours / cublas:4.2f}x) | descriptors {results[0][0]:6.1f} "
              f"({results[0][0] / cublas:4.2f}x) | {top3}", flush=True)
        del pairs, outs
        torch.cuda.empty_cache()
    for kind, rs in ratios.items():
        print(f"{kind}: geometric mean / cuBLAS {geometric_mean(rs):.3f} over {len(rs)} cases, "
              f"worst {min(rs):.2f}")


def _path_features(a, b):
    """What the package's rules may look at for ``a @ b`` (inputs as the launcher prepared
    them): b stored by columns, M, and whether both are ready for descriptors at 16 and at 32
    bytes."""
    from triton_guide.matmul import descriptor_ready, layout

    def on_sectors(x):  # every row (column) starts on a 32-byte boundary
        stride = x.stride(1) if layout(x)[0] else x.stride(0)
        return x.data_ptr() % 32 == 0 and stride * x.element_size() % 32 == 0

    return dict(b_columns=layout(b)[0], rows=a.shape[0],
                ready16=descriptor_ready(a) and descriptor_ready(b),
                ready32=descriptor_ready(a) and descriptor_ready(b)
                and on_sectors(a) and on_sectors(b))


# Rules for when matmul reads through descriptors, each a function of _path_features.
PATH_RULES = {
    "eleventh session's (b by columns, >256 rows, 32-byte rows)":
        lambda f: f["b_columns"] and f["rows"] > 256 and f["ready32"],
    "b by columns, >256 rows, 16-byte rows":
        lambda f: f["b_columns"] and f["rows"] > 256 and f["ready16"],
    "b by columns, 16-byte rows (any M)":
        lambda f: f["b_columns"] and f["ready16"],
    "any layout, >256 rows, 16-byte rows":
        lambda f: f["rows"] > 256 and f["ready16"],
    "any layout, 16-byte rows (any M; kept)": lambda f: f["ready16"],
}


def _paths_compile(cases):
    """Autotune each case's paths once, in a worker: fills Triton's on-disk cache."""
    from triton_guide.matmul import aligned_copies, aligned_if_worth_it, matmul, product

    for dtype, M, N, K, layout in cases:
        a = laid_out(torch.randn(M, K, device="cuda", dtype=dtype), layout[0] == "c")
        b = laid_out(torch.randn(K, N, device="cuda", dtype=dtype), layout[1] == "c")
        prepared = aligned_if_worth_it(a, b)
        product(*prepared, descriptors=False)
        product(*aligned_copies(a, b), descriptors=True)
        matmul(a, b)
        if _path_features(*prepared)["ready16"]:
            product(*prepared, descriptors=True)
    torch.cuda.synchronize()


def tune_matmul_paths(cases, workers=8):
    """Both of the package's kernels on the same prepared inputs (``aligned_if_worth_it``,
    as ``matmul`` prepared them before the twelfth session), each autotuned, against cuBLAS,
    in GPU time on cold inputs; then, for the rules in PATH_RULES, the geometric mean and
    worst ratio each would give.
    A third path copies both inputs (``aligned_copies``, b by columns, K padded to 16) and
    reads them through descriptors, the copies timed in; a fourth is ``matmul`` itself, with
    whatever copies it makes. ``cases``: (dtype, M, N, K, layout) as in
    tune_matmul_layouts."""
    import multiprocessing as mp

    from triton_guide.benchmark import matmul_tflop_per_s
    from triton_guide.matmul import aligned_copies, aligned_if_worth_it, matmul, product

    def pointers(a, b):
        return product(*aligned_if_worth_it(a, b), descriptors=False)

    def descriptors(a, b):
        return product(*aligned_if_worth_it(a, b), descriptors=True)

    def copies(a, b):
        return product(*aligned_copies(a, b), descriptors=True)

    start = time.time()
    with mp.get_context("spawn").Pool(workers) as pool:  # compile in parallel: fills the cache
        pool.map(_paths_compile, [cases[i::workers] for i in range(workers)])
    print(f"compiled in {time.time() - start:.0f} s")
    print("matmul: pointer kernel / descriptor kernel / copies + descriptors, TFLOP/s and "
          "ratio to cuBLAS, GPU time, cold inputs")
    rows = []
    for dtype, M, N, K, layout in cases:
        start = time.time()
        pairs = cold_pairs_laid_out(dtype, M, N, K, layout)
        features = _path_features(*aligned_if_worth_it(*pairs[0]))
        paths = {"pointers": pointers, "copies": copies, "matmul": matmul}
        if features["ready16"]:
            paths["descriptors"] = descriptors
        ref = pairs[0][0].double() @ pairs[0][1].double()
        rates = {}
        for name, fn in paths.items():
            err = relative_error(fn(*pairs[0]), ref)
            assert err < 1e-2, (name, dtype, M, N, K, layout, err)
            rates[name] = matmul_tflop_per_s(fn, pairs)
        cublas = matmul_tflop_per_s(torch.matmul, pairs)
        ratios = {name: rate / cublas for name, rate in rates.items()}
        rows.append((features, ratios))
        text = "  ".join(f"{name} {rates[name]:6.1f} ({ratios[name]:4.2f}x)"
                         for name in ("pointers", "descriptors", "copies", "matmul")
                         if name in rates)
        print(f"{str(dtype)[6:]:>8} {M:>5}x{N:>5}x{K:>5} {layout}  cuBLAS {cublas:6.1f} | {text}"
              f"  [{'32' if features['ready32'] else '16' if features['ready16'] else '--'}"
              f"-byte rows; {time.time() - start:4.1f} s]", flush=True)
        del pairs
        torch.cuda.empty_cache()
    print("rule: geometric mean / cuBLAS, worst, over", len(rows), "cases")
    for name, rule in PATH_RULES.items():
        chosen = [r["descriptors"] if rule(f) else r["pointers"] for f, r in rows]
        print(f"  {name:<48} {geometric_mean(chosen):.3f}  worst {min(chosen):.2f}")
    for name in ("matmul", None):
        chosen = [r[name] if name else max(r.values()) for _, r in rows]
        print(f"  {name or 'best path, per case':<48} {geometric_mean(chosen):.3f}  "
              f"worst {min(chosen):.2f}")


# An experiment, not the package's kernel: the last, partial wave of tiles split along K.
# A launch of T tiles on S slots (SMs x programs per SM) runs floor(T / S) full waves and
# one partial wave, which takes as long as a full one (2000 x 3000 x 1000 in 128 x 256
# tiles: 192 tiles, 132 slots, 1.45 waves run as 2). Here the full waves' tiles run as
# usual and each of the remaining tiles is split into SPLITS ranges of K, so that the last
# wave fills every slot; the ranges add into a float32 buffer with atomics, and a second
# launch converts it into c. ``python lab/tune.py matmul_tail_split``.
@triton.jit
def matmul_tail_split_kernel(a_desc, b_desc, c_ptr, partial_ptr, M, N, K, stride_cm,
                             FULL_TILES, SPLITS,
                             BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                             BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                             C_ALIGN: tl.constexpr):
    pid = tl.program_id(0)
    k_steps = tl.cdiv(K, BLOCK_SIZE_K)
    tile = pid
    first = 0
    last = k_steps
    if pid >= FULL_TILES:
        unit = pid - FULL_TILES
        tile = FULL_TILES + unit // SPLITS
        part = unit % SPLITS
        first = part * k_steps // SPLITS
        last = (part + 1) * k_steps // SPLITS
    pid_m, pid_n = tile_of_program(tile, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(first, last):
        a = a_desc.load([pid_m * BLOCK_SIZE_M, k * BLOCK_SIZE_K])
        b = b_desc.load([k * BLOCK_SIZE_K, pid_n * BLOCK_SIZE_N])
        acc = tl.dot(a, b, acc)
    if pid < FULL_TILES:
        store_output_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, 1, BLOCK_SIZE_M,
                          BLOCK_SIZE_N, C_ALIGN, False)
    else:
        offs = ((tile - FULL_TILES) * BLOCK_SIZE_M * BLOCK_SIZE_N
                + tl.arange(0, BLOCK_SIZE_M)[:, None] * BLOCK_SIZE_N
                + tl.arange(0, BLOCK_SIZE_N)[None, :])
        tl.atomic_add(partial_ptr + offs, acc, sem="relaxed")


@triton.jit
def tail_store_kernel(c_ptr, partial_ptr, M, N, stride_cm, FULL_TILES,
                      BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                      GROUP_SIZE_M: tl.constexpr, C_ALIGN: tl.constexpr):
    t = tl.program_id(0)
    pid_m, pid_n = tile_of_program(FULL_TILES + t, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N,
                                   GROUP_SIZE_M)
    offs = (t * BLOCK_SIZE_M * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_M)[:, None] * BLOCK_SIZE_N
            + tl.arange(0, BLOCK_SIZE_N)[None, :])
    store_output_tile(c_ptr, tl.load(partial_ptr + offs), pid_m, pid_n, M, N, stride_cm, 1,
                      BLOCK_SIZE_M, BLOCK_SIZE_N, C_ALIGN, False)


def tail_split_plan(M, N, K, cfg, slots):
    """(full tiles, tail tiles, splits) for ``cfg`` on ``slots`` program slots: no split
    where the tail would not gain (it already fills half the slots, or K has one step)."""
    m, n, k = cfg[:3]
    tiles = triton.cdiv(M, m) * triton.cdiv(N, n)
    full = tiles // slots * slots
    tail = tiles - full
    splits = min(triton.cdiv(K, k), slots // tail) if tail else 1
    return (tiles, 0, 1) if splits < 2 else (full, tail, splits)


def _tail_split_runner(a, b, cfg, slots, split=True):
    """``a @ b`` (both stored by rows) by matmul_tail_split_kernel with ``cfg`` (M, N, K
    blocks, group, stages, warps); ``split=False`` runs every tile whole."""
    from triton_guide.matmul import alignment, descriptor

    m, n, k, g, s, w = cfg
    (M, K), N = a.shape, b.shape[1]
    full, tail, splits = tail_split_plan(M, N, K, cfg, slots) if split else (
        triton.cdiv(M, m) * triton.cdiv(N, n), 0, 1)
    a_desc, b_desc = descriptor(a), descriptor(b)
    a_desc.block_shape, b_desc.block_shape = [m, k], [k, n]
    partial = torch.empty(max(tail, 1) * m * n, device=a.device, dtype=torch.float32)
    meta = dict(BLOCK_SIZE_M=m, BLOCK_SIZE_N=n, GROUP_SIZE_M=g, C_ALIGN=alignment(N))

    def run():
        c = torch.empty(M, N, device=a.device, dtype=a.dtype)
        if tail:
            partial.zero_()
        matmul_tail_split_kernel[(full + tail * splits,)](
            a_desc, b_desc, c, partial, M, N, K, c.stride(0), full, splits, BLOCK_SIZE_K=k,
            num_stages=s, num_warps=w, **meta)
        if tail:
            tail_store_kernel[(tail,)](c, partial, M, N, c.stride(0), full, num_warps=4,
                                       **meta)
        return c
    return run


# (configuration, programs per SM): two 128 x 128 programs fit an H100 SM with 3 stages.
TAIL_SPLIT_CANDIDATES = [
    (_mm_cfg(128, 256, 64, 8, 3, 8), 1), (_mm_cfg(256, 128, 64, 8, 3, 8), 1),
    (_mm_cfg(128, 128, 64, 8, 3, 4), 2), (_mm_cfg(128, 128, 64, 8, 3, 8), 2),
]


def tune_matmul_tail_split(shapes, dtypes):
    """Each TAIL_SPLIT_CANDIDATES configuration whole and with its last wave split, against
    the package's matmul and cuBLAS, in GPU time on cold inputs (b by rows)."""
    import triton_guide as tg
    from triton_guide.benchmark import cold_matmul_inputs, gpu_ms, matmul_tflop_per_s

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"matmul, last wave split along K: TFLOP/s in GPU time ({sms} SMs); "
          "ours / cuBLAS in brackets")
    for dtype in dtypes:
        for M, N, K in shapes:
            pairs = cold_matmul_inputs(M, N, K, dtype)
            flops = 2 * M * N * K

            def rate(runner):  # runner(a, b): a call of one prepared launch on a and b
                return tflop_per_s(flops, gpu_ms([runner(a, b) for a, b in pairs]))
            cublas = matmul_tflop_per_s(torch.matmul, pairs)
            row = [f"cuBLAS {cublas:5.0f}",
                   f"package {matmul_tflop_per_s(tg.matmul, pairs) / cublas:.2f}"]
            a, b = pairs[0]
            reference = (a.float() @ b.float())
            for cfg, per_sm in TAIL_SPLIT_CANDIDATES:
                plan = tail_split_plan(M, N, K, cfg, sms * per_sm)
                cells = []
                for split in (False, True):
                    if split and plan[2] == 1:
                        cells.append("  -  ")
                        continue
                    try:
                        error = relative_error(_tail_split_runner(a, b, cfg, sms * per_sm,
                                                                  split)(), reference)
                        if error > 1e-2:
                            cells.append(f"wrong {error:.1e}")
                            continue
                        value = rate(lambda x, y: _tail_split_runner(x, y, cfg, sms * per_sm,
                                                                     split))
                        cells.append(f"{value / cublas:.2f}")
                    except Exception as e:  # out of resources: say so, go on
                        cells.append(type(e).__name__)
                row.append(f"{cfg[0]}x{cfg[1]}/{cfg[5]}w {'/'.join(cells)} (x{plan[2]})")
            print(f"{str(dtype)[6:]:>8} {M}x{N}x{K}: " + " | ".join(row), flush=True)
            pairs.clear()  # frees the inputs before the next shape
            torch.cuda.empty_cache()


def _row_split_runner(a, b, big, slots, small):
    """``a @ b`` (both stored by rows) by the package's descriptor kernel in two launches:
    the first rows with ``big`` tiles, as many as make whole waves of ``slots`` programs,
    the rest with ``small`` tiles (no split when ``small`` is None). Configurations are
    (M, N, K blocks, group, stages, warps)."""
    from triton_guide.matmul import alignment, descriptor, matmul_tma_kernel

    (M, K), N = a.shape, b.shape[1]
    per_row = triton.cdiv(N, big[1])
    tiles = triton.cdiv(M, big[0]) * per_row
    split = min(M, tiles // slots * slots // per_row * big[0]) if small else M
    parts = [(lo, hi, cfg) for lo, hi, cfg in ((0, split, big), (split, M, small)) if hi > lo]
    launches = []
    for lo, hi, (m, n, k, g, s, w) in parts:
        a_desc, b_desc = descriptor(a[lo:hi]), descriptor(b)
        a_desc.block_shape, b_desc.block_shape = [m, k], [k, n]
        launches.append((lo, hi - lo, (triton.cdiv(hi - lo, m) * triton.cdiv(N, n),), a_desc,
                         b_desc, dict(BLOCK_SIZE_M=m, BLOCK_SIZE_N=n, BLOCK_SIZE_K=k,
                                      GROUP_SIZE_M=g, num_stages=s, num_warps=w)))

    def run():
        c = torch.empty(M, N, device=a.device, dtype=a.dtype)
        for lo, rows, grid, a_desc, b_desc, meta in launches:
            matmul_tma_kernel.fn[grid](a_desc, b_desc, c[lo:], rows, N, K, c.stride(0), 1,
                                       C_ALIGN=alignment(N), **meta)
        return c
    return run, split


# The tiles tried for the rows after the whole waves of 128 x 256 tiles (one per SM).
ROW_SPLIT_SMALL = [_mm_cfg(128, 64, 64, 8, 4, 4), _mm_cfg(64, 128, 64, 8, 4, 4),
                   _mm_cfg(64, 64, 64, 8, 4, 4), _mm_cfg(128, 128, 64, 8, 4, 4)]


def tune_matmul_row_split(shapes, dtypes):
    """Whole waves of 128 x 256 tiles, then the last rows in smaller tiles (a second
    launch), against the package (which splits where ``last_wave_split`` says), the
    package's one autotuned launch, 128 x 256 tiles throughout, and cuBLAS, in GPU time."""
    import triton_guide as tg
    from triton_guide.benchmark import cold_matmul_inputs, gpu_ms, matmul_tflop_per_s
    from triton_guide.matmul import WAVE_TILE, last_wave_split, product

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"matmul, last rows in smaller tiles: ours / cuBLAS in GPU time ({sms} SMs); "
          "'split at': the package's row, 0 for one launch")
    for dtype in dtypes:
        for M, N, K in shapes:
            pairs = cold_matmul_inputs(M, N, K, dtype)
            flops = 2 * M * N * K
            cublas = matmul_tflop_per_s(torch.matmul, pairs)
            one = matmul_tflop_per_s(lambda x, y: product(x, y, True, split=0), pairs)
            row = [f"cuBLAS {cublas:5.0f}", f"split at {last_wave_split(M, N, K, sms)}",
                   f"package {matmul_tflop_per_s(tg.matmul, pairs) / cublas:.2f}",
                   f"one launch {one / cublas:.2f}"]
            a, b = pairs[0]
            reference = a.float() @ b.float()
            for small in [None] + ROW_SPLIT_SMALL:
                name = "256 wide" if small is None else f"{small[0]}x{small[1]}/{small[5]}w"
                try:
                    run, split = _row_split_runner(a, b, WAVE_TILE, sms, small)
                    if small is not None and split in (0, M):
                        continue  # no whole wave, or nothing left over: nothing to try
                    error = relative_error(run(), reference)
                    if error > 1e-2:
                        row.append(f"{name} wrong {error:.1e}")
                        continue
                    ms = gpu_ms([_row_split_runner(x, y, WAVE_TILE, sms, small)[0]
                                 for x, y in pairs])
                    row.append(f"{name} {tflop_per_s(flops, ms) / cublas:.2f}")
                except Exception as e:  # out of resources: say so, go on
                    row.append(f"{name} {type(e).__name__}")
            print(f"{str(dtype)[6:]:>8} {M}x{N}x{K}: " + " | ".join(row), flush=True)
            pairs.clear()
            torch.cuda.empty_cache()


def tune_matmul_last_wave(shapes, dtypes, rounds=3):
    """The package's matmul with and without its last-wave split (its split at a given row,
    and its single autotuned launch), timed in turns ``rounds`` times with cuBLAS, in GPU
    time: the medians, so that drifting clocks fall on both sides alike."""
    from statistics import median

    from triton_guide.benchmark import cold_matmul_inputs, matmul_tflop_per_s
    from triton_guide.matmul import WAVE_TILE, kernel_inputs, product

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"matmul, last-wave split against one launch: ours / cuBLAS in GPU time ({sms} SMs), "
          f"median of {rounds} rounds taken in turns")
    for dtype in dtypes:
        for M, N, K in shapes:
            pairs = cold_matmul_inputs(M, N, K, dtype)
            a, b, descriptors = kernel_inputs(*pairs[0])
            per_row = triton.cdiv(b.shape[1], WAVE_TILE[1])
            full_waves, tail = divmod(triton.cdiv(M, WAVE_TILE[0]) * per_row, sms)
            split = full_waves * sms // per_row * WAVE_TILE[0]  # as last_wave_split, if asked

            def variant(split):
                def call(x, y):
                    x, y, descriptors = kernel_inputs(x, y)
                    return product(x, y, descriptors, split=split)
                return call
            rates = {"split": [], "one launch": [], "cuBLAS": []}
            for _ in range(rounds):
                rates["split"].append(matmul_tflop_per_s(variant(split), pairs))
                rates["one launch"].append(matmul_tflop_per_s(variant(0), pairs))
                rates["cuBLAS"].append(matmul_tflop_per_s(torch.matmul, pairs))
            cublas = median(rates["cuBLAS"])
            cells = "  ".join(f"{name} {median(values) / cublas:.2f} "
                              f"({'/'.join(f'{v / cublas:.2f}' for v in values)})"
                              for name, values in rates.items() if name != "cuBLAS")
            print(f"{str(dtype)[6:]:>8} {M}x{N}x{K}: {full_waves} full waves + {tail} tiles, "
                  f"split at {split} | cuBLAS {cublas:5.0f} | {cells}", flush=True)
            pairs.clear()
            torch.cuda.empty_cache()


# An experiment, not the package's kernel: tiles 64 rows or columns larger than a power of
# two (192 x 128, 128 x 192, 192 x 192), as four accumulators of power-of-two shapes (the main
# BLOCK_SIZE_M x BLOCK_SIZE_N one, EXTRA_N columns to its right, EXTRA_M rows below it, and
# the corner), each fed by tl.dot from its own descriptor loads. cuBLAS picks 192-wide tiles
# at 3072^3 and 2000 x 3000 x 1000, where tiles of powers of two leave a last wave of
# programs mostly empty. Row-major a and b whose rows start on 16-byte boundaries.
# ``python lab/tune.py matmul_wide_tiles``.
@triton.jit
def _store_block(c_desc, c_ptr, block, first_row, first_col, M, N, stride_cm,
                 C_ALIGN: tl.constexpr, STORE_DESC: tl.constexpr):
    """One accumulator's part of c: through a descriptor (TMA clips what lies past the
    edges), or by masked stores from the registers."""
    if STORE_DESC:
        c_desc.store([first_row, first_col], block.to(c_desc.dtype))
    else:
        rows = first_row + tl.arange(0, block.shape[0])
        cols = tl.max_contiguous(
            tl.multiple_of(first_col + tl.arange(0, block.shape[1]), C_ALIGN), C_ALIGN)
        N = (N // C_ALIGN) * C_ALIGN
        pointers = c_ptr + tl.multiple_of(rows * stride_cm, C_ALIGN)[:, None] + cols[None, :]
        tl.store(pointers, block.to(c_ptr.dtype.element_ty),
                 mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def matmul_wide_tile_kernel(
    a_desc, a_extra_desc, b_desc, b_extra_desc,  # a's tiles (BLOCK_SIZE_M, EXTRA_M rows) ...
    c_desc, c_right_desc, c_below_desc, c_corner_desc,  # c's four parts (with STORE_DESC)
    c_ptr, M, N, K, stride_cm,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    EXTRA_M: tl.constexpr, EXTRA_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
    C_ALIGN: tl.constexpr, STORE_DESC: tl.constexpr,
):
    TILE_M: tl.constexpr = BLOCK_SIZE_M + EXTRA_M
    TILE_N: tl.constexpr = BLOCK_SIZE_N + EXTRA_N
    pid_m, pid_n = tile_of_program(tl.program_id(0), M, N, TILE_M, TILE_N, GROUP_SIZE_M)
    row, col = pid_m * TILE_M, pid_n * TILE_N
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    if EXTRA_N > 0:
        acc_right = tl.zeros((BLOCK_SIZE_M, EXTRA_N), dtype=tl.float32)
    if EXTRA_M > 0:
        acc_below = tl.zeros((EXTRA_M, BLOCK_SIZE_N), dtype=tl.float32)
        if EXTRA_N > 0:
            acc_corner = tl.zeros((EXTRA_M, EXTRA_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_col = k * BLOCK_SIZE_K
        a = a_desc.load([row, k_col])
        b = b_desc.load([k_col, col])
        acc = tl.dot(a, b, acc)
        if EXTRA_N > 0:
            b_right = b_extra_desc.load([k_col, col + BLOCK_SIZE_N])
            acc_right = tl.dot(a, b_right, acc_right)
        if EXTRA_M > 0:
            a_below = a_extra_desc.load([row + BLOCK_SIZE_M, k_col])
            acc_below = tl.dot(a_below, b, acc_below)
            if EXTRA_N > 0:
                acc_corner = tl.dot(a_below, b_right, acc_corner)
    _store_block(c_desc, c_ptr, acc, row, col, M, N, stride_cm, C_ALIGN, STORE_DESC)
    if EXTRA_N > 0:
        _store_block(c_right_desc, c_ptr, acc_right, row, col + BLOCK_SIZE_N, M, N, stride_cm,
                     C_ALIGN, STORE_DESC)
    if EXTRA_M > 0:
        _store_block(c_below_desc, c_ptr, acc_below, row + BLOCK_SIZE_M, col, M, N, stride_cm,
                     C_ALIGN, STORE_DESC)
        if EXTRA_N > 0:
            _store_block(c_corner_desc, c_ptr, acc_corner, row + BLOCK_SIZE_M,
                         col + BLOCK_SIZE_N, M, N, stride_cm, C_ALIGN, STORE_DESC)


def _wide_tile_runner(a, b, cfg, store_desc=False):
    """``a @ b`` by matmul_wide_tile_kernel with cfg = (BLOCK_SIZE_M, EXTRA_M, BLOCK_SIZE_N,
    EXTRA_N, BLOCK_SIZE_K, group, stages, warps); c stored through descriptors or not."""
    from triton_guide.matmul import alignment

    bm, em, bn, en, bk, group, stages, warps = cfg
    em_, en_ = max(em, 16), max(en, 16)  # placeholders' tiles where a part is absent
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)

    def desc(x, block):
        return TensorDescriptor(x, list(x.shape), list(x.stride()), block)
    descs = (desc(a, [bm, bk]), desc(a, [em_, bk]), desc(b, [bk, bn]), desc(b, [bk, en_]),
             desc(c, [bm, bn]), desc(c, [bm, en_]), desc(c, [em_, bn]), desc(c, [em_, en_]))
    grid = (triton.cdiv(M, bm + em) * triton.cdiv(N, bn + en),)

    def run():
        matmul_wide_tile_kernel[grid](
            *descs, c, M, N, K, c.stride(0), BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn,
            BLOCK_SIZE_K=bk, EXTRA_M=em, EXTRA_N=en, GROUP_SIZE_M=group, C_ALIGN=alignment(N),
            STORE_DESC=store_desc, num_stages=stages, num_warps=warps)
        return c
    return run


# (BLOCK_SIZE_M, EXTRA_M, BLOCK_SIZE_N, EXTRA_N, BLOCK_SIZE_K, group, stages, warps)
WIDE_TILES = [
    (128, 0, 256, 0, 64, 8, 3, 8),  # the package's large tile, through this kernel
    (128, 0, 128, 64, 64, 8, 3, 8), (128, 0, 128, 64, 64, 8, 4, 8),  # 128 x 192
    (128, 64, 128, 0, 64, 8, 3, 8), (128, 64, 128, 0, 64, 8, 4, 8),  # 192 x 128
    (128, 64, 128, 64, 64, 8, 3, 8), (128, 64, 128, 64, 64, 8, 2, 8),  # 192 x 192
]
# Tiles two programs of which fit one SM (shared memory at most ~113 KiB, registers at most
# 128 a thread at 8 warps): one program's loads and stores then overlap the other's products.
TWO_PER_SM_TILES = [
    (128, 0, 128, 64, 64, 8, 2, 8), (128, 0, 128, 64, 32, 8, 4, 8),  # 128 x 192
    (128, 0, 128, 64, 32, 8, 3, 8), (64, 0, 128, 64, 64, 8, 3, 4),  # 128 x 192, 64 x 192
    (128, 0, 128, 0, 64, 8, 4, 4), (128, 0, 128, 0, 32, 8, 4, 4),  # 128 x 128
]


def _print_against_cublas(dtype, shape, runners, notes, rounds):
    """Time every ``runners[name]`` (lists of calls for ``gpu_ms``, one named "cuBLAS") in
    turns ``rounds`` times and print one line: each one's median rate over cuBLAS's, with
    its note, and the notes of the variants that did not run."""
    from statistics import median

    from triton_guide.benchmark import gpu_ms

    M, N, K = shape
    rates = {name: [] for name in runners}
    for _ in range(rounds):
        for name, calls in runners.items():
            rates[name].append(tflop_per_s(2 * M * N * K, gpu_ms(calls)))
    cublas = median(rates.pop("cuBLAS"))
    cells = [f"{name} {median(values) / cublas:.2f}{notes.get(name, '')}"
             for name, values in rates.items()]
    cells += [note for name, note in notes.items() if name not in rates]
    print(f"{str(dtype)[6:]:>8} {M}x{N}x{K}: cuBLAS {cublas:5.0f} | " + " ".join(cells),
          flush=True)


def tune_matmul_wide_tiles(shapes, dtypes, rounds=3, tiles=WIDE_TILES):
    """Each wide tile against the package and cuBLAS, in GPU time, in turns ``rounds`` times
    (medians); with each tile's waves (programs / SMs) for the shape."""
    import triton_guide as tg
    from triton_guide.benchmark import cold_matmul_inputs

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"matmul, tiles of 192: ours / cuBLAS in GPU time ({sms} SMs), median of {rounds} "
          "rounds in turns; [waves]")
    for dtype in dtypes:
        for M, N, K in shapes:
            pairs = cold_matmul_inputs(M, N, K, dtype)
            a, b = pairs[0]
            reference = a.float() @ b.float()
            runners = {"package": [lambda x=x, y=y: tg.matmul(x, y) for x, y in pairs],
                       "cuBLAS": [lambda x=x, y=y: x @ y for x, y in pairs]}
            notes = {}
            for cfg, store_desc in [(cfg, sd) for cfg in tiles for sd in (False, True)]:
                bm, em, bn, en = cfg[:4]
                name = f"{bm + em}x{bn + en}/{cfg[6]}s{cfg[7]}w{'/tma-store' if store_desc else ''}"
                waves = triton.cdiv(M, bm + em) * triton.cdiv(N, bn + en) / sms
                try:
                    run = _wide_tile_runner(a, b, cfg, store_desc)
                    run().fill_(float("nan"))
                    error = relative_error(run(), reference)
                except Exception as e:  # out of shared memory or registers: say so, go on
                    notes[name] = f"{name} {type(e).__name__}"
                    continue
                if not error < 1e-2:
                    notes[name] = f"{name} wrong {error:.1e}"
                    continue
                runners[name] = [_wide_tile_runner(x, y, cfg, store_desc) for x, y in pairs]
                notes[name] = f"[{waves:.2f}]"
            _print_against_cublas(dtype, (M, N, K), runners, notes, rounds)
            pairs.clear()
            runners.clear()
            torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------
# matmul: stream-K (the products along K shared out evenly among one program per SM)
# ---------------------------------------------------------------------------------------
# 2000 x 3000 x 1000 is 192 tiles of 128 x 256 on 132 SMs: the second wave runs 60 tiles
# while 72 SMs wait. Stream-K (Osama et al., 2023) gives every program the same number of
# K steps instead of whole tiles: the tiles' K steps are laid end to end and cut into one
# equal share per program, so a share starts and ends inside tiles. A piece that does not
# start a tile leaves its float32 partial sum in a slot of its own and raises a flag; the
# program holding the piece that starts the tile (the one it computes last) waits for
# those flags, adds the partials and stores the tile. ``DATA_PARALLEL`` tiles before that
# are computed whole, program by program, as usual.
@triton.jit
def _k_steps(acc, a_desc, b_desc, row, col, first, last, BLOCK_SIZE_K: tl.constexpr):
    """acc plus the products of K steps ``first .. last`` of the tile at (row, col)."""
    for k in range(first, last):
        a = a_desc.load([row, k * BLOCK_SIZE_K])
        b = b_desc.load([k * BLOCK_SIZE_K, col])
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _share_start(share, base, shared, programs):
    """The first global K step of stream-K share ``share`` (int64: steps x programs can
    pass 2**31)."""
    return base + share.to(tl.int64) * shared // programs


@triton.jit(do_not_specialize=["DATA_PARALLEL"])
def matmul_stream_k_kernel(
    a_desc, b_desc, c_ptr,
    partial_ptr,  # (programs, BLOCK_SIZE_M * BLOCK_SIZE_N) float32: one slot per share
    flag_ptr,  # (programs,) int32, zero: share s raises flag s when its partial is in its slot
    M, N, K, stride_cm,
    DATA_PARALLEL,  # tiles computed whole before the stream-K shares
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, C_ALIGN: tl.constexpr,
    HAND_OVER: tl.constexpr = 2,  # for timing only: 1 stores partials but waits for none,
    # 0 neither (both give wrong results)
    FLATTEN: tl.constexpr = False,  # the whole tiles' loops as one (see below)
    WARP_SPECIALIZE: tl.constexpr = False,  # that loop split into loading and computing warps
):
    programs = tl.num_programs(0)
    # Shares in reverse program order: the program holding a tile's first piece then runs
    # after those it waits for when programs run one by one (the interpreter).
    share = programs - 1 - tl.program_id(0)
    steps = tl.cdiv(K, BLOCK_SIZE_K)  # K steps per tile
    tiles = tl.cdiv(M, BLOCK_SIZE_M) * tl.cdiv(N, BLOCK_SIZE_N)
    rows = tl.arange(0, BLOCK_SIZE_M)
    cols = tl.arange(0, BLOCK_SIZE_N)
    slot_offsets = rows[:, None] * BLOCK_SIZE_N + cols[None, :]

    if FLATTEN:
        # One loop over (tile, K step) pairs, which Triton pipelines as one: the next
        # tile's first loads are issued while this tile's last products and store run.
        first_tile = share
        my_tiles = tl.cdiv(DATA_PARALLEL - share, programs)
        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for i in tl.range(0, my_tiles * steps, flatten=True, warp_specialize=WARP_SPECIALIZE):
            tile = first_tile + (i // steps) * programs
            k = i % steps
            pid_m, pid_n = tile_of_program(tile, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N,
                                           GROUP_SIZE_M)
            a = a_desc.load([pid_m * BLOCK_SIZE_M, k * BLOCK_SIZE_K])
            b = b_desc.load([k * BLOCK_SIZE_K, pid_n * BLOCK_SIZE_N])
            acc = tl.dot(a, b, acc)
            if k == steps - 1:
                store_output_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, 1,
                                  BLOCK_SIZE_M, BLOCK_SIZE_N, C_ALIGN, False)
                acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    else:
        for tile in range(share, DATA_PARALLEL, programs):
            pid_m, pid_n = tile_of_program(tile, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N,
                                           GROUP_SIZE_M)
            acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            acc = _k_steps(acc, a_desc, b_desc, pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N,
                           0, steps, BLOCK_SIZE_K)
            store_output_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, 1,
                              BLOCK_SIZE_M, BLOCK_SIZE_N, C_ALIGN, False)

    base = DATA_PARALLEL.to(tl.int64) * steps
    shared = (tiles - DATA_PARALLEL).to(tl.int64) * steps
    start = _share_start(share, base, shared, programs)
    end = _share_start(share + 1, base, shared, programs)
    # The tiles this share touches, each a plain loop over its K steps as above.
    for tile in range((start // steps).to(tl.int32), tl.cdiv(end, steps).to(tl.int32)):
        tile_start = tile * steps.to(tl.int64)
        first = tl.maximum(start - tile_start, 0).to(tl.int32)
        last = tl.minimum(end - tile_start, steps).to(tl.int32)
        pid_m, pid_n = tile_of_program(tile, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        acc = _k_steps(acc, a_desc, b_desc, pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N,
                       first, last, BLOCK_SIZE_K)
        if first > 0:
            # Only a share's first piece can start inside a tile: slot `share` is free.
            if HAND_OVER > 0:
                tl.store(partial_ptr + share * BLOCK_SIZE_M * BLOCK_SIZE_N + slot_offsets, acc)
            if HAND_OVER > 1:
                tl.debug_barrier()  # every thread's part stored before the flag goes up
                tl.atomic_xchg(flag_ptr + share, 1, sem="release")
        else:
            # The rest of this tile's steps are the first pieces of the next shares.
            covered = last if HAND_OVER > 1 else steps
            other = share + 1
            while covered < steps:
                other_end = _share_start(other + 1, base, shared, programs)
                if other_end > _share_start(other, base, shared, programs):
                    ready = tl.atomic_cas(flag_ptr + other, 1, 0, sem="acquire")
                    while ready != 1:
                        ready = tl.atomic_cas(flag_ptr + other, 1, 0, sem="acquire")
                    tl.debug_barrier()
                    acc += tl.load(partial_ptr + other * BLOCK_SIZE_M * BLOCK_SIZE_N
                                   + slot_offsets, cache_modifier=".cg")
                covered = tl.minimum(other_end - tile_start, steps).to(tl.int32)
                other += 1
            store_output_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, 1,
                              BLOCK_SIZE_M, BLOCK_SIZE_N, C_ALIGN, False)


def _stream_k_runner(a, b, cfg, per_sm=1, data_parallel_waves=None, hand_over=2,
                     flatten=False, warp_specialize=False):
    """``a @ b`` (both stored by rows) by matmul_stream_k_kernel with cfg = (BLOCK_SIZE_M,
    BLOCK_SIZE_N, BLOCK_SIZE_K, group, stages, warps): one program per SM slot
    (``per_sm`` slots per SM); of the tiles, whole waves but the last full one computed
    whole (``data_parallel_waves``, default: that many) and the rest in stream-K shares."""
    from triton_guide.hardware import multiprocessors
    from triton_guide.matmul import alignment, descriptor

    bm, bn, bk, group, stages, warps = cfg
    (M, K), N = a.shape, b.shape[1]
    slots = multiprocessors(a.device) * per_sm
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    steps = triton.cdiv(K, bk)
    full_waves = tiles // slots
    if data_parallel_waves is None:
        data_parallel_waves = max(full_waves - 1, 0)
    if data_parallel_waves == math.inf:  # every tile whole: a persistent kernel
        data_parallel, programs = tiles, min(slots, tiles)
    else:
        data_parallel = min(data_parallel_waves, full_waves) * slots
        programs = max(1, min(slots, (tiles - data_parallel) * steps))
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)
    partial = torch.empty(programs, bm * bn, device=a.device, dtype=torch.float32)
    flags = torch.zeros(programs, device=a.device, dtype=torch.int32)
    a_desc, b_desc = descriptor(a), descriptor(b)
    a_desc.block_shape, b_desc.block_shape = [bm, bk], [bk, bn]

    def run():
        matmul_stream_k_kernel[(programs,)](
            a_desc, b_desc, c, partial, flags, M, N, K, c.stride(0), data_parallel,
            BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=group,
            C_ALIGN=alignment(N), HAND_OVER=hand_over, FLATTEN=flatten,
            WARP_SPECIALIZE=warp_specialize, num_stages=stages, num_warps=warps)
        return c
    run.programs, run.data_parallel = programs, data_parallel
    return run


# (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, group, stages, warps), programs per SM, and
# the whole waves computed data-parallel (None: all but the last full one).
STREAM_K_VARIANTS = [
    ((128, 256, 64, 8, 3, 8), 1, None), ((128, 256, 64, 8, 3, 8), 1, 0),
    ((256, 128, 64, 8, 3, 8), 1, None), ((128, 128, 64, 8, 4, 8), 1, None),
    ((128, 128, 64, 8, 3, 4), 2, None), ((128, 256, 64, 8, 4, 8), 1, None),
]
# A persistent kernel: every tile whole (math.inf waves), one program per SM looping over
# them; its loops flattened into one (and split between loading and computing warps).
PERSISTENT_VARIANTS = [
    ((128, 256, 64, 8, 3, 8), 1, math.inf),
    ((128, 256, 64, 8, 3, 8), 1, math.inf, True), ((128, 256, 64, 8, 3, 8), 1, math.inf, True, True),
    ((128, 128, 64, 8, 4, 8), 1, math.inf, True), ((128, 128, 64, 8, 4, 8), 1, math.inf, True, True),
    ((128, 128, 64, 8, 4, 4), 1, math.inf, True), ((128, 128, 64, 8, 4, 4), 1, math.inf, True, True),
    ((128, 256, 64, 8, 4, 8), 1, math.inf, True),
]


def tune_matmul_stream_k(shapes, dtypes, rounds=3, variants=STREAM_K_VARIANTS):
    """Each stream-K variant against the package and cuBLAS, in GPU time, in turns
    ``rounds`` times (medians); with each variant's programs and data-parallel tiles."""
    import triton_guide as tg
    from triton_guide.benchmark import cold_matmul_inputs

    print(f"matmul, stream-K: ours / cuBLAS in GPU time, median of {rounds} rounds in turns;"
          " [programs, tiles computed whole]")
    for dtype in dtypes:
        for M, N, K in shapes:
            pairs = cold_matmul_inputs(M, N, K, dtype)
            a, b = pairs[0]
            reference = a.float() @ b.float()
            runners = {"package": [lambda x=x, y=y: tg.matmul(x, y) for x, y in pairs],
                       "cuBLAS": [lambda x=x, y=y: x @ y for x, y in pairs]}
            notes = {}
            for cfg, per_sm, waves, *loop in variants:
                name = (f"{cfg[0]}x{cfg[1]}/{cfg[4]}s{cfg[5]}w/{per_sm}perSM"
                        f"{'' if waves is None else f'/dp{waves}'}"
                        f"{'/flat' if loop[:1] == [True] else ''}{'/ws' if loop[1:] == [True] else ''}")
                try:
                    run = _stream_k_runner(a, b, cfg, per_sm, waves, 2, *loop)
                    run().fill_(float("nan"))
                    errors = [relative_error(run(), reference) for _ in range(3)]
                except Exception as e:  # out of shared memory or registers: say so, go on
                    notes[name] = f"{name} {type(e).__name__}"
                    continue
                if not max(errors) < 1e-2:
                    notes[name] = f"{name} wrong {max(errors):.1e}"
                    continue
                runners[name] = [_stream_k_runner(x, y, cfg, per_sm, waves, 2, *loop)
                                 for x, y in pairs]
                notes[name] = f"[{run.programs},{run.data_parallel}]"
            _print_against_cublas(dtype, (M, N, K), runners, notes, rounds)
            pairs.clear()
            runners.clear()
            torch.cuda.empty_cache()


def _clock_sampler():
    """Start nvidia-smi sampling the SM clock and power every 20 ms; returns a function that
    gives the mean clock (MHz) and power (W) between two ``time.time()`` readings."""
    import datetime
    import subprocess
    import tempfile

    log = tempfile.NamedTemporaryFile("w+", suffix=".csv", delete=False)
    proc = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw",
                             "--format=csv,noheader,nounits", "-lms", "20"], stdout=log)

    def between(start, end):
        log.flush()
        values = []
        for line in open(log.name):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3:
                continue
            try:
                when = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                values.append((when, float(parts[1]), float(parts[2])))
            except ValueError:
                continue
        inside = [(c, p) for w, c, p in values if start <= w <= end]
        if not inside:
            return float("nan"), float("nan")
        return (sum(c for c, _ in inside) / len(inside), sum(p for _, p in inside) / len(inside))
    between.stop = proc.terminate
    return between


def tune_attention_timing(cases):
    """The forward of ours and cuDNN timed four ways (CUDA graph over rotating copies, the
    same over one copy, ``do_bench``, calls queued behind a sleep), with the SM clock and
    power nvidia-smi saw meanwhile: is the GPU-time gap at short sequences the kernel's?"""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    import triton_guide as tg
    from triton_guide.benchmark import copies_for_cold_cache, gpu_ms, queued_ms

    clocks = _clock_sampler()
    print("attention forward: TFLOP/s [mean SM MHz, W] per timing method")
    for dtype, batch, heads, seq, dim, causal in cases:
        shape = (batch, heads, seq, dim)
        flops = 4 * batch * heads * seq * seq * dim * (0.5 if causal else 1)
        copies = copies_for_cold_cache(3 * batch * heads * seq * dim * dtype.itemsize)
        inputs = [tuple(torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3))
                  for _ in range(copies)]

        def cudnn(q, k, v):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        fns = {"ours": lambda q, k, v: tg.attention(q, k, v, causal=causal), "cuDNN": cudnn}
        tag = f"{str(dtype)[6:]} B{batch} H{heads} N{seq} d{dim} {'causal' if causal else 'full'}"
        for name, f in fns.items():
            methods = {
                "graph rotating": lambda: gpu_ms([lambda x=x: f(*x) for x in inputs]),
                "graph one copy": lambda: gpu_ms([lambda: f(*inputs[0])] * copies),
                "do_bench": lambda: median_ms(lambda: f(*inputs[0])),
                "queued rotating": lambda: queued_ms([lambda x=x: f(*x) for x in inputs])[0],
            }
            cells = []
            for method, measure in methods.items():
                start = time.time()
                ms = measure()
                mhz, watts = clocks(start, time.time())
                cells.append(f"{method} {tflop_per_s(flops, ms):5.0f} [{mhz:4.0f}, {watts:3.0f}]")
            print(f"  {tag:<32} {name:<5} " + " | ".join(cells), flush=True)
        del inputs
        torch.cuda.empty_cache()
    clocks.stop()


def tune_matmul_stream_k_parts(shapes, dtypes, cfg=(128, 256, 64, 8, 3, 8)):
    """Where stream-K's time goes: the kernel with its hand-over, with partials stored but
    never awaited, and with neither (wrong results, timing only), against the package."""
    import triton_guide as tg
    from triton_guide.benchmark import cold_matmul_inputs

    print("matmul, stream-K parts: ours / cuBLAS in GPU time, median of 3 rounds in turns")
    for dtype in dtypes:
        for M, N, K in shapes:
            pairs = cold_matmul_inputs(M, N, K, dtype)
            runners = {"package": [lambda x=x, y=y: tg.matmul(x, y) for x, y in pairs],
                       "cuBLAS": [lambda x=x, y=y: x @ y for x, y in pairs]}
            for hand_over, name in ((2, "stream-K"), (1, "no waits"), (0, "no partials")):
                runners[name] = [_stream_k_runner(x, y, cfg, 1, 0, hand_over) for x, y in pairs]
            runners["whole tiles"] = [_stream_k_runner(x, y, cfg, 1, math.inf) for x, y in pairs]
            _print_against_cublas(dtype, (M, N, K), runners, {}, 3)
            pairs.clear()
            runners.clear()


# More configurations than the package tries, for the shapes no listed one serves well.
WIDE_CANDIDATES = MATMUL_CANDIDATES + [
    _mm_cfg(128, 128, 64, 8, 3, 8), _mm_cfg(128, 128, 64, 8, 3, 4),
    _mm_cfg(128, 256, 64, 8, 4, 8), _mm_cfg(256, 128, 64, 8, 4, 8),
    _mm_cfg(128, 128, 128, 8, 3, 4), _mm_cfg(128, 128, 64, 4, 4, 4),
    _mm_cfg(128, 128, 64, 16, 4, 4), _mm_cfg(128, 128, 32, 8, 5, 4),
    _mm_cfg(128, 256, 32, 8, 4, 8), _mm_cfg(64, 256, 64, 8, 4, 4),
    _mm_cfg(128, 64, 128, 8, 3, 4), _mm_cfg(128, 128, 64, 8, 2, 8),
]


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
    """(rows per program, warps): tiles of 2k-8k elements for short rows, one or two rows
    of 4k-8k elements, one row otherwise."""
    if block_cols > 32768:
        return []
    if block_cols <= 2048:
        return [(tile // block_cols, warps) for tile in (2048, 4096, 8192) for warps in (4, 8)]
    rows = (1, 2) if block_cols <= 8192 else (1,)
    warps = (4, 8, 16) if block_cols <= 4096 else (8, 16, 32)
    return [(r, w) for r in rows for w in warps]


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


@triton.jit
def softmax_persistent_kernel(input_ptr, output_ptr, input_row_stride, output_row_stride,
                              num_rows, num_cols, BLOCK_COLS: tl.constexpr,
                              NUM_STAGES: tl.constexpr):
    # The candidate: a few programs per SM, each taking every num_programs-th row. With
    # NUM_STAGES > 1 the compiler copies the next rows into shared memory (cp.async) while
    # this one is reduced and stored; 16-bit rows only when num_cols is a multiple of 8.
    cols = tl.arange(0, BLOCK_COLS)
    in_row = cols < num_cols
    for row in tl.range(tl.program_id(0), num_rows, tl.num_programs(0),
                        num_stages=NUM_STAGES):
        x = tl.load(input_ptr + row * input_row_stride + cols, mask=in_row,
                    other=-float("inf")).to(tl.float32)
        numerator = tl.exp(x - tl.max(x, axis=0))
        tl.store(output_ptr + row * output_row_stride + cols,
                 numerator / tl.sum(numerator, axis=0), mask=in_row)


def _persistent_candidates(block_cols):
    """(warps, stages, programs per SM) for rows of 2k-32k elements."""
    warps = {2048: (4, 8), 4096: (4, 8), 8192: (8, 16), 16384: (16, 32),
             32768: (16, 32)}[block_cols]
    per_sm = (1, 2) if block_cols >= 16384 else (2, 4, 8)
    return [(w, s, p) for w in warps for s in (1, 2, 3) for p in per_sm]


def _softmax_cold_case(rows, cols, dtype):
    """Inputs of one softmax shape on enough copies to overrun L2, their outputs, the
    float32 reference of the first, and ``rate(fn)``: GB/s of ``fn(x, y)`` over the
    copies in GPU time (read and write once)."""
    from triton_guide.benchmark import copies_for_cold_cache, gpu_ms

    first = torch.randn(rows, cols, device="cuda", dtype=dtype)
    nbytes = 2 * first.numel() * first.element_size()
    xs = [first] + [torch.randn_like(first)
                    for _ in range(copies_for_cold_cache(nbytes // 2) - 1)]
    ys = [torch.empty_like(x) for x in xs]

    def rate(fn):
        return gb_per_s(nbytes, gpu_ms([lambda x=x, y=y: fn(x, y) for x, y in zip(xs, ys)]))
    return xs, ys, torch.softmax(first.float(), dim=-1), rate


def tune_softmax_persistent(shapes, dtypes):
    """The package's one-pass kernel against a persistent, pipelined one, in GPU time on
    cold copies (as report.py times it), with a copy of the same bytes timed alike."""
    import triton_guide as tg
    from triton_guide.benchmark import measure_ceiling

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    copy_1gib = measure_ceiling("copy").value
    print(f"softmax, GPU time on cold copies, GB/s (read + write once); 1 GiB copy "
          f"{copy_1gib:.0f} GB/s; 'copy' is a copy of the same bytes timed alike")
    for dtype in dtypes:
        for rows, cols in shapes:
            xs, ys, refs, rate = _softmax_cold_case(rows, cols, dtype)
            copy = rate(lambda x, y: y.copy_(x))
            base = rate(lambda x, y: torch.softmax(x, dim=-1))
            ours = rate(lambda x, y: tg.softmax(x))
            block_cols = triton.next_power_of_2(cols)
            variants = []
            for warps, stages, per_sm in _persistent_candidates(block_cols):
                grid = (min(rows, per_sm * sms),)

                def run(x, y):
                    softmax_persistent_kernel[grid](
                        x, y, x.stride(0), y.stride(0), rows, cols, BLOCK_COLS=block_cols,
                        NUM_STAGES=stages, num_warps=warps)
                name = f"w{warps}s{stages}p{per_sm}"
                try:
                    ys[0].fill_(float("nan"))
                    run(xs[0], ys[0])
                    if not torch.allclose(ys[0].float(), refs, atol=1e-2, rtol=1e-2):
                        variants.append((0.0, name, "wrong"))
                        continue
                    variants.append((rate(run), name, ""))
                except Exception as e:  # shared memory or registers exceeded
                    variants.append((0.0, name, type(e).__name__))
            variants.sort(reverse=True)
            top = "  ".join(f"{r:5.0f}@{n}" for r, n, _ in variants[:3])
            print(f"{str(dtype)[6:]:>8} {rows:>5}x{cols:<5} copy {copy:5.0f} torch {base:5.0f} "
                  f"package {ours:5.0f} ({ours / copy:4.2f} of copy, {ours / copy_1gib:4.2f} "
                  f"of 1 GiB) | persistent {top} ({variants[0][0] / copy:4.2f} of copy)",
                  flush=True)
            del xs, ys
            torch.cuda.empty_cache()


def tune_softmax_registers(shapes, dtypes, candidates):
    """The package's one-pass kernel with its registers capped (``maxnreg``), so that two
    programs fit on an SM where one did (32768-wide rows: 47 registers a thread at 32
    warps), in GPU time on cold copies against a copy of the same bytes."""
    import triton_guide as tg
    from triton_guide.softmax import softmax_kernel

    print("softmax one-pass kernel, (warps, register cap): GPU time on cold copies, GB/s")
    for dtype in dtypes:
        for rows, cols in shapes:
            xs, ys, refs, rate = _softmax_cold_case(rows, cols, dtype)
            copy = rate(lambda x, y: y.copy_(x))
            ours = rate(lambda x, y: tg.softmax(x))
            cells = []
            for warps, maxnreg in candidates:
                def run(x, y):
                    softmax_kernel[(rows,)](x, y, x.stride(0), x.stride(1), y.stride(0), rows,
                                            cols, BLOCK_ROWS=1,
                                            BLOCK_SIZE=triton.next_power_of_2(cols),
                                            num_warps=warps, maxnreg=maxnreg)
                try:
                    ys[0].fill_(float("nan"))
                    run(xs[0], ys[0])
                    right = torch.allclose(ys[0].float(), refs, atol=1e-2, rtol=1e-2)
                    cells.append(f"w{warps}r{maxnreg} " + (f"{rate(run):5.0f}" if right
                                                          else "wrong"))
                except Exception as e:
                    cells.append(f"w{warps}r{maxnreg} {type(e).__name__}")
            print(f"{str(dtype)[6:]:>8} {rows:>5}x{cols:<5} copy {copy:5.0f} package {ours:5.0f} "
                  f"({ours / copy:4.2f}) | " + "  ".join(cells), flush=True)
            del xs, ys
            torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------------------

# (BLOCK_M, BLOCK_N, num_stages, num_warps) per kernel and head_dim.
ATTENTION_CANDIDATES = {
    ("forward", 64): [(128, 128, 3, 4), (128, 128, 2, 4), (128, 128, 4, 4), (128, 64, 4, 4),
                      (128, 64, 3, 4), (64, 64, 3, 4), (256, 64, 2, 8), (256, 64, 3, 8),
                      (256, 128, 2, 8), (128, 128, 3, 8)],
    ("forward", 128): [(128, 64, 2, 4), (128, 64, 1, 4), (128, 32, 2, 4), (128, 64, 2, 8),
                       (128, 128, 3, 8), (64, 64, 3, 4), (64, 64, 2, 4), (256, 64, 2, 8),
                       (256, 64, 3, 8), (256, 32, 2, 8)],
    ("dkdv", 64): [(64, 64, 3, 4), (32, 64, 3, 4), (32, 128, 5, 4), (64, 64, 4, 4),
                   (64, 128, 3, 8), (64, 64, 2, 4), (32, 64, 4, 4), (64, 128, 4, 4)],
    ("dkdv", 128): [(64, 128, 3, 8), (64, 128, 4, 8), (32, 128, 3, 8), (128, 128, 2, 8),
                    (32, 64, 3, 4), (64, 64, 3, 8), (32, 128, 4, 8), (64, 128, 5, 8)],
    ("dq", 64): [(128, 64, 3, 8), (128, 64, 4, 8), (64, 64, 3, 4), (64, 32, 3, 4),
                 (128, 128, 3, 8), (64, 64, 4, 4), (128, 64, 2, 8), (64, 64, 2, 4)],
    ("dq", 128): [(128, 64, 3, 8), (128, 64, 4, 8), (128, 32, 3, 4), (128, 128, 2, 8),
                  (128, 32, 3, 8), (64, 64, 3, 8), (128, 64, 5, 8), (64, 32, 3, 4)],
}

# The forward over the grid the official Triton tutorial (06, release 3.6) autotunes on Hopper:
# BLOCK_M 64-128, BLOCK_N 32-128, 2-4 stages, 4 or 8 warps, no 8 warps below 128 x 128
# tiles; plus 256-row tiles (ours) and without BLOCK_N > BLOCK_M (our forward's rule), or
# q and the stages of k and v past an H100's 227 KiB of shared memory (float16).
FORWARD_GRID = {
    ("forward", dim): [(m, n, s, w) for m in (64, 128, 256) for n in (32, 64, 128)
                       for s in (2, 3, 4) for w in (4, 8)
                       if n <= m and not (m * n < 128 * 128 and w == 8)
                       and not (m == 256 and w == 4) and 2 * dim * (m + 2 * s * n) <= 227 * 1024]
    for dim in (64, 128)
}

ATTENTION_CASES = [  # (dtype, batch, heads, seq, head_dim); each causal and full
    (torch.float16, 16, 32, 1024, 64), (torch.float16, 4, 32, 4096, 64),
    (torch.float16, 1, 32, 16384, 64), (torch.float16, 32, 16, 1024, 128),
    (torch.float16, 8, 16, 4096, 128), (torch.float16, 2, 16, 16384, 128),
    (torch.float16, 16, 16, 2048, 128), (torch.bfloat16, 2, 16, 16384, 128),
]


# An experiment, not the package's kernel: the forward kernel made persistent (one program
# per SM slot, looping over (query block, head) tiles), so that a short sequence's few
# key blocks per tile do not leave the prologue and epilogue exposed. Full attention, seq_len
# a multiple of BLOCK_N. ``python lab/tune.py attention_persistent``.
@triton.jit
def attention_forward_persistent_kernel(
    q_desc, k_desc, v_desc, out_ptr, lse_ptr, num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NUM_TILES_BH: tl.constexpr = 0,
    FLATTEN: tl.constexpr = False,  # tl.range(flatten=True) fails to compile in Triton 3.6
):
    num_blocks = tl.cdiv(seq_len, BLOCK_M)
    num_tiles = num_blocks * NUM_TILES_BH
    qk_scale = sm_scale * LOG2E
    full_end = (seq_len // BLOCK_N) * BLOCK_N
    for tile in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=FLATTEN):
        batch_head = tile // num_blocks
        first_row = (tile % num_blocks) * BLOCK_M
        batch = batch_head // num_heads
        head = batch_head % num_heads
        offs_m = first_row + tl.arange(0, BLOCK_M)
        q = _rows(q_desc, batch, head, first_row, BLOCK_M, BLOCK_D)
        row_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
        row_sum = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        acc, row_sum, row_max = _forward_block_loop(
            acc, row_sum, row_max, q, k_desc, v_desc, batch, head, offs_m, qk_scale,
            0, full_end, seq_len, BLOCK_N, CAUSAL_MASK=False, BOUNDS_MASK=False)
        acc = acc / row_sum[:, None]
        head_rows = batch_head.to(tl.int64) * seq_len
        row_mask = offs_m < seq_len
        tl.store(lse_ptr + head_rows + offs_m, row_max + tl.math.log2(row_sum), mask=row_mask)
        offs_d = tl.arange(0, BLOCK_D)
        tl.store(out_ptr + head_rows * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
                 acc.to(out_ptr.dtype.element_ty), mask=row_mask[:, None])


# An experiment, not the package's kernel: the forward over two-dimensional descriptors, the
# rows of every (batch, head) stacked (batch * heads * seq_len, head_dim), as the official
# tutorial reads them, with the output stored through a descriptor too. Full attention,
# seq_len a multiple of BLOCK_M. RESCALE_FIRST scales acc before waiting for v and updates
# the row sum after the second product (the tutorial's order); otherwise the package's order.
# ``python lab/tune.py attention_flat``.
@triton.jit
def attention_forward_flat_kernel(
    q_desc, k_desc, v_desc, o_desc, lse_ptr, num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, RESCALE_FIRST: tl.constexpr = False,
):
    batch_head = tl.program_id(1)
    head_row = batch_head * seq_len  # this head's first row in the stacked rows
    first_row = tl.program_id(0) * BLOCK_M
    q = q_desc.load([head_row + first_row, 0])
    qk_scale = sm_scale * LOG2E
    row_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start_n in range(0, seq_len, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = k_desc.load([head_row + start_n, 0])
        scores = tl.dot(q, tl.trans(k))
        new_max = tl.maximum(row_max, tl.max(scores, axis=1) * qk_scale)
        probs = tl.math.exp2(scores * qk_scale - new_max[:, None])
        correction = tl.math.exp2(row_max - new_max)
        block_sum = tl.sum(probs, axis=1)
        if RESCALE_FIRST:
            acc = acc * correction[:, None]
            v = v_desc.load([head_row + start_n, 0])
            acc = tl.dot(probs.to(v.dtype), v, acc)
            row_sum = row_sum * correction + block_sum
        else:
            row_sum = row_sum * correction + block_sum
            v = v_desc.load([head_row + start_n, 0])
            acc = tl.dot(probs.to(v.dtype), v, acc * correction[:, None])
        row_max = new_max
    acc = acc / row_sum[:, None]
    offs_m = first_row + tl.arange(0, BLOCK_M)
    tl.store(lse_ptr + head_row + offs_m, row_max + tl.math.log2(row_sum))
    o_desc.store([head_row + first_row, 0], acc.to(o_desc.dtype))


TUNED_FORWARD = TUNED["forward"]


# An experiment, not the package's kernel: the forward with the rescale of acc and the row
# sums skipped while no row's maximum has grown by more than RESCALE_THRESHOLD (base 2) since
# the last rescale. Until then the exponentials are taken against the old maxima, so they
# can exceed 1 but stay below 2**RESCALE_THRESHOLD, which float16 and bfloat16 hold; the
# row sums and the final division use the same stale maxima, so the result is the same.
# The test is one number for the whole block (a branch every warp takes alike), so most
# blocks after the first few skip the multiply of the (BLOCK_M, BLOCK_D) accumulator.
# ``python lab/tune.py attention_lazy``.
@triton.jit
def _lazy_block_loop(
    acc, row_sum, row_max, q, k_desc, v_desc, batch, head, offs_m, qk_scale, start, end,
    seq_len, BLOCK_N: tl.constexpr, CAUSAL_MASK: tl.constexpr, BOUNDS_MASK: tl.constexpr,
    RESCALE_THRESHOLD: tl.constexpr,
):
    BLOCK_D: tl.constexpr = q.shape[1]
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(start, end, BLOCK_N):
        k = _rows(k_desc, batch, head, start_n, BLOCK_N, BLOCK_D)
        scores = tl.dot(q, tl.trans(k))
        cols = start_n + offs_n
        if CAUSAL_MASK:
            scores = tl.where(offs_m[:, None] >= cols[None, :], scores, -float("inf"))
        if BOUNDS_MASK:
            scores = tl.where(cols[None, :] < seq_len, scores, -float("inf"))
        new_max = tl.maximum(row_max, tl.max(scores, axis=1) * qk_scale)
        if tl.max(new_max - row_max) > RESCALE_THRESHOLD:
            correction = tl.math.exp2(row_max - new_max)
            row_sum = row_sum * correction
            acc = acc * correction[:, None]
            row_max = new_max
        probs = tl.math.exp2(scores * qk_scale - row_max[:, None])
        row_sum = row_sum + tl.sum(probs, axis=1)
        v = _rows(v_desc, batch, head, start_n, BLOCK_N, BLOCK_D)
        acc = tl.dot(probs.to(v.dtype), v, acc)
    return acc, row_sum, row_max


@triton.jit
def attention_forward_lazy_kernel(
    q_desc, k_desc, v_desc, out_ptr, lse_ptr, num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, RESCALE_THRESHOLD: tl.constexpr = 8.0,
):
    block_index = tl.program_id(0)
    if CAUSAL:
        block_index = tl.num_programs(0) - 1 - block_index
    batch_head = tl.program_id(1)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    first_row = block_index * BLOCK_M
    offs_m = first_row + tl.arange(0, BLOCK_M)
    q = _rows(q_desc, batch, head, first_row, BLOCK_M, BLOCK_D)
    qk_scale = sm_scale * LOG2E
    row_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    if CAUSAL:
        acc, row_sum, row_max = _lazy_block_loop(
            acc, row_sum, row_max, q, k_desc, v_desc, batch, head, offs_m, qk_scale,
            0, first_row, seq_len, BLOCK_N, False, False, RESCALE_THRESHOLD)
        acc, row_sum, row_max = _lazy_block_loop(
            acc, row_sum, row_max, q, k_desc, v_desc, batch, head, offs_m, qk_scale,
            first_row, tl.minimum(first_row + BLOCK_M, seq_len), seq_len, BLOCK_N, True, False,
            RESCALE_THRESHOLD)
    else:
        full_end = (seq_len // BLOCK_N) * BLOCK_N
        acc, row_sum, row_max = _lazy_block_loop(
            acc, row_sum, row_max, q, k_desc, v_desc, batch, head, offs_m, qk_scale,
            0, full_end, seq_len, BLOCK_N, False, False, RESCALE_THRESHOLD)
        acc, row_sum, row_max = _lazy_block_loop(
            acc, row_sum, row_max, q, k_desc, v_desc, batch, head, offs_m, qk_scale,
            full_end, seq_len, seq_len, BLOCK_N, False, True, RESCALE_THRESHOLD)
    acc = acc / row_sum[:, None]
    row_mask = offs_m < seq_len
    head_rows = batch_head.to(tl.int64) * seq_len
    tl.store(lse_ptr + head_rows + offs_m, row_max + tl.math.log2(row_sum), mask=row_mask)
    offs_d = tl.arange(0, BLOCK_D)
    tl.store(out_ptr + head_rows * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
             acc.to(out_ptr.dtype.element_ty), mask=row_mask[:, None])


# Experiment: the backward in one kernel, dq added atomically. The package's backward runs
# two kernels after the delta one: dkdv (per key block: S^T, dP^T, dV and dK, four GEMMs)
# and dq (per query block: S, dP and dQ, three), seven GEMMs where five carry what the
# gradients need. FlashAttention-2 and 3 compute dQ inside the dkdv loop instead, from the
# same dS, and add each program's share into a float32 buffer atomically. That saves two of
# the seven GEMMs, at the price of one (BLOCK_M, head_dim) float32 reduction into global
# memory per step: a TMA reduction (``desc.atomic_add``, one instruction per tile; the
# interpreter lacks it) or one ``tl.atomic_add`` per element. dS is scaled by sm_scale
# before dK and dQ use it, so dQ needs only a cast.
# ``python lab/tune.py attention_fused_backward``.
@triton.jit
def _fused_backward_block_loop(
    dk, dv, k, v, q_desc, do_desc, dq_desc, dq_base, lse_base, delta_base, batch, head,
    offs_n, qk_scale, sm_scale, start, end, seq_len, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, CAUSAL_MASK: tl.constexpr, BOUNDS_MASK: tl.constexpr,
    TMA_REDUCE: tl.constexpr,
):
    BLOCK_D: tl.constexpr = k.shape[1]
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    for start_m in range(start, end, BLOCK_M):
        offs_m = start_m + offs_m0
        row_mask = offs_m < seq_len
        q = _rows(q_desc, batch, head, start_m, BLOCK_M, BLOCK_D)
        lse = tl.load(lse_base + offs_m, mask=row_mask, other=0.0)
        scores_t = tl.dot(k, tl.trans(q))
        if CAUSAL_MASK:
            scores_t = tl.where(offs_m[None, :] >= offs_n[:, None], scores_t, -float("inf"))
        if BOUNDS_MASK:
            # Zero keys past the end score 0 and exp2(0 - lse) can overflow; dkdv never
            # stores their rows, but dQ sums over them.
            scores_t = tl.where(offs_n[:, None] < seq_len, scores_t, -float("inf"))
        probs_t = tl.math.exp2(scores_t * qk_scale - lse[None, :])
        do = _rows(do_desc, batch, head, start_m, BLOCK_M, BLOCK_D)
        dv = tl.dot(probs_t.to(do.dtype), do, dv)
        delta = tl.load(delta_base + offs_m, mask=row_mask, other=0.0)
        dprobs_t = tl.dot(v, tl.trans(do))
        dscores_t = (probs_t * (dprobs_t - delta[None, :]) * sm_scale).to(q.dtype)
        dk = tl.dot(dscores_t, q, dk)
        dq = tl.dot(tl.trans(dscores_t), k)
        if TMA_REDUCE:
            dq_desc.atomic_add([batch, head, start_m, 0], dq.reshape(1, 1, BLOCK_M, BLOCK_D))
        else:
            tl.atomic_add(dq_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], dq,
                          mask=row_mask[:, None] & (offs_d[None, :] < HEAD_DIM), sem="relaxed")
    return dk, dv


@triton.jit
def attention_backward_fused_kernel(
    q_desc, k_desc, v_desc, do_desc,
    dq_desc, dq_ptr,  # the same float32 dq, zeroed before the launch (TMA_REDUCE picks one)
    lse_ptr, delta_ptr, dk_ptr, dv_ptr, num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, TMA_REDUCE: tl.constexpr = True,
):
    # The diagonal loop below covers BLOCK_N query rows in steps of BLOCK_M.
    tl.static_assert(BLOCK_N % BLOCK_M == 0, "BLOCK_N must be a multiple of BLOCK_M")
    block_index = tl.program_id(0)
    batch_head = tl.program_id(1)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    head_rows = batch_head.to(tl.int64) * seq_len
    lse_base = lse_ptr + head_rows
    delta_base = delta_ptr + head_rows
    dq_base = dq_ptr + head_rows * HEAD_DIM
    first_key = block_index * BLOCK_N
    offs_n = first_key + tl.arange(0, BLOCK_N)
    k = _rows(k_desc, batch, head, first_key, BLOCK_N, BLOCK_D)
    v = _rows(v_desc, batch, head, first_key, BLOCK_N, BLOCK_D)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    qk_scale = sm_scale * LOG2E
    if CAUSAL:
        # Keys past the end are hidden from every real row by the causal mask, and a
        # partial key block is the last: no query block comes after it.
        dk, dv = _fused_backward_block_loop(
            dk, dv, k, v, q_desc, do_desc, dq_desc, dq_base, lse_base, delta_base, batch,
            head, offs_n, qk_scale, sm_scale, first_key,
            tl.minimum(first_key + BLOCK_N, seq_len), seq_len, HEAD_DIM, BLOCK_M, CAUSAL_MASK=True, BOUNDS_MASK=False,
            TMA_REDUCE=TMA_REDUCE)
        dk, dv = _fused_backward_block_loop(
            dk, dv, k, v, q_desc, do_desc, dq_desc, dq_base, lse_base, delta_base, batch,
            head, offs_n, qk_scale, sm_scale, first_key + BLOCK_N, seq_len, seq_len, HEAD_DIM,
            BLOCK_M, CAUSAL_MASK=False, BOUNDS_MASK=False, TMA_REDUCE=TMA_REDUCE)
    elif first_key + BLOCK_N <= seq_len:
        dk, dv = _fused_backward_block_loop(
            dk, dv, k, v, q_desc, do_desc, dq_desc, dq_base, lse_base, delta_base, batch,
            head, offs_n, qk_scale, sm_scale, 0, seq_len, seq_len, HEAD_DIM,
            BLOCK_M, CAUSAL_MASK=False, BOUNDS_MASK=False, TMA_REDUCE=TMA_REDUCE)
    else:
        dk, dv = _fused_backward_block_loop(
            dk, dv, k, v, q_desc, do_desc, dq_desc, dq_base, lse_base, delta_base, batch,
            head, offs_n, qk_scale, sm_scale, 0, seq_len, seq_len, HEAD_DIM,
            BLOCK_M, CAUSAL_MASK=False, BOUNDS_MASK=True, TMA_REDUCE=TMA_REDUCE)
    offs_d = tl.arange(0, BLOCK_D)
    offsets = head_rows * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    tile_mask = (offs_n[:, None] < seq_len) & (offs_d[None, :] < HEAD_DIM)
    tl.store(dk_ptr + offsets, dk.to(dk_ptr.dtype.element_ty), mask=tile_mask)
    tl.store(dv_ptr + offsets, dv.to(dv_ptr.dtype.element_ty), mask=tile_mask)


# (BLOCK_M, BLOCK_N, num_stages, num_warps) for the fused backward. Compiled for sm_90a with
# Triton 3.6 (ptxas -v, fp16, full attention), the TMA-reduction kernels fit an H100's
# 227 KiB of shared memory without spills except where noted; the dQ tile's staging and
# the transposed dS take shared memory that the package's dkdv picks, (64, 128, 3+, 8) at
# head_dim 128, no longer have (322 KiB). The first FUSED_POINTER_ATOMICS of each list
# also run with pointer atomics, which need less. BLOCK_M 32 makes ptxas serialise the
# wgmma instructions (warning C7515).
FUSED_BACKWARD_CANDIDATES = {
    64: [(64, 128, 3, 8), (64, 64, 3, 4), (64, 128, 2, 8), (64, 64, 2, 4), (32, 64, 3, 4)],
    128: [(64, 64, 2, 8),
          (64, 64, 3, 8),  # TMA: 290 KiB, too much; pointer atomics: 226 KiB
          (64, 128, 2, 8),  # TMA: 257 KiB, too much; pointer atomics: 193 KiB, spills 604 B
          (64, 64, 2, 4),  # spills 292 B
          (32, 128, 2, 8)],  # spills 108 B
}
FUSED_POINTER_ATOMICS = 3


def _compile_fused(jobs):
    """Run each (cfg, tma_reduce, dtype, dim, causal) of the fused backward once at a small
    size: fills Triton's cache (as :func:`_compile_jobs` does for the package's kernels)."""
    for cfg, tma_reduce, dtype, dim, causal in jobs:
        problem = AttentionProblem(dtype, 1, 16, 256, dim, causal)
        problem.out, problem.lse = problem.mod.attention_forward(
            problem.q, problem.k, problem.v, causal, problem.scale)
        try:
            problem.fused_backward(cfg, tma_reduce)()
        except Exception:  # out of shared memory: the sweep reports it
            pass
    torch.cuda.synchronize()


class AttentionProblem:
    """Inputs, outputs and the backward's intermediates of one attention case."""

    def __init__(self, dtype, batch, heads, seq, dim, causal, device="cuda"):
        # The module, not the function the package's __init__ exports under its name.
        self.mod = importlib.import_module("triton_guide.attention")
        shape = (batch, heads, seq, dim)
        self.q, self.k, self.v, self.do = (torch.randn(shape, device=device, dtype=dtype)
                                           for _ in range(4))
        self.out, self.dq, self.dk, self.dv = (torch.empty_like(self.q) for _ in range(4))
        self.lse = torch.empty(batch * heads, seq, device=device, dtype=torch.float32)
        self.delta = torch.empty_like(self.lse)
        self.heads, self.seq, self.dim, self.causal = heads, seq, dim, causal
        self.batch_heads = batch * heads
        self.scale = 1 / math.sqrt(dim)

    def runner(self, kind, cfg):
        """A no-argument callable that runs one kernel with one configuration."""
        bm, bn, stages, warps = cfg
        m = self.mod
        rows = {"q": bm, "do": bm, "k": bn, "v": bn}
        desc = {name: m._descriptor(getattr(self, name), rows[name], self.dim)
                for name in rows}
        meta = dict(HEAD_DIM=self.dim, BLOCK_D=self.dim, CAUSAL=self.causal, BLOCK_M=bm,
                    BLOCK_N=bn, num_stages=stages, num_warps=warps)
        common = (self.heads, self.seq, self.scale)
        if kind.startswith("persistent"):  # persistent<programs per SM>[_flat]
            per_sm = int(kind[len("persistent"):].split("_")[0])
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            tiles = triton.cdiv(self.seq, bm) * self.batch_heads
            grid = (min(tiles, per_sm * sms),)
            meta.update(NUM_TILES_BH=self.batch_heads, FLATTEN=kind.endswith("_flat"))
            return lambda: attention_forward_persistent_kernel[grid](
                desc["q"], desc["k"], desc["v"], self.out, self.lse, *common, **meta)
        if kind.startswith("flat"):  # flat[_reordered]: the experiment above
            def flat(t, rows):
                return TensorDescriptor(t.view(-1, self.dim), [t.numel() // self.dim, self.dim],
                                        [self.dim, 1], [rows, self.dim])
            grid = (triton.cdiv(self.seq, bm), self.batch_heads)
            descs = (flat(self.q, bm), flat(self.k, bn), flat(self.v, bn), flat(self.out, bm))
            return lambda: attention_forward_flat_kernel[grid](
                *descs, self.lse, *common, **meta, RESCALE_FIRST=kind.endswith("_reordered"))
        if kind.startswith("lazy"):  # lazy[<threshold>]: the experiment above
            grid = (triton.cdiv(self.seq, bm), self.batch_heads)
            threshold = float(kind[4:] or 8)
            return lambda: attention_forward_lazy_kernel[grid](
                desc["q"], desc["k"], desc["v"], self.out, self.lse, *common, **meta,
                RESCALE_THRESHOLD=threshold)
        if kind == "forward":
            grid = (triton.cdiv(self.seq, bm), self.batch_heads)
            return lambda: m.attention_forward_kernel.fn[grid](
                desc["q"], desc["k"], desc["v"], self.out, self.lse, *common, **meta)
        descs = (desc["q"], desc["k"], desc["v"], desc["do"], self.lse, self.delta)
        if kind == "dkdv":
            grid = (triton.cdiv(self.seq, bn), self.batch_heads)
            return lambda: m.attention_backward_dkdv_kernel.fn[grid](
                *descs, self.dk, self.dv, *common, **meta)
        grid = (triton.cdiv(self.seq, bm), self.batch_heads)
        return lambda: m.attention_backward_dq_kernel.fn[grid](*descs, self.dq, *common, **meta)

    def fused_backward(self, cfg, tma_reduce=True):
        """A no-argument callable: the delta kernel, then the fused experiment above with
        one configuration, its float32 dq zeroed before and cast into ``self.dq`` after."""
        bm, bn, stages, warps = cfg
        m = self.mod
        dq_sum = torch.empty(self.q.shape, device=self.q.device, dtype=torch.float32)
        desc = {name: m._descriptor(getattr(self, name), rows, self.dim)
                for name, rows in (("q", bm), ("k", bn), ("v", bn), ("do", bm))}
        dq_desc = m._descriptor(dq_sum, bm, self.dim)
        grid = (triton.cdiv(self.seq, bn), self.batch_heads)
        preprocess = self.preprocess()

        def run():
            preprocess()
            dq_sum.zero_()
            attention_backward_fused_kernel[grid](
                desc["q"], desc["k"], desc["v"], desc["do"], dq_desc, dq_sum, self.lse,
                self.delta, self.dk, self.dv, self.heads, self.seq, self.scale,
                HEAD_DIM=self.dim, BLOCK_D=self.dim, CAUSAL=self.causal, BLOCK_M=bm,
                BLOCK_N=bn, TMA_REDUCE=tma_reduce, num_stages=stages, num_warps=warps)
            self.dq.copy_(dq_sum)
        return run

    def preprocess(self):
        m = self.mod
        grid = (triton.cdiv(self.seq, 64), self.batch_heads)
        return lambda: m.attention_backward_preprocess_kernel[grid](
            self.out, self.do, self.delta, self.seq, HEAD_DIM=self.dim, BLOCK_D=self.dim,
            BLOCK_M=64)


def _compile_jobs(jobs):
    """Run each (kind, cfg, dtype, dim, causal) once at a small size: fills Triton's cache."""
    for kind, cfg, dtype, dim, causal in jobs:
        problem = AttentionProblem(dtype, 1, 16, 256, dim, causal)
        try:
            problem.runner("forward", ATTENTION_CANDIDATES[("forward", dim)][0])()
            if kind != "forward":
                problem.preprocess()()
            problem.runner(kind, cfg)()
        except Exception:  # out of shared memory: tune_attention reports it
            pass
    torch.cuda.synchronize()


def precompile_attention(kinds, cases=ATTENTION_CASES, candidates=ATTENTION_CANDIDATES,
                         causals=(False, True), workers=12):
    """Compile every candidate of the kinds to tune in parallel processes before timing
    (compiling is the slow part of a sweep, and Triton's on-disk cache carries the result to
    this process)."""
    import multiprocessing as mp

    jobs = sorted({(kind, cfg, dtype, dim, causal)
                   for dtype, _, _, _, dim in cases for causal in causals
                   for (kind, d), cfgs in candidates.items() if d == dim
                   and kind in kinds for cfg in cfgs}, key=str)
    chunks = [jobs[i::workers] for i in range(workers)]
    with mp.get_context("spawn").Pool(workers) as pool:
        pool.map(_compile_jobs, chunks)
    return len(jobs)


def tune_attention(cases=ATTENTION_CASES, kinds=("forward", "dkdv", "dq"),
                   causals=(False, True), candidates=ATTENTION_CANDIDATES, precompile=True):
    """Time each candidate of each kernel in ``kinds`` (those other than dkdv and dq are
    forward variants, checked against the forward's output) on every case."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    if precompile:
        start = time.time()
        compiled = precompile_attention(kinds, cases, candidates, causals)
        print(f"compiled {compiled} kernels in {time.time() - start:.0f} s", flush=True)
    print("attention: best candidate per kernel (TFLOP/s, ms); cuDNN and flash in the same run")
    ratios = {"forward": [], "backward": []}
    shares = {}  # (kind, head_dim) -> config -> [best time / its time, one per case]
    for dtype, batch, heads, seq, dim in cases:
        for causal in causals:
            p = AttentionProblem(dtype, batch, heads, seq, dim, causal)
            flops = 4 * batch * heads * seq * seq * dim * (0.5 if causal else 1.0)
            tag = f"{str(dtype)[6:]} B{batch} H{heads} N{seq} d{dim} {'causal' if causal else 'full'}"
            q, k, v = (t.detach().clone().requires_grad_() for t in (p.q, p.k, p.v))
            base = {}
            for name, backend in (("cuDNN", SDPBackend.CUDNN_ATTENTION),
                                  ("flash", SDPBackend.FLASH_ATTENTION)):
                def sdpa():
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                ref = sdpa()
                base[name] = median_ms(sdpa)
                base[name + " bwd"] = median_ms(  # autograd.grad: no sum into .grad
                    lambda: torch.autograd.grad(ref, (q, k, v), p.do, retain_graph=True))
            q.grad = k.grad = v.grad = None
            ref_out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            ref_out.backward(p.do)
            expected = {"forward": (ref_out.float(),),
                        "dkdv": (k.grad.float(), v.grad.float()), "dq": (q.grad.float(),)}
            produced = {"forward": (p.out,), "dkdv": (p.dk, p.dv), "dq": (p.dq,)}
            for kind in kinds:
                expected.setdefault(kind, expected["forward"])
                produced.setdefault(kind, produced["forward"])
            best = {}
            for kind in kinds:
                results = []
                for cfg in candidates[(kind if kind in ("dkdv", "dq") else "forward", dim)]:
                    run = p.runner(kind, cfg)
                    try:
                        for t in produced[kind]:
                            t.fill_(float("nan"))
                        run()
                        err = max(relative_error(t, e)
                                  for t, e in zip(produced[kind], expected[kind]))
                        if not err < 2e-2:
                            results.append((math.inf, cfg, f"wrong {err:.1e}"))
                            continue
                        results.append((median_ms(run), cfg, ""))
                    except Exception as e:
                        results.append((math.inf, cfg, type(e).__name__))
                results.sort()
                best[kind] = results[0]
                for ms, cfg, _ in results:
                    shares.setdefault((kind, dim), {}).setdefault(cfg, []).append(
                        results[0][0] / ms)
                top = "  ".join(f"{ms:7.3f}@{c}{f' {why}' if why else ''}"
                                for ms, c, why in results[:4])
                failed = [f"{c} {why}" for ms, c, why in results if why]
                print(f"  {tag:<34} {kind:<8} {top}" + (f" | failed: {failed}" if failed else ""),
                      flush=True)
                if kind == "forward":
                    p.runner(kind, best[kind][1])()  # the backward reads out and lse
                    p.preprocess()()
            if "dkdv" not in best:
                continue
            fwd = best["forward"][0]
            bwd = median_ms(p.preprocess()) + best["dkdv"][0] + best["dq"][0]
            ratios["forward"].append(base["cuDNN"] / fwd)
            ratios["backward"].append(base["cuDNN bwd"] / bwd)
            print(f"{tag:<34} fwd {tflop_per_s(flops, fwd):5.0f} (cuDNN "
                  f"{tflop_per_s(flops, base['cuDNN']):5.0f} flash "
                  f"{tflop_per_s(flops, base['flash']):5.0f}) {base['cuDNN'] / fwd:4.2f}x | bwd "
                  f"{tflop_per_s(2.5 * flops, bwd):5.0f} (cuDNN "
                  f"{tflop_per_s(2.5 * flops, base['cuDNN bwd']):5.0f} flash "
                  f"{tflop_per_s(2.5 * flops, base['flash bwd']):5.0f}) "
                  f"{base['cuDNN bwd'] / bwd:4.2f}x", flush=True)
            del p, q, k, v, ref, ref_out
            torch.cuda.empty_cache()
    print("each configuration's speed as a share of the best one's, geometric mean over cases:")
    for (kind, dim), by_config in shares.items():
        ranked = sorted(((geometric_mean([max(x, 1e-9) for x in v]), min(v), c)
                         for c, v in by_config.items()), reverse=True)
        print(f"  {kind} d{dim}: " + "  ".join(f"{c} {g:.3f} (min {lo:.2f})"
                                               for g, lo, c in ranked))
    for kind, values in ratios.items():
        if not values:
            continue
        geo = geometric_mean(values)
        print(f"attention {kind}: best per case vs cuDNN, geometric mean {geo:.3f}, "
              f"min {min(values):.2f}")


def _fused_backward_error_at_odd_length(dtype, dim, causal, cfg, tma_reduce, seq=1000):
    """Run the fused backward at a length no block divides (a partial key block, padded
    query rows) and check every element of dQ, dK and dV against float64 autograd; raise
    AssertionError on a mismatch, else return the largest relative error."""
    from triton_guide.attention import attention_reference
    from triton_guide.testing import assert_close, tolerance

    small = AttentionProblem(dtype, 1, 4, seq, dim, causal)
    small.out, small.lse = small.mod.attention_forward(small.q, small.k, small.v, causal,
                                                       small.scale)
    small.fused_backward(cfg, tma_reduce)()
    leaves = [t.double().requires_grad_() for t in (small.q, small.k, small.v)]
    expected = torch.autograd.grad(attention_reference(*leaves, causal=causal), leaves,
                                   small.do.double())
    return max(assert_close(got, want, rtol=tolerance(dtype), name=name)
               for got, want, name in zip((small.dq, small.dk, small.dv), expected,
                                          ("dq", "dk", "dv")))


def tune_attention_fused_backward(cases, candidates=FUSED_BACKWARD_CANDIDATES, rounds=3,
                                  pointer_atomics=FUSED_POINTER_ATOMICS):
    """The whole backward (delta, dK, dV, dQ) three ways: the package's kernels as its
    launcher picks them, the fused experiment above at each configuration, and cuDNN
    through autograd. GPU time by ``queued_ms`` on rotating copies, medians of ``rounds``
    rounds in which the variants take turns; every variant is checked first, against
    cuDNN's gradients at the case's size and element by element against float64 autograd
    at a length of 1000 (partial blocks). The first ``pointer_atomics`` configurations also run with one
    ``tl.atomic_add`` per element instead of the TMA reduction."""
    from statistics import median

    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    from triton_guide.benchmark import copies_for_cold_cache, queued_ms

    import multiprocessing as mp

    jobs = sorted({(cfg, tma, dtype, dim, causal) for dtype, _, _, _, dim, causal in cases
                   for i, cfg in enumerate(candidates[dim])
                   for tma in ((True, False) if i < pointer_atomics else (True,))}, key=str)
    start = time.time()
    with mp.get_context("spawn").Pool(12) as pool:
        pool.map(_compile_fused, [jobs[i::12] for i in range(12)])
    print(f"compiled {len(jobs)} fused kernels in {time.time() - start:.0f} s", flush=True)
    print("attention backward: TFLOP/s (2.5x the forward's FLOPs), GPU time; ours / cuDNN")
    for dtype, batch, heads, seq, dim, causal in cases:
        shape = (batch, heads, seq, dim)
        flops = 2.5 * 4 * batch * heads * seq * seq * dim * (0.5 if causal else 1)
        tag = f"{str(dtype)[6:]} B{batch} H{heads} N{seq} d{dim} {'causal' if causal else 'full'}"
        copies = copies_for_cold_cache(4 * batch * heads * seq * dim * dtype.itemsize)
        problems = [AttentionProblem(dtype, batch, heads, seq, dim, causal)
                    for _ in range(copies)]
        leaves = []
        for p in problems:
            p.out, p.lse = p.mod.attention_forward(p.q, p.k, p.v, causal, p.scale)
            q, k, v = (t.detach().clone().requires_grad_() for t in (p.q, p.k, p.v))
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                leaves.append(((q, k, v), F.scaled_dot_product_attention(q, k, v, is_causal=causal)))
        first = problems[0]
        (q, k, v), out = leaves[0]
        expected = torch.autograd.grad(out, (q, k, v), first.do, retain_graph=True)
        calls = {"cuDNN": [lambda x=x, o=o, p=p: torch.autograd.grad(o, x, p.do, retain_graph=True)
                           for (x, o), p in zip(leaves, problems)],
                 "package": [lambda p=p: p.mod.attention_backward(
                     p.do, p.q, p.k, p.v, p.out, p.lse, causal, p.scale) for p in problems]}
        failed = {}
        got = first.mod.attention_backward(first.do, first.q, first.k, first.v, first.out,
                                           first.lse, causal, first.scale)
        errors = {"package": max(relative_error(g, e) for g, e in zip(got, expected))}
        variants = ([(f"fused {cfg}", cfg, True) for cfg in candidates[dim]]
                    + [(f"fused {cfg} pointer atomics", cfg, False)
                       for cfg in candidates[dim][:pointer_atomics]])
        run = t = None  # deleted with the rest after the case
        for name, cfg, tma_reduce in variants:
            try:
                _fused_backward_error_at_odd_length(dtype, dim, causal, cfg, tma_reduce)
                run = first.fused_backward(cfg, tma_reduce)
                for t in (first.dq, first.dk, first.dv):
                    t.fill_(float("nan"))
                run()
                error = max(relative_error(g, e) for g, e in
                            zip((first.dq, first.dk, first.dv), expected))
            except AssertionError as e:
                failed[name] = f"wrong at length 1000: {str(e)[:120]}"
                continue
            except Exception as e:  # out of shared memory, say
                failed[name] = type(e).__name__
                continue
            if not error < 2e-2:
                failed[name] = f"wrong {error:.1e}"
                continue
            errors[name] = error
            calls[name] = [p.fused_backward(cfg, tma_reduce) for p in problems]
        times = {name: [] for name in calls}
        unclean = set()
        for _ in range(rounds):
            for name, fns in calls.items():
                ms, covered = queued_ms(fns, rounds=3)
                times[name].append(ms)
                if not covered:
                    unclean.add(name)
        ms = {name: median(values) for name, values in times.items()}
        cudnn = ms.pop("cuDNN")
        cells = "  ".join(f"{name} {tflop_per_s(flops, t):4.0f} {cudnn / t:4.2f}x "
                          f"(err {errors[name]:.1e})"
                          for name, t in sorted(ms.items(), key=lambda item: item[1]))
        print(f"  {tag:<34} cuDNN {tflop_per_s(flops, cudnn):4.0f} | {cells}"
              + (f" | failed: {failed}" if failed else "")
              + (f" | too few clean rounds: {sorted(unclean)}" if unclean else ""), flush=True)
        del problems, leaves, calls, q, k, v, out, expected, got, first, p, run, t
        torch.cuda.empty_cache()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="+",
                        choices=["matmul", "matmul_aligned", "matmul_wide",
                                 "matmul_decode", "matmul_k1000", "matmul_row_starts",
                                 "matmul_layouts", "matmul_picks", "matmul_host_tma",
                                 "matmul_paths", "matmul_ragged", "matmul_tail_split",
                                 "matmul_row_split", "matmul_last_wave",
                                 "matmul_wide_tiles", "matmul_two_per_sm", "matmul_stream_k", "matmul_stream_k_parts",
                                 "matmul_persistent",
                                 "softmax", "softmax_persistent", "softmax_registers",
                                 "attention", "attention_persistent", "attention_configs",
                                 "attention_flat", "attention_lazy", "attention_timing",
                                 "attention_fused_backward"])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    start = time.time()
    if "matmul" in args.what:
        shapes = MATMUL_SHAPES[:4] if args.quick else MATMUL_SHAPES
        tune_matmul(shapes, (torch.float16, torch.bfloat16))
    if "matmul_decode" in args.what:  # few rows, with the narrow 128-row tiles
        shapes = [(1, 4096, 4096), (16, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096),
                  (256, 4096, 4096), (128, 4096, 16384), (128, 12288, 4096)]
        tune_matmul(shapes, (torch.float16,), WIDE_CANDIDATES + [
            _mm_cfg(128, 32, 128, 8, 4, 4), _mm_cfg(128, 32, 128, 8, 3, 4),
            _mm_cfg(128, 32, 64, 8, 5, 4)])  # (128, 64, 128, 8, 3, 4) is in WIDE already
    if "matmul_k1000" in args.what:  # is 2000 x 3000 x 1000 slow for its K?
        tune_matmul([(2000, 3000, 1000), (2000, 3000, 1024), (2048, 3072, 1000),
                     (2048, 3072, 1024), (2000, 3000, 4000)], (torch.float16,),
                    WIDE_CANDIDATES[:6] + WIDE_CANDIDATES[-12:-8])
    if "matmul_row_starts" in args.what:
        tune_matmul_row_starts([(2048, 3072, 1024), (2000, 3000, 1024), (2048, 3072, 1000),
                                (2000, 3000, 1000), (2000, 3000, 4000), (1000, 1000, 1000),
                                (4000, 4000, 4000)])
    if "matmul_layouts" in args.what:  # a and b by rows or by columns (transposed views)
        shapes = [(1000, 1000, 1000), (4096, 4096, 4096), (4096, 12288, 4096),
                  (128, 4096, 4096), (2000, 3000, 1000), (1023, 1025, 1027)]
        tune_matmul_layouts([(torch.float16, *shape, layout) for shape in shapes
                             for layout in ("rr", "rc", "cr", "cc")])
    if "matmul_picks" in args.what:  # few rows: does the autotuner find the best tile?
        rows = (1, 16, 32, 64, 96, 128, 192, 256)
        tune_matmul_picks([(m, 4096, 4096) for m in rows] + [(128, 12288, 4096),
                          (64, 12288, 4096), (128, 4096, 16384)], (torch.float16, torch.bfloat16))
    if "matmul_host_tma" in args.what:  # host-made descriptors for a and b
        f16, bf16 = torch.float16, torch.bfloat16
        shapes = [(2000, 3000, 1000), (1000, 1000, 1000), (2000, 3000, 4000), (512, 512, 512),
                  (1024, 1024, 1024), (3072, 3072, 3072), (4096, 4096, 4096),
                  (8192, 8192, 8192), (4096, 12288, 4096), (128, 4096, 4096)]
        tune_matmul_host_tma([(f16, *shape, "rr") for shape in shapes]
                             + [(f16, 2000, 3000, 1000, "padded"), (bf16, 2000, 3000, 1000, "rr"),
                                (bf16, 3072, 3072, 3072, "rr"), (f16, 1000, 1000, 1000, "rc"),
                                (f16, 4096, 4096, 4096, "rc"), (f16, 4096, 12288, 4096, "rc")])
    if "matmul_paths" in args.what:  # which kernel where, now both store alike
        shapes = [(n, n, n) for n in (512, 1000, 1024, 2048, 3072, 4096, 8192)] + [
            (4096, 12288, 4096), (4096, 4096, 16384), (4096, 32000, 4096), (1, 4096, 4096),
            (16, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096), (4095, 4097, 4093),
            (1023, 1025, 1027), (2000, 3000, 1000)]
        cases = [(torch.float16, *shape, layout) for shape in shapes for layout in ("rr", "rc")]
        cases += [(torch.float16, *shape, layout)
                  for shape in [(1000, 1000, 1000), (2000, 3000, 1000), (4096, 4096, 4096),
                                (128, 4096, 4096), (1023, 1025, 1027)] for layout in ("cr", "cc")]
        cases += [(torch.bfloat16, *shape, layout)
                  for shape in [(1000, 1000, 1000), (2000, 3000, 1000), (3072, 3072, 3072)]
                  for layout in ("rr", "rc")]
        tune_matmul_paths(cases)
    if "matmul_ragged" in args.what:  # rows no descriptor reads as they are: copies
        shapes = [(511, 513, 515), (1023, 1025, 1027), (2047, 2049, 2051), (4095, 4097, 4093)]
        tune_matmul_paths([(torch.float16, *shape, layout) for shape in shapes
                           for layout in ("rr", "rc", "cr", "cc")])
    if "matmul_tail_split" in args.what:  # the last partial wave of tiles split along K
        tune_matmul_tail_split([(2000, 3000, 1000), (3072, 3072, 3072), (1000, 1000, 1000),
                                (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192)],
                               (torch.float16, torch.bfloat16))
    if "matmul_row_split" in args.what:  # the last partial wave re-cut into smaller tiles
        tune_matmul_row_split([(2304, 2304, 2304), (3072, 3072, 1024), (3072, 3072, 3072),
                               (3072, 3072, 8192), (4096, 4352, 4096), (2000, 3000, 1000),
                               (4096, 4096, 4096)], (torch.float16, torch.bfloat16))
    if "matmul_last_wave" in args.what:  # the split against one launch, in turns
        tune_matmul_last_wave([(2304, 2304, 2304), (3072, 3072, 3072), (4096, 3328, 4096),
                               (4096, 4352, 4096), (4095, 4097, 4093), (2816, 2816, 2816)],
                              (torch.float16, torch.bfloat16))
    if "matmul_wide_tiles" in args.what:  # 192-wide tiles (four power-of-two accumulators)
        tune_matmul_wide_tiles([(2000, 3000, 1000), (3072, 3072, 3072), (1000, 1000, 1000),
                                (4096, 4096, 4096), (8192, 8192, 8192)], (torch.float16,))
        tune_matmul_wide_tiles([(2000, 3000, 1000), (3072, 3072, 3072)], (torch.bfloat16,))
    if "matmul_two_per_sm" in args.what:  # 192-wide tiles, two programs per SM
        tune_matmul_wide_tiles([(2000, 3000, 1000), (2000, 3000, 4000), (1000, 1000, 1000),
                                (2048, 2048, 2048), (3072, 3072, 3072)], (torch.float16,),
                               tiles=TWO_PER_SM_TILES)
    if "matmul_stream_k" in args.what:  # K steps shared out evenly among the SMs
        tune_matmul_stream_k([(2000, 3000, 1000), (3072, 3072, 3072), (1000, 1000, 1000),
                              (2048, 2048, 2048), (2000, 3000, 4000), (4096, 4096, 4096),
                              (8192, 8192, 8192)], (torch.float16,))
        tune_matmul_stream_k([(2000, 3000, 1000), (3072, 3072, 3072)], (torch.bfloat16,))
    if "matmul_persistent" in args.what:  # one program per SM, loops flattened
        shapes = [(2000, 3000, 1000), (1000, 1000, 1000), (2048, 2048, 2048),
                  (3072, 3072, 3072), (4096, 4096, 4096), (8192, 8192, 8192),
                  (4096, 12288, 4096), (2000, 3000, 4000)]
        tune_matmul_stream_k(shapes, (torch.float16,), variants=PERSISTENT_VARIANTS)
        tune_matmul_stream_k([(2000, 3000, 1000), (3072, 3072, 3072)], (torch.bfloat16,),
                             variants=PERSISTENT_VARIANTS)
    if "matmul_stream_k_parts" in args.what:  # where stream-K's time goes
        tune_matmul_stream_k_parts([(2000, 3000, 1000), (2048, 2048, 2048), (8192, 8192, 8192)],
                                   (torch.float16,))
    if "matmul_wide" in args.what:  # shapes that no listed configuration serves well
        tune_matmul([(2000, 3000, 1000), (3072, 3072, 3072), (1000, 1000, 1000)],
                    (torch.float16,), WIDE_CANDIDATES)
    if "matmul_aligned" in args.what:
        shapes = [(1000, 1000, 1000), (1023, 1025, 1027), (4095, 4097, 4093), (127, 4096, 4096),
                  (1, 4096, 4096), (3072, 3072, 3072)]
        tune_matmul_aligned(shapes, (torch.float16,))
    if "softmax" in args.what:
        tune_softmax(SOFTMAX_SHAPES, (torch.float32, torch.float16, torch.bfloat16))
    if "softmax_persistent" in args.what:  # rows 4k-32k: several rows per program in turn
        tune_softmax_persistent([(4096, 4096), (8192, 4096), (4096, 8192), (4096, 16384),
                                 (2048, 32768), (4096, 2048)],
                                (torch.float32, torch.float16, torch.bfloat16))
    if "softmax_registers" in args.what:  # 32768-wide rows, two programs per SM
        tune_softmax_registers([(2048, 32768), (4096, 16384)],
                               (torch.float16, torch.bfloat16, torch.float32),
                               [(32, None), (32, 32), (16, None), (16, 64), (16, 48)])
    if "attention" in args.what:
        tune_attention()
    if "attention_persistent" in args.what:  # the experiment above, full attention only
        f16, bf16 = torch.float16, torch.bfloat16
        cases = [(f16, 32, 16, 1024, 128), (f16, 16, 16, 2048, 128), (f16, 16, 32, 1024, 64),
                 (f16, 2, 16, 16384, 128), (bf16, 32, 16, 1024, 128)]
        candidates = {("forward", 128): [(128, 64, 2, 4), (128, 128, 3, 8), (64, 64, 3, 4)],
                      ("forward", 64): [(128, 128, 3, 4), (128, 64, 3, 4), (64, 64, 3, 4)]}
        tune_attention(cases, ("forward", "persistent1", "persistent2"), (False,), candidates,
                       precompile=False)
    if "attention_configs" in args.what:  # the forward over the official tutorial's grid
        f16, bf16 = torch.float16, torch.bfloat16
        cases = [(f16, 32, 16, 1024, 128), (f16, 16, 16, 2048, 128), (f16, 2, 16, 16384, 128),
                 (bf16, 2, 16, 16384, 128), (f16, 16, 32, 1024, 64)]
        tune_attention(cases, ("forward",), (False, True), FORWARD_GRID, precompile=True)
    if "attention_flat" in args.what:  # the experiment above, full attention only
        f16, bf16 = torch.float16, torch.bfloat16
        cases = [(f16, 32, 16, 1024, 128), (f16, 16, 16, 2048, 128), (f16, 2, 16, 16384, 128),
                 (f16, 4, 32, 16384, 128), (bf16, 2, 16, 16384, 128), (f16, 16, 32, 1024, 64),
                 (f16, 1, 32, 16384, 64)]
        candidates = {("forward", 128): [(128, 64, 2, 4), (128, 128, 3, 8)],
                      ("forward", 64): [(128, 128, 3, 4), (128, 64, 3, 4), (64, 64, 3, 4)]}
        tune_attention(cases, ("forward", "flat", "flat_reordered"), (False,), candidates,
                       precompile=False)
    if "attention_lazy" in args.what:  # the rescale skipped while the maxima hold
        f16, bf16 = torch.float16, torch.bfloat16
        cases = [(f16, 32, 16, 1024, 128), (f16, 2, 16, 16384, 128), (f16, 16, 32, 1024, 64),
                 (bf16, 16, 16, 2048, 128)]
        candidates = {("forward", 128): TUNED_FORWARD[128], ("forward", 64): TUNED_FORWARD[64]}
        tune_attention(cases, ("forward", "lazy", "lazy0"), (False, True), candidates,
                       precompile=True)
    if "attention_timing" in args.what:  # the forward timed four ways, with the clock
        f16, bf16 = torch.float16, torch.bfloat16
        tune_attention_timing([(f16, 16, 16, 2048, 128, False), (f16, 32, 16, 1024, 128, False),
                               (bf16, 16, 16, 2048, 128, False), (f16, 2, 16, 16384, 128, False),
                               (f16, 16, 16, 2048, 128, True)])
    if "attention_fused_backward" in args.what:  # dQ in the dkdv loop, added atomically
        f16, bf16 = torch.float16, torch.bfloat16
        cases = [(f16, 2, 16, 16384, 128, False), (f16, 2, 16, 16384, 128, True),
                 (f16, 8, 16, 4096, 128, False), (f16, 8, 16, 4096, 128, True),
                 (f16, 32, 16, 1024, 128, False), (bf16, 2, 16, 16384, 128, False),
                 (f16, 1, 32, 16384, 64, False), (f16, 4, 32, 4096, 64, True)]
        tune_attention_fused_backward(cases[:2] if args.quick else cases)
    print(f"done in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
