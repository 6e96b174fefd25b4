"""
Softmax: naive, fused, online
=============================

Softmax along rows, ``exp(x - max(x)) / sum(exp(x - max(x)))``, is memory bound: a few
operations per element, so its speed is set by how many times the data crosses between
GPU memory and the chip. This page compares three ways to compute it by that count, and
then by the clock.

You will learn:

* why subtracting the row maximum matters;
* how many memory round trips a chain of PyTorch operations makes, and how a fused kernel
  makes one;
* the online softmax: a running maximum and a running sum, rescaled as the maximum grows,
  for rows too long to hold at once (and the heart of flash attention, next page);
* GB/s against row length, next to PyTorch.
"""

# %%
import math

import torch
import triton

from triton_guide import runtime, softmax, softmax_naive, softmax_reference
from triton_guide.benchmark import (Benchmark, gb_per_s, host_and_gpu_time, print_host_and_gpu,
                                    print_ratios, random_inputs_each)
from triton_guide.hardware import num_warps_for  # how the launchers pick num_warps
from triton_guide.softmax import MAX_ONE_PASS_BLOCK, ONE_PASS_TILE, ONLINE_BLOCK, one_pass_rows
from triton_guide.testing import assert_close, tolerance

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()  # timings: live on a GPU, else the recorded ones
print(bench.stamp())
device = runtime.device()

# %%
# Why subtract the maximum
# ------------------------
# ``exp`` overflows float32 a little past ``log`` of the largest float32 (printed below).
# Softmax does not change when the same number is subtracted from every element of a row,
# so subtracting the row maximum keeps every exponent at or below 0 without changing the
# answer.

largest = torch.finfo(torch.float32).max
print(f"largest float32 {largest:.3e}; exp overflows past log of it, {math.log(largest):.2f}")
row = torch.tensor([10.0, 50.0, 100.0])
shifted = row - row.max()
for name, values in (("exp(row) / sum:      ", row.exp() / row.exp().sum()),
                     ("exp(row - max) / sum:", shifted.exp() / shifted.exp().sum())):
    print(name, ", ".join(f"{v:.3g}" for v in values.tolist()))

# %%
# Naive: one PyTorch operation at a time
# --------------------------------------
# Written with PyTorch operations, each line is a kernel that reads its inputs from memory
# and writes its output back:
#
# .. literalinclude:: /../triton_guide/softmax.py
#    :pyobject: softmax_naive
#
# For an M x N input that is ``5MN + 2M`` float elements read and ``3MN + 2M`` written,
# against ``MN`` read and ``MN`` written for a kernel that keeps the row on chip.
# ``x.max(dim=-1)`` also returns where each maximum is, so the naive version writes ``M``
# int64 indices as well; the count below keeps to float elements and gives the indices'
# bytes apart:


def naive_elements(m, n):
    return (5 * m * n + 2 * m) + (3 * m * n + 2 * m)


def fused_elements(m, n):
    return 2 * m * n


M, N = 4096, 4096
print(f"M = N = {N}, float32: naive moves {naive_elements(M, N) * 4 / 1e6:.0f} MB (and "
      f"{M * torch.int64.itemsize / 1e6:.2f} MB of int64 indices), fused "
      f"{fused_elements(M, N) * 4 / 1e6:.0f} MB")
traffic_ratio = naive_elements(M, N) / fused_elements(M, N)
print(f"fused moves {traffic_ratio:.1f}x fewer float elements")

