"""
Performance habits, measured
============================

Advice about kernel speed is easy to give and easy to get wrong: "bigger blocks are
faster", "masks are expensive", "always autotune". This page measures each habit on the
simplest memory-bound kernel there is, a copy, where nothing but memory access varies.
Timings come from a GPU (live, or recorded); the cells also show what needs no clock:
how the work is divided, and which addresses the lanes touch.

You will learn:

* how block size and ``num_warps`` move the bandwidth of a memory-bound kernel;
* why neighbouring lanes should read neighbouring addresses (coalescing), in sectors and
  in GB/s;
* what a mask costs, against a branch that skips it and against no check at all, and
  why a length that is not a multiple of 16 changes the instructions;
* what ``triton.autotune`` picks, and what the first call costs.
"""

# %%
import functools
import inspect
import re

import torch
import triton

from triton_guide import runtime
from triton_guide.benchmark import (Benchmark, first_call_ms, gb_per_s, median_ms,
                                    print_best_and_worst, print_ratios)
from triton_guide.copy import (AUTOTUNE_BLOCK_SIZES, AUTOTUNE_NUM_WARPS, copy,
                               copy_autotuned_kernel, copy_kernel, copy_matrix)
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
# kernel with only its own branch in it. First, check that every variant copies exactly.
# Every timing of a flat copy below copies ``TIMED_N`` float32 elements, 256 MiB, far
# more than an L2 cache holds (on a GPU, ``n`` here is that long too).

TIMED_N = 2**26
n = runtime.pick(interpreter=10_000, gpu=TIMED_N)
x = torch.randn(n, device=device)
for bounds in ("mask", "branch", "none"):
    block_size = 16 if bounds == "none" else 1024  # "none" needs n % block_size == 0
    exact = torch.equal(copy(x, bounds=bounds, block_size=block_size), x)
    print(f"bounds={bounds!r:<9} copies all {n:,} elements exactly: {exact}")


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


results = bench.sweep("block size and num_warps", block_sizes,
                      {f"{w} warps": copy_with_warps(w) for w in warp_counts},
                      lambda block_size, ms: gb_per_s(2 * 4 * TIMED_N, ms),
                      label="BLOCK_SIZE", unit="GB/s", ceiling="copy",
                      xlabel="BLOCK_SIZE (copy of 2^26 float32)")
results.plot()
best = print_best_and_worst(results)

# %%
# Elements per thread do not explain the smallest blocks: at BLOCK_SIZE 128 with 1 warp a
# thread holds 4 float32, the 16 bytes one load can move, yet the rate is well under the
# ceiling. Each program costs a fixed amount besides its bytes (the GPU must start it, it
# computes its offsets, its stores wait for its loads), and at 128 lanes that fixed cost
# is the likely limit; a larger block spreads it over more bytes.
#
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
# Where fewer programs fit, the rate falls: a program holds its place on the SM while it
# waits for its loads, so fewer programs at once means fewer loads in flight.

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
gaps = print_ratios(coalescing, "rows", "columns")

# %%
# Counting sectors predicts a gap of 8x. The measured gap (above) is no constant, because
# the two walks change differently with the size. Along rows, the bandwidth climbs with
# the matrix: a call of a few microseconds spends much of its time starting its programs
# and waiting for the last of them, a fixed time that a longer copy spreads over more
# bytes. Down columns, the bandwidth is about the same at every size, even where the
# matrix and its copy fit in L2, and it gains far less than the copy ceiling from one GPU
# to the other (compare the columns of the table). Both point at the number of sector
# requests, not the bytes fetched from HBM, as what sets its pace; that is a likely
# explanation, not a measured one (a profiler such as Nsight Compute counts requests).
# Either way, make the lanes of a program walk along the dimension with stride 1.

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


checks = bench.sweep("masks against branches", [TIMED_N],
                     {bounds: bounded(bounds) for bounds in ("mask", "branch", "none")},
                     lambda size, ms: gb_per_s(2 * 4 * size, ms), label="n", unit="GB/s",
                     ceiling="copy", xlabel="elements (float32)")
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
# Triton compiles a kernel separately for an integer argument that divides by 16 and one
# that does not (and for pointers aligned to 16 bytes or not). A thread holds its lanes
# in runs of four, 16 bytes of float32. When ``num_elements`` divides by 16, each run is
# all inside the mask or all outside it, so one instruction loads it; when it does not,
# the compiler cannot know that, and loads each element apart. The PTX (the assembly
# Triton makes on the way to machine code) shows it, and needs no GPU:
# :func:`~triton_guide.debugging.compile_kernels` compiles for an H100 on any machine.
# Both pointers are passed as multiples of 16, as torch's allocations are:

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
# The counts are per thread: 128 threads (4 warps) share 1,024 lanes, 8 each. Masked, a
# length that divides by 16 loads them as two runs of four; one that does not costs a
# 4-byte load per element, in every program. The branch keeps the 16-byte loads for full
# blocks and pays the 4-byte ones only in its masked path, which only the last program
# takes (the PTX holds both paths). Whether that costs bandwidth is a question for the
# clock: the same copy, one element longer than ``TIMED_N``:

