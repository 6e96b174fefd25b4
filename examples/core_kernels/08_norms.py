"""
LayerNorm and RMSNorm, forward and backward
===========================================

Every transformer block normalises its activations twice, with LayerNorm or its cheaper
sibling RMSNorm. Both are memory bound: a handful of operations per element, so a good
kernel runs at the speed of a copy. The forward is a row-wise reduction like softmax.
The backward is more interesting: the gradient of the input belongs to one row, but the
gradient of the weight sums over every row, so many programs must add into the same
numbers.

You will learn:

* the backward of a normalisation, derived and checked against autograd;
* one kernel for both norms, with a ``tl.constexpr`` flag;
* how to reduce across programs without atomics: partial sums, then a second pass;
* GB/s against the bandwidth of a plain copy, next to PyTorch: the forward kernels
  alone, and the backward as a program calls it.
"""

# %%
# Setup
# -----
import torch
import torch.nn.functional as F

from triton_guide import layer_norm, layer_norm_reference, rms_norm, rms_norm_reference
from triton_guide import runtime
from triton_guide.benchmark import (SAME_BYTES_COPY, Benchmark, memory_bound_sweep,
                                    random_inputs, random_inputs_backward)
from triton_guide.norms import default_num_partials
from triton_guide.testing import assert_close, tolerance

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()  # timings: live on a GPU, else the recorded ones
print(bench.stamp())
device = runtime.device()

# %%
# The math
# --------
# For one row ``x`` of ``N`` numbers, LayerNorm computes the mean ``mu``, the
# reciprocal standard deviation ``r = 1 / sqrt(var + eps)``, the normalised row
# ``x_hat = (x - mu) * r`` and the output ``y = w * x_hat + b``. RMSNorm skips the mean
# (``mu = 0``, ``var`` becomes the mean of ``x**2``) and usually the bias.
#
# Going backwards with the incoming gradient ``dy``: ``dw`` and ``db`` are sums over the
# rows, ``dw = sum_rows(dy * x_hat)`` and ``db = sum_rows(dy)``. For the input, write
# ``g = dy * w`` (the gradient with respect to ``x_hat``). Since ``mu`` and ``r`` depend
# on every element of the row, each ``x_i`` reaches the output through them too, and the
# chain rule gives
#
# .. math:: \frac{\partial L}{\partial x} = r \left( g - \overline{g}
#    - \hat{x}\,\overline{g \hat{x}} \right)
#
# where a bar is the mean over the row. RMSNorm has no mean to differentiate, so its
# :math:`\overline{g}` term disappears. Checked against autograd in float64:

x = torch.randn(3, 10, dtype=torch.float64, requires_grad=True)
w = torch.randn(10, dtype=torch.float64)
dy = torch.randn(3, 10, dtype=torch.float64)
for name, subtract_mean in (("LayerNorm", True), ("RMSNorm", False)):
    if subtract_mean:
        y = F.layer_norm(x, (10,), w, None, 1e-5)
        centred = x - x.mean(-1, keepdim=True)
    else:
        y = F.rms_norm(x, (10,), w, 1e-5)
        centred = x
    (autograd_dx,) = torch.autograd.grad(y, x, dy)
    r = (centred.pow(2).mean(-1, keepdim=True) + 1e-5).rsqrt()
    x_hat, g = centred * r, dy * w
    correction = x_hat * (g * x_hat).mean(-1, keepdim=True)
    if subtract_mean:
        correction = correction + g.mean(-1, keepdim=True)
    formula_dx = r * (g - correction)
    difference = (formula_dx - autograd_dx).abs().max().item()
    print(f"{name}: formula vs autograd, largest difference {difference:.1e}")

