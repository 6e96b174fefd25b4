"""
Fused cross-entropy: the loss and its gradient in one kernel
============================================================

A language model ends with logits of shape rows x vocabulary (rows = batch x sequence
positions) and a cross-entropy loss against the next token. With a vocabulary of 128256
(Llama 3) the logits are the largest activation in the model, and the loss, written as
PyTorch operations, keeps one more tensor of that size (the log-softmax) until the
backward, which makes two more. A fused kernel computes the loss and the gradient in one
launch: it keeps one buffer of that size, for the gradient, or none beyond the logits
when it may write the gradient over them.

You will learn:

* what ``torch.nn.functional.cross_entropy`` keeps for its backward, and what that costs
  at LLM sizes;
* an online log-sum-exp over the vocabulary, block by block (the softmax page's trick);
* how to compute a gradient in the forward, and when to write it over the input;
* how to measure peak GPU memory next to time.
"""

# %%
# Setup
# -----
import numpy as np
import torch
import torch.nn.functional as F

from triton_guide import cross_entropy, cross_entropy_reference, runtime
from triton_guide.benchmark import Benchmark, gb_per_s
from triton_guide.testing import assert_close, tolerance

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()  # timings: live on a GPU, else the recorded ones
print(bench.stamp())
device = runtime.device()
GIB = 2**30

# %%
# What PyTorch keeps for the backward
# -----------------------------------
# ``F.cross_entropy`` is ``log_softmax`` followed by ``nll_loss``. Autograd saves the
# log-softmax (rows x vocabulary) for the backward. The backward of ``nll_loss`` then
# makes a dense rows x vocabulary gradient (zeros except one entry per row), and the
# backward of ``log_softmax`` turns it into the logits' gradient, one more. Autograd's
# graph says so on a small example:

small_logits = torch.randn(4, 10, dtype=torch.bfloat16, requires_grad=True)
small_loss = F.cross_entropy(small_logits, torch.tensor([1, 2, 3, 4]))
log_softmax_node = small_loss.grad_fn.next_functions[0][0]
saved = log_softmax_node._saved_result
print(f"{small_loss.grad_fn.name()} <- {log_softmax_node.name()}; saved for the "
      f"backward: {saved.dtype} {tuple(saved.shape)}")
grad_of_log_softmax = small_loss.grad_fn(torch.ones((), dtype=torch.bfloat16))
print(f"the gradient nll_loss's backward hands to log_softmax's: "
      f"{grad_of_log_softmax.dtype} {tuple(grad_of_log_softmax.shape)}")

# %%
# Many training scripts also cast the logits to float32 before the loss
# (``logits.float()``). The logits stay bfloat16, but the tensors the loss makes from
# them are then float32, twice the bytes. Counted at LLM sizes, the tensors of rows x
# vocabulary alive at the worst moment of the backward are: the logits, the saved
# log-softmax, the dense gradient ``nll_loss``'s backward hands to ``log_softmax``'s,
# and the gradient that one returns (the logits' gradient). With the cast, the last
# three are float32; the float32 copy of the logits itself is not kept, since
# ``log_softmax`` saves its output, not its input. The fused kernel keeps the logits and
# one gradient buffer, or only the logits when it may write the gradient over them. The
# measured peaks further down test this count.

VOCAB = 128256
for rows in (8192, 16384):
    bf16 = rows * VOCAB * 2 / GIB  # one rows x vocabulary tensor in bfloat16
    fp32 = 2 * bf16
    print(f"{rows} x {VOCAB}: logits {bf16:.2f} GiB in bfloat16. At the backward's "
          f"peak: torch {4 * bf16:.1f} GiB, "
          f"torch with .float() {bf16 + 3 * fp32:.1f} GiB, "
          f"fused {2 * bf16:.1f} GiB, fused in place {bf16:.1f} GiB")

# %%
# The same count in bytes moved: the fused forward reads the logits twice (once for the
# log-sum-exp, once for the gradient) and writes the gradient once, three trips over
# rows x vocabulary. For a mean or a summed loss, its backward moves nothing when the
# incoming gradient is 1, as it is for ``loss.backward()``; with ``reduction="none"`` it
# always scales the gradient, one more read and write. PyTorch's forward reads the
# logits and writes the log-softmax; its backward writes the dense ``nll_loss``
# gradient, then reads it with the log-softmax and writes the logits' gradient: six
# trips (each operation may make more passes inside).