odd_n = TIMED_N + 1
print(f"n = {odd_n:,}: odd_n % 16 = {odd_n % 16}")
odd = bench.sweep("masks against branches, a length not a multiple of 16", [odd_n],
                  {bounds: bounded(bounds) for bounds in ("mask", "branch")},
                  lambda size, ms: gb_per_s(2 * 4 * size, ms), label="n", unit="GB/s",
                  ceiling="copy", xlabel="elements (float32)")
for run in odd:
    share = run.ratio("mask", "branch")
    verdict = (f"the branch is {1 / share:.2f}x as fast: the narrow loads cost bandwidth"
               if share < 0.97 else "within 3%: the narrow loads cost no bandwidth we can see")
    print(f"{run.gpu}: at n = {odd_n:,} the mask reaches {share:.3f}x the branch's "
          f"bandwidth; {verdict}")

# %%
# Here only the width of the loads in full blocks differs between the two: four times as
# many load instructions for the same data, more and smaller requests. So the habit to
# keep is narrower than "avoid masks": when a kernel must accept any length, keep the
# full blocks free of the mask (the branch); where you choose the sizes, make them
# multiples of 16; and check the PTX for ``ld.global.v4``.

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
# Measured on a GPU, in milliseconds of wall-clock time (``first_call_ms``, with an empty
# Triton cache so that kernels compile for real): the first call of the autotuned copy of
# ``TIMED_N`` elements, the calls after it (a median, like every timing above), and, for
# scale, "one compilation": the first call of the plain copy in a configuration this page
# has not compiled before. That one holds more than the compiler: the copy itself, and a
# small C launcher that Triton 3.6 builds once per cache directory and kernel signature.
# Autotune times each configuration with ``do_bench`` at its defaults:


def on_vector(measure):  # given n, a measurement of the vector of n elements
    return lambda size: functools.partial(measure, vector(size))


cost = bench.measure("autotune: first call and later calls", [TIMED_N], {
    "one compilation": on_vector(lambda data: first_call_ms(
        lambda: copy(data, block_size=2048, num_warps=2, bounds="branch"))),
    "first call": on_vector(lambda data: first_call_ms(lambda: copy(data, autotune=True))),
    "later calls": on_vector(lambda data: median_ms(lambda: copy(data, autotune=True))),
}, label="n", unit="ms", xlabel="elements (float32)")
defaults = inspect.signature(triton.testing.do_bench).parameters
timing_ms = configs * (defaults["warmup"].default + defaults["rep"].default)
print(f"do_bench's defaults: {defaults['warmup'].default} ms of warm-up and "
      f"{defaults['rep'].default} ms of timed runs; for {configs} configurations about "
      f"{timing_ms / 1e3:.2f} s, whatever the kernel's speed")
for run in cost:
    compiling, first, later = (run[name][0] for name in run.series)
    print(f"{run.gpu}: first call {first / 1e3:.2f} s, {first / compiling:.0f}x one "
          f"compilation ({compiling / 1e3:.2f} s), {timing_ms / first:.0%} of it do_bench's "
          f"nominal timing; later calls {later:.3f} ms")

# %%
# What the first call measured: autotune keeps its timing of every configuration
# (``copy_autotuned_kernel.configs_timings``, in milliseconds) and picks the fastest, so
# the best below is its pick. As GB/s:


def autotune_rate(num_warps):  # given BLOCK_SIZE, a reading of autotune's timing of it
    def timing_of(block_size):
        timings = getattr(copy_autotuned_kernel, "configs_timings", None) or {}
        for config, ms in timings.items():
            if (config.kwargs["BLOCK_SIZE"], config.num_warps) == (block_size, num_warps):
                # [median, 20th, 80th percentile] in ms, or a bare median
                return gb_per_s(2 * 4 * TIMED_N, ms[0] if isinstance(ms, list) else ms)
        raise LookupError(f"autotune kept no timing of BLOCK_SIZE {block_size}, "
                          f"{num_warps} warps")
    return lambda block_size: functools.partial(timing_of, block_size)


tuned = bench.measure(
    "autotune's timings", list(AUTOTUNE_BLOCK_SIZES),
    {f"{w} warps": autotune_rate(w) for w in AUTOTUNE_NUM_WARPS}, label="BLOCK_SIZE",
    unit="GB/s", xlabel="BLOCK_SIZE (autotuned copy of 2^26 float32)")
picks = print_best_and_worst(tuned)
print(f"autotuned copy is exact: {torch.equal(copy(x, autotune=True), x)}")

# %%
# A key that changes often (here, every new length) pays the first call again and again,
# and so does a new process: Triton's disk cache spares it the compilations, not the
# timings, unless the autotuner is made with ``cache_results=True``. Where the rates lie
# close together, the pick can change from run to run with the noise of the timings.
# Autotune over few configurations, with a key that changes rarely, or choose by a rule
# once a sweep like the first one has shown what wins.

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
# :class:`triton_guide.benchmark.Benchmark`, :func:`triton_guide.benchmark.median_ms`,
# :func:`triton_guide.benchmark.first_call_ms`.