# %%
# The forward kernel
# ------------------
# One program per row, the whole row in one block (``BLOCK_SIZE`` is the row length
# rounded up to a power of two). Padding lanes load 0; after the mean is subtracted they
# are set back to 0 so that they do not count in the variance. The row's mean and ``r``
# go to two small float32 vectors that the backward reads instead of recomputing them.
# ``SUBTRACT_MEAN`` and ``HAS_BIAS`` are ``tl.constexpr``: Triton compiles one variant
# per value, and the branch not taken costs nothing.
#
# .. literalinclude:: /../triton_guide/norms.py
#    :pyobject: norm_forward_kernel

# %%
# The backward: reducing across programs
# --------------------------------------
# ``dx`` is per row, like the forward. ``dw`` is a column sum over all rows, computed by
# many programs. Three ways to combine them:
#
# * ``tl.atomic_add`` into ``dw`` from every row: ``rows x N`` atomic additions on the
#   same ``N`` addresses, serialised by the memory system, and a float sum whose order
#   (so whose last bits) changes from run to run.
# * Triton's own tutorial: a few buffers of partial sums, each guarded by a lock taken
#   with ``tl.atomic_cas``; a program spins until it holds its buffer's lock, adds its
#   row, and releases it; a second pass sums the buffers. Fewer collisions, but still
#   spinning, and still an order that depends on scheduling.
# * Here: program ``p`` takes a contiguous range of rows, sums its rows' ``dy * x_hat``
#   in registers, and writes one row of partial sums; a second kernel adds the partial
#   rows. No atomics and no locks, and the same bits on every run, for the price of one
#   ``programs x N`` float32 buffer per summed gradient, however many rows ``x`` has:
#   one for RMSNorm (``dw``), two for LayerNorm with a bias (``dw`` and ``db``). They are
#   small next to ``x`` when the rows far outnumber the programs (two per SM on a GPU,
#   four under the interpreter, whose small checks make them a large share). For
#   LayerNorm with a bias, at the size checked below:

rows, hidden = runtime.pick(interpreter=(64, 1000), gpu=(16384, 4000))
programs = default_num_partials(rows)
partial_bytes = 2 * programs * hidden * 4  # two float32 buffers: dweight's and dbias's
x_bytes = rows * hidden * 4  # x in float32, as in the checks below
print(f"{rows} rows x {hidden}: {programs} programs of {-(-rows // programs)} rows; "
      f"partial sums 2 x {programs} x {hidden} float32 = {partial_bytes / 2**20:.2f} MiB "
      f"next to x in float32, {x_bytes / 2**20:.2f} MiB "
      f"({partial_bytes / x_bytes:.1%} of x)")
H100_SMS = 132  # under the interpreter, lines say what an H100 would run
if runtime.interpreting():
    # The share is 2 x programs / rows whatever the hidden size. On a GPU the line above
    # is for this GPU; here, what the same rows would cost on an H100.
    GPU_ROWS = 16384
    print(f"on an H100: {2 * H100_SMS} programs (two per SM of {H100_SMS}) for {GPU_ROWS} "
          f"rows: partial sums {2 * 2 * H100_SMS / GPU_ROWS:.1%} of x")

# %%
# .. literalinclude:: /../triton_guide/norms.py
#    :pyobject: norm_backward_kernel
#
# .. literalinclude:: /../triton_guide/norms.py
#    :pyobject: column_sums_kernel
#
# The same input gives the same weight gradient, bit for bit. The check has force only on
# a GPU, where the programs run at the same time and finish in any order. The interpreter
# runs them one after another, always in the same order, so there even atomics would
# give the same bits twice.

x = torch.randn(rows, hidden, device=device, requires_grad=True)
weight = torch.randn(hidden, device=device, requires_grad=True)
bias = torch.randn(hidden, device=device, requires_grad=True)
dy = torch.randn(rows, hidden, device=device)
first = torch.autograd.grad(layer_norm(x, weight, bias), weight, dy)[0]
second = torch.autograd.grad(layer_norm(x, weight, bias), weight, dy)[0]
print("dweight identical across two runs:", torch.equal(first, second))