rows = 16384
trip = rows * VOCAB * 2 / 1e9
print(f"one trip over {rows} x {VOCAB} bfloat16: {trip:.2f} GB; "
      f"fused {3 * trip:.1f} GB, torch at least {6 * trip:.1f} GB per forward + "
      "backward")

# %%
# The kernel
# ----------
# One program per row. The first pass is an online log-sum-exp: ``m`` is the largest
# logit seen so far and ``s`` the sum of ``exp(x - m)``; when a block brings a larger
# maximum ``m'``, ``s`` is rescaled by ``exp(m - m')``. After the last block,
# ``lse = m + log(s)`` and the loss of the row is ``lse - x[target]``. Logits of
# ``-inf`` (classes masked out, such as a vocabulary padded to a round size) are allowed:
# while every logit seen so far is ``-inf``, so is ``m``, and ``x - m`` would be
# ``-inf - (-inf)``, which is ``nan``; the kernel subtracts 0 instead (``shift``).
#
# With label smoothing ``eps`` the target distribution puts ``1 - eps`` on the target
# and ``eps / V`` on every class, so the loss is
# ``lse - (1 - eps) * x[target] - eps / V * sum(x)``, and its derivative with respect
# to ``x[j]`` is
#
# .. math:: \frac{\partial \ell}{\partial x_j} = \mathrm{softmax}(x)_j
#    - (1 - \varepsilon)\,[j = t] - \frac{\varepsilon}{V}
#
# which needs only ``lse`` and ``x[j]``. So when the logits need a gradient, a second
# pass reads each block again and writes that value, already multiplied by
# ``1 / (rows not ignored)`` for a mean. Rows whose target is ``ignore_index`` store a
# zero loss and a zero gradient.
#
# .. literalinclude:: /../triton_guide/cross_entropy.py
#    :pyobject: cross_entropy_forward_kernel
#
# The autograd Function saves the gradient buffer. For a mean or a sum, the backward has
# nothing left to do but multiply it by the incoming gradient when that is not 1. With
# ``reduction="none"`` the incoming gradient holds one value per row, and the backward
# always multiplies each row of the buffer by its value:
#
# .. literalinclude:: /../triton_guide/cross_entropy.py
#    :pyobject: _CrossEntropy
#
# Whether the incoming gradient is 1 is known only on the GPU. Asking from Python
# (``torch.equal``, ``.item()``) would make the host wait for every kernel queued before
# it; a small kernel asks on the GPU instead, and returns at once when the answer is yes
# (the forward does wait, twice, on small reductions over the targets: that every target
# is a class index, as torch also checks, and how many rows are not ignored, the mean's
# divisor):
#
# .. literalinclude:: /../triton_guide/cross_entropy.py
#    :pyobject: scale_if_not_one_kernel
#
# The saved buffer is rescaled in place, and whether it was is known only on the GPU, so
# the backward counts it as modified either way: a second ``backward(retain_graph=True)``
# through the same loss raises PyTorch's error about a saved tensor modified in place,
# rather than return gradients scaled twice.
#
# ``inplace_grad=True`` passes the logits as the gradient buffer. The kernel reads every
# block before writing it, so that is safe inside the kernel, but afterwards the logits
# are gone: only use it when nothing else reads them. The kernel writes through a raw
# pointer, where autograd cannot see it, so the launcher refuses a leaf tensor and a view
# of one (the gradient would overwrite a parameter) and logits whose rows share memory,
# and bumps the logits' autograd version so that an operation that saved them fails
# loudly in its backward instead of reading gradients.

# %%
# Check against PyTorch
# ---------------------
# Odd sizes (the vocabulary is not a power of two and spans several blocks), some rows
# ignored, label smoothing, and float16; the reference is PyTorch in float64.

rows, vocab = runtime.pick(interpreter=(32, 3001), gpu=(1024, VOCAB))
logits = torch.randn(rows, vocab, device=device) * 4
target = torch.randint(0, vocab, (rows,), device=device)
target[::7] = -100  # ignored rows


def loss_and_grad(fn, logits, dtype, **options):
    source = logits.to(dtype).requires_grad_()
    loss = fn(source * 1, target, **options)
    (grad,) = torch.autograd.grad(loss, source)
    return loss, grad


