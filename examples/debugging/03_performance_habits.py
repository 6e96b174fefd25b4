"""
Performance habits, measured
============================

Advice about kernel speed is easy to give and easy to get wrong: "bigger blocks are
faster", "masks are expensive", "always autotune". This page measures each habit on the
simplest memory-bound kernel there is, a copy, where nothing but memory access varies.
Every timing below was taken on a GPU: in this build when it ran on one, otherwise
recalled from the recordings in ``triton_guide/_results/``, each labelled with its GPU,
versions and date. The interpreter times nothing; the cells also show what needs no
clock: how the work is divided, and which addresses the lanes touch.

You will learn:

* how block size and ``num_warps`` move the bandwidth of a memory-bound kernel;
* why neighbouring lanes should read neighbouring addresses (coalescing), in sectors and
  in GB/s;
* what a mask costs, against a branch that skips it and against no check at all, and
  why a length that is not a multiple of 16 changes the instructions;
* what ``triton.autotune`` picks, and what the first call costs.
"""

# %%
import contextlib
import functools
import inspect
import os
import re
import tempfile
import time

import torch
import triton

from triton_guide import runtime
from triton_guide.benchmark import Benchmark, gb_per_s, median_ms, us_per_call
from triton_guide.copy import (
    AUTOTUNE_BLOCK_SIZES,
    AUTOTUNE_NUM_WARPS,
    copy,
    copy_autotuned_kernel,
    copy_kernel,
    copy_matrix,
)
from triton_guide.debugging import compile_kernels

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()  # timings: live on a GPU, else the recorded ones
print(bench.stamp())
device = runtime.device()

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
# Every timing of a flat copy below copies ``TIMED_N`` float32 elements, 256 MiB, far
# more than an L2 cache holds (on a GPU, ``n`` above is that long too).

TIMED_N = 2**26
print(f"TIMED_N = 2^26 = {TIMED_N:,} elements; a copy moves {2 * 4 * TIMED_N:,} bytes")


@functools.cache
def vector(size):
    """A random float32 vector of ``size`` elements, made when a timing needs it."""
    return torch.randn(size, device=device)


# %%
# Block size and ``num_warps``
# ----------------------------
# A program handles ``BLOCK_SIZE`` lanes (element positions of its block, not a warp's
# threads) with ``num_warps * 32`` threads, so each thread holds
# ``BLOCK_SIZE / (32 * num_warps)`` of them. Too few per thread, and a thread loads less
# than the 16 bytes one instruction can move. Fewer lanes than threads (a fraction in
# the table below), and Triton's layout gives each lane to more than one thread: the
# extra threads repeat work that others already do. Too many, and a program needs many
# registers and the GPU fits fewer programs at once. The division, for the copy of
# ``TIMED_N`` elements timed below:

block_sizes = [128, 256, 512, 1024, 2048, 4096, 8192]
warp_counts = [1, 2, 4, 8, 16]
print(f"n = {TIMED_N:,}; elements per thread (threads are 32 per warp):")
print("BLOCK_SIZE   programs" + "".join(f"{w:>3} warp(s)" for w in warp_counts))
for block_size in block_sizes:
    per_thread = "".join(f"{block_size / (32 * w):>11g}" for w in warp_counts)
    print(f"{block_size:>10} {triton.cdiv(TIMED_N, block_size):>10,} {per_thread}")

# %%
# Measured: GB/s for every combination (one line per ``num_warps``), under the ceiling:
# a device-to-device copy of 1 GiB, measured in the same run.
#
# How the site times these calls, and what a recording holds: :doc:`/measuring`.


def copy_with_warps(num_warps):
    def prepare(block_size):
        data = vector(TIMED_N)
        return lambda: copy(data, block_size=block_size, num_warps=num_warps)
    return prepare


results = bench.sweep(
    "block size and num_warps",
    block_sizes,
    {f"{w} warps": copy_with_warps(w) for w in warp_counts},
    lambda block_size, ms: gb_per_s(2 * 4 * TIMED_N, ms),
    label="BLOCK_SIZE",
    unit="GB/s",
    ceiling="copy",
    xlabel="BLOCK_SIZE (copy of 2^26 float32)",
)
results.plot()
for run in results:
    cells = [(value, name, run.xs[i])
             for name, values in run.series.items() for i, value in enumerate(values)]
    (best, best_warps, best_block), (worst, worst_warps, worst_block) = (
        max(cells), min(cells))
    print(f"{run.gpu}: best {best_warps} at BLOCK_SIZE {best_block}, {best:.0f} GB/s; "
          f"worst {worst_warps} at BLOCK_SIZE {worst_block}, {worst:.0f} GB/s "
          f"({best / worst:.1f}x slower)")
    near = sorted((block, name) for value, name, block in cells if value >= 0.95 * best)
    print(f"    within 5% of the best: {len(near)} of {len(cells)} combinations, with "
          f"BLOCK_SIZE {min(block for block, _ in near)} to "
          f"{max(block for block, _ in near)}")

