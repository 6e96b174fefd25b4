"""
Reductions across programs: two stages or atomics
=================================================

A program can sum the block it holds with one ``tl.sum``; a long vector is many blocks,
spread over many programs that cannot see each other's registers. Their partial sums
have to meet somewhere, and there are two common places: a second kernel, or one memory
cell that every program adds into with an atomic.
This page builds both, checks them against a float64 sum, and measures what each costs:
in reproducibility, because float32 addition depends on order, and in time, next to
``torch.sum`` (on a GPU: live when this build ran on one, otherwise the recordings in
``triton_guide/_results/``, each labelled with its GPU, versions and date).

You will learn:

* the two-stage reduction: a partial sum per program, then one program adds the
  partials;
* ``tl.atomic_add``: one launch, every program adds into the same cell;
* why float32 sums change with the order of the additions, with numbers, and which of
  the two methods gives the same bits every run;
* how fast each is against ``torch.sum``.
"""

# %%
import functools

import numpy as np
import torch
import triton

from triton_guide import runtime, vector_sum, vector_sum_reference
from triton_guide.benchmark import (Benchmark, distinct_results, gb_per_s,
                                    print_where_time_follows_work, random_inputs)
from triton_guide.reduction import MAX_PARTIALS, partial_sums_kernel
from triton_guide.testing import assert_close

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()  # timings: live on a GPU, else the recorded ones
print(bench.stamp())
device = runtime.device()

# %%
# One block is not enough
# -----------------------
# With 1024 elements per block, a vector of ``n`` elements is ``cdiv(n, 1024)`` blocks.
# We launch at most ``MAX_PARTIALS`` programs; when there are more blocks than that,
# each program walks through several of them, striding by the whole grid so that at
# every step the programs together read one unbroken stretch of memory.

n = runtime.pick(interpreter=100_003, gpu=2**26 + 3)  # gpu_n below
block_size = 1024
blocks = triton.cdiv(n, block_size)
num_programs = min(blocks, MAX_PARTIALS)
print(f"n = {n:,} float32 elements = {n * 4 / 1e6:,.1f} MB; {blocks:,} blocks of "
      f"{block_size}")
print(f"{num_programs} programs, each summing at most "
      f"{triton.cdiv(blocks, num_programs)} block(s)")
gpu_n = 2**26 + 3  # the size this page uses on a GPU, where programs stride
gpu_blocks = triton.cdiv(gpu_n, block_size)
print(f"on a GPU: n = {gpu_n:,}, {gpu_blocks:,} blocks, MAX_PARTIALS = {MAX_PARTIALS} "
      f"programs, each summing up to {triton.cdiv(gpu_blocks, MAX_PARTIALS)} blocks")

# %%
# Stage 1: a partial sum per program
# ----------------------------------
# Each program keeps one running float32 sum per lane while it walks its blocks, and
# adds the lanes together once at the end. Loads past the end read 0, which changes no
# sum.
#
# .. literalinclude:: /../triton_guide/reduction.py
#    :pyobject: program_sum
#
# The first kernel stores that sum in the program's own cell of a ``partials`` buffer.
# No two programs write the same cell, so nothing can go wrong between them:
#
# .. literalinclude:: /../triton_guide/reduction.py
#    :pyobject: partial_sums_kernel
#
# Stage 2: one program adds the partials
# --------------------------------------
# The partials are few (at most ``MAX_PARTIALS``), so one program loads them all as one
# block and sums them, in the same order every time:
#
# .. literalinclude:: /../triton_guide/reduction.py
#    :pyobject: sum_partials_kernel
#
# The second launch costs little memory traffic, next to the first:

print(f"stage 1 reads {n * 4:,} bytes; stage 2 reads {num_programs * 4:,} bytes "
      f"({100 * num_programs / n:.2g}% of stage 1)")