for dtype in (torch.float32, torch.float16):
    for smoothing in (0.0, 0.1):
        loss, grad = loss_and_grad(cross_entropy, logits, dtype,
                                   label_smoothing=smoothing, block_size=1024)
        want_loss, want_grad = loss_and_grad(
            cross_entropy_reference, logits.to(dtype), torch.float64,
            label_smoothing=smoothing)
        loss_error = assert_close(loss, want_loss, rtol=tolerance(dtype))
        # Below float16's smallest normal number (6.1e-5) values are stored in steps of
        # 2**-24 = 6e-8: one step is the error of storing them at all.
        step = 2.0**-24 if dtype == torch.float16 else 0.0
        grad_error = assert_close(grad, want_grad, rtol=tolerance(dtype), atol=step)
        print(f"{str(dtype):<14} smoothing {smoothing}: loss {loss.item():.4f}, "
              f"relative error {loss_error:.1e}; gradient relative error "
              f"{grad_error:.1e}")

# %%
# How small the float16 gradient's entries get (``want_grad`` is the last one checked):

tiny = (want_grad.abs() < torch.finfo(torch.float16).tiny).double().mean().item()
print(f"{tiny:.0%} of the {rows} x {vocab} gradient entries are below float16's smallest "
      "normal number, where it keeps fewer significant bits (down to none below 6e-8): "
      "the mean over rows and a large vocabulary make the gradient small, one reason "
      "losses are computed in float32 or bfloat16")

# %%
# In place, the logits come back holding their own gradient:

source = logits.clone().requires_grad_()
buffer = source * 1  # stands for the output of the model's last layer
loss = cross_entropy(buffer, target, inplace_grad=True)
_, want_grad = loss_and_grad(cross_entropy_reference, logits, torch.float64)
error = assert_close(buffer.detach(), want_grad, rtol=1e-5)
print(f"logits after the in-place forward vs the float64 gradient: relative error "
      f"{error:.1e}")

# %%
# Edges
# -----
# Every row ignored: PyTorch's mean divides 0 by 0 and returns ``nan``, the sum is 0,
# and no logit gets a gradient. The kernel does the same: its mean scales by 1 / (rows
# not ignored), here 1 / 0. A GPU computes that ``inf`` silently; the interpreter's numpy
# would warn about it, so the cell tells numpy not to.

all_ignored = torch.full((4,), -100, device=device)
small = torch.randn(4, 10, device=device)
for reduction in ("mean", "sum"):
    leaf = small.clone().requires_grad_()
    with np.errstate(divide="ignore", invalid="ignore"):
        ours = cross_entropy(leaf * 1, all_ignored, reduction=reduction)
        (grad,) = torch.autograd.grad(ours, leaf)
    theirs = F.cross_entropy(small, all_ignored, reduction=reduction).item()
    print(f"all rows ignored, reduction={reduction!r}: ours {ours.item()}, torch {theirs}; "
          f"every gradient entry 0: {bool((grad == 0).all())}")

# %%
# Masked classes: logits of ``-inf`` get probability 0 and gradient 0. Here classes at
# both ends are masked, among them the whole first block the kernel reads:

vocab_size, first_visible, last_visible, block = 300, 70, 255, 64
masked = torch.ones(vocab_size, dtype=torch.bool, device=device)
masked[first_visible:last_visible + 1] = False
padded = torch.randn(4, vocab_size, device=device).masked_fill(masked, float("-inf"))
visible_target = torch.randint(first_visible, last_visible + 1, (4,), device=device)
leaf = padded.clone().requires_grad_()
ours = cross_entropy(leaf * 1, visible_target, block_size=block)
(grad,) = torch.autograd.grad(ours, leaf)
theirs = F.cross_entropy(padded.double(), visible_target)
print(f"{vocab_size} classes, -inf outside {first_visible}..{last_visible}, blocks of "
      f"{block}: ours {ours.item():.6f}, torch (float64) {theirs.item():.6f}; gradient of "
      f"the masked classes all 0: {bool((grad[:, masked] == 0).all())}")

# %%
# Time and peak memory at LLM sizes
# ---------------------------------
# Logits in bfloat16, vocabulary 128256, 8192 and 16384 rows, and four ways to take
# the mean loss: ``F.cross_entropy`` on the logits, the same on ``logits.float()``, the
# fused kernel, and the fused kernel writing the gradient over the logits.
#
# The logits stand for a model's output: a tensor that needs a gradient but is not a
# leaf (the in-place variant refuses a leaf). Here they are random numbers plus a zero
# that requires a gradient, so that autograd sees them computed from a parameter while
# only one rows x vocabulary tensor stays alive. They are made once per size and shared
# by every variant, and dropped before the next size is made: at 16384 rows they take
# the GiB printed above, and the float32 variant adds several times that.

