"""
Vector addition: programs, offsets and masks
============================================

The smallest useful Triton kernel adds two vectors. It already has everything every later
kernel has: many *programs* running the same code, each finding its own slice of the data
from its *program id*, loading it, computing, and storing the result, with a *mask* for the
slice that runs past the end.

You will learn:

* what a Triton program is, and how it differs from a CUDA thread;
* ``tl.program_id``, ``tl.arange``, ``tl.load`` / ``tl.store`` with ``mask``;
* why ``BLOCK_SIZE`` is a ``tl.constexpr`` and a power of two;
* how to launch a kernel over a grid, and how to check it against PyTorch;
* what bandwidth a memory-bound kernel reaches, next to PyTorch's own ``x + y``.
"""

# %%
import torch
import triton
from triton.backends.nvidia.compiler import CUDAOptions  # Triton's defaults

import triton_guide
from triton_guide import runtime, vector_add, vector_add_reference
from triton_guide.benchmark import Benchmark, gb_per_s, random_inputs_each
from triton_guide.testing import assert_close

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()  # timings: live on a GPU, else the recorded ones
print(bench.stamp())
device = runtime.device()

# %%
# Programs, not threads
# ---------------------
# A CUDA kernel is written for one thread, which usually handles one element. A Triton kernel
# is written for one **program**, which handles a whole block of elements at once: its
# variables are blocks (vectors or tiles). You launch as many programs as there are blocks.
#
# On the GPU, one program runs as one CUDA thread block of ``num_warps`` x 32 threads. A
# *warp* is a group of 32 threads that the GPU runs together; ``num_warps`` is a launch
# option, and Triton's default is printed below with the grid. The compiler splits the
# program's block among those threads, so each thread handles several of its elements.
#
# On these pages a **lane** is one element position within a block: lane ``i`` of
# ``offsets``, ``x`` and ``mask`` all belong to element ``i`` of the block. The threads
# share the lanes out between them. (CUDA also says "lane" for a thread's place in its
# warp; here it always means an element's place in a block.)
#
# Here is the kernel, as it stands in ``triton_guide/vector_add.py``:
#
# .. literalinclude:: /../triton_guide/vector_add.py
#    :pyobject: vector_add_kernel
#
# Line by line:
#
# * ``tl.program_id(axis=0)`` is this program's index in the launch grid: 0, 1, 2, ...
# * ``tl.arange(0, BLOCK_SIZE)`` is the block ``[0, 1, ..., BLOCK_SIZE - 1]``. Added to
#   ``program_id * BLOCK_SIZE`` it gives the indices this program owns. ``BLOCK_SIZE`` must
#   be known when the kernel is compiled (``tl.constexpr``) because it is the *shape* of
#   ``offsets``; ``tl.arange`` also wants it to be a power of two. Each distinct value of
#   a ``tl.constexpr`` argument compiles its own version of the kernel: a second
#   ``BLOCK_SIZE`` means a second compile.
# * ``x_ptr + offsets`` is a block of pointers; ``tl.load`` reads them all at once.
# * ``mask`` switches off the lanes whose index is past the end. A masked-off lane neither
#   reads nor writes memory.
# * ``INT64_OFFSETS``: the program id and the offsets are 32-bit integers unless told
#   otherwise, and an index past ``2**31 - 1`` wraps round. The launcher asks
#   ``needs_int64_offsets`` and, only for vectors that long, passes
#   ``INT64_OFFSETS=True``. That is a ``tl.constexpr`` too, so it is a separate compile
#   of the kernel with 64-bit offsets, and short vectors never pay for it; the
#   :ref:`common-mistakes page <sphx_glr_auto_examples_debugging_02_common_mistakes.py>`
#   shows the wrap.
#
# The launcher checks its arguments, then its ``_launch`` allocates the output, works out
# the grid and launches:
#
# .. literalinclude:: /../triton_guide/vector_add.py
#    :pyobject: _launch
#
# ``kernel[grid](...)`` launches ``grid[0]`` programs. Tensors passed to a kernel arrive as
# pointers to their first element; integers arrive as scalars. ``fast_launch(kernel)`` is
# ``kernel`` with the compiled kernel remembered per kind of argument, so that later calls
# skip Triton's per-call bookkeeping (microseconds of host time; it launches the same).

# %%
# How many programs?
# ------------------
# One program per block, rounded up so that the last, partial block is covered:
# ``triton.cdiv(n, BLOCK_SIZE)``. The mask then has to switch off the lanes of that last
# program that fall past ``n``.