# %%
# Fused, one pass
# ---------------
# Each program takes whole rows. A row fits in one block (``BLOCK_SIZE`` is the row length
# rounded up to a power of two), so it is read once, reduced twice in registers and written
# once. A *lane* is one element position of a block; the threads of the program's warps
# share the lanes out, each thread holding several when the block has more lanes than the
# program has threads. Lanes past the end of the row read ``-inf``: they change neither the
# maximum nor the sum.
#
# The tile is ``BLOCK_ROWS x BLOCK_SIZE``: for long rows ``BLOCK_ROWS`` is 1, one row per
# program. The launcher picks ``num_warps`` from the size of the tile (``num_warps_for`` in
# ``triton_guide/hardware.py``). A 128-element row alone would get the threads printed on the
# last line below, each with one element to load and then two reductions to wait for, so
# short rows are taken several to a program until the tile holds ``ONE_PASS_TILE``
# elements; ``axis=1`` reduces each row of the tile on its own. The last program's tile
# can hang past the last row: those lanes re-read the last row and store nothing.
#
# .. literalinclude:: /../triton_guide/softmax.py
#    :pyobject: softmax_kernel
#
# This stops working when a row no longer fits in registers: here, beyond
# ``MAX_ONE_PASS_BLOCK`` elements.

WARP_SIZE = 32  # threads in a warp on NVIDIA GPUs


def threads(elements):
    """num_warps as softmax() picks it for a tile of this many elements, and the lanes."""
    warps = num_warps_for(elements)
    per_thread = elements // (warps * WARP_SIZE)
    return (f"num_warps {warps}, {warps} x {WARP_SIZE} = {warps * WARP_SIZE} threads, "
            f"{per_thread} lane{'' if per_thread == 1 else 's'} each")


print("MAX_ONE_PASS_BLOCK =", MAX_ONE_PASS_BLOCK, " ONE_PASS_TILE =", ONE_PASS_TILE)
for length in (128, 1000, 4096):
    block = triton.next_power_of_2(length)
    rows = one_pass_rows(block)
    print(f"rows of {length}: BLOCK_SIZE {block}, BLOCK_ROWS {rows}, {threads(rows * block)}")
print(f"one row of 128 alone: {threads(128)}")

# %%
# Online softmax
# --------------
# Read the row in blocks, and keep two numbers: the largest value seen so far ``m`` and the
# sum ``s`` of ``exp(x - m)`` over everything seen so far. When a block brings a larger
# maximum ``m'``, every term already in ``s`` was computed against the old ``m``; since
# ``exp(x - m') = exp(x - m) * exp(m - m')``, one multiplication fixes them all:
#
# .. math:: s' = s \cdot e^{m - m'} + \sum_{x \in \text{block}} e^{x - m'}
#
# After the last block, ``m`` and ``s`` are the row's maximum and normaliser, and a second
# pass writes ``exp(x - m) / s``.
#
# Here is the update run by hand, in blocks of 4. The values are built so that the
# rescale has something to do: each block is random noise in [-1, 1] plus its own
# offset, and the offsets rise and then fall back, so some blocks raise the maximum and
# one does not.

block_size = 4
block_offsets = torch.tensor([0.0, 3.0, 6.0, 1.0], dtype=torch.float64)
noise = torch.rand(15, dtype=torch.float64) * 2 - 1
values = noise + block_offsets.repeat_interleave(block_size)[: len(noise)]
print("block offsets:", block_offsets.tolist())
print("values:", " ".join(f"{value:.1f}" for value in values.tolist()))

m, s = -math.inf, 0.0
factors = []
for start in range(0, len(values), block_size):
    block = values[start:start + block_size]
    new_m = max(m, block.max().item())
    factor = math.exp(m - new_m)  # 0 on the first block, 1 if the max did not move
    s = s * factor + torch.exp(block - new_m).sum().item()
    if m == -math.inf:
        what = "(first block: nothing to rescale)"
    elif factor < 1:
        what = "(max moved: old terms shrink)"
    else:
        what = "(max stayed)"
    factors.append(factor)
    print(f"{start:>2}..{start + len(block) - 1:>2}: m {m:7.4f} -> {new_m:7.4f}, "
          f"rescale {'-' if m == -math.inf else f'{factor:.4f}'}, s {s:7.4f} {what}")
    m = new_m
