"""
Matrix multiplication: tiles, tl.dot and the K loop
===================================================

A matrix product does far more arithmetic than it moves bytes, so unlike the previous pages
it can be bound by the tensor cores rather than by memory, if each tile of input is reused
enough. This page builds the tiled GEMM of ``triton_guide/matmul.py`` in three steps, each
one a kernel that runs, is checked against PyTorch and, on a GPU, is timed against cuBLAS.

You will learn:

* how an output tile is computed by walking along K with ``tl.dot`` (step 1);
* how to handle sizes that are not multiples of the tile (masks, or wrapped rows);
* grouped program ordering, when it helps the L2 cache and when it does not (step 2), with
  a picture drawn by the kernel's own program-to-tile helper;
* autotuning tile sizes with ``triton.autotune`` (step 3);
* what each step buys, as a fraction of cuBLAS, TFLOP/s against size, and what the
  host's time per call adds at small sizes.

What the package adds on a Hopper GPU to reach cuBLAS's speed (aligned rows, tensor
descriptors, the last wave of tiles) is the next lesson,
:ref:`Matmul at full speed <sphx_glr_auto_examples_hopper_01_matmul_full_speed.py>`.
"""

# %%
import functools

import matplotlib.pyplot as plt
import numpy as np
import torch

from triton_guide import matmul, matmul_reference, runtime
from triton_guide.benchmark import (Benchmark, calls_on, cold_matmul_inputs, host_us,
                                    tflop_per_s)
from triton_guide.matmul import matmul_kernel
from triton_guide.testing import assert_close, tolerance

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()  # timings: live on a GPU, else the recorded ones
print(bench.stamp())
device = runtime.device()

# %%
# Arithmetic against traffic
# --------------------------
# ``C = A @ B`` with A of M x K and B of K x N does ``2 M N K`` floating-point operations and
# must move at least ``(M K + K N + M N)`` elements. For square fp16 matrices the ratio grows
# with the size: large products are limited by arithmetic, not memory. Where the line lies
# depends on the GPU: its arithmetic rate over its memory bandwidth, here the two ceilings
# measured on each GPU (a large cuBLAS float16 product, and a 1 GiB device-to-device copy
# from the vector-add page's run): live on this build's GPU, recorded for the others. Each
# is timed once per process, apart from the sweeps; the end of the page compares the
# product's reading with the same call timed later in the run.

for n in (256, 1024, 4096):
    flops = 2 * n**3
    moved = 2 * (3 * n * n)  # bytes, float16
    print(f"n = {n:>4}: {flops / 1e9:8.2f} GFLOP, {moved / 1e6:6.1f} MB moved at "
          f"least, {flops / moved:6.0f} FLOP per byte")
gemm_roofs, copy_roofs = bench.ceilings("gemm_fp16"), bench.ceilings("copy")
for gpu in sorted(gemm_roofs.keys() & copy_roofs.keys()):
    tflops, gbps = gemm_roofs[gpu].value, copy_roofs[gpu].value
    print(f"{gpu}: {tflops:.0f} TFLOP/s over {gbps:.0f} GB/s, so a product needs "
          f"{tflops * 1e3 / gbps:.0f} FLOP per byte to be limited by arithmetic")

# %%
# Step 1: one program per tile of C
# ---------------------------------
# A program owns a ``BLOCK_SIZE_M x BLOCK_SIZE_N`` tile of C. It walks along K, loading a
# ``BLOCK_SIZE_M x BLOCK_SIZE_K`` tile of A and a ``BLOCK_SIZE_K x BLOCK_SIZE_N`` tile of B
# at each step, and accumulates their product with ``tl.dot`` (which runs on the tensor
# cores) into a float32 accumulator. Loads past any edge of A or B give zeros, which add
# nothing to the sum; the store leaves out the part of the tile past the edge of C:
#
# .. literalinclude:: /../triton_guide/matmul_steps.py
#    :pyobject: tile_product
#
# .. literalinclude:: /../triton_guide/matmul_steps.py
#    :pyobject: store_tile
#
# The kernel numbers its programs row by row: program ``i`` computes tile row
# ``i // num_pid_n``, tile column ``i % num_pid_n``. One tile shape is fixed for every
# problem: ``FIXED_TILE`` in ``triton_guide/matmul_steps.py`` on a GPU, and the smaller
# ``INTERPRETER_TILE`` under the interpreter, which runs each tile in numpy (the tile this
# build uses is printed below):
#
# .. literalinclude:: /../triton_guide/matmul_steps.py
#    :pyobject: matmul_row_major_kernel
#
# The launcher starts one program per tile: ``cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)``.
# Checked against a float64 product, at sizes that are not multiples of the tile:

from triton_guide.matmul_steps import (  # noqa: E402
    FIXED_TILE,
    INTERPRETER_TILE,
    matmul_grouped,
    matmul_pointer_loads,
    matmul_row_major,
    program_tiles,
)

step_shapes = [(1, 1, 1), (17, 31, 65),
               runtime.pick(interpreter=(129, 67, 250), gpu=(2049, 1537, 3073))]


def check_step(step, name):
    for m, n, k in step_shapes:
        a = torch.randn(m, k, device=device, dtype=torch.float16)
        b = torch.randn(k, n, device=device, dtype=torch.float16)
        error = assert_close(step(a, b), matmul_reference(a.double(), b.double()),
                             rtol=tolerance(torch.float16, tensor_cores=True))
        print(f"{name}: M={m:<5} N={n:<5} K={k:<5} float16 relative error {error:.1e}")


tile_name, step_tile = runtime.pick(interpreter=("INTERPRETER_TILE", INTERPRETER_TILE),
                                    gpu=("FIXED_TILE", FIXED_TILE))
print(f"steps 1 and 2 in this build: {tile_name}, BLOCK_SIZE_M x _N x _K = "
      + " x ".join(str(step_tile[f"BLOCK_SIZE_{axis}"]) for axis in "MNK"))
check_step(matmul_row_major, "step 1 (row-major)")

# %%
# Step 2: grouped ordering
# ------------------------
# Programs start roughly in the order of their id, and only so many run at once. In
# row-major order, programs 0, 1, 2, ... compute the first row of C tiles: they all read
# the same row of A tiles, but every column of B. Grouped order walks down
# ``GROUP_SIZE_M`` tile rows before moving one column right, so that the programs running
# together share rows of A *and* columns of B, and those tiles are still in the L2 cache
# when the next program asks for them. The mapping is one jit function, which both
# production kernels call (``GROUP_SIZE_M = 1`` gives back row-major order):
#
# .. literalinclude:: /../triton_guide/matmul.py
#    :pyobject: tile_of_program
#
# To see it, a tiny kernel runs that same function in every program of a launch and
# writes down the tile each program would compute:
#
# .. literalinclude:: /../triton_guide/matmul_steps.py
#    :pyobject: program_tiles_kernel
#
# Below, the program id in every tile of a 9 x 9 grid of C tiles, in both orders; the
# first programs of the launch, the ones that run together, are shaded.

tiles, group, window = 9, 3, 9
orders = {"row-major": program_tiles(tiles, tiles, 1),
          f"grouped, GROUP_SIZE_M = {group}": program_tiles(tiles, tiles, group)}


def tiles_read(mapping, num_programs):
    """Distinct tile rows of A and tile columns of B that the first programs read."""
    first = mapping[:num_programs]
    return len(set(first[:, 0].tolist())), len(set(first[:, 1].tolist()))


