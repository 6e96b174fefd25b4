"""
Performance habits, measured
============================

Advice about kernel speed is easy to give and easy to get wrong: "bigger blocks are
faster", "masks are expensive", "always autotune". This page measures each habit on the
simplest memory-bound kernel there is, a copy, where nothing but memory access varies.
On a GPU every claim below comes with a plot or a number from the run that built the
page; under the interpreter, timings mean nothing, so those cells say so and show what
can be shown without a clock: how the work is divided, and which addresses the lanes
touch.

You will learn:

* how block size and ``num_warps`` move the bandwidth of a memory-bound kernel;
* why neighbouring lanes should read neighbouring addresses (coalescing), in sectors and
  in GB/s;
* what a mask costs, against a branch that skips it and against no check at all;
* what ``triton.autotune`` picks, and what the first call costs.
"""

# %%
# Where this page ran
# -------------------
# ``triton_guide`` is imported first: it decides between the GPU and the interpreter,
# and that must happen before Triton itself is loaded.

import os
import tempfile
import time

import torch

from triton_guide import runtime
from triton_guide.benchmark import gb_per_s, median_ms, plot, sweep
from triton_guide.copy import (
    AUTOTUNE_BLOCK_SIZES,
    AUTOTUNE_NUM_WARPS,
    copy,
    copy_autotuned_kernel,
    copy_matrix,
)

import triton  # noqa: E402  (after triton_guide, see above)

print(runtime.describe())
device = runtime.device()
torch.manual_seed(0)

# %%
# The kernel: a copy
# ------------------
# A copy reads each element once and writes it once, with no arithmetic in between, so
# its speed is the memory system's speed. It counts ``2 * 4`` bytes per float32 element.
#
# .. literalinclude:: /../triton_guide/copy.py
#    :pyobject: copy_kernel
#
# ``BOUNDS`` is a ``tl.constexpr``, so each of its three values compiles to its own
# kernel with only its own branch in it. First, check that every variant copies exactly:

n = runtime.pick(interpreter=10_000, gpu=2**26)
x = torch.randn(n, device=device)
for bounds in ("mask", "branch", "none"):
    block_size = 16 if bounds == "none" else 1024  # "none" needs n % block_size == 0
    exact = torch.equal(copy(x, bounds=bounds, block_size=block_size), x)
    print(f"bounds={bounds!r:<9} copies all {n:,} elements exactly: {exact}")

# %%
# Block size and ``num_warps``
# ----------------------------
# A program handles ``BLOCK_SIZE`` elements with ``num_warps * 32`` threads, so each
# thread handles ``BLOCK_SIZE / (32 * num_warps)`` of them. Too few per thread, and
# threads sit idle or load less than the 16 bytes one instruction can move; too many,
# and a program needs many registers and the GPU fits fewer programs at once. The
# division, for a copy of ``n`` elements:

block_sizes = [128, 256, 512, 1024, 2048, 4096, 8192]
warp_counts = [1, 2, 4, 8, 16]
print(f"n = {n:,}; elements per thread (threads are 32 per warp):")
print("BLOCK_SIZE  programs" + "".join(f"{w:>3} warp(s)" for w in warp_counts))
for block_size in block_sizes:
    per_thread = "".join(f"{block_size / (32 * w):>11g}" for w in warp_counts)
    print(f"{block_size:>10} {triton.cdiv(n, block_size):>9,} {per_thread}")

# %%
# Measured: GB/s for every combination (one line per ``num_warps``).


def copy_with_warps(num_warps):
    def prepare(block_size):
        return lambda: copy(x, block_size=block_size, num_warps=num_warps)
    return prepare