# %%
# Check against PyTorch
# ---------------------
# Outputs and all gradients, in float32 and float16, against PyTorch in float64; the
# hidden size (printed above) is not a power of two, so the padding lanes are exercised.
# bfloat16, the dtype benchmarked below, is not checked on this page: the interpreter has
# no bfloat16 arithmetic. ``tests/test_norms.py`` checks it on a GPU, outputs and
# gradients alike.


def outputs_and_grads(norm, fn, x, weight, bias, dy):
    inputs = [t.detach().clone().requires_grad_() for t in (x, weight, bias)]
    if norm == "rms_norm":
        inputs = inputs[:2]
        y = fn(*inputs, 1e-6)
    else:
        y = fn(*inputs, 1e-5)
    return (y, *torch.autograd.grad(y, inputs, dy.to(y.dtype)))


functions = {"layer_norm": (layer_norm, layer_norm_reference),
             "rms_norm": (rms_norm, rms_norm_reference)}
for dtype in (torch.float32, torch.float16):
    tensors = [t.detach().to(dtype) for t in (x, weight, bias)]
    for norm, (ours, reference) in functions.items():
        got = outputs_and_grads(norm, ours, *tensors, dy)
        want = outputs_and_grads(norm, reference, *(t.double() for t in tensors), dy)
        errors = [assert_close(a, b, rtol=tolerance(dtype), atol=1e-6)
                  for a, b in zip(got, want)]
        names = ["y", "dx", "dweight", "dbias"][:len(errors)]
        print(f"{norm:<10} {str(dtype):<13} relative errors: " + ", ".join(
            f"{name} {error:.1e}" for name, error in zip(names, errors)))

# %%
# Bandwidth
# ---------
# 4096 rows of bfloat16, hidden size from 1024 to 16384. The forward must read ``x`` and
# write ``y`` (2 bytes each per element); the backward must read ``x`` and ``dy`` and
# write ``dx``. GB/s counts those bytes for every variant, and leaves out the weight, the
# statistics and our backward's float32 partial sums, whose share (next line) grows with
# the programs against the rows. Beside the 1 GiB copy ceiling (the wide pale line), one
# more variant is a copy of the same bytes as the norm at each size: a yardstick at
# small sizes, where fixed costs weigh more and even a copy falls short of the ceiling. It
# is PyTorch's copy kernel, not a bound: a kernel can beat it where its own launch fits
# the size better. How the site times: :doc:`/measuring`.

ROWS, hiddens = 4096, [1024, 2048, 4096, 8192, 16384]
TRIPS = {"forward": 2, "backward": 3}  # passes over x's size: x, y; x, dy, dx
bench_programs = 2 * H100_SMS if runtime.interpreting() else default_num_partials(ROWS)
share = 2 * bench_programs * 4 / (TRIPS["backward"] * ROWS * 2)  # per float32 buffer
print(f"backward, {ROWS} rows, {bench_programs} programs"
      + (" (on an H100)" if runtime.interpreting() else "") + f": partial sums add "
      f"{share:.1%} to the bytes counted for rms_norm, {2 * share:.1%} for layer_norm")

# %%
# The calls to time, given a hidden size, each on fresh bfloat16 inputs: the forward
# (``random_inputs``), or the backward through ``torch.autograd.grad`` as training runs it
# (``random_inputs_backward``); and a copy of the same bytes. One sweep of them, in a
# direction, timed as called or on the GPU alone (``memory_bound_sweep``: GB/s under the
# copy ceiling, beside the copy):
row, vector = (lambda hidden: (ROWS, hidden)), (lambda hidden: (hidden,))
norms = {"layer_norm": (layer_norm, [row, vector, vector]),
         "torch layer_norm": (lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b),
                              [row, vector, vector]),
         "rms_norm": (lambda x, w: rms_norm(x, w, 1e-6), [row, vector]),
         "torch rms_norm": (lambda x, w: F.rms_norm(x, x.shape[-1:], w, 1e-6), [row, vector])}


