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
* GB/s against the bandwidth of a plain copy, next to PyTorch, per call and for the
  kernel alone.
"""

# %%
# Setup
# -----
import torch
import torch.nn.functional as F

from triton_guide import layer_norm, layer_norm_reference, rms_norm, rms_norm_reference
from triton_guide import runtime
from triton_guide.benchmark import (DO_BENCH_CLEARING_BYTES, Benchmark, copies_for_cold_cache,
                                    gb_per_s, us_per_call)
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
# write ``dx``. GB/s counts those bytes for every variant, and leaves out the rest: the
# weight, the statistics and our backward's float32 partial sums (their share, printed
# below, grows with the number of programs against the rows, whatever the hidden size).
# Two ceilings, both timed in the same run: a device-to-device copy of 1 GiB (the wide
# pale line, as on every page) and, as one more variant, a copy that moves the same
# number of bytes as the norm at each size: the fairer roof at small sizes, where fixed
# costs weigh more.
#
# How the site times these calls, and what a recording holds: :doc:`/measuring`.

ROWS = 4096
hiddens = [1024, 2048, 4096, 8192, 16384]
# Programs of the backward: this GPU's, or (under the interpreter) an H100's.
bench_programs = (2 * H100_SMS if runtime.interpreting()
                  else default_num_partials(ROWS))
# Each buffer of partial sums is written once and read once, in float32, against the
# three bfloat16 passes over x that the backward's GB/s counts.
for name, buffers in (("rms_norm", 1), ("layer_norm with a bias", 2)):
    share = 2 * bench_programs * 4 * buffers / (3 * ROWS * 2)
    print(f"{name} backward, {ROWS} rows, {bench_programs} programs"
          + (" (on an H100)" if runtime.interpreting() else "")
          + f": partial sums add {share:.1%} to the bytes counted")

# %%
# The calls to time, each on fresh inputs for a hidden size: a copy of the same bytes,
# and the forward.


def inputs(hidden, grad=True):
    x = torch.randn(ROWS, hidden, device=device, dtype=torch.bfloat16)
    weight = torch.randn(hidden, device=device, dtype=torch.bfloat16)
    bias = torch.randn(hidden, device=device, dtype=torch.bfloat16)
    return [t.requires_grad_(grad) for t in (x, weight, bias)]


def copy_of(trips):
    # A copy of trips / 2 times x's size reads and writes trips times x's size in all.
    def prepare(hidden):
        source = torch.randn(ROWS * hidden * trips // 2, device=device,
                             dtype=torch.bfloat16)
        target = torch.empty_like(source)
        return lambda: target.copy_(source)
    return prepare


def forward(fn, with_bias, grad=True):
    def prepare(hidden):
        x, weight, bias = inputs(hidden, grad)
        args = (x, weight, bias) if with_bias else (x, weight)
        return lambda: fn(*args)
    return prepare

# %%
# The backward, through autograd as training runs it, and PyTorch's two norms:


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


# %%
# One sweep per direction, drawn, tabulated and compared with torch:

COPY = "copy, same bytes"
# Passes over x's size: read x, write y; read x and dy, write dx.
TRIPS = {"forward": 2, "backward": 3}


def benchmark(direction, make, trips):
    """One sweep, drawn and tabulated; trips: passes over x the op must make."""
    def work(hidden):  # the bytes GB/s counts in one call
        return trips * ROWS * hidden * 2

    variants = {"layer_norm": make(layer_norm, True),
                "torch layer_norm": make(torch_layer_norm, True),
                "rms_norm": make(lambda x, w: rms_norm(x, w, 1e-6), False),
                "torch rms_norm": make(torch_rms_norm, False), COPY: copy_of(trips)}
    results = bench.sweep(f"LayerNorm and RMSNorm, {direction}", hiddens, variants,
                          lambda hidden, ms: gb_per_s(work(hidden), ms), label="hidden",
                          unit="GB/s", ceiling="copy",
                          xlabel=f"hidden size ({ROWS} rows, bfloat16)")
    results.plot()
    results.summary(ratios=[("layer_norm", "torch layer_norm"),
                            ("rms_norm", "torch rms_norm")])
    for ours in ("rms_norm", "layer_norm"):
        results.compare(ours, f"torch {ours}", work=work)
    results.per_call(["rms_norm", "torch rms_norm", COPY], work=work)
    return results


# %%
# Forward:

forward_results = benchmark("forward", forward, trips=TRIPS["forward"])

# %%
# Backward:

backward_results = benchmark("backward", backward, trips=TRIPS["backward"])

# %%
# Read the ratios ("at smaller hidden": the range of ours over torch below the largest
# size) next to the "us per call" line (RMSNorm's, with torch's and the copy's), and the
# growth line under it. A call whose time grows far
# less than the bytes it moves (the copy's grows with them) is set by a cost per call,
# not by its kernel's reading: where ours
# grows little, "ours / torch" at those sizes compares fixed costs, not kernels, and
# a ratio below 1 there says that our call costs more, not that our kernel reads
# slower. Part of that cost may be the host's. Every call of
# ``rms_norm`` runs Python before its kernel is queued (argument checks, the autograd
# wrapper, the launch; the backward launches two kernels, three for ``layer_norm`` with
# a bias). These sweeps time one call as a program makes it, with
# ``triton.testing.do_bench``, but host time shorter than a cache clearing does not show:
# ``do_bench`` clears the L2 cache with a kernel before every timed call and starts the
# clock when that kernel ends, and the call is launched while it still runs. Only host
# time beyond the clearing shows, and, between the kernels of one call, Python that
# outlasts the GPU's work. The section "The forward kernels alone", further down, times
# the forward with the host left out. The
# lines "at smaller hidden" show, for each op and GPU, how far ours is from torch below
# the largest size, readings out of line left out.
#
# Which ratios are the kernel's
# -----------------------------
# At the largest size, a ratio to the copy says something about the kernel only where the
# GPU's work, not the fixed cost, sets the call's time. The test used here: the call's
# time at the largest size must be at least ``PAST`` times its longest time at the two
# smallest sizes, which move far fewer bytes. For each GPU at the largest size, each
# variant's rate as a fraction of the same-bytes copy, forward and backward, with its
# time over the small sizes' in brackets:

SMALL = hiddens[:2]  # the small sizes
PAST = 2  # "grown past the small sizes": at least this many times their longest time


def fraction_and_growth(run, name, trips):
    """name's rate over the same-bytes copy's at the largest size, and its time per call
    there over its longest time per call at the SMALL sizes."""
    micros = [us_per_call(trips * ROWS * x * 2, rate) for x, rate in zip(run.xs, run[name])]
    small = max(t for x, t in zip(run.xs, micros) if x in SMALL)
    return run.at_largest(name) / run.at_largest(COPY), micros[run.largest] / small

# %%
# Forward and backward side by side, for each GPU:

for runs in zip(forward_results, backward_results):
    gpu, largest = runs[0].gpu, runs[0].xs[runs[0].largest]
    print(f"{gpu} at hidden {largest}: rate / same-bytes copy rate (time / longest time "
          f"at hidden {' and '.join(map(str, SMALL))})")
    grown = []
    for name in runs[0].series:
        if name == COPY:
            continue
        cells = []
        for direction, run in zip(TRIPS, runs):
            fraction, growth = fraction_and_growth(run, name, TRIPS[direction])
            cells.append(f"{direction} {fraction:4.0%} ({growth:.1f}x)")
            if growth >= PAST:
                grown.append(f"{name} {direction}")
        print(f"    {name:<17}" + "    ".join(cells))
    for whose in ("ours", "torch"):
        mine = [entry.removeprefix("torch ") for entry in grown
                if entry.startswith("torch") == (whose == "torch")]
        print(f"    grown to {PAST}x the small sizes' time or more, {whose}: "
              + (", ".join(mine) or "none"))

# %%
# Read the last lines of each GPU first. A variant listed there as grown has a ratio
# that is mostly the kernel's (what the small sizes cost is at most 1/PAST of its
# time at the largest). For one that is not, the ratio is a floor: the timed call
# contains the kernel, so the kernel alone is at least as fast as its fraction says. A
# floor close to the copy says the kernel runs at about copy speed; a low floor says
# nothing about the kernel. So whether our backward kernel reaches less of the copy than
# our forward kernel shows here only where both of ours are listed as grown; where the
# lines list neither of our backward kernels, this page cannot tell. It would take timing
# the GPU alone, which the next section does for the forward only.
#
# If the backward kernel does fall further short of the copy, part of the gap is bytes
# its rate does not count (the partial sums, printed under "Bandwidth"), and a likely
# reason for the rest is its loop: each program of the backward walks its share of rows
# one at a time, and each row's sums across the row (one for RMSNorm, two for LayerNorm)
# must finish before its ``dx`` can be written, so few bytes are in flight on each SM.
# Giving every program several rows per step is the change to try; it has not been made
# yet.

# %%
# The forward kernels alone
# -------------------------
# The same forward calls once more, timed on the GPU alone (``gpu_time=True``): each
# variant's calls on several copies of the inputs, enough to overrun the L2 cache, are
# captured back to back in a CUDA graph and replayed, so that no kernel waits for Python
# and each finds its inputs in HBM (``triton_guide.benchmark.gpu_ms``). The inputs do not
# require gradients here: a CUDA graph replays kernels, not autograd's bookkeeping, and
# the forward kernel is the same either way. The backward is not timed this way: it runs
# inside autograd, which replays no graph.


def on_cold_copies(prepare, trips):
    """``prepare``'s call, each on its own inputs, as many times as it takes to overrun
    the L2 cache: the list of calls a ``gpu_time`` sweep replays."""
    def prepared(hidden):
        return [prepare(hidden)
                for _ in range(copies_for_cold_cache(trips * ROWS * hidden * 2))]
    return prepared


def forward_alone(fn, with_bias):
    return on_cold_copies(forward(fn, with_bias, grad=False), TRIPS["forward"])


alone = bench.sweep("LayerNorm and RMSNorm, forward, GPU time", hiddens, {
    "layer_norm": forward_alone(layer_norm, True),
    "torch layer_norm": forward_alone(torch_layer_norm, True),
    "rms_norm": forward_alone(lambda x, w: rms_norm(x, w, 1e-6), False),
    "torch rms_norm": forward_alone(torch_rms_norm, False),
    COPY: on_cold_copies(copy_of(TRIPS["forward"]), TRIPS["forward"]),
}, lambda hidden, ms: gb_per_s(TRIPS["forward"] * ROWS * hidden * 2, ms), label="hidden",
    unit="GB/s", ceiling="copy", xlabel=f"hidden size ({ROWS} rows, bfloat16)",
    gpu_time=True)
alone.plot()

# %%
# Each size's GPU times, ours against torch's and the copy's, beside the time as called:

for run in alone:
    called = next((r for r in forward_results if r.slug == run.slug), None)
    if called is not None and called.ceiling:
        print(f"{run.gpu}: do_bench's clearing writes 256 MiB, about "
              f"{us_per_call(DO_BENCH_CLEARING_BYTES, called.ceiling.value):.0f} us at the "
              "copy rate")
    for ours in ("rms_norm", "layer_norm"):
        cells = []
        for i, x in enumerate(run.xs):
            nbytes = TRIPS["forward"] * ROWS * x * 2
            cell = (f"{x}: {us_per_call(nbytes, run[ours][i]):.0f} / "
                    f"{us_per_call(nbytes, run[f'torch {ours}'][i]):.0f} us, "
                    f"{run[ours][i] / run[f'torch {ours}'][i]:.2f}x torch, "
                    f"{run[ours][i] / run[COPY][i]:.0%} of the copy")
            if called is not None and x in called.xs:
                cell += (f" (as called "
                         f"{us_per_call(nbytes, called[ours][called.xs.index(x)]):.0f} us)")
            cells.append(cell)
        print(f"{run.gpu}, {ours} forward, GPU alone, ours / torch:\n    "
              + "\n    ".join(cells))
    for ours in ("rms_norm", "layer_norm"):
        versus = [mine / theirs for mine, theirs in zip(run[ours], run[f"torch {ours}"])]
        of_copy = [mine / copy for mine, copy in zip(run[ours], run[COPY])]
        print(f"{run.gpu}, {ours} kernel alone: {min(versus):.2f}-{max(versus):.2f}x "
              f"torch's over the {len(run.xs)} sizes, {min(of_copy):.0%}-{max(of_copy):.0%} "
              "of the same-bytes copy")

# %%
# For each GPU with a recording (the output says which have none), the first of the two
# times is our kernel's and the second torch's, both without the host; "as called" is our
# time per call from the forward sweep above, host included. Where the two times of ours
# are far apart, the difference is the part of the call's cost around the kernel (the
# Python before the launch, the autograd bookkeeping) that outlasted ``do_bench``'s cache
# clearing, printed first; the ratio to torch in the sweep above compared that cost, not
# the kernels. The percentages set each kernel against a copy of the same bytes timed the
# same way. Where one passes 100%, the copy itself is short of the memory's rate at that
# size (compare its GB/s in the table with the 1 GiB ceiling): the same-bytes copy is
# then a yardstick, not a roof. The last two lines for each GPU sum it up: the range of
# our kernels' ratios to torch's and to the copy, over all sizes.

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
#   Read the ratio as the kernel's only where the call's time grows with the bytes; where
#   a fixed cost per call sets the time, the ratio is a floor.
# * Where our calls lose to torch here, check first whether their time grows with the
#   bytes (the growth lines): a call that costs the same at every size is paying a fixed
#   cost per call, which a faster kernel would not remove.
# * To tell the kernel from the call, time the kernel alone too, as "The forward kernels
#   alone" does: the calls replayed from a CUDA graph on cold copies of the inputs, next
#   to the time of one call as a program makes it.
#
# Used here: :func:`triton_guide.layer_norm`, :func:`triton_guide.rms_norm`,
# :func:`triton_guide.layer_norm_reference`, :func:`triton_guide.rms_norm_reference`,
# :func:`triton_guide.testing.assert_close`,
# :class:`triton_guide.benchmark.Benchmark`.