ROWS = [8192, 16384]
_inputs = {}  # rows -> (logits, target), one size at a time


def llm_inputs(rows):
    if rows not in _inputs:
        _inputs.clear()  # free the previous size before making this one
        torch.cuda.empty_cache()
        zero = torch.zeros((), device=device, dtype=torch.bfloat16, requires_grad=True)
        logits = torch.randn(rows, VOCAB, device=device, dtype=torch.bfloat16) + zero
        target = torch.randint(0, VOCAB, (rows,), device=device)
        _inputs[rows] = logits, target
    return _inputs[rows]

# %%
# Given a size, each variant returns the call to time: the loss alone under
# ``torch.no_grad()``, or the loss and its gradient.


def forward_only(loss_fn):
    def prepare(rows):
        logits, target = llm_inputs(rows)

        def call():
            with torch.no_grad():
                return loss_fn(logits, target)
        return call
    return prepare


def forward_backward(loss_fn):
    def prepare(rows):
        logits, target = llm_inputs(rows)
        return lambda: torch.autograd.grad(loss_fn(logits, target), logits)
    return prepare


losses = {
    "torch": F.cross_entropy,
    "torch, .float()": lambda x, t: F.cross_entropy(x.float(), t),
    "triton_guide": cross_entropy,
    "triton_guide, in place": lambda x, t: cross_entropy(x, t, inplace_grad=True),
}

# %%
# Time is shown as an effective bandwidth: the bytes that any implementation must move,
# divided by the time. GB/s counts the same bytes for every variant, so a variant that
# makes extra trips over the logits shows a lower rate. The ceiling is a
# device-to-device copy of 1 GiB, measured in the same run; its GB/s counts the bytes
# the copy reads plus the bytes it writes, two trips over its data.
#
# Peak memory is ``torch.cuda.max_memory_allocated()`` during one call minus what was
# allocated before it (the logits and the targets): the memory the loss adds on top of
# the model. Below each plot it is also given in logits-sized tensors, to compare with
# the count above (which also counts the logits themselves); a peak too small to read in
# GiB (what a call adds per row: the float32 losses and the like) is given in KiB too.


def peak_extra_gib(make_call):
    def prepare(rows):
        call = make_call(rows)

        def measure():
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            call()  # what it returns is freed at once: the peak has counted it
            torch.cuda.synchronize()
            return (torch.cuda.max_memory_allocated() - before) / GIB
        return measure
    return prepare

# %%
# What a peak is in logits-sized tensors, printed under each memory plot:


def in_logits(peak):
    for run in peak:
        i = run.largest
        logits_gib = run.xs[i] * VOCAB * 2 / GIB
        print(f"{run.gpu}, {run.xs[i]} rows, extra memory in logits-sized tensors: "
              + "; ".join(f"{name} {values[i] / logits_gib:.1f}"
                          for name, values in run.series.items()))
        for name, values in run.series.items():  # the peaks too small to read in GiB
            if max(values) < 2**-10:
                print(f"    {name}: " + ", ".join(
                    f"{gib * 2**20:.1f} KiB at {rows:,} rows ({gib * GIB / rows:.0f} bytes "
                    "a row)" for rows, gib in zip(run.xs, values)))
    measured = {tuple(map(tuple, run.series.values())) for run in peak}
    if len(peak.runs) > 1 and len(measured) == 1:
        print("every GPU measured the same bytes: in the plot, " + (
            "the lines of one lie on top of the other's" if peak.overlaid
            else "the panels are alike"))


XLABEL = f"rows (vocabulary {VOCAB}, bfloat16)"

# %%
# Forward
# -------
# Evaluation: the loss alone, under ``torch.no_grad()``. Any implementation must read
# the logits once (the targets and the losses are a few bytes per row). The in-place
# variant is left out: with no gradient to write it is the same call as
# ``triton_guide``.
#
# How the site times these calls, and what a recording holds: :doc:`/measuring`.