def sweep(direction, on_inputs, gpu_time=False):
    def work(hidden):  # the bytes GB/s counts in one call: TRIPS passes over x's size
        return TRIPS[direction] * ROWS * hidden * 2
    variants = {name: on_inputs(fn, *shapes, dtype=torch.bfloat16)
                for name, (fn, shapes) in norms.items()}
    return memory_bound_sweep(
        bench, f"LayerNorm and RMSNorm, {direction}" + (", GPU time" if gpu_time else ""),
        hiddens, variants, work, label="hidden", xlabel=f"hidden size ({ROWS} rows, bfloat16)",
        copy_dtype=torch.bfloat16, gpu_time=gpu_time), work

# %%
# The forward kernels alone
# -------------------------
# The forward timed on the GPU alone (``gpu_time=True``): each variant's calls, on copies
# of the inputs that together overrun the L2 cache, are replayed from a CUDA graph, so
# that no kernel waits for Python. RMSNorm's kernel against torch's at the largest size,
# and the range below it (LayerNorm runs the same kernel with one flag more: its numbers
# are in the table and the plot):

alone, work = sweep("forward", random_inputs, gpu_time=True)
alone.plot()
alone.compare("rms_norm", "torch rms_norm", work=work)

# %%
# The backward
# ------------
# The backward runs inside autograd, which a CUDA graph does not replay, so it is timed
# as a program calls it (``do_bench``, host included), against torch's and a copy of its
# bytes; then each call's time per size, RMSNorm's with torch's and the copy's, with its
# growth from the smallest size to the largest against the bytes:

backward, work = sweep("backward", random_inputs_backward)
backward.plot()
backward.compare("rms_norm", "torch rms_norm", work=work)
backward.per_call(["rms_norm", "torch rms_norm", SAME_BYTES_COPY], work=work)

# %%
# A call whose time grows far less than the bytes it moves (the copy's grows with them)
# is set by a cost per call, not by its kernel: there a ratio below 1 says that our call
# costs more, not that our kernel reads slower. Every call runs Python before its kernels
# are queued: argument checks, the autograd wrapper, the launches. ``do_bench`` hides host
# time shorter than the cache clearing it runs before each call; what shows is the host
# time beyond it.
#
# So read the growth line before the ratios: where our backward's time grows with the
# bytes, its ratio to the copy is the kernel's; where it grows far less than the 16x of
# the bytes, the call's fixed cost sets the time, and the ratio is a floor for the
# kernel, not its measure. This page
# does not time the backward kernel alone: the CUDA graph that would leave the host out
# cannot hold autograd's calls.

# %%
# Takeaways
# ---------
# * LayerNorm and RMSNorm differ by one subtraction; one kernel with a ``tl.constexpr``
#   flag serves both.
# * Save the row statistics in the forward: the backward needs them and they cost
#   4 bytes per row (RMSNorm's ``rstd``) or 8 (LayerNorm's mean too).
# * A sum across programs does not need atomics: let each program own a range of rows,
#   write its partial sum, and add the partials in a second, small pass. It is
#   deterministic, which atomics are not.
# * Measure a memory-bound kernel against a copy of the same bytes. Read a call's ratio
#   as the kernel's only where the call's time grows with the bytes (the growth lines);
#   where a fixed cost per call sets it, a faster kernel would not help, and the kernel
#   alone, replayed from a CUDA graph on cold copies of its inputs, is what to compare.
#
# Used here: :func:`triton_guide.layer_norm`, :func:`triton_guide.rms_norm`,
# :func:`triton_guide.layer_norm_reference`, :func:`triton_guide.rms_norm_reference`,
# :func:`triton_guide.testing.assert_close`,
# :class:`triton_guide.benchmark.Benchmark`,
# :func:`triton_guide.benchmark.memory_bound_sweep`.
