"""
2D blocks: broadcasting, strides and 2D masks
=============================================

Matrices are stored as one long row of memory. To work on a tile of one, a program builds
a 2D block of offsets from a column of row indices and a row of column indices, by
broadcasting, exactly as in NumPy or PyTorch. This page builds such a block, draws it, and
uses it in a tiled transpose.

You will learn:

* what ``rows[:, None]`` and ``cols[None, :]`` are, and what adding them gives;
* how strides turn (row, column) into a memory offset, including for views such as ``x.t()``;
* how to build a 2D mask for tiles on the ragged edge;
* a complete 2D kernel (transpose) on a 2D grid, checked against PyTorch.
"""

# %%
import inspect

import numpy as np
import torch

from triton_guide import runtime, transpose, transpose_reference
from triton_guide.benchmark import (OUT_OF_LINE, Benchmark, draw_tile_mask, gb_per_s,
                                    print_where_time_follows_work)
from triton_guide.testing import assert_close

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()  # timings: live on a GPU, else the recorded ones
print(bench.stamp())
device = runtime.device()

# %%
# Broadcasting in one picture
# ---------------------------
# ``tl.arange`` gives 1D blocks. ``rows[:, None]`` turns a block of 4 into a 4 x 1 column;
# ``cols[None, :]`` turns a block of 8 into a 1 x 8 row. Any arithmetic between the two
# stretches both to 4 x 8. Triton follows NumPy's rules, so PyTorch shows the same result.
# Without the ``None``, blocks of shapes (4,) and (8,) do not broadcast: PyTorch raises the
# error printed below, and Triton refuses such a sum in a kernel too.

rows = torch.arange(4)
cols = torch.arange(8)
print("rows[:, None] has shape", tuple(rows[:, None].shape))
print("cols[None, :] has shape", tuple(cols[None, :].shape))
try:
    rows + cols
except RuntimeError as error:
    print("rows + cols, without None, raises:", str(error).splitlines()[0])
row_stride = 8
offsets = rows[:, None] * row_stride + cols[None, :]
print("rows[:, None] * 8 + cols[None, :] =")
print(offsets)

# %%
# Strides
# -------
# ``x.stride()`` says how many elements to skip to move one step along each dimension. A
# row-major 4 x 8 matrix has strides (8, 1); its transpose ``x.t()`` is the same memory read
# with strides (1, 8). A kernel that takes the strides as arguments works on both without a
# copy.

x = torch.arange(32, dtype=torch.float32).reshape(4, 8)
print("x.stride() =", x.stride(), "  x.t().stride() =", x.t().stride())
offset = 2 * x.stride(0) + 5 * x.stride(1)
print(f"x[2, 5] sits at offset 2 * {x.stride(0)} + 5 * {x.stride(1)} = {offset}",
      "-> value", x.flatten()[offset].item())

# %%
# 2D masks on the edge
# --------------------
# A tile that hangs over the edge of the matrix needs a mask that is true only where both
# the row and the column are inside: ``(rows[:, None] < M) & (cols[None, :] < N)``. Below,
# an 11 x 13 matrix in 8 x 8 tiles: the tile of program (1, 1) covers rows 8..15 and
# columns 8..15, and only 3 x 5 of its 64 offsets are real elements.

M, N, BLOCK = 11, 13, 8
tile_rows = 1 * BLOCK + np.arange(BLOCK)
tile_cols = 1 * BLOCK + np.arange(BLOCK)
mask = (tile_rows[:, None] < M) & (tile_cols[None, :] < N)
tile_offsets = tile_rows[:, None] * N + tile_cols[None, :]
print(f"valid lanes in tile (1, 1): {mask.sum()} of {mask.size}")

draw_tile_mask(tile_rows, tile_cols, mask, tile_offsets, shape=(M, N))

# %%
# A 2D kernel: transpose
# ----------------------
# Each program loads one tile with the input's strides and stores it with the roles of the
# output's strides swapped. The grid has two axes, one per tile dimension:
#
# .. literalinclude:: /../triton_guide/transpose.py
#    :pyobject: transpose_kernel
#
# and the launcher. ``transpose`` checks the arguments and hands them to an operator that
# autograd and ``torch.compile`` know (the :ref:`autograd page
# <sphx_glr_auto_examples_core_kernels_05_autograd_and_compile.py>` explains why), which
# runs the part that launches:
#
# .. literalinclude:: /../triton_guide/transpose.py
#    :pyobject: _launch
#
# ``block_rows`` and ``block_cols`` are keyword arguments of ``transpose``, the tile's
# height and width; their defaults are printed below. ``needs_int64_offsets(x, out)``
# says whether an offset can pass ``2**31 - 1``; only then is ``INT64_OFFSETS`` true, and
# the kernel computes its offsets in 64 bits, as on :ref:`the vector-add page
# <sphx_glr_auto_examples_basics_01_vector_add.py>`.

defaults = {name: parameter.default
            for name, parameter in inspect.signature(transpose).parameters.items()
            if parameter.default is not inspect.Parameter.empty}
print(f"default tile: block_rows={defaults['block_rows']} x "
      f"block_cols={defaults['block_cols']} = "
      f"{defaults['block_rows'] * defaults['block_cols']} elements")