# %%
# Elements per thread do not explain the smallest blocks. At BLOCK_SIZE 128 with 1 warp,
# a thread holds 4 float32, the 16 bytes one load instruction can move, yet 1, 2 and 4
# warps land at about the same bandwidth, well under the ceiling. Divide the bandwidth
# by the bytes a program moves (``2 * 4 * BLOCK_SIZE``) to get the programs that finish
# per microsecond, and compare the two GPUs: at BLOCK_SIZE 128 they finish about the
# same number, although the H200's copy ceiling is well above the H100's (both printed
# below). The memory does not set that pace. Each program costs a fixed amount besides
# its bytes: the GPU must start it on an SM, it computes its offsets, and its stores
# wait for its loads. At 128 lanes that fixed cost, not the memory, is the likely limit,
# and a larger block spreads it over more bytes.


def gpu_pairs(results):
    """(slower, faster) pairs of GPUs, ranked by their copy ceilings."""
    runs = sorted((run for run in results if run.ceiling),
                  key=lambda run: run.ceiling.value)
    return [(runs[0], run) for run in runs[1:]]


for run in results:
    print(f"{run.gpu}: programs finished per microsecond "
          "(GB/s x 1e3 / bytes per program)")
    print("BLOCK_SIZE" + "".join(f"{name:>10}" for name in run.series))
    for i, block_size in enumerate(run.xs[:3]):
        rates = [values[i] * 1e3 / (2 * 4 * block_size)
                 for values in run.series.values()]
        print(f"{block_size:>10}" + "".join(f"{rate:>10,.0f}" for rate in rates))
for base, other in gpu_pairs(results):
    i, j = base.xs.index(128), other.xs.index(128)
    ratios = ", ".join(f"{name} {other[name][j] / base[name][i]:.2f}x"
                       for name in base.series)
    print(f"{other.gpu} over {base.gpu}, programs per microsecond at BLOCK_SIZE 128: "
          f"{ratios}; copy ceiling {other.ceiling.value / base.ceiling.value:.2f}x")

# %%
# With 8 and 16 warps the rate drops further. A program is one thread block, and an SM
# of compute capability 9.0 (the H100 and the H200) holds at most 32 thread blocks and 64
# warps at once (the table "Technical Specifications per Compute Capability" in NVIDIA's
# `CUDA C++ Programming Guide
# <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html>`__). A copy needs
# few registers and no shared memory, so these two limits decide how many programs fit
# on an SM at once:

