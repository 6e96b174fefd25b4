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
from triton_guide.benchmark import (Benchmark, memory_bound_sweep, print_best_and_worst,
                                    print_ratios, print_share_of, random_inputs_by_setting,
                                    random_inputs_each)
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
# Every timing of a flat copy below copies ``TIMED_N`` float32 elements, far more than an
# L2 cache holds (on a GPU, ``n`` here is that long too).


def copy_bytes(elements):  # each float32 element read once and written once
    return 2 * 4 * elements


TIMED_N = 2**26
n = runtime.pick(interpreter=10_000, gpu=TIMED_N)
x = torch.randn(n, device=device)
for bounds in ("mask", "branch", "none"):
    block_size = 16 if bounds == "none" else 1024  # "none" needs n % block_size == 0
    exact = torch.equal(copy(x, bounds=bounds, block_size=block_size), x)
    print(f"bounds={bounds!r:<9} copies all {n:,} elements exactly: {exact}")
print(f"a timed copy: {TIMED_N:,} float32 elements ({4 * TIMED_N / 2**20:.0f} MiB), "
      f"{copy_bytes(TIMED_N) / 2**20:.0f} MiB read and written")

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
# a device-to-device copy of 1 GiB, measured in the same run. Measuring is the first
# habit, and on this page each measurement is one helper call: ``random_inputs_by_setting``
# gives each warp count a call on a fresh vector with x as its ``block_size``, and
# ``memory_bound_sweep`` times every call as a program makes it (``do_bench``: a warm-up,
# then runs that each start on a cleared L2) and turns the times into GB/s of the bytes
# counted above. How the site times calls, and what a recording holds: :doc:`/measuring`.

by_warps = {f"{w} warps": functools.partial(copy, num_warps=w) for w in warp_counts}
results = memory_bound_sweep(bench, "block size and num_warps", block_sizes,
                             random_inputs_by_setting(by_warps, "block_size", TIMED_N),
                             lambda _: copy_bytes(TIMED_N), label="BLOCK_SIZE",
                             xlabel="BLOCK_SIZE (copy of 2^26 float32)")
results.plot()
print_best_and_worst(results)

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
# on an SM at once (set them beside the first row of the table above, BLOCK_SIZE 128):