fig, axes = plt.subplots(1, 2, figsize=(9, 5), layout="constrained")
for ax, (name, mapping) in zip(axes, orders.items()):
    program_of_tile = np.zeros((tiles, tiles), dtype=int)
    for pid, (pid_m, pid_n) in enumerate(mapping.tolist()):
        program_of_tile[pid_m, pid_n] = pid
    ax.imshow(program_of_tile < window, cmap="Blues", vmin=-0.3, vmax=1.3)
    for (i, j), pid in np.ndenumerate(program_of_tile):
        ax.text(j, i, str(pid), ha="center", va="center", fontsize=7,
                color="white" if pid < window else "black")
    a_rows, b_cols = tiles_read(mapping, window)
    ax.set_title(f"{name}\nthe first {window} programs read tile rows of A: {a_rows}, "
                 f"tile columns of B: {b_cols}", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("tile column of C (pid_n): a column of B tiles", fontsize=9)
    ax.set_ylabel("tile row of C (pid_m): a row of A tiles", fontsize=9)

# %%
# Each tile row of A (and each tile column of B) is ``tiles`` input tiles long, one per K
# step. Counting, for windows of different sizes, the input tiles the first programs
# read:

row_major, grouped = orders.values()
print(f"{tiles} x {tiles} tiles of C, K {tiles} tiles long, GROUP_SIZE_M = {group}")
print(f"{'':>8} | {'row-major':^22} | {'grouped':^22} |")
print(f"{'programs':>8} | {'A rows':>6} {'B cols':>6} {'tiles':>8} | "
      f"{'A rows':>6} {'B cols':>6} {'tiles':>8} | verdict")
for num_programs in (9, 18, 27, 36, 45, 81):
    counts = [tiles_read(mapping, num_programs) for mapping in (row_major, grouped)]
    loads = [(rows + cols) * tiles for rows, cols in counts]
    verdict = ("grouped reads fewer" if loads[1] < loads[0] else
               "a tie" if loads[1] == loads[0] else "grouped reads MORE")
    print(f"{num_programs:>8} | " + " | ".join(
        f"{rows:>6} {cols:>6} {load:>8}" for (rows, cols), load in zip(counts, loads))
        + f" | {verdict}")
print("(programs: the first ones, running together; A rows and B cols: the tiles of each "
      "they read; tiles: input tiles loaded over the K loop)")

# %%
# In this toy, grouping wins when the programs running together fit in one group, ties
# when the window covers whole groups, and loses when a window covers one group and part
# of the next (that part starts new rows of A *and* goes back to the first columns of B).
# That loss needs a grid only 9 tiles wide. On a GPU the window is the programs resident
# at once, one or two per SM for large tiles (132 SMs on an H100), and a large product's
# grid is far wider: in row-major order such a window reads every column of B. The same
# count for the 8192^3 product of the ladder below, in 128 x 128 tiles with
# ``GROUP_SIZE_M = 8``, for a window starting at every program of the launch (the kernel's
# helper, run on a 64 x 64 grid):

ladder_tiles, ladder_group = 8192 // 128, 8
wide_orders = [program_tiles(ladder_tiles, ladder_tiles, g) for g in (1, ladder_group)]
print(f"{ladder_tiles} x {ladder_tiles} tiles of C, GROUP_SIZE_M = {ladder_group}: a group is "
      f"{ladder_group * ladder_tiles} programs")
for window in (132, 264):
    reads = [[sum(tiles_read(mapping[start:], window)) for start in
              range(len(mapping) - window + 1)] for mapping in wide_orders]
    fewer = sum(grouped < row_major for row_major, grouped in zip(*reads))
    print(f"window of {window} programs: row-major reads {min(reads[0])}-{max(reads[0])} "
          f"tile rows of A and columns of B, grouped {min(reads[1])}-{max(reads[1])}; "
          f"grouped reads fewer at {fewer} of {len(reads[0])} starts")

# %%
# Step 2 is step 1 with the row-major arithmetic replaced by the helper:
#
# .. literalinclude:: /../triton_guide/matmul_steps.py
#    :pyobject: matmul_grouped_kernel

check_step(matmul_grouped, "step 2 (grouped)")

# %%
# Step 3: autotuned tile shapes
# -----------------------------
# The pointer kernel in ``triton_guide/matmul.py`` is step 2 with three changes:
#
# * Its tile shape, group size, number of warps and pipeline stages come from
#   ``triton.autotune`` (see "Autotuning" below). A program runs as ``num_warps`` warps
#   of 32 threads each. ``num_stages`` is how many K steps of A and B tiles it keeps in
#   shared memory at once, so that the loads of the next tiles overlap the current
#   ``tl.dot``.
# * Rows of A and columns of B past the edge are wrapped round with ``% M`` and ``% N``
#   instead of masked: the loads stay inside the matrices, and the rows they fetch twice
#   are computed but never stored (the store is masked). Only K keeps a load mask.
# * Alignment parameters (``A_ALIGN``, ``A_COLUMNS`` and the like), which the launcher
#   sets after checking the strides, so that the loads stay 16 bytes wide on rows of any
#   length. They change how fast the kernel reads, not what it computes: the next lesson,
#   :ref:`Matmul at full speed <sphx_glr_auto_examples_hopper_01_matmul_full_speed.py>`,
#   explains them step by step.
#
# .. literalinclude:: /../triton_guide/matmul.py
#    :pyobject: matmul_kernel
#
# %%
# Autotuning
# ----------
# The best tile shape depends on the problem and the GPU. The first time
# ``@triton.autotune`` meets a new ``(M, N, K)`` (and layout), it times the configurations
# of its list that :func:`~triton_guide.matmul.prune_configs` keeps for that shape, then
# keeps the fastest. Pruning is more than a shortcut: the autotuner times each call alone,
# after emptying the L2 cache, and for products of a few dozen to 256 rows that timing
# favours tiles that are slower in a network's back-to-back calls, so those shapes only get
# tiles 64 or 128 rows tall. These are the candidates in the current mode (a single one
# under the interpreter, where there is nothing to time), and the winner for one product,
# run through this kernel (``matmul_pointer_loads``, step 3 on its own):

for config in matmul_kernel.configs:
    print(" ", config)
m, n, k = runtime.pick(interpreter=(129, 67, 250), gpu=(2048, 1536, 3072))
matmul_pointer_loads(torch.randn(m, k, device=device, dtype=torch.float16),
                     torch.randn(k, n, device=device, dtype=torch.float16))
print(f"chosen for {m} x {n} x {k} float16:", matmul_kernel.best_config)

# %%
# Checked like steps 1 and 2:

check_step(matmul_pointer_loads, "step 3 (autotuned)")

# %%
# Check against PyTorch
# ---------------------
# :func:`~triton_guide.matmul.matmul` as the package exports it (on a Hopper GPU, large
# products read their tiles through tensor descriptors, the next lesson's step 2), on the
# shapes the steps were checked on, compared with a float64 product, with B as it is
# (stored row by row) and as a transposed view (stored column by column, as ``w.t()`` is),
# in float32 and float16:

for m, n, k in step_shapes:  # the shapes the steps were checked on
    for dtype in (torch.float32, torch.float16):
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, n, device=device, dtype=dtype)
        for order, b_view in (("by rows", b), ("by columns", b.t().contiguous().t())):
            error = assert_close(matmul(a, b_view), matmul_reference(a.double(), b.double()),
                                 rtol=tolerance(dtype, tensor_cores=True))
            print(f"M={m:<5} N={n:<5} K={k:<5} {str(dtype)[6:]:<8} B {order:<10} "
                  f"relative error {error:.1e}")

