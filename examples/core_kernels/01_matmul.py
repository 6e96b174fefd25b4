"""
Matrix multiplication: tiles, tl.dot and the K loop
===================================================

A matrix product does far more arithmetic than it moves bytes, so unlike the previous pages
it can be bound by the tensor cores rather than by memory, if each tile of input is reused
enough. This page builds the tiled GEMM of ``triton_guide/matmul.py`` in three steps, each
one a kernel that runs, is checked against PyTorch and, on a GPU, is timed against cuBLAS.

You will learn:

* how an output tile is computed by walking along K with ``tl.dot``, masks for sizes
  that are not multiples of the tile (step 1);
* grouped program ordering, when it helps the L2 cache and when it does not (step 2);
* autotuning tile sizes with ``triton.autotune`` (step 3);
* what each step buys against cuBLAS, and what the host's time per call adds at small
  sizes.
"""

# %%
import torch

from triton_guide import matmul, matmul_reference, runtime
from triton_guide.benchmark import (Benchmark, draw_program_order, host_time, matmul_variant,
                                    print_call_floors, print_ridge_points, print_share_of,
                                    sweep_matmuls)
from triton_guide.matmul import matmul_kernel
from triton_guide.matmul_steps import (FIXED_TILE, INTERPRETER_TILE, matmul_grouped,
                                       matmul_pointer_loads, matmul_row_major,
                                       program_tiles)
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
# depends on the GPU's arithmetic rate over its memory bandwidth, here its two ceilings (a
# large cuBLAS float16 product, and a 1 GiB device-to-device copy from the vector-add
# page's run). Their ratio, the ridge point, is the FLOP per byte a product needs to be
# limited by arithmetic.

intensity = {n: 2 * n**3 / (2 * 3 * n * n) for n in (256, 1024, 4096)}  # float16 bytes
print("FLOP per byte moved at least, square float16: "
      + ", ".join(f"{value:.0f} at n = {n}" for n, value in intensity.items()))
print_ridge_points(bench)

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
# ``i // num_pid_n``, tile column ``i % num_pid_n``, with one tile shape for every problem
# (``FIXED_TILE`` on a GPU, the smaller ``INTERPRETER_TILE`` under the interpreter):
#
# .. literalinclude:: /../triton_guide/matmul_steps.py
#    :pyobject: matmul_row_major_kernel
#
# The launcher starts one program per tile: ``cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)``.
# Checked against a float64 product, at sizes that are not multiples of the tile:

step_shapes = [(1, 1, 1), (17, 31, 65),
               runtime.pick(interpreter=(129, 67, 250), gpu=(2049, 1537, 3073))]


def check_step(step, name):
    errors = []
    for m, n, k in step_shapes:
        a = torch.randn(m, k, device=device, dtype=torch.float16)
        b = torch.randn(k, n, device=device, dtype=torch.float16)
        errors.append(assert_close(step(a, b), matmul_reference(a.double(), b.double()),
                                   rtol=tolerance(torch.float16, tensor_cores=True)))
    print(f"{name}, float16, relative error: " + ", ".join(
        f"{error:.1e} at {m}x{n}x{k}" for (m, n, k), error in zip(step_shapes, errors)))


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
# To see it, a tiny kernel (``program_tiles_kernel``) runs that same function in every
# program of a launch and writes down the tile each program would compute. Below, the
# program id in every tile of a 9 x 9 grid of C tiles, in both orders; the first programs
# of the launch, the ones that run together, are shaded.

tiles, group, window = 9, 3, 9
orders = {"row-major": program_tiles(tiles, tiles, 1),
          f"grouped, GROUP_SIZE_M = {group}": program_tiles(tiles, tiles, group)}
draw_program_order(orders, first=window)

# %%
# In the picture grouping wins: the first programs fit in one group. It ties when they
# cover whole groups, and loses when they cover one group and part of the next (that part
# starts new rows of A *and* goes back to the first columns of B). On a GPU the programs
# running together are those resident at once, one or two per SM for large tiles (132 SMs
# on an H100), and a large product's grid is far wider than a group. The distinct tile
# rows of A and columns of B such a window reads, for the 8192^3 product of the ladder
# below (128 x 128 tiles, ``GROUP_SIZE_M = 8``), wherever in the launch the window starts:

def tiles_read(mapping, num_programs):
    """Distinct tile rows of A and tile columns of B that the first programs read."""
    first = mapping[:num_programs]
    return len(set(first[:, 0].tolist())), len(set(first[:, 1].tolist()))


ladder_tiles, ladder_group = 8192 // 128, 8
wide_orders = [program_tiles(ladder_tiles, ladder_tiles, g) for g in (1, ladder_group)]
for window in (132, 264):
    reads = [[sum(tiles_read(mapping[start:], window)) for start in
              range(len(mapping) - window + 1)] for mapping in wide_orders]
    fewer = sum(grouped < row_major for row_major, grouped in zip(*reads))
    print(f"window of {window} programs: row-major reads {min(reads[0])}-{max(reads[0])} "
          f"tile rows of A and columns of B, grouped {min(reads[1])}-{max(reads[1])}; "
          f"grouped reads fewer at {fewer} of {len(reads[0])} starts")

# %%
# Step 2 (``matmul_grouped_kernel``) is step 1 with its two lines of row-major arithmetic
# replaced by a call to ``tile_of_program``:

check_step(matmul_grouped, "step 2 (grouped)")

# %%
# Step 3: autotuned tile shapes
# -----------------------------
# The pointer kernel in ``triton_guide/matmul.py`` is step 2 with three changes:
#
# * Its tile shape, group size, ``num_warps`` (warps of 32 threads per program) and
#   ``num_stages`` (K steps of A and B tiles kept in shared memory at once, so that the
#   next loads overlap the current ``tl.dot``) come from ``triton.autotune`` (below).
# * Rows of A and columns of B past the edge are wrapped round with ``% M`` and ``% N``
#   instead of masked: the loads stay inside the matrices, and the rows they fetch twice
#   are computed but never stored (the store is masked). Only K keeps a load mask.
# * Alignment parameters (``A_ALIGN``, ``A_COLUMNS`` and the like) that keep the loads
#   16 bytes wide on rows of any length: they change how fast it reads, not what it
#   computes, and the next lesson explains them.
#
# .. literalinclude:: /../triton_guide/matmul.py
#    :pyobject: matmul_kernel

# %%
# Autotuning
# ----------
# The best tile shape depends on the problem and the GPU. The first time
# ``@triton.autotune`` meets a new ``(M, N, K)`` (and layout), it times the configurations
# of its list that :func:`~triton_guide.matmul.prune_configs` keeps for that shape, then
# keeps the fastest. Pruning is more than a shortcut: the autotuner times each call alone,
# after emptying the L2 cache, and for products of a few dozen to 256 rows that timing
# favours tiles that are slower in a network's back-to-back calls, so those shapes only get
# tiles 64 or 128 rows tall. How many candidates the current mode has (one under the
# interpreter, where there is nothing to time), and the winner for one product run through
# this kernel (``matmul_pointer_loads``, step 3 on its own):

print(f"{len(matmul_kernel.configs)} candidate configuration(s)")
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
    errors = []
    for dtype in (torch.float32, torch.float16):
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, n, device=device, dtype=dtype)
        for order, b_view in (("rows", b), ("columns", b.t().contiguous().t())):
            error = assert_close(matmul(a, b_view), matmul_reference(a.double(), b.double()),
                                 rtol=tolerance(dtype, tensor_cores=True))
            errors.append(f"{str(dtype)[6:]} B by {order} {error:.1e}")
    print(f"M={m} N={n} K={k}, relative error: " + ", ".join(errors))

# %%
# What each step buys
# -------------------
# Steps 1 to 3, the package's ``matmul`` and cuBLAS (``a @ b``), on one square float16
# product large enough to fill the GPU with thousands of tiles, timed in the same run,
# each compiled (and autotuned) first. On a Hopper GPU, ``matmul`` ("step 4
# descriptors") is step 3 with its tiles read through tensor descriptors; what they add
# with B stored by rows differs from GPU to GPU, and they buy more where B is stored by
# columns (the next lesson) and on ragged and small products (``benchmarks/report.py``).