# %%
# One stage with an atomic
# ------------------------
# Instead of a buffer and a second launch, every program can add its sum straight into
# one float32 cell. A plain load-add-store would race: two programs read the same old
# value and one of the two additions is lost (the
# :ref:`common mistakes <sphx_glr_auto_examples_debugging_02_common_mistakes.py>` page
# explains how, step by step). ``tl.atomic_add`` makes each read-modify-write indivisible:
#
# .. literalinclude:: /../triton_guide/reduction.py
#    :pyobject: atomic_sum_kernel
#
# The launcher ends with one branch per method. The two-stage sum allocates the
# ``partials`` buffer and an output cell that it leaves unset, since its second launch
# writes it. The atomic sum zeroes its output cell, since every program adds into it.
# Both return the float32 result cast to the input's dtype, as a 0-d tensor, like
# ``torch.sum``:
#
# .. literalinclude:: /../triton_guide/reduction.py
#    :pyobject: vector_sum
#    :start-at: if method == "two_stage":
#    :dedent: 4

# %%
# Check against a float64 sum
# ---------------------------
# The reference is the float64 sum. The sum of ``n`` random-sign numbers is typically of
# size ``||x||_2`` (and can land near zero), so the error is measured against that
# scale.

x = torch.randn(n, device=device)
exact = vector_sum_reference(x.double())
scale = x.double().norm().item()
print(f"float64 sum = {exact.item():.6f}; ||x||_2 = {scale:.1f}")
for method in ("two_stage", "atomic"):
    for dtype in (torch.float32, torch.float16):
        values = x.to(dtype)
        got = vector_sum(values, method=method)
        exact_of_values = vector_sum_reference(values.double())
        assert_close(got, exact_of_values, rtol=1e-2, atol=1e-2 * scale)
        error = abs(got.double().item() - exact_of_values.item()) / scale
        print(f"{method:<9} {str(dtype):<13}: {got.item():14.6f}, "
              f"error / ||x||_2 = {error:.1e}")
error = abs(x.sum().double().item() - exact.item()) / scale
print(f"torch.sum float32    : {x.sum().item():14.6f}, error / ||x||_2 = {error:.1e}")

# %%
# The float16 rows are off by far more than the float32 ones, but not because of the
# adding. ``vector_sum`` adds in float32 and then returns the sum in the input's dtype
# (``out.to(x.dtype)``), and float16 can only hold numbers a coarse step apart at the
# size of this sum. The same float16 values, converted to float32 first, go through the
# same float32 additions in the kernel and skip only that last rounding:

values = x.half()
exact_of_values = vector_sum_reference(values.double())
for method in ("two_stage", "atomic"):
    kept = vector_sum(values.float(), method=method)  # the float32 sum, before the cast
    error = abs(kept.item() - exact_of_values.item()) / scale
    print(f"{method:<9} float16 values, result kept in float32: {kept.item():14.6f}, "
          f"error / ||x||_2 = {error:.1e}")
step = float(np.spacing(np.float16(abs(exact_of_values.item()))))
print(f"float16 numbers near {exact_of_values.item():.1f} are {step} apart: rounding "
      f"the sum to the nearest costs up to half that, {step / 2 / scale:.1e} x ||x||_2")

# %%
# Both kernels read float16 values but add them in float32 (``x.to(tl.float32)`` in
# ``program_sum``). Here is why, on the first values of the same vector added one after
# the other on the CPU: float16 keeps 11 significant bits, so once the running total is
# large, each new value is rounded to the total's coarse steps, or lost.

head = x[: 2**16].half().cpu().numpy()
exact_head = head.astype(np.float64).sum()
head_scale = np.linalg.norm(head.astype(np.float64))
for accumulator in (np.float16, np.float32):
    total = np.add.accumulate(head, dtype=accumulator)[-1]
    print(f"{len(head):,} float16 values added in {np.dtype(accumulator).name}: "
          f"error / ||x||_2 = {abs(float(total) - exact_head) / head_scale:.1e}")

# %%
# By default there are as many programs as blocks (up to ``MAX_PARTIALS``), so each
# program's loop may run once. With fewer programs each walks several blocks, a whole
# launch's width apart:

few = 7
blocks = triton.cdiv(n, 1024)
for method in ("two_stage", "atomic"):
    got = vector_sum(x, method=method, num_programs=few)
    assert_close(got, exact, rtol=1e-2, atol=1e-2 * scale)
    error = abs(got.double().item() - exact.item()) / scale
    print(f"{method:<9} with {few} programs for {blocks:,} blocks of 1024 (up to "
          f"{triton.cdiv(blocks, few):,} each): error / ||x||_2 = {error:.1e}")