MAX_PROGRAMS_PER_SM, MAX_WARPS_PER_SM = 32, 64  # compute capability 9.0
for w in warp_counts:
    resident = min(MAX_PROGRAMS_PER_SM, MAX_WARPS_PER_SM // w)
    limit = ("the limit of 32 programs" if resident == MAX_PROGRAMS_PER_SM
             else f"{MAX_WARPS_PER_SM} warps / {w}")
    at_128 = [(run.gpu, run.xs.index(128), run) for run in results]
    against_one = ", ".join(f"{gpu} {run[f'{w} warps'][i] / run['1 warps'][i]:.2f}"
                            for gpu, i, run in at_128)
    print(f"{w:>2} warp(s): {resident:>2} programs per SM ({limit}); at "
          f"BLOCK_SIZE 128, rate against 1 warp's: {against_one or 'not recorded'}")

# %%
# With 1, 2 or 4 warps, 16 or more programs fit on an SM, and the rate stays the same.
# With 8 warps only 8 fit, with 16 only 4, and the rate falls, to about half with 16. A
# program holds its place on the SM while it waits for its loads, so fewer programs at
# once means fewer loads in flight, too few to keep up the pace.

# %%
# Coalescing: rows against columns
# --------------------------------
# A warp's 32 threads issue a load instruction together, and the memory system serves
# it in 32-byte sectors. When neighbouring lanes read neighbouring addresses, 32 float32
# lanes fall in 4 sectors; when each lane's address is a whole row apart, they fall in
# 32, so the same 128 useful bytes cost 32 sector requests instead of 4, each for 4
# useful bytes. The other 28 bytes of each sector are not necessarily fetched again
# from memory: the programs of the neighbouring columns need them, and may find them in
# cache. Both walks below copy the same matrix:
#
# .. literalinclude:: /../triton_guide/copy.py
#    :pyobject: copy_rows_kernel
#
# .. literalinclude:: /../triton_guide/copy.py
#    :pyobject: copy_columns_kernel
#
# The byte addresses of 32 lanes, one float32 each, from the matrix's strides and the
# kernels' indexing, as one warp reads them if each of its threads holds one lane. This
# is a model: the compiler may give a thread several neighbouring lanes (four float32 in
# one 16-byte load, for a row), which changes which thread reads what, not how many
# sectors a walk along rows or down columns touches per useful byte.

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
# Measured, on square matrices from 4 MiB to 256 MiB. ``do_bench`` clears the L2 cache
# before every run (it zeroes a 256 MiB buffer), so at every size the matrix starts in
# HBM. What differs is what fits once it is loaded: the smallest matrix and its copy fit
# in an L2 cache, the largest do not.

sides = [1024, 2048, 4096, 8192]


def walking(walk):
    def prepare(side):
        data = torch.randn(side, side, device=device)
        return lambda: copy_matrix(data, walk=walk)
    return prepare


coalescing = bench.sweep("rows against columns", sides,
                         {walk: walking(walk) for walk in walks},
                         lambda side, ms: gb_per_s(2 * 4 * side * side, ms), label="n",
                         unit="GB/s", ceiling="copy", xlabel="n (an n x n float32 matrix)")
coalescing.plot()
coalescing.summary(ratios=[("rows", "columns")])

# %%
# The gap at each size, the smallest size's time per call, and each walk on one GPU
# against the other:

for run in coalescing:
    ratios = ", ".join(f"{r / c:.1f}x at n = {side}"
                       for side, r, c in zip(run.xs, run["rows"], run["columns"]))
    print(f"{run.gpu}: bandwidth along rows over bandwidth down columns: {ratios}")
    side = min(run.xs)
    for walk in walks:
        micros = us_per_call(2 * 4 * side * side, run[walk][run.xs.index(side)])
        print(f"    walk={walk}, n = {side}: {micros:.1f} microseconds per call")
for base, other in gpu_pairs(coalescing):
    for walk in walks:
        ratios = ", ".join(
            f"{other[walk][other.xs.index(side)] / base[walk][i]:.2f}x at n = {side}"
            for i, side in enumerate(base.xs) if side in other.xs)
        print(f"{other.gpu} over {base.gpu}, walk={walk}: {ratios}")
    print(f"{other.gpu} over {base.gpu}, copy ceiling: "
          f"{other.ceiling.value / base.ceiling.value:.2f}x")

# %%
# Counting sectors predicts a gap of 8x. The measured gap, printed for each size above,
# is no constant, because the two walks change differently with the size. Along rows, the
# bandwidth climbs with the matrix: a call of some microseconds, printed above, likely
# spends much of its time starting its programs and waiting for the last of them, a
# fixed time that a longer copy spreads over more bytes.
#
# At n = 1024 the two GPUs can also differ by more than their copy ceilings do (compare
# the "over" lines): at the smallest sizes, fixed costs, the host's included, differ from
# machine to machine, as on the other pages' smallest sizes.
#
# Down columns, the bandwidth is about the same at every size. That includes n = 1024,
# where the matrix and its copy fit in L2 once loaded, so each sector comes from HBM
# about once, whichever program asks for it first. And from the H100 to the H200, the
# column walk gains much less than the copy ceiling does (both printed above). If the
# bytes fetched from HBM set its pace, the small matrix would run faster and the H200's
# faster memory would show. Both point instead at the number of sector requests. For
# each 128 useful bytes, the column walk's loads ask for 32 sectors where the row
# walk's ask for 4, and the SMs that issue those requests are of the same compute
# capability on both GPUs, so they would serve them at about the same rate. That is a
# likely explanation, not a measured one: this page does not count requests (a
# profiler such as Nsight Compute does). Either way, make the lanes of a program walk
# along the dimension with stride 1.

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
blocks = triton.cdiv(TIMED_N, block_size)
print(f"n = {TIMED_N:,}, BLOCK_SIZE {block_size}: {blocks:,} programs, of which "
      f"{int(TIMED_N % block_size != 0)} owns a partial block")


def bounded(bounds):
    def prepare(size):
        data = vector(size)
        return lambda: copy(data, bounds=bounds, block_size=block_size)
    return prepare


checks = bench.sweep(
    "masks against branches",
    [TIMED_N],
    {bounds: bounded(bounds) for bounds in ("mask", "branch", "none")},
    lambda size, ms: gb_per_s(2 * 4 * size, ms),
    label="n",
    unit="GB/s",
    ceiling="copy",
    xlabel="elements (float32)",
)
checks.summary()
for run in checks:
    print(f"{run.gpu}: against no check, the mask reaches "
          f"{run.ratio('mask', 'none'):.3f}x the bandwidth, the branch "
          f"{run.ratio('branch', 'none'):.3f}x")

# %%
# At this length, a multiple of the block, the three variants move the same bytes; the
# mask adds one comparison per element to a kernel that spends its time waiting on
# memory. Read the numbers above before contorting a kernel to avoid a mask.
#
# A length that is not a multiple of 16
# ---------------------------------------
# The length matters in one more way. Triton compiles a kernel separately for an integer
# argument that divides by 16 and one that does not (and for pointers aligned to 16
# bytes or not). A thread holds its lanes in runs of four consecutive ones, 16 bytes of
# float32. When ``num_elements`` divides by 16, each run is all inside the mask or all
# outside it, so the thread loads (and stores) its four elements with one instruction.
# When it does not, the compiler cannot know that, and the thread loads each element
# apart. The PTX (NVIDIA's assembly, which Triton produces on the way to machine code)
# shows it; it needs no GPU to produce, because
# :func:`~triton_guide.debugging.compile_kernels` compiles for an H100 on any machine.
# Torch's allocations are aligned, so both pointers are passed as multiples of 16:

COPY_SIGNATURE = {"input_ptr": "*fp32", "output_ptr": "*fp32", "num_elements": "i32",
                  "BLOCK_SIZE": "constexpr", "BOUNDS": "constexpr"}
ptx_cases = [(bounds, divides) for divides in (True, False) for bounds in ("mask", "branch")]
ptx = compile_kernels([
    (copy_kernel, COPY_SIGNATURE, {"BLOCK_SIZE": block_size, "BOUNDS": bounds},
     ["input_ptr", "output_ptr"] + (["num_elements"] if divides else []))
    for bounds, divides in ptx_cases
])
print(f"global load instructions in the PTX of copy_kernel, BLOCK_SIZE {block_size}, "
      f"4 warps:")
for (bounds, divides), compiled in zip(ptx_cases, ptx):
    wide = compiled.ptx.count("ld.global.v4.b32")
    narrow = len(re.findall(r"ld\.global\.b32", compiled.ptx))
    length = "divides by 16" if divides else "does not"
    print(f"  bounds={bounds!r:<9} length {length:<14}: {wide} x 16 bytes, {narrow} x 4 bytes")

# %%
# PTX is written for one thread, so the counts are per thread: 128 threads (4 warps)
# share a block of 1,024 lanes, 8 per thread. Masked, a length that divides by 16 lets
# each thread load its 8 elements as two runs of four, 16 bytes at a time; one that does
# not costs a 4-byte load per element, in every program. The branch keeps the 16-byte
# loads for every full block and pays the 4-byte ones only in its masked path, which
# only the last program takes (the PTX holds both paths, hence both counts). Whether
# the extra instructions cost bandwidth is a question for the clock: the same copy, one
# element longer than ``TIMED_N``:

odd_n = TIMED_N + 1
print(f"n = {odd_n:,}: odd_n % 16 = {odd_n % 16}")
odd = bench.sweep(
    "masks against branches, a length not a multiple of 16",
    [odd_n],
    {bounds: bounded(bounds) for bounds in ("mask", "branch")},
    lambda size, ms: gb_per_s(2 * 4 * size, ms),
    label="n",
    unit="GB/s",
    ceiling="copy",
    xlabel="elements (float32)",
)
odd.summary()
for run in odd:
    share = run.ratio("mask", "branch")
    verdict = (f"the branch is {1 / share:.2f}x as fast: the narrow loads cost bandwidth"
               if share < 0.97 else "within 3%: the narrow loads cost no bandwidth we can see")
    print(f"{run.gpu}: at n = {odd_n:,} the mask reaches {share:.3f}x the branch's "
          f"bandwidth; {verdict}")

# %%
# The two variants move the same bytes, and at the aligned length they ran at the same
# speed; here only the width of the loads in full blocks differs between them. A thread
# that loads its elements one 4 bytes at a time issues four times as many load
# instructions for the same data, and the memory system sees more, smaller requests. So
# the habit to keep is narrower than "avoid masks": when a kernel must accept any
# length, keep the full blocks free of the mask (the branch above); where you choose the
# sizes, make them multiples of 16; and check the PTX for ``ld.global.v4``.

# %%
# What autotuning picks, and what it costs
# ----------------------------------------
# ``triton.autotune`` compiles and times every configuration it is given, the first time
# a kernel is called with a new value of its ``key`` arguments, and reuses the winner
# after that. The package's autotuned copy tries every pair of these (the interpreter,
# which cannot time anything, gets only one configuration):

configs = len(AUTOTUNE_BLOCK_SIZES) * len(AUTOTUNE_NUM_WARPS)
print(f"BLOCK_SIZE in {AUTOTUNE_BLOCK_SIZES} x num_warps in {AUTOTUNE_NUM_WARPS}: "
      f"{configs} configurations, each compiled and timed on the first call")

# %%
# Measured on a GPU, in milliseconds of wall-clock time: the first call of the autotuned
# copy of ``TIMED_N`` elements, the calls after it (a median, like every timing above),
# and, for scale, "one compilation": the first call of the plain copy in a configuration
# this page has not compiled before. Triton keeps compiled kernels in an on-disk cache,
# which would make a second build of this page look cheaper than a first; an empty
# cache directory, for these two first calls only, makes both compile for real.
#
# ``one_compilation`` below times all of one call, from Python until the copy has
# finished, so it holds more than the compiler: the copy itself (a fraction of a
# millisecond), and what Triton 3.6, the version of these recordings, builds once per
# cache directory and kernel signature: a small C launcher for the kernel's argument
# types, compiled with the host's C compiler and kept in that directory.


def wall_ms(fn):
    """Milliseconds of wall-clock time for one call of ``fn``, compilation included."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3


@contextlib.contextmanager
def empty_triton_cache():
    previous = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="triton-guide-") as directory:
        os.environ["TRITON_CACHE_DIR"] = directory
        try:
            yield
        finally:
            if previous is None:
                del os.environ["TRITON_CACHE_DIR"]
            else:
                os.environ["TRITON_CACHE_DIR"] = previous

# %%
# The three measurements, each a callable that measures once:


def one_compilation(size):
    data = vector(size)

    def measure():
        with empty_triton_cache():  # a configuration this page has not compiled yet
            return wall_ms(lambda: copy(data, block_size=2048, num_warps=2,
                                        bounds="branch"))
    return measure


def first_call(size):
    data = vector(size)

    def measure():
        with empty_triton_cache():
            return wall_ms(lambda: copy(data, autotune=True))
    return measure


def later_calls(size):
    data = vector(size)
    return lambda: median_ms(lambda: copy(data, autotune=True))

# %%
# Autotune times each configuration with ``triton.testing.do_bench`` at its defaults;
# against that, the first call, one compilation and the later calls:

bench_defaults = inspect.signature(triton.testing.do_bench).parameters
warmup_ms, rep_ms = bench_defaults["warmup"].default, bench_defaults["rep"].default
timing_ms = configs * (warmup_ms + rep_ms)
print(f"do_bench's defaults: {warmup_ms} ms of warm-up and {rep_ms} ms of timed runs, "
      f"whatever the kernel's speed; for {configs} configurations, about "
      f"{timing_ms / 1e3:.2f} s")

cost = bench.measure("autotune: first call and later calls", [TIMED_N],
                     {"one compilation": one_compilation, "first call": first_call,
                      "later calls": later_calls}, label="n", unit="ms",
                     xlabel="elements (float32)")
for run in cost:
    compiling, first, later = (run[name][0] for name in
                               ("one compilation", "first call", "later calls"))
    print(f"{run.gpu}: first call {first / 1e3:.2f} s (compiles and times {configs} "
          f"configurations), {first / compiling:.0f}x one compilation "
          f"({compiling / 1e3:.2f} s); later calls {later:.3f} ms "
          f"({gb_per_s(2 * 4 * run.xs[0], later):.0f} GB/s)")
    rest = first - timing_ms
    print(f"    less about {timing_ms / 1e3:.2f} s of timing ({timing_ms / first:.0%} of "
          f"the first call): about {rest / 1e3:.2f} s left, "
          f"{rest / configs / 1e3:.2f} s per configuration, "
          f"{rest / configs / compiling:.2f}x one compilation")

# %%
# Nine times "one compilation", plus the timing, would be far more than the first call
# took. Two things close the gap. Autotune times each configuration for a fixed time,
# at ``do_bench``'s defaults, whatever the kernel's speed, and that is more than half
# of the first call. What is left, per configuration, is about a quarter of "one
# compilation" (both printed above). The likely reason is the launcher: the nine
# configurations share one signature, so the first call builds it once, while "one
# compilation" pays for it in full. The split is an estimate from ``do_bench``'s
# defaults (its warm-up can take less than its 25 ms), not a timing: this page does
# not time the parts of a first call apart.

# %%
# What the first call measured: autotune keeps its timing of every configuration (in
# ``copy_autotuned_kernel.configs_timings``, milliseconds), and picks the fastest. As
# GB/s:


def autotune_timing(num_warps):
    def prepare(block_size):
        def read():
            timings = getattr(copy_autotuned_kernel, "configs_timings", None) or {}
            for config, measured in timings.items():
                tried = (config.kwargs["BLOCK_SIZE"], config.num_warps)
                if tried == (block_size, num_warps):
                    # [median, 20th, 80th percentile] in ms, or a bare median
                    median = measured[0] if isinstance(measured, list) else measured
                    return gb_per_s(2 * 4 * TIMED_N, median)
            raise LookupError(f"autotune kept no timing of BLOCK_SIZE {block_size}, "
                              f"{num_warps} warps")
        return read
    return prepare

# %%
# Every configuration's timing, and the pick:

tuned = bench.measure(
    "autotune's timings", list(AUTOTUNE_BLOCK_SIZES),
    {f"{w} warps": autotune_timing(w) for w in AUTOTUNE_NUM_WARPS}, label="BLOCK_SIZE",
    unit="GB/s", xlabel="BLOCK_SIZE (autotuned copy of 2^26 float32)")
tuned.plot()
for run in tuned:
    cells = [(value, name, run.xs[i])
             for name, values in run.series.items() for i, value in enumerate(values)]
    (best, best_warps, best_block), (worst, _, _) = max(cells), min(cells)
    print(f"{run.gpu}: fastest by autotune's own timing, so its pick: BLOCK_SIZE "
          f"{best_block}, {best_warps} ({best:.0f} GB/s); its {len(cells)} configurations "
          f"spanned {worst:.0f} to {best:.0f} GB/s")
print(f"autotuned copy is exact: {torch.equal(copy(x, autotune=True), x)}")

# %%
# The first call with a new key pays for timing every configuration, and a key that
# changes often (here, every new length) pays again and again. A new process pays again
# too: Triton's disk cache spares it the compilations, but not the timings, unless the
# autotuner is made with ``cache_results=True``. Where the configurations' rates lie
# close together, as they may above, the pick can also change from run to run with the
# noise of the timings. Autotune over few configurations, with a key that changes
# rarely, or choose by a rule once a sweep like the one above has shown what wins.

# %%
# Takeaways
# ---------
# * Measure before tuning: on a memory-bound kernel many block sizes and warp counts
#   come within a few percent of the best (how many is printed under the sweep), while
#   the worst corner is several times slower.
# * Let neighbouring lanes read neighbouring addresses. Down columns, a warp's loads ask
#   for 8 times as many sectors per useful byte, and the column walk stayed at about the
#   same low bandwidth at every size, on both GPUs.
# * Measure what a mask costs before removing it (the ratios to no check are printed
#   above). At a length that does not divide by 16 the mask also loses the 16-byte
#   loads, and a branch that leaves full blocks unmasked keeps them.
# * Read the PTX to see what the compiler made of a kernel: whether loads are 16 bytes
#   wide depends on what it knows about lengths and pointers.
# * Autotuning costs compilations and timings on the first call of every new key.
#
# Used here: :func:`triton_guide.copy.copy`, :func:`triton_guide.copy.copy_matrix`,
# :func:`triton_guide.debugging.compile_kernels`,
# :class:`triton_guide.benchmark.Benchmark`, :func:`triton_guide.benchmark.median_ms`.