exact_max = values.max().item()
exact_sum = torch.exp(values - exact_max).sum().item()
print(f"exact: max {exact_max:.4f}, sum {exact_sum:.4f}")
rescaled = sum(0 < factor < 1 for factor in factors)
print(f"the running sum was rescaled by a factor below 1 at {rescaled} of "
      f"{len(factors)} blocks")

# %%
# The kernel does the same with one ``m`` and ``s`` per lane, merged at the end, so that the
# loop needs no reduction across lanes. It reads the row twice and writes it once:
# ``3MN`` elements of traffic instead of ``2MN``, for rows of any length. (The sweep below
# counts ``2MN`` for every variant: where the online kernel's rate passes two thirds of
# the copy ceiling, its second read of a row came partly from the cache, not memory.)
#
# .. literalinclude:: /../triton_guide/softmax.py
#    :pyobject: softmax_online_kernel
#
# ``softmax(x)`` picks the one-pass kernel when the row fits and the online kernel when it
# does not; ``method=`` forces one. Forced onto short rows, the online kernel is slow for
# a reason the traffic count does not show: it takes one row per program in steps of
# ``ONLINE_BLOCK`` columns, so on a short row most of its lanes are masked off:

for n in (128, 1024):
    print(f"a row of {n} in steps of ONLINE_BLOCK = {ONLINE_BLOCK}: "
          f"{1 - n / ONLINE_BLOCK:.0%} of the lanes masked off")

# %%
# Check against PyTorch
# ---------------------
# Rows of odd length, rows holding ``-inf`` (a masked position), large values, and float16.

x = torch.randn(runtime.pick(interpreter=(37, 1003), gpu=(4099, 5003)), device=device)
x[0, :700] = -math.inf
x[1] *= 1e4
reference = softmax_reference(x.double())
for method in ("one_pass", "online"):
    error = assert_close(softmax(x, method=method), reference, rtol=1e-5)
    print(f"{method:<8} float32 {tuple(x.shape)}: relative error {error:.1e}")
error = assert_close(softmax_naive(x), reference, rtol=1e-5)
print(f"naive    float32 {tuple(x.shape)}: relative error {error:.1e}")
half = x.half()
error = assert_close(softmax(half), softmax_reference(half.double()),
                     rtol=tolerance(torch.float16))
print(f"auto     float16 {tuple(x.shape)}: relative error {error:.1e}")
long_rows = torch.randn(3, MAX_ONE_PASS_BLOCK + 3, device=device)
error = assert_close(softmax(long_rows), softmax_reference(long_rows.double()),
                     rtol=1e-5)
print(f"auto     float32 {tuple(long_rows.shape)}: relative error {error:.1e} "
      "(online: the row does not fit)")

# %%
# Performance
# -----------
# 4096 rows of float32, row length from 128 to 32768, fresh random rows for every variant.
# GB/s counts the bytes a perfect kernel must move (read once, write once) for every
# variant, so the naive version's extra trips show up as a lower rate. The ceiling is a
# plain device-to-device copy, measured in the same run: read once, write once, no
# arithmetic.
#
# How the site times these calls, and what a recording holds: :doc:`/measuring`.

lengths = [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]


def work(n):  # the bytes a perfect kernel moves on 4096 rows of n
    return 2 * 4096 * n * 4


variants = random_inputs_each({  # each on fresh random inputs of 4096 rows of n
    "fused (one pass)": lambda t: softmax(t, method="one_pass"),
    "online": lambda t: softmax(t, method="online"),
    "naive (torch ops)": softmax_naive,
    "torch.softmax": lambda t: torch.softmax(t, dim=-1)}, lambda n: (4096, n))
results = bench.sweep("softmax", lengths, variants, lambda n, ms: gb_per_s(work(n), ms),
                      label="N", unit="GB/s", ceiling="copy",
                      xlabel="row length (4096 rows, float32)")
results.plot()
results.compare("fused (one pass)", "torch.softmax", work=work)