# %%
# Float32 addition depends on the order
# -------------------------------------
# Real-number addition is associative; float32 addition is not, because every addition
# rounds to 24 significant bits. The smallest example: above ``2**24`` float32 cannot
# hold every integer, so adding 1 can vanish:

big = torch.tensor(2.0**24)
print(f"(2**24 + 1) - 2**24 = {((big + 1) - big).item()}   "
      f"(2**24 - 2**24) + 1 = {((big - big) + 1).item()}")

# %%
# The same happens, less visibly, in every long sum. Below, the same float32 numbers are
# added one at a time in different orders (``np.add.accumulate`` adds strictly left to
# right), next to our two kernels and ``torch.sum``. Every line is a correct float32
# sum of the same values; they differ only in order.

values = x.cpu().numpy()
orders = {
    "left to right": values,
    "smallest magnitude first": values[np.argsort(np.abs(values))],
    "largest magnitude first": values[np.argsort(-np.abs(values))],
    "shuffled": values[np.random.default_rng(0).permutation(n)],
}
sums = {name: float(np.add.accumulate(v)[-1]) for name, v in orders.items()}
sums["two-stage kernel"] = vector_sum(x, method="two_stage").item()
sums["atomic kernel"] = vector_sum(x, method="atomic").item()
sums["torch.sum"] = x.sum().item()
for name, total in sums.items():
    print(f"{name:<25} {total:16.8f}   off the float64 sum by "
          f"{total - exact.item():+.2e}")
print(f"{len(set(sums.values()))} different results from {len(sums)} orders of the "
      "same numbers")
ratio = abs(sums["left to right"] - exact.item()) / abs(
    sums["two-stage kernel"] - exact.item()
)
print(f"left to right is {ratio:,.0f}x further from the float64 sum than the "
      "two-stage kernel")

# %%
# Adding one number at a time is the least accurate way: after a few thousand terms the
# running total is large, and each small number added to it loses its low bits. Blocked
# sums (per lane, per program, then across programs) add numbers of similar size at
# every level, which is why both kernels and ``torch.sum`` land closer.

# %%
# Run to run: which method gives the same bits?
# ---------------------------------------------
# The two-stage kernel fixes the order of every addition: the same input gives the same
# bits on every run. The atomic kernel adds the partial sums in whatever order the
# programs reach the cell, which on a GPU can change from run to run. The interpreter
# runs programs one after another, always in the same order, so there it cannot show
# this. Below, first repeated runs in this build, on the vector above (its ``n`` is
# printed at the top of the page and on each line); then the same count on GPUs (live on
# one, else recorded), at the size the table prints:

runs = runtime.pick(interpreter=5, gpu=20)
two_stage = torch.stack([vector_sum(x, method="two_stage") for _ in range(runs)])
atomic = torch.stack([vector_sum(x, method="atomic") for _ in range(runs)])
for name, repeated in (("two-stage", two_stage), ("atomic", atomic)):
    distinct = repeated.unique()
    spread = (distinct.max() - distinct.min()).item()
    print(f"this build, n = {n:,}, {name:<9}: {len(distinct)} distinct result(s) in "
          f"{runs} runs, spread {spread:.2e}")

# %%
# On GPUs, 20 runs of each kernel on one large vector of random values, counting the
# distinct results (``distinct_results``; ``random_inputs`` makes a call on fresh random
# inputs of the shape given for each size):

repeats = 20
methods = {method: random_inputs(functools.partial(vector_sum, method=method), lambda n: (n,))
           for method in ("two_stage", "atomic")}
repeatability = bench.measure(
    "run to run", [2**26 + 3],
    {method: distinct_results(call, repeats) for method, call in methods.items()}, label="n",
    unit=f"distinct results in {repeats} runs", xlabel="elements (float32)")

# %%
# A CPU build can still replay what a GPU does: take the programs' partial sums (stage
# 1) and add them in random orders, as the atomics would.