ladder_n = 8192
steps = {
    "step 1 row-major": matmul_row_major,
    "step 2 grouped": matmul_grouped,
    "step 3 autotuned": matmul_pointer_loads,
    "step 4 descriptors": matmul,
    "cuBLAS": matmul_reference,
}

# %%
# The sweep (``sweep_matmuls``: TFLOP/s of ``2 n^3`` FLOPs a call, on random float16
# inputs), and each step as a share of cuBLAS:

ladder = sweep_matmuls(bench, "steps ladder", [ladder_n], steps, xlabel="n (float16)")
shares = print_share_of(ladder, "cuBLAS")

# %%
# Performance
# -----------
# TFLOP/s of square float16 products, ``matmul`` ("triton_guide") against cuBLAS
# (``torch.matmul``), in the same run, each size autotuned before timing. These are GPU
# times, the host left out: each side's calls, on copies of the inputs too large together
# for the L2 cache, are replayed from one CUDA graph (:doc:`/measuring`). The ceiling is
# cuBLAS on 8192^3 timed once per process, before the sweeps: a reference for scale, not
# a reading beside our kernel, so read ours against the cuBLAS of its own sweep.

sizes = [256, 512, 1024, 2048, 3072, 4096, 6144, 8192]
results = sweep_matmuls(bench, "matmul, GPU time", sizes,
                        {"triton_guide": matmul, "cuBLAS": matmul_reference}, gpu_time=True)
results.plot()
spans = results.compare("triton_guide", "cuBLAS", work=lambda n: 2 * n**3)

# %%
# The host's share
# ----------------
# A program does not call ``matmul`` from a CUDA graph. Each call runs Python on the host
# first (the checks, the choice of kernel, the launch), and the GPU cannot start a kernel
# before the host has launched it. The host's time per call (``host_time``, through
# ``host_us``: 200 calls back to back, which return as soon as their kernels are queued),
# for steps 3 and 4 and for cuBLAS's call, each compiled and autotuned first:

host_sizes = [256, 512, 1024, 2048]
host_calls = {"step 3 pointer loads": matmul_pointer_loads, "step 4 descriptors": matmul,
              "cuBLAS": matmul_reference}
host = bench.measure("matmul, host time per call", host_sizes,
                     {name: host_time(matmul_variant(fn)) for name, fn in host_calls.items()},
                     label="n", unit="us per call", xlabel="n (n x n x n, float16)")

# %%
# A call takes at least the longer of its host time and its kernel's GPU time (from the
# sweep above). That floor, for ``matmul`` (step 4) against cuBLAS's, at each size:

floors = print_call_floors(host, results, ours=("step 4 descriptors", "triton_guide"),
                           theirs=("cuBLAS", "cuBLAS"), work=lambda n: 2 * n**3)

# %%
# Wherever the host's time is the longer, a program that calls ``matmul`` in a loop runs
# at the host's pace: there our launcher, not our kernel, decides how we compare with
# cuBLAS. Step 4 costs the host more than step 3, mostly for two tensor descriptors to
# build at every call. A CUDA graph removes the host from the loop, as the sweep above
# did; so does giving the GPU fewer, larger products. ``benchmarks/report.py`` compares
# the package with cuBLAS over many more shapes, in GPU time and as called.

# %%
# Takeaways
# ---------
# * One program, one output tile; a loop over K; ``tl.dot`` into a float32 accumulator.
#   Mask along K (zeros add nothing); wrap or mask along M and N and mask the store.
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
# :func:`triton_guide.benchmark.sweep_matmuls`, :func:`triton_guide.benchmark.matmul_variant`,
# :func:`triton_guide.benchmark.host_time`, :func:`triton_guide.benchmark.host_us`,
# :func:`triton_guide.benchmark.print_ridge_points`,
# :func:`triton_guide.benchmark.draw_program_order`.