shape = runtime.pick(interpreter=(301, 203), gpu=(8191, 4099))
x = torch.randn(shape, device=device)
assert_close(transpose(x), transpose_reference(x), rtol=0.0)
print(f"transpose of a {shape[0]} x {shape[1]} matrix matches torch exactly")

strided = torch.randn(90, 120, device=device)[::3, 7::2]
assert_close(transpose(strided), strided.t(), rtol=0.0)
print(f"and of a strided view of shape {tuple(strided.shape)} with strides "
      f"{strided.stride()}, without a copy")

# %%
# Bandwidth
# ---------
# A transpose reads and writes every element once, like a copy; but what is a row on one
# side is a column on the other. The GPU fetches memory in 32-byte sectors, the smallest
# piece it moves, so an element-by-element transpose, which reads or writes down columns,
# touches a new sector for every 4-byte value. A tile avoids that: Triton loads the tile
# along the input's rows, and stores it along the output's rows, moving it between the
# two arrangements through shared memory on the way. (Shared memory is a small, fast
# memory on each streaming multiprocessor, or SM, the part of the GPU that runs a
# program; :ref:`the GPU page <sphx_glr_auto_examples_basics_00_triton_pytorch_cuda.py>`
# describes it.) Triton can do this because it knows, when it compiles, which axis of
# each tile is contiguous: it compiles a separate kernel for integer arguments equal to 1
# and folds them in as constants, so the column strides of a contiguous input and output
# (both 1) are constants in the compiled kernel. The :ref:`performance-habits page
# <sphx_glr_auto_examples_debugging_03_performance_habits.py>` counts sectors, and walks
# a matrix down its columns on purpose, with no tile to rearrange, to show the cost.
# Baseline: ``x.t().contiguous()`` in PyTorch; ceiling: a device-to-device copy of 1 GiB,
# measured in the same run.
#
# How the site times these calls, and what a recording holds: :doc:`/measuring`.

sizes = [512, 1024, 2048, 4096, 8192]


def ours(size):
    a = torch.randn(size, size, device=device)
    return lambda: transpose(a)


def torch_transpose(size):
    a = torch.randn(size, size, device=device)
    return lambda: a.t().contiguous()


variants = {"triton_guide": ours, "torch": torch_transpose}
results = bench.sweep("transpose", sizes, variants,
                      lambda size, ms: gb_per_s(2 * 4 * size * size, ms), label="n",
                      unit="GB/s", ceiling="copy", xlabel="n (n x n float32 matrix)")
results.plot()
results.summary(ratios=[("triton_guide", "torch")])

# %%
# The smallest sizes time more than the kernel
# ----------------------------------------------
# Compare the two at the large sizes only. A rate is bytes over the time of one call,
# and a call costs some time whatever its size: the launch, starting the programs, and
# the host's Python when it is slower than the GPU. Each rate comes from
# ``triton.testing.do_bench``, Triton's timer, which runs the call many times and, as
# this package calls it (``return_mode="median"``; the default is the mean), keeps the
# median. Before each run it queues a kernel that clears the L2 cache (the cache that
# all SMs share, in front of the GPU's memory), so that no run finds its data there; then
# a CUDA event (a marker that the GPU timestamps when its queue reaches it), the call,
# and another event. If the call's Python outlasts the clearing kernel, the GPU waits
# between the two events, and the wait is timed too. Each size here moves four times the
# bytes of the one before, so where a call takes much less than four times as long as
# the call before, those fixed costs are a large part of the smaller call. The times per
# call, worked back from each rate (a call reads and writes ``2 x 4 x n^2`` bytes), and
# how much each grew from the smallest size to the largest, against the bytes:

names = ["triton_guide", "torch"]
results.per_call(names, work=lambda n: 2 * 4 * n * n)

# %%
# A call that takes less time than the call before it, for four times the bytes, cannot
# be explained by fixed costs: more work does not take less time. Such a reading says
# something about the run (the host busy for a moment, the clock not yet up), not about
# the kernel. Below, for each GPU, the first size at which each call takes twice its time
# at the smallest size, leaving out, and listing, the readings that took more than
# ``OUT_OF_LINE`` times as long as a larger size's (``out_of_line`` in
# ``triton_guide.benchmark``). Below that size a call costs about the same whatever it
# moves: the ratios there compare fixed costs, not transposes.

print(f"left out below: readings over {OUT_OF_LINE}x a larger size's time per call")
print_where_time_follows_work(results, names, work=lambda n: 2 * 4 * n * n)

# %%
# Takeaways
# ---------
# * ``a[:, None]`` is a column, ``b[None, :]`` a row; together they make a tile.
# * offset = row * row_stride + col * col_stride: pass strides and views work unchanged.
# * A 2D mask is the AND of a row mask and a column mask, broadcast the same way.
# * A tiled transpose moves data at close to a copy's speed at large sizes; the fractions
#   of the copy ceiling that it and ``x.t().contiguous()`` reach are the ``/ ceiling``
#   rows of the bandwidth table.
# * At small sizes a call's time is mostly fixed costs; a reading that a larger size beat
#   is the run's, not the kernel's.
