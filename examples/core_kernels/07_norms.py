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
* GB/s against the bandwidth of a plain copy, next to PyTorch.
"""

# %%
# Setup
# -----
import torch
import torch.nn.functional as F

from triton_guide import layer_norm, layer_norm_reference, rms_norm, rms_norm_reference
from triton_guide import runtime
from triton_guide.benchmark import Benchmark, gb_per_s, us_per_call
from triton_guide.norms import default_num_partials
from triton_guide.testing import assert_close, tolerance

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()  # timings: live on a GPU, else the recordings in results/
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
# ``overline{g}`` term disappears. Checked against autograd in float64:

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
#   rows. No atomics and no locks, and the same bits on every run, for the price of a
#   ``programs x N`` float32 buffer, however many rows ``x`` has: small next to ``x``
#   when the rows far outnumber the programs (two per SM on a GPU, four under the
#   interpreter):

rows, hidden = runtime.pick(interpreter=(64, 1000), gpu=(16384, 4096))
programs = default_num_partials(rows)
print(f"{rows} rows x {hidden}: {programs} programs of {-(-rows // programs)} rows; "
      f"partial sums {programs * hidden * 4 / 2**20:.2f} MiB next to "
      f"x in bfloat16, {rows * hidden * 2 / 2**20:.1f} MiB "
      f"({programs * hidden * 4 / (rows * hidden * 2):.0%} of x)")

# %%
# .. literalinclude:: /../triton_guide/norms.py
#    :pyobject: norm_backward_kernel
#
# .. literalinclude:: /../triton_guide/norms.py
#    :pyobject: sum_partials_kernel
#
# The same input gives the same weight gradient, bit for bit:

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
# hidden size is not a power of two.


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
# write ``dx`` (the weight, the statistics and the partial sums are small). GB/s counts
# those bytes for every variant. Two ceilings, both timed in the same run: a
# device-to-device copy of 1 GiB (the wide pale line, as on every page) and, as one
# more variant, a copy that moves the same number of bytes as the norm at each size:
# the fairer roof at small sizes, where fixed costs weigh more.

ROWS = 4096
hiddens = [1024, 2048, 4096, 8192, 16384]


def inputs(hidden):
    x = torch.randn(ROWS, hidden, device=device, dtype=torch.bfloat16)
    weight = torch.randn(hidden, device=device, dtype=torch.bfloat16)
    bias = torch.randn(hidden, device=device, dtype=torch.bfloat16)
    return [t.requires_grad_() for t in (x, weight, bias)]


def copy_of(trips):
    # A copy of trips / 2 times x's size reads and writes trips times x's size in all.
    def prepare(hidden):
        source = torch.randn(ROWS * hidden * trips // 2, device=device,
                             dtype=torch.bfloat16)
        target = torch.empty_like(source)
        return lambda: target.copy_(source)
    return prepare


def forward(fn, with_bias):
    def prepare(hidden):
        x, weight, bias = inputs(hidden)
        args = (x, weight, bias) if with_bias else (x, weight)
        return lambda: fn(*args)
    return prepare


def backward(fn, with_bias):
    def prepare(hidden):
        x, weight, bias = inputs(hidden)
        args = (x, weight, bias) if with_bias else (x, weight)
        y = fn(*args)
        dy = torch.randn_like(y)
        return lambda: torch.autograd.grad(y, args, dy, retain_graph=True)
    return prepare


def torch_layer_norm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias)


def torch_rms_norm(x, weight):
    return F.rms_norm(x, (x.shape[-1],), weight, 1e-6)


COPY = "copy, same bytes"


def benchmark(direction, make, trips):
    """One sweep, drawn and tabulated; trips: passes over x the op must make."""
    results = bench.sweep(
        f"LayerNorm and RMSNorm, {direction}",
        hiddens,
        {
            "layer_norm": make(layer_norm, True),
            "torch layer_norm": make(torch_layer_norm, True),
            "rms_norm": make(lambda x, w: rms_norm(x, w, 1e-6), False),
            "torch rms_norm": make(torch_rms_norm, False),
            COPY: copy_of(trips),
        },
        lambda hidden, ms: gb_per_s(trips * ROWS * hidden * 2, ms),
        label="hidden",
        unit="GB/s",
        ceiling="copy",
        xlabel=f"hidden size ({ROWS} rows, bfloat16)",
    )
    results.plot()
    results.summary(ratios=[("layer_norm", "torch layer_norm"),
                            ("rms_norm", "torch rms_norm")])
    for run in results:
        if 4096 in run.xs:
            i = run.xs.index(4096)
            print(f"{run.gpu}, {direction} at hidden 4096: " + ", ".join(
                f"{name} {values[i] / run[COPY][i]:.0%} of the same-bytes copy"
                for name, values in run.series.items() if name != COPY))
        per_size = "; ".join(
            f"{x}: rms {run['rms_norm'][i] / run['torch rms_norm'][i]:.2f}x, "
            f"layer {run['layer_norm'][i] / run['torch layer_norm'][i]:.2f}x"
            for i, x in enumerate(run.xs))
        print(f"{run.gpu}, {direction}, ours / torch by hidden size: {per_size}")
        for ours in ("rms_norm", "layer_norm"):
            level = [x for x, mine, theirs in zip(run.xs, run[ours], run[f"torch {ours}"])
                     if mine >= theirs]
            print(f"{run.gpu}, {direction}, {ours} at least as fast as torch at hidden: "
                  + (", ".join(map(str, level)) if level else "no size measured"))
        times = []
        for i, x in enumerate(run.xs):
            nbytes = trips * ROWS * x * 2
            times.append(f"{x}: " + " / ".join(
                f"{us_per_call(nbytes, run[name][i]):.0f}"
                for name in ("rms_norm", "torch rms_norm", COPY)))
        print(f"{run.gpu}, {direction}, microseconds per call, rms_norm / torch rms_norm / "
              f"copy, by hidden size: {'; '.join(times)}")


# %%
# Forward:

benchmark("forward", forward, trips=2)

# %%
# Backward:

benchmark("backward", backward, trips=3)

# %%
# Read the ratios by size next to the times per call printed last. At the small sizes
# the copy of the same bytes takes microseconds, while our calls take far longer and
# about as long at one size as at the next: that is what a call bound by the host looks
# like. Every call of ``rms_norm`` runs Python before its kernel is queued (argument
# checks, the autograd wrapper, the launch; the backward launches two kernels, three
# with a bias), and meanwhile the GPU waits. These sweeps time one call as a program
# makes it, so that host time is in every number above; the matmul page shows how to
# time the GPU alone. The lines "at least as fast as torch at hidden" say, for each op
# and GPU, where ours draws level with torch; where they say no size, torch is ahead
# everywhere measured.
#
# At the largest sizes, read the times per call the same way. Where ours has grown well
# past the small sizes' time, the GPU's work dominates and the ratio is the kernel's;
# where it has not (compare the GPUs: the faster one spends less time on the same bytes,
# so the host can still set its pace), the number says little about the kernel. Where
# the GPU's work does dominate, the backward reaches less of the copy than the forward.
# A likely reason, not measured on this page: each program of the backward walks its
# share of rows one at a time, and each row's sums across the row (one for RMSNorm, two
# for LayerNorm) must finish before its ``dx`` can be written, so few bytes are in flight
# on each SM. Giving every program several rows per step is the change to try; it has
# not been made yet.

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
# * Measure a memory-bound kernel against a copy of the same bytes: that is the ceiling.
#
# Used here: :func:`triton_guide.layer_norm`, :func:`triton_guide.rms_norm`,
# :func:`triton_guide.layer_norm_reference`, :func:`triton_guide.rms_norm_reference`,
# :func:`triton_guide.testing.assert_close`,
# :class:`triton_guide.benchmark.Benchmark`.