forward_losses = {name: fn for name, fn in losses.items() if "in place" not in name}
forward_time = bench.sweep(
    "cross-entropy forward",
    ROWS,
    {name: forward_only(fn) for name, fn in forward_losses.items()},
    lambda rows, ms: gb_per_s(rows * VOCAB * 2, ms),
    label="rows",
    unit="GB/s",
    ceiling="copy",
    xlabel=XLABEL,
)
forward_time.plot()
forward_time.summary(ratios=[("triton_guide", "torch")])

# %%

forward_peak = bench.measure(
    "cross-entropy forward, peak memory",
    ROWS,
    {name: peak_extra_gib(forward_only(fn)) for name, fn in forward_losses.items()},
    label="rows",
    unit="GiB",
    xlabel=XLABEL,
)
forward_peak.plot(ylabel="peak memory over the logits (GiB)")
in_logits(forward_peak)

# %%
# Forward and backward
# --------------------
# Training: ``torch.autograd.grad`` of the mean loss with respect to the logits. Any
# implementation must read the logits once and write their gradient once: two trips,
# which is what GB/s counts here. The copy ceiling counts two trips too, the bytes it
# reads plus the bytes it writes. The fused kernel makes three (it reads each row again
# to write the gradient), so at the copy's rate of traffic it can reach at most two
# thirds of the ceiling; PyTorch makes at least six.
#
# The in-place variant overwrites the logits with their gradient on every call, so the
# timer, which calls it many times, hands each call the previous call's gradient instead
# of fresh logits. The timing is still that of the real call: the kernel reads every
# logit twice and writes every gradient once whatever their values, its one branch
# depends on the targets, which do not change, and the values stay finite (a gradient of
# the mean is at most ``1 / rows`` in size). Restoring the logits before every call
# would add a copy of them to each timing instead. The in-place variant runs last at
# each size, so the other variants always see the random logits.

training_time = bench.sweep(
    "cross-entropy forward + backward",
    ROWS,
    {name: forward_backward(fn) for name, fn in losses.items()},
    lambda rows, ms: gb_per_s(2 * rows * VOCAB * 2, ms),
    label="rows",
    unit="GB/s",
    ceiling="copy",
    xlabel=XLABEL,
)
training_time.plot()
training_time.summary(ratios=[("triton_guide", "torch"),
                              ("triton_guide, in place", "torch")])

# %%

training_peak = bench.measure(
    "cross-entropy forward + backward, peak memory",
    ROWS,
    {name: peak_extra_gib(forward_backward(fn)) for name, fn in losses.items()},
    label="rows",
    unit="GiB",
    xlabel=XLABEL,
)
training_peak.plot(ylabel="peak memory over the logits (GiB)")
in_logits(training_peak)
_inputs.clear()  # free the last logits
torch.cuda.empty_cache()

# %%
# The summary, at the larger size, for each GPU: the speed is the ratio of the rates
# (the same bytes, so torch's time over ours), the memory the extra peak.

for pass_name, ours, timed, peak in (
        ("forward", "triton_guide", forward_time, forward_peak),
        ("fwd+bwd", "triton_guide, in place", training_time, training_peak)):
    fused = "in-place fused" if "in place" in ours else "fused"
    peak_on = {run.gpu: run for run in peak}
    for run in timed:
        rows = run.xs[run.largest]
        line = (f"{run.gpu}, {rows} rows, {pass_name}: {fused} "
                f"{run.ratio(ours, 'torch'):.2f}x torch's speed")
        memory = peak_on.get(run.gpu)
        if memory is not None and rows in memory.xs:
            i = memory.xs.index(rows)
            line += (f", {memory[ours][i]:.2f} GiB extra against torch's "
                     f"{memory['torch'][i]:.2f} GiB")
        print(line)

# %%
# Takeaways
# ---------
# * Count the rows x vocabulary tensors the loss adds on top of the logits: the measured
#   peaks above show how many each version adds, and what one weighs at LLM sizes.
# * An online log-sum-exp lets one program stream a row of any length.
# * When the gradient is a simple function of the forward's statistics, compute it in
#   the forward and keep it instead of the activations; write it over the input only
#   when the caller gives the input up.
#
# Used here: :func:`triton_guide.cross_entropy`,
# :func:`triton_guide.cross_entropy_reference`,
# :func:`triton_guide.testing.assert_close`, :func:`triton_guide.testing.tolerance`,
# :class:`triton_guide.benchmark.Benchmark`.