partials = torch.empty(num_programs, dtype=torch.float32, device=device)
partial_sums_kernel[(num_programs,)](x, partials, n, BLOCK_SIZE=block_size)
partial_values = partials.cpu().numpy()
generator = np.random.default_rng(1)
orderings = 20
replayed = {
    float(np.add.accumulate(partial_values[generator.permutation(num_programs)])[-1])
    for _ in range(orderings)
}
spread = max(replayed) - min(replayed)
total = float(np.float32(max(replayed, key=abs)))
step = float(np.spacing(np.float32(abs(total))))  # one float32 step (ulp) at the sum's size
default_tolerance = 1e-5 + 1.3e-6 * abs(total)  # assert_close's float32 atol + rtol * |sum|
print(f"{num_programs} partial sums added in {orderings} random orders "
      "(as atomics do): "
      f"{len(replayed)} distinct results, spread {spread:.2e}: {spread / step:.0f} float32 "
      f"steps at a sum of {total:.1f}, {spread / default_tolerance:.2f}x "
      "torch.testing.assert_close's default float32 tolerance there")

# %%
# How far apart the results are depends on the values and on how many partial sums
# there are; the line above puts it in float32 steps at the size of the sum, and
# against the tolerance a test with torch's defaults would allow. Whatever its size, a
# training run that must repeat bit for bit, or a test that compares two runs for
# equality, needs the two-stage kernel (PyTorch's ``torch.use_deterministic_algorithms``
# exists for the same reason).

# %%
# Speed against torch.sum
# -----------------------
# A sum reads each element once and does one addition, so it is bound by memory
# bandwidth: GB/s counts the 4 bytes read per element. The ceiling (the wide pale line)
# is a device-to-device copy of 1 GiB, measured in the same run. Its GB/s counts the
# bytes the copy reads plus the bytes it writes: it is a rate of memory traffic in both
# directions, here set against a sum that only reads.
#
# How the site times these calls, and what a recording holds: :doc:`/measuring`.

sizes = [2**k for k in range(16, 29, 2)]
methods["torch.sum"] = random_inputs(torch.sum, lambda n: (n,))
results = bench.sweep("sum of a vector", sizes, methods,
                      lambda size, ms: gb_per_s(4 * size, ms), label="n", unit="GB/s",
                      ceiling="copy", xlabel="elements (float32)")
results.plot()
results.summary(ratios=[("two_stage", "torch.sum"), ("atomic", "torch.sum")])

# %%
# The same readings as times per call, how much each grew from the smallest size to the
# largest, and where each call's time first reaches twice its time at the smallest size
# (leaving out readings that a larger size beat: the run's, not the kernel's):

results.per_call(list(methods), work=lambda size: 4 * size)
print_where_time_follows_work(results, methods, work=lambda size: 4 * size)

# %%
# The plot's GB/s axis is logarithmic where the rates span a hundredfold or more, as a
# sum's do from a quarter of a MiB to 1 GiB; the times per call printed above give the
# small sizes exactly.
#
# At the smallest size the vector is a quarter of a MiB, which the GPU reads in far less
# time than the calls above take, so fixed costs set the time there more than reading
# does. Each call of the launcher shown above makes two launches from Python on the
# host: the atomic sum zeroes its output cell with torch, then launches its Triton
# kernel; the two-stage sum launches two Triton kernels. Below the size where a call's
# time first doubles, a call costs about the same whatever it reads, and the ratios
# there compare fixed costs (the host's and the launches'), not reading speeds; those
# costs differ between machines far more than the kernels do. Only above it do the three
# compare as sums.
#
# These times do not say what the host spends on a launch. The timer (``do_bench``,
# through ``median_ms``) clears the L2 cache with a kernel before every timed call and
# starts the clock when that kernel ends, and the host starts launching the call while
# it still runs: host time shorter than the cache clearing does not show, only what goes
# beyond it. So the two-stage sum's time beyond the atomic one's cannot be read as the
# cost of its second launch; this page does not time the host apart.

# %%
# Takeaways
# ---------
# * To reduce across programs, give each program its own output cell and add the cells
#   in a second, small launch; or add into one cell with ``tl.atomic_add``.
# * Never combine programs with a plain load and store to one address: that is a race.
# * Float32 sums depend on the order of the additions. The two-stage kernel fixes the
#   order and repeats bit for bit; atomics need not, on a GPU.
# * Accumulate in float32 even for float16 input.
#
# Used here: :func:`triton_guide.vector_sum`, :func:`triton_guide.vector_sum_reference`,
# :func:`triton_guide.testing.assert_close`, :class:`triton_guide.benchmark.Benchmark`.