MAX_PROGRAMS_PER_SM, MAX_WARPS_PER_SM = 32, 64  # compute capability 9.0
for w in warp_counts:
    resident = min(MAX_PROGRAMS_PER_SM, MAX_WARPS_PER_SM // w)
    limit = ("the limit of 32 programs" if resident == MAX_PROGRAMS_PER_SM
             else f"{MAX_WARPS_PER_SM} warps / {w}")
    print(f"{w:>2} warp(s): {resident:>2} programs per SM ({limit})")

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
walk_copies = {walk: functools.partial(copy_matrix, walk=walk) for walk in walks}
for walk, walk_copy in walk_copies.items():
    print(f"copy_matrix(walk={walk!r}) is exact: {torch.equal(walk_copy(matrix), matrix)}")

# %%
# Measured, on square matrices from 4 MiB to 256 MiB. ``do_bench`` clears the L2 cache
# before every run (it zeroes a 256 MiB buffer), so at every size the matrix starts in
# HBM. What differs is what fits once it is loaded: the smallest matrix and its copy fit
# in an L2 cache, the largest do not.

sides = [1024, 2048, 4096, 8192]
coalescing = memory_bound_sweep(bench, "rows against columns", sides,
                                random_inputs_each(walk_copies, lambda side: (side, side)),
                                lambda side: copy_bytes(side * side), label="n",
                                xlabel="n (an n x n float32 matrix)")
coalescing.plot()
print_ratios(coalescing, "rows", "columns")

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

# %%
# At a length that is a multiple of the block, the three variants move the same bytes;
# the mask adds one comparison per element to a kernel that spends its time waiting on
# memory. The length matters in another way too.
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
# takes (the PTX holds both paths). Whether any of this costs bandwidth is a question for
# the clock: the copy of ``TIMED_N`` elements with each way of handling the end, and the
# same copy one element longer (where "none" would write past the end), each rate as a
# share of the branch's:

odd_n = TIMED_N + 1
print(f"n = {odd_n:,}: odd_n % 16 = {odd_n % 16}")
bounded = {bounds: functools.partial(copy, bounds=bounds, block_size=block_size)
           for bounds in ("mask", "branch", "none")}
lengths = {"masks against branches": (TIMED_N, ["mask", "branch", "none"]),
           "masks against branches, a length not a multiple of 16": (odd_n, ["mask", "branch"])}
for title, (length, names) in lengths.items():
    sweep = memory_bound_sweep(bench, title, [length],
                               random_inputs_each({name: bounded[name] for name in names}, int),
                               copy_bytes, label="n", xlabel="elements (float32)")
    print_share_of(sweep, "branch")

# %%
# At ``TIMED_N``, a multiple of the block, read the shares before contorting a kernel to
# avoid a mask. One element longer, only the width of the loads in full blocks differs
# between the mask and the branch: four times as many load instructions for the same
# data, more and smaller requests; where the mask's share is well under 100%, they cost
# bandwidth. So the habit to keep is narrower than "avoid masks": when a kernel must
# accept any length, keep the full blocks free of the mask (the branch); where you choose
# the sizes, make them multiples of 16; and check the PTX for ``ld.global.v4``.

# %%
# What autotuning picks, and what it costs
# ----------------------------------------
# ``triton.autotune`` compiles and times every configuration it is given, the first time
# a kernel is called with a new value of its ``key`` arguments, and reuses the winner
# after that. It times each with ``do_bench`` at its defaults, so the first call costs a
# fixed time per configuration whatever the kernel's speed, compilations aside. The
# package's autotuned copy tries every pair of these (the interpreter, which cannot time
# anything, gets only one configuration); its pick, once called, is ``best_config``:

configs = len(AUTOTUNE_BLOCK_SIZES) * len(AUTOTUNE_NUM_WARPS)
print(f"BLOCK_SIZE in {AUTOTUNE_BLOCK_SIZES} x num_warps in {AUTOTUNE_NUM_WARPS}: "
      f"{configs} configurations, each compiled and timed on the first call")
defaults = inspect.signature(triton.testing.do_bench).parameters
timing_ms = configs * (defaults["warmup"].default + defaults["rep"].default)
print(f"do_bench's defaults: {defaults['warmup'].default} ms of warm-up and "
      f"{defaults['rep'].default} ms of timed runs; for {configs} configurations about "
      f"{timing_ms / 1e3:.2f} s, whatever the kernel's speed")
print(f"autotuned copy is exact: {torch.equal(copy(x, autotune=True), x)}")
pick, tried = copy_autotuned_kernel.best_config, len(copy_autotuned_kernel.configs)
print(f"its pick for n = {n:,} of the {tried} configuration(s) it has here: "
      f"BLOCK_SIZE {pick.kwargs['BLOCK_SIZE']}, {pick.num_warps} warps")

# %%
# On a GPU, ``n`` is ``TIMED_N``, and the first sweep on this page timed the same nine
# configurations with the same timer: its rows 256, 1024 and 4096, columns 2, 4 and 8
# warps. Where their rates lie close together (how many lie within 5% of the best is
# printed under that sweep), the pick can change from run to run with the noise of the
# timings.
#
# A key that changes often (here, every new length) pays the first call again and again,
# and so does a new process: Triton's disk cache spares it the compilations, not the
# timings, unless the autotuner is made with ``cache_results=True``. Autotune over few
# configurations, with a key that changes rarely, or choose by a rule once a sweep like the
# first one has shown what wins.

# %%
# Takeaways
# ---------
# * Measure before tuning: on a memory-bound kernel many block sizes and warp counts
#   come within a few percent of the best (how many is printed under the sweep), while
#   the worst corner is several times slower.
# * Let neighbouring lanes read neighbouring addresses. Down columns, a warp's loads ask
#   for 8 times as many sectors per useful byte, and the column walk stayed at about the
#   same low bandwidth at every size, on both GPUs.
# * Measure what a mask costs before removing it (each variant's share of the branch's
#   rate is printed above). At a length that does not divide by 16 the mask also loses
#   the 16-byte loads, and a branch that leaves full blocks unmasked keeps them.
# * Read the PTX to see what the compiler made of a kernel: whether loads are 16 bytes
#   wide depends on what it knows about lengths and pointers.
# * Autotuning costs compilations and timings on the first call of every new key.
#
# Used here: :func:`triton_guide.copy.copy`, :func:`triton_guide.copy.copy_matrix`,
# :func:`triton_guide.debugging.compile_kernels`,
# :class:`triton_guide.benchmark.Benchmark`,
# :func:`triton_guide.benchmark.memory_bound_sweep`,
# :func:`triton_guide.benchmark.random_inputs_by_setting`,
# :func:`triton_guide.benchmark.random_inputs_each`.