# %%
# What each step buys
# -------------------
# Steps 1 to 3, the package's ``matmul`` and cuBLAS (``a @ b``), on one square float16
# product large enough to fill the GPU with thousands of tiles, timed in the same run. On
# a Hopper GPU, ``matmul`` ("step 4 descriptors" below) is step 3 with its tiles read
# through tensor descriptors, the next lesson's step 2. Each kernel is compiled (and
# autotuned) before timing.

ladder_n = 8192
steps = {
    "step 1 row-major": matmul_row_major,
    "step 2 grouped": matmul_grouped,
    "step 3 autotuned": matmul_pointer_loads,
    "step 4 descriptors": matmul,
    "cuBLAS": matmul_reference,
}


def prepared(fn):
    def prepare(size):
        a = torch.randn(size, size, device=device, dtype=torch.float16)
        b = torch.randn(size, size, device=device, dtype=torch.float16)
        fn(a, b)  # compile and autotune outside the timed region
        return lambda: fn(a, b)
    return prepare

# %%
# The sweep, and each step as a share of cuBLAS:

ladder = bench.sweep("steps ladder", [ladder_n],
                     {name: prepared(fn) for name, fn in steps.items()},
                     lambda size, ms: tflop_per_s(2 * size**3, ms), label="n",
                     unit="TFLOP/s", ceiling="gemm_fp16", xlabel="n (float16)")