# %%
# Do not read too much into the ratio at the largest size alone: ``torch.softmax``'s
# curve is jagged, with dips at some row lengths (see the table), so the ratio at any one
# length can flatter either side. The line "at smaller N" gives the range of fused /
# ``torch.softmax`` at the other lengths, naming where it is lowest and highest; below
# 1.00x, ``torch.softmax`` was the faster there. Read the left of the plot with care: a
# call on short rows takes a few microseconds of GPU time, and what the sweep times there
# is mostly the host's Python and the launch, not the kernel. The section "The host's
# share", below, times the two apart.
#
# Against the naive version, by row length, beside the ratio of their traffic counted
# above, with the lengths where the measured gap falls short of it:

print_ratios(results, "fused (one pass)", "naive (torch ops)", beside=traffic_ratio)

# %%
# Counting trips gives a rough estimate of the gap, not a bound. On long rows the gap is
# wider than the count: PyTorch's separate reductions and elementwise kernels do not each
# run at copy speed. On short rows, where bytes are not what a call costs (next section),
# it can be narrower.
#
# The host's share
# ----------------
# A call on 128-wide rows moves a few megabytes, which the copy ceiling would move in the
# time printed beside that length below; both softmaxes take longer, even on the GPU
# alone. Every kernel pays fixed costs whatever its size: the launch, and filling the GPU
# with programs, which run in waves of as many as fit at once, the last wave leaving much
# of the GPU idle while it finishes. And before the kernel, the host (the CPU, running
# Python) makes the call: ``softmax`` checks its argument, picks the block and the rows
# per program, allocates the output and launches, all in Python; ``torch.softmax`` does
# the same in C++. A launch is asynchronous: the host queues the kernel and returns, and
# if it takes longer per call than the kernel runs, the GPU waits for it.
#
# Below, for three row lengths, both softmaxes: the host's time per call (200 calls back
# to back, which return as soon as their kernels are queued; ``host_time``), the GPU's
# time with the host left out (calls on many copies of the input, replayed from a CUDA
# graph; ``gpu_time``), and the time per call of the sweep above.

pair = ["fused (one pass)", "torch.softmax"]
times = bench.measure("softmax, host and GPU time per call", [128, 1024, 8192],
                      host_and_gpu_time({name: variants[name] for name in pair}, work),
                      label="N", unit="us per call", xlabel="row length (4096 rows, float32)")
print_host_and_gpu(times, results, pair, work)

# %%
# Read the three pairs in turn. The host pair is our launcher's Python against
# ``torch.softmax``'s C++; the GPU pair, the fused kernel against ``torch.softmax``'s
# kernel, which is the comparison of the kernels. The sweep's time per call mixes the two:
# ``bench.sweep`` times with ``triton.testing.do_bench``, which clears the L2 cache
# before every timed call (the first line for each GPU says how long that takes at the
# copy rate), starts the clock when the clearing ends, and launches the call while the
# clearing still runs. A host time shorter than the clearing is hidden, but only as long
# as every call's host time is; where it comes within reach of the clearing, some calls
# show part of it, and how much changes from one recording to the next (the sweep keeps
# the median of three rounds for that reason). So on short rows the sweep's ratio to
# ``torch.softmax`` measures our Python as much as our kernel. A program that calls
# ``softmax`` on small tensors in a loop does wait on that Python, and only fewer
# Python steps per call, or a CUDA graph (which replays the launches without running
# Python), would close the gap. Where the GPU time is well above the host time, the
# bytes decide again.

# %%
# Takeaways
# ---------
# * Count memory trips: for memory-bound work they give a rough estimate of the speed,
#   closest where the bytes, not fixed costs, take the time.
# * On small tensors, time the host too: a launcher's Python can take longer than its
#   kernel.
# * Fuse the steps so each element is read once and written once.
# * Short rows are packed several to a program (``BLOCK_ROWS`` in ``softmax_kernel``), so
#   that each thread holds more than one element of the tile.
# * A running max and a running sum, rescaled by ``exp(m - m')``, make softmax streamable.
