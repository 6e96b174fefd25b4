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
import functools

import numpy as np
import torch
import torch.nn.functional as F

from triton_guide import cross_entropy, cross_entropy_reference, runtime
from triton_guide.benchmark import (Benchmark, gb_per_s, peak_memory, print_in_units,
                                    print_ratios)
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
# maximum ``m'``, ``s`` is rescaled by ``exp(m - m')``. After the last block the
# log-sum-exp is ``m + log(s)`` and the loss of the row is ``(m - x[target]) + log(s)``,
# added in that order: when the target's logit is the largest, ``m - x[target]`` is
# exactly 0, and the loss keeps every bit of the small ``log(s)`` that rounding
# ``m + log(s)`` first would lose. Logits of
# ``-inf`` (classes masked out, such as a vocabulary padded to a round size) are allowed:
# while every logit seen so far is ``-inf``, so is ``m``, and ``x - m`` would be
# ``-inf - (-inf)``, which is ``nan``; the kernel subtracts 0 instead (``shift``).
#
# With label smoothing ``eps`` the target distribution puts ``1 - eps`` on the target
# and ``eps / V`` on every class, so the loss is
# ``log-sum-exp - (1 - eps) * x[target] - eps / V * sum(x)``, and its derivative with respect
# to ``x[j]`` is
#
# .. math:: \frac{\partial \ell}{\partial x_j} = \mathrm{softmax}(x)_j
#    - (1 - \varepsilon)\,[j = t] - \frac{\varepsilon}{V}
#
# which needs only ``m``, ``log(s)`` and ``x[j]``: ``softmax(x)_j`` is
# ``exp((x[j] - m) - log(s))``. So when the logits need a gradient, a second
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
# Whether the incoming gradient is 1 is known only on the GPU; asking from Python
# (``.item()``) would make the host wait for every kernel queued before it, so a small
# kernel, ``scale_if_not_one_kernel``, asks on the GPU and returns at once when it is.
# Since the saved buffer may be rescaled in place, a second
# ``backward(retain_graph=True)`` through the same loss raises PyTorch's error about a
# saved tensor modified in place rather than return gradients scaled twice.
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
# Time and peak memory of a training step
# ---------------------------------------
# ``torch.autograd.grad`` of the mean loss with respect to bfloat16 logits of 8192 and
# 16384 rows, four ways: ``F.cross_entropy``, the same on ``logits.float()``, the fused
# kernel, and the fused kernel writing the gradient over the logits. The logits stand for
# a model's output: random numbers plus a zero that requires a gradient, so that they are
# not a leaf (the in-place variant refuses one); one size's logits are alive at a time.
#
# GB/s counts the two trips over the logits that any implementation must make (read the
# logits, write their gradient), the same bytes for every variant; the copy ceiling
# counts two trips too, so the fused kernel, which makes three, can reach at most two
# thirds of it. The in-place variant, timed last at each size, is handed the previous
# call's gradient as its logits; its kernel moves the same bytes whatever their values.
# Peak memory is what one call allocates beyond the logits and the targets
# (:func:`~triton_guide.benchmark.peak_memory`). How the site times: :doc:`/measuring`.

ROWS = [8192, 16384]
XLABEL = f"rows (vocabulary {VOCAB}, bfloat16)"


@functools.lru_cache(maxsize=1)  # one size's logits at a time
def llm_logits(rows):
    zero = torch.zeros((), device=device, dtype=torch.bfloat16, requires_grad=True)
    logits = torch.randn(rows, VOCAB, device=device, dtype=torch.bfloat16) + zero
    return logits, torch.randint(0, VOCAB, (rows,), device=device)


def training_step(loss_fn):
    def prepare(rows):
        logits, target = llm_logits(rows)
        return lambda: torch.autograd.grad(loss_fn(logits, target), logits)
    return prepare


steps = {"torch": training_step(F.cross_entropy),
         "torch, .float()": training_step(lambda x, t: F.cross_entropy(x.float(), t)),
         "triton_guide": training_step(cross_entropy),
         "triton_guide, in place": training_step(
             lambda x, t: cross_entropy(x, t, inplace_grad=True))}

# %%
# Time, as GB/s under the copy ceiling, and our speed over torch's at each size:

training_time = bench.sweep(
    "cross-entropy forward + backward", ROWS, steps,
    lambda rows, ms: gb_per_s(2 * rows * VOCAB * 2, ms), label="rows", unit="GB/s",
    ceiling="copy", xlabel=XLABEL)
training_time.plot()
speedups = print_ratios(training_time, "triton_guide", "torch")

# %%
# Peak memory, and the same peak in tensors the size of the logits, to set beside the
# count above (which counted the logits too):

training_peak = bench.measure(
    "cross-entropy forward + backward, peak memory", ROWS,
    {name: peak_memory(step) for name, step in steps.items()}, label="rows", unit="GiB",
    xlabel=XLABEL)
training_peak.plot(ylabel="peak memory over the logits (GiB)")
in_logits = print_in_units(training_peak, "logits-sized tensors",
                           lambda rows: rows * VOCAB * 2 / GIB)
llm_logits.cache_clear()

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