tile_m, tile_n = FIXED_TILE["BLOCK_SIZE_M"], FIXED_TILE["BLOCK_SIZE_N"]
num_programs = (ladder_n // tile_m) * (ladder_n // tile_n)
print(f"{ladder_n}^3 float16; steps 1 and 2 launch {num_programs} programs of "
      f"{tile_m} x {tile_n}")
for run in ladder:
    print(run.gpu)
    for name in steps:
        if name not in run.series:  # a recording older than this step
            print(f"  {name:<18} not in this recording")
            continue
        fraction = run[name][0] / run["cuBLAS"][0]
        print(f"  {name:<18} {run[name][0]:6.0f} TFLOP/s  {fraction:6.1%} of cuBLAS")
    if {"step 3 autotuned", "step 4 descriptors"} <= run.series.keys():
        print(f"  step 4 / step 3: "
              f"{run['step 4 descriptors'][0] / run['step 3 autotuned'][0]:.2f}")

# %%
# At this one size, with B stored by rows, the last line per GPU is what the descriptors
# of ``matmul`` ("step 4") add to step 3; it is not the same on every GPU or in every
# recording. They buy more where B is stored by columns, which the next lesson,
# :ref:`Matmul at full speed <sphx_glr_auto_examples_hopper_01_matmul_full_speed.py>`,
# measures, and on ragged and small products (``benchmarks/report.py``).

# %%
# Performance
# -----------
# TFLOP/s of square float16 products against cuBLAS (``torch.matmul``), in the same run.
# Each size is autotuned on its first call, before timing. These are the GPU's times, with
# the host left out: each side's calls, on copies of the inputs too large together for the
# L2 cache, are captured in one CUDA graph and replayed (``gpu_ms`` in
# ``triton_guide/benchmark/timing.py``). The series "triton_guide" is ``matmul``.
#
# The ceiling drawn for each GPU is the ladder's cuBLAS call on 8192^3 float16 inputs,
# timed the same way as the ladder (``median_ms``, on the same inputs every call), but
# once per process and apart from the sweeps: for a recording (``make bench`` runs each
# page in a process of its own), at the top of this page, before any of its kernels has
# run. It is a reference, not a bound, and not a reading taken beside our kernel: read our
# kernel against the cuBLAS of its own sweep. The end of the page prints the ceiling
# beside the ladder's cuBLAS.

sizes = [256, 512, 1024, 2048, 3072, 4096, 6144, 8192]



def on_cold_copies(fn):
    return lambda size: calls_on(fn, cold_matmul_inputs(size, size, size, torch.float16))


results = bench.sweep("matmul, GPU time", sizes,
                      {"triton_guide": on_cold_copies(matmul),
                       "cuBLAS": on_cold_copies(matmul_reference)},
                      lambda size, ms: tflop_per_s(2 * size**3, ms), label="n",
                      unit="TFLOP/s", ceiling="gemm_fp16",
                      xlabel="n (n x n x n, float16)", gpu_time=True)
results.plot()
results.summary(ratios=[("triton_guide", "cuBLAS")])
for run in results:
    best = max(range(len(run.xs)), key=lambda i: run["triton_guide"][i])
    ours_best = run["triton_guide"][best]
    print(f"{run.gpu}, best: n = {run.xs[best]}, {ours_best:.0f} TFLOP/s, "
          f"{ours_best / run['cuBLAS'][best]:.2f}x cuBLAS")
    ratios = "  ".join(f"{n}: {ours_rate / cublas_rate:.2f}" for n, ours_rate, cublas_rate
                       in zip(run.xs, run["triton_guide"], run["cuBLAS"]))
    print(f"{run.gpu}, ours / cuBLAS at each n:  {ratios}")

# %%
# The host's share
# ----------------
# A program does not call ``matmul`` from a CUDA graph. Each call runs Python on the host
# first: the checks, the choice of kernel, the launch (cached per shape in
# ``triton_guide.launch``); the GPU cannot start a kernel before the host has launched it.
# Here is the host's time per call (200 calls back to back, which return as soon as their
# kernels are queued; ``host_us``) for steps 3 and 4 and for cuBLAS's call, next to our
# kernel's GPU time from the sweep above:

host_sizes = [256, 512, 1024, 2048]


def host_time(fn):
    prepare = prepared(fn)  # as for the ladder: compiled and autotuned first
    return lambda size: functools.partial(host_us, prepare(size))


host = bench.measure("matmul, host time per call", host_sizes,
                     {"step 3 pointer loads": host_time(matmul_pointer_loads),
                      "step 4 descriptors": host_time(matmul),
                      "cuBLAS": host_time(matmul_reference)},
                     label="n", unit="us per call", xlabel="n (n x n x n, float16)")

# %%
# Each size's host time beside our kernel's GPU time from the sweep above:


def gpu_us(host_run, variant, n):
    """``variant``'s GPU time per call at n from the sweep above, on the GPU of
    ``host_run``, in microseconds (None where the sweep has no such GPU or size)."""
    gpu_run = next((r for r in results if r.slug == host_run.slug), None)
    if gpu_run is None or n not in gpu_run.xs:
        return None
    return 2 * n**3 / gpu_run[variant][gpu_run.xs.index(n)] / 1e6


for run in host:
    host_bound = []  # sizes where step 4's host time is longer than its kernel's GPU time
    for i, n in enumerate(run.xs):
        kernel = ""
        kernel_us = gpu_us(run, "triton_guide", n)
        if kernel_us is not None:
            kernel = f"; our kernel (step 4) runs {kernel_us:.1f} us on the GPU"
            if run["step 4 descriptors"][i] > kernel_us:
                host_bound.append(n)
        print(f"{run.gpu}, n = {n}: host {run['step 4 descriptors'][i]:.0f} us per call "
              f"(step 4), {run['step 3 pointer loads'][i]:.0f} (step 3), "
              f"{run['cuBLAS'][i]:.0f} (cuBLAS){kernel}")
    if any(r.slug == run.slug for r in results):
        print(f"{run.gpu}: the host takes longer than the kernel at n = "
              + (", ".join(map(str, host_bound)) or "none of these sizes"))

# %%
# The host does the same work at every n, yet its time per call need not be the same at
# every n. Each column's change from the smallest n to the largest:

for run in host:
    changes = ", ".join(f"{name} {run[name][0]:.1f} -> {run[name][-1]:.1f} us "
                        f"({run[name][-1] / run[name][0] - 1:+.1%})" for name in run.series)
    print(f"{run.gpu}, host time from n = {run.xs[0]} to n = {run.xs[-1]}: {changes}")

# %%
# The changes are not the same on every GPU's host, and some columns rise with n; this
# page does not measure why. Between machines the host CPUs differ too. So compare the
# columns of one row: one n, one machine.
#
# Wherever the host's time is the longer, a program that calls ``matmul`` in a loop runs
# at the host's pace, not the kernel's: there our launcher, not our kernel, decides how we
# compare with cuBLAS. Each call then takes at least the longer of its host time and its
# GPU time; that floor for both sides, with cuBLAS's GPU time from the same sweep:

for run in host:
    floors = []
    for i, n in enumerate(run.xs):
        if gpu_us(run, "cuBLAS", n) is None:
            continue
        ours = max(run["step 4 descriptors"][i], gpu_us(run, "triton_guide", n))
        theirs = max(run["cuBLAS"][i], gpu_us(run, "cuBLAS", n))
        floors.append(f"n = {n}: ours {ours:.0f} us, cuBLAS {theirs:.0f} us "
                      f"(ours at {theirs / ours:.2f}x cuBLAS's speed)")
    if floors:
        print(f"{run.gpu}, per call in a loop, at least:\n  " + "\n  ".join(floors))

# %%
# Set these beside the sweep's GPU-time ratios: at these sizes, a Python loop of
# ``matmul`` calls runs at the host-bound ratios just printed, not at the sweep's. Step 4
# costs the host more than step 3, mostly for two tensor descriptors to build, which
# Triton encodes for the TMA unit at every call, and for the choice of kernel. A CUDA
# graph removes the host from the loop, as the sweep above did; so does giving the GPU
# fewer, larger products. ``benchmarks/launch_overhead.py`` breaks the host's time down.
#
# One caution when reading any of these numbers: compare only timings taken the same way,
# and side by side. This page times the 8192^3 float16 product two ways per GPU: the sweep
# (GPU time, on inputs out of L2) and the steps ladder (each call as a program makes it,
# with ``median_ms`` on the same inputs every call, which at this size hides the host).
# The rates can differ between the ways, so ours / cuBLAS within one way is what to compare:

for run in results:
    if ladder_n not in run.xs:
        continue
    i = run.xs.index(ladder_n)
    pairs = {"sweep": (run["triton_guide"][i], run["cuBLAS"][i])}
    for step in ladder:
        if step.gpu == run.gpu and "step 4 descriptors" in step.series:
            pairs["ladder"] = (step["step 4 descriptors"][0], step["cuBLAS"][0])
    print(f"{run.gpu}, {ladder_n}^3 in TFLOP/s, ours / cuBLAS: "
          + ", ".join(f"{where} {ours:.0f} / {cublas:.0f} = {ours / cublas:.2f}"
                      for where, (ours, cublas) in pairs.items()))

# %%
# The ceiling is a third timing of cuBLAS, and of the same call as the ladder's: 8192^3
# float16, timed the same way (``median_ms``), but once per process, before any other
# kernel of the page has run; the ladder comes after minutes of sweeps. The two, side by
# side:

for step in ladder:
    if step.ceiling is None or "cuBLAS" not in step.series:
        continue
    beside, alone = step["cuBLAS"][0], step.ceiling.value
    print(f"{step.gpu}, cuBLAS on {ladder_n}^3 float16 in TFLOP/s: {beside:.1f} in the "
          f"ladder, {alone:.1f} as the ceiling ({alone / beside - 1:+.1%})")

# %%
# The same call, timed the same way, gave both numbers, and they can lie far apart (the
# percentage printed). The ladder times its calls after minutes of sweeps; the ceiling is
# timed before any of the page's own kernels has run. The likely reason for a gap is the
# clock, which this page does not record: a GPU starts a burst of
# work at a higher clock than it can hold under sustained load, when its power and
# temperature limits pull the clock down. Readings taken side by side share the clock, so
# their ratios do not carry the gap; readings taken apart can differ by this much. So this
# page reads ours against the cuBLAS timed beside our kernel, and the ceiling only as a
# reference for scale.

# %%
# ``benchmarks/report.py`` compares the package with cuBLAS over many more shapes, in GPU
# time and as called, with ratios of timings from one run.

# %%
# Takeaways
# ---------
# * One program, one output tile; a loop over K; ``tl.dot`` into a float32 accumulator.
# * Mask along K (zeros add nothing); wrap or mask along M and N and mask the store.
# * Program order decides cache reuse; grouping is one small jit function. On a grid many
#   tiles wider than ``GROUP_SIZE_M``, with fewer programs running together than a group
#   holds, grouped order reads far fewer tiles, wherever those programs start.
# * Let the autotuner pick tile sizes, and always compare with cuBLAS measured in the same
#   run.
# * Below a few thousand rows, called from Python, the host's time per call, not the
#   kernel, decides how ``matmul`` compares with cuBLAS.
# * Aligned rows, tensor descriptors and the last wave are the next lesson,
#   :ref:`Matmul at full speed <sphx_glr_auto_examples_hopper_01_matmul_full_speed.py>`.
#
# Used here: :func:`triton_guide.matmul`, :func:`triton_guide.matmul_reference`,
# :func:`triton_guide.matmul_steps.matmul_row_major`,
# :func:`triton_guide.matmul_steps.matmul_grouped`,
# :func:`triton_guide.matmul_steps.matmul_pointer_loads`,
# :func:`triton_guide.matmul_steps.program_tiles`,
# :func:`triton_guide.testing.assert_close`, :class:`triton_guide.benchmark.Benchmark`,
# :func:`triton_guide.benchmark.cold_matmul_inputs`, :func:`triton_guide.benchmark.host_us`,
# :meth:`triton_guide.benchmark.Benchmark.ceilings`.