n = runtime.pick(interpreter=98_765, gpu=98_765_431)
block_size = 1024
num_programs = triton.cdiv(n, block_size)
valid_in_last = n - (num_programs - 1) * block_size
print(f"n = {n:,} elements, BLOCK_SIZE = {block_size}")
print(f"programs launched: cdiv({n}, {block_size}) = {num_programs:,}")
print(f"the last program owns indices {(num_programs - 1) * block_size:,} .. "
      f"{num_programs * block_size - 1:,}")
print(f"{valid_in_last} of its {block_size} lanes are valid")
num_warps = CUDAOptions.num_warps  # used when the launch does not pass num_warps
threads = num_warps * 32
print(f"on the GPU each program is one thread block of num_warps x 32 = {num_warps} x 32 = "
      f"{threads} threads (num_warps = {num_warps}, Triton's default), "
      f"{block_size // threads} lanes per thread")

# %%
# Check against PyTorch
# ---------------------
# Random inputs (seeded), a length that is not a multiple of the block, and the reference
# computed in float64. ``assert_close`` checks every element and reports the worst one.

x = torch.randn(n, device=device)
y = torch.randn(n, device=device)
out = vector_add(x, y)
error = assert_close(out, vector_add_reference(x.double(), y.double()), rtol=1e-6)
print(f"vector_add matches torch on {n:,} elements; relative error {error:.1e}")

for odd_n in (1, 17, 1025):
    a, b = torch.randn(2, odd_n, device=device).unbind(0)
    assert_close(vector_add(a, b), a.double() + b.double(), rtol=1e-6)
print("and on lengths 1, 17 and 1025")

# %%
# Bandwidth
# ---------
# Each element costs 12 bytes of memory traffic (two 4-byte reads, one 4-byte write) and
# one addition: the kernel is bound by memory bandwidth, so we measure GB/s.
#
# * Small vectors cannot fill the GPU: the launch dominates their time.
# * Large ones should approach the copy bandwidth of the card. The wide pale line is that
#   ceiling: a device-to-device copy of 1 GiB, measured in the same run.
# * The ceiling is a reference, not a hardware limit. It is one kernel's measurement,
#   with its own noise, and a copy reads and writes equal amounts where vector addition
#   reads two bytes for each byte it writes, a mix the memory may serve a little faster.
#   A point a few percent above the line moves data as fast as the memory delivers it.
# * The baseline is PyTorch's ``x + y``, timed in the same run too.
#
# Without a GPU the plot shows the recorded results of every GPU measured so far, one
# colour each. Under it, for each GPU: ours against torch at the largest size and as a
# share of the ceiling, then the range of that ratio at the smaller sizes. How the site
# times a call: :doc:`/measuring`.

bytes_per_element = 3 * x.element_size()  # x and y read, the sum written
print(f"{bytes_per_element} bytes moved per element for one addition: "
      f"{1 / bytes_per_element:.3f} FLOP per byte")
sizes = [2**k for k in range(12, 29, 2)]
adds = {"triton_guide": vector_add, "torch": torch.add}  # torch.add(x, y) is x + y
# Each called on two fresh random float32 inputs, each of shape int(n): a vector of n
# elements (random_inputs_each takes one shape function per input):
results = bench.sweep("vector add", sizes, random_inputs_each(adds, int, int),
                      lambda n, ms: gb_per_s(bytes_per_element * n, ms), label="n",
                      unit="GB/s", ceiling="copy", xlabel="elements (float32)")
results.plot()
results.compare("triton_guide", "torch", work=lambda n: bytes_per_element * n)

# %%
# Takeaways
# ---------
# * A program handles a block; the grid is the number of blocks, rounded up.
# * Offsets = ``program_id * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)``; mask = ``offsets < n``.
# * A program runs as one CUDA thread block; its threads share the block's lanes.
# * An element-wise kernel is memory bound: its speed is bytes moved over time, and at
#   large sizes a good one runs as fast as PyTorch's. At smaller sizes a call's time can
#   be mostly fixed costs (the launch, the host's Python) rather than the kernel's: the
#   range of the ratio there is printed for each GPU under the plot's table, leaving out
#   readings that took longer than a call moving more bytes, which say more about the
#   run than the kernel. The :ref:`host-time page
#   <sphx_glr_auto_examples_debugging_04_host_time.py>` times the two apart.
#
# Used here: :func:`triton_guide.vector_add`, :func:`triton_guide.vector_add_reference`,
# :func:`triton_guide.testing.assert_close`.