results = sweep(
    block_sizes,
    {f"{w} warps": copy_with_warps(w) for w in warp_counts},
    lambda block_size, ms: gb_per_s(2 * 4 * n, ms),
    label="BLOCK_SIZE",
)
if results is not None:
    plot(block_sizes, results, xlabel="BLOCK_SIZE", ylabel="GB/s",
         title=f"copy of {n:,} float32: block size and num_warps")
    cells = [(value, name, block_sizes[i])
             for name, values in results.items() for i, value in enumerate(values)]
    best, worst = max(cells), min(cells)
    print(f"best:  {best[1]}, BLOCK_SIZE {best[2]}: {best[0]:.0f} GB/s")
    print(f"worst: {worst[1]}, BLOCK_SIZE {worst[2]}: {worst[0]:.0f} GB/s "
          f"({best[0] / worst[0]:.1f}x slower)")

# %%
# Coalescing: rows against columns
# --------------------------------
# A warp's 32 lanes issue their loads together, and memory is fetched in 32-byte
# sectors. When neighbouring lanes read neighbouring addresses, 32 float32 lanes need 4
# sectors; when each lane's address is a whole row apart, they need 32, and 28 of every
# 32 bytes fetched are thrown away. Both walks below copy the same matrix:
#
# .. literalinclude:: /../triton_guide/copy.py
#    :pyobject: copy_rows_kernel
#
# .. literalinclude:: /../triton_guide/copy.py
#    :pyobject: copy_columns_kernel
#
# The byte addresses that the first warp of program (0, 0) reads, from the matrix's
# strides and the kernels' indexing:

rows, cols = runtime.pick(interpreter=(64, 96), gpu=(8192, 8192))
matrix = torch.randn(rows, cols, device=device)
row_stride, col_stride = matrix.stride()
item = matrix.element_size()
lanes = torch.arange(32)
walks = {
    "rows": (0 * row_stride + lanes * col_stride) * item,  # row 0, columns 0..31
    "columns": (lanes * row_stride + 0 * col_stride) * item,  # column 0, rows 0..31
}
print(f"{rows} x {cols} float32 matrix, strides {matrix.stride()} (elements)")
for walk, addresses in walks.items():
    sectors = len(set((addresses // 32).tolist()))
    print(f"walk={walk:<8} lanes 0..3 read bytes {addresses[:4].tolist()} ...; "
          f"32 lanes touch {sectors} sectors = {sectors * 32} bytes for 128 useful")
for walk in walks:
    print(f"copy_matrix(walk={walk!r}) is exact: "
          f"{torch.equal(copy_matrix(matrix, walk=walk), matrix)}")

# %%
# Measured, on the same matrix:

if runtime.timings_meaningful():
    matrix_bytes = 2 * matrix.numel() * item
    bandwidth = {
        walk: gb_per_s(
            matrix_bytes, median_ms(lambda w=walk: copy_matrix(matrix, walk=w))
        )
        for walk in walks
    }
    for walk, value in bandwidth.items():
        print(f"walk={walk:<8} {value:7.0f} GB/s")
    slowdown = bandwidth["rows"] / bandwidth["columns"]
    print(f"walking down columns is {slowdown:.1f}x slower")
else:
    print("Timings need a GPU: this cell measures only when run on one.")

# %%
# The measured gap need not be the full 8x of wasted sectors: programs that run at about
# the same time read neighbouring columns, so a sector fetched for one program may still
# be in the L2 cache when the next one needs it. Do not count on that: make the lanes of
# a program walk along the dimension with stride 1.

# %%
# Masks against branches
# ----------------------
# Only the last program of a launch can run past the end, yet the usual kernel masks
# every block. Three ways to handle the end (see the kernel above): mask every block;
# branch on the program id so that full blocks skip the mask; or, when the length is a
# multiple of the block, no check at all. A branch like that is on a scalar, the same
# for the whole program; a condition that differs per lane cannot be an ``if`` in
# Triton, it is a mask or ``tl.where``.

block_size = 1024
blocks = triton.cdiv(n, block_size)
print(f"n = {n:,}, BLOCK_SIZE {block_size}: {blocks:,} programs, of which "
      f"{int(n % block_size != 0)} owns a partial block")
if runtime.timings_meaningful():
    rates = {
        bounds: gb_per_s(2 * 4 * n, median_ms(lambda b=bounds: copy(x, bounds=b)))
        for bounds in ("mask", "branch", "none")
    }
    for bounds, value in rates.items():
        print(f"bounds={bounds!r:<9} {value:7.0f} GB/s "
              f"({value / rates['none']:.3f}x no check)")
else:
    print("Timings need a GPU: this cell measures only when run on one.")

# %%
# The three variants do the same loads and stores; the mask adds one comparison per
# element to a kernel that spends its time waiting on memory. Read the numbers above
# before contorting a kernel to avoid a mask.

# %%
# What autotuning picks, and what it costs
# ----------------------------------------
# ``triton.autotune`` compiles and times every configuration it is given, the first time
# a kernel is called with a new value of its ``key`` arguments, and reuses the winner
# after that. The package's autotuned copy tries every pair of these:

configs = len(AUTOTUNE_BLOCK_SIZES) * len(AUTOTUNE_NUM_WARPS)
print(f"BLOCK_SIZE in {AUTOTUNE_BLOCK_SIZES} x num_warps in {AUTOTUNE_NUM_WARPS}: "
      f"{configs} configurations, each compiled and timed on the first call")

# %%
# On a GPU: the first call, the calls after it, and, for scale, one compilation of one
# configuration. Triton keeps compiled kernels in an on-disk cache, which would make a
# second build of this page look cheaper than a first; an empty cache directory, for
# this cell only, makes both compile for real.

if runtime.timings_meaningful():
    def wall_seconds(fn):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return time.perf_counter() - start

    previous_cache = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-guide-")
    try:
        # One configuration this page has not compiled yet.
        one_compile = wall_seconds(lambda: copy(x, block_size=2048, num_warps=2,
                                                bounds="branch"))
        first_call = wall_seconds(lambda: copy(x, autotune=True))
    finally:
        if previous_cache is None:
            del os.environ["TRITON_CACHE_DIR"]
        else:
            os.environ["TRITON_CACHE_DIR"] = previous_cache
    later_call = median_ms(lambda: copy(x, autotune=True))
    print(f"autotuned copy is exact: {torch.equal(copy(x, autotune=True), x)}")
    best = copy_autotuned_kernel.best_config
    print(f"first call (compile and time {configs} configurations): {first_call:.2f} s")
    print(f"later calls: {later_call:.3f} ms, "
          f"{gb_per_s(2 * 4 * n, later_call):.0f} GB/s")
    print(f"one compilation, for scale: {one_compile:.2f} s")
    print(f"chosen: BLOCK_SIZE {best.kwargs['BLOCK_SIZE']}, num_warps {best.num_warps}")
    timings = getattr(copy_autotuned_kernel, "configs_timings", None) or {}
    for config, measured in sorted(timings.items(), key=lambda item: item[1][0]):
        median = measured[0] if isinstance(measured, (list, tuple)) else measured
        block = config.kwargs["BLOCK_SIZE"]
        print(f"  BLOCK_SIZE {block:>5}, {config.num_warps} warps: "
              f"{gb_per_s(2 * 4 * n, median):7.0f} GB/s")
else:
    print("Timings need a GPU: under the interpreter autotune gets one configuration, "
          "since it cannot time any.")
    print(f"autotuned copy is exact: {torch.equal(copy(x, autotune=True), x)}")

# %%
# The first call pays for every configuration, in every process that calls it with a new
# key, so a key that changes often (here, every new length) pays again and again.
# Autotune over few configurations, with a key that changes rarely, or choose by a rule
# once the sweep above has shown what wins.

# %%
# Takeaways
# ---------
# * Measure before tuning: on a memory-bound kernel the sweep shows how flat, or not,
#   the block size and warp count landscape is.
# * Let neighbouring lanes read neighbouring addresses; walking down columns wastes most
#   of every sector fetched.
# * Measure what a mask costs before removing it; the cell above compares all three
#   ways.
# * Autotuning costs compilations and timings on the first call of every new key.
#
# Used here: :func:`triton_guide.copy.copy`, :func:`triton_guide.copy.copy_matrix`,
# :func:`triton_guide.benchmark.sweep`, :func:`triton_guide.benchmark.median_ms`,
# :func:`triton_guide.benchmark.plot`.
