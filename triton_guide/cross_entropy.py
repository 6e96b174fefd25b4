"""Cross-entropy over logits (rows x vocabulary), with its gradient computed in the forward.

One program per row streams the row through in blocks: an online log-sum-exp (a running
maximum and a running sum, rescaled when the maximum grows) plus the target's logit give the
loss. When the logits need a gradient, a second pass over the same row writes
``softmax - onehot`` (label smoothing and the reduction's scale folded in) straight into a
gradient buffer, so no ``rows x vocabulary`` softmax or log-softmax is ever kept. The
backward then only rescales that buffer if the incoming gradient is not 1, a test made on
the GPU so that the host does not wait for it.

``inplace_grad=True`` writes the gradient over the logits themselves (Liger-Kernel's trick):
no second ``rows x vocabulary`` buffer at all, but the logits are destroyed by the forward.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .hardware import multiprocessors, num_warps_for
from .launch import cdiv, fast_launch, next_power_of_2
from .registry import register
from .runtime import interpreting
from .validation import (
    MAX_ELEMENTS_PER_THREAD_EXP,
    check_block_size,
    check_tensor,
    needs_int64_offsets,
)

# Vocabulary columns a program reads per step.
VOCAB_BLOCK = 4096
# Integer dtypes of class indices: torch's cross_entropy takes int64 and uint8; int32,
# int16 and int8, which other libraries' tests pass (Liger-Kernel's, LeetGPU's), too.
TARGET_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
REDUCTIONS = ("mean", "sum", "none")


def cross_entropy_reference(
    logits: torch.Tensor, target: torch.Tensor, *, ignore_index: int = -100,
    label_smoothing: float = 0.0, reduction: str = "mean",
) -> torch.Tensor:
    """What :func:`cross_entropy` computes, in plain PyTorch."""
    return torch.nn.functional.cross_entropy(
        logits, target, ignore_index=ignore_index, label_smoothing=label_smoothing,
        reduction=reduction,
    )


@triton.jit
def cross_entropy_forward_kernel(
    logits_ptr,
    logits_row_stride,  # elements between the starts of two rows of logits
    target_ptr,  # int64, one class index per row
    loss_ptr,  # float32, one loss per row (0 for ignored rows)
    grad_ptr,  # where d(loss)/d(logits) goes; may be logits_ptr itself
    grad_row_stride,
    num_classes,  # the vocabulary size V
    ignore_index,
    label_smoothing,  # eps: the target gets 1 - eps, every class also gets eps / V
    scale_ptr,  # one float32: 1 / (rows not ignored) for a mean, else 1; nan: a bad target
    COMPUTE_GRAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,  # vocabulary columns per step
):
    row = tl.program_id(0).to(tl.int64)  # 64-bit: rows x V may pass 2**31 in bytes
    logits_row = logits_ptr + row * logits_row_stride
    grad_row = grad_ptr + row * grad_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    target = tl.load(target_ptr + row)

    if target == ignore_index:
        # An ignored row adds nothing to the loss and gets a zero gradient. (0 times the
        # scale: a mean over no rows is 0 * inf = nan, as torch's.)
        tl.store(loss_ptr + row, 0.0 * tl.load(scale_ptr))
        if COMPUTE_GRAD:
            for start in range(0, num_classes, BLOCK_SIZE):
                mask = start + cols < num_classes
                zeros = tl.zeros([BLOCK_SIZE], tl.float32)
                tl.store(grad_row + start + cols, zeros.to(grad_ptr.dtype.element_ty),
                         mask=mask)
        return

    # Pass 1: online log-sum-exp. m is the largest logit seen so far, s the sum of
    # exp(x - m) over the logits seen so far; a new maximum rescales s by exp(m - m_new).
    m = -float("inf")
    s = 0.0
    logit_sum = 0.0  # sum of all logits, for label smoothing
    for start in range(0, num_classes, BLOCK_SIZE):
        mask = start + cols < num_classes
        x = tl.load(logits_row + start + cols, mask=mask, other=-float("inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # Logits may be -inf (masked-out classes, such as a vocabulary padded to a round
        # size). While every logit so far is -inf, so is m_new, and x - m_new would be
        # -inf - (-inf) = nan: subtract 0 instead, which gives the same zeros.
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
        logit_sum += tl.sum(tl.where(mask, x, 0.0), axis=0)
    # log-sum-exp is m + log(s), but the kernel keeps the two apart: m - x is exact where
    # x is near m, and log(s) is small, while m + log(s) rounds at the size of m. Where
    # the target dominates, its gradient p - 1 and its loss cancel, and that rounding would
    # be most of what is left (1e-5 of the gradient for a row of 17 logits around 8).
    log_s = tl.log(s)

    # -log p(target) with the target's weight 1 - eps, and -mean(log p) with weight eps.
    # A target outside [0, V) is never read: its row's loss and gradient become nan.
    target_ok = (target >= 0) & (target < num_classes)
    target_logit = tl.load(logits_row + target, mask=target_ok, other=float("nan"))
    loss = (m - (1.0 - label_smoothing) * target_logit.to(tl.float32)) + log_s
    if label_smoothing != 0.0:  # else a -inf logit would make 0 * -inf = nan of the sum
        loss -= label_smoothing * logit_sum / num_classes
    # A mean's 1 / (rows not ignored) is applied here, so the loss is the sum of the rows.
    grad_scale = tl.load(scale_ptr)
    tl.store(loss_ptr + row, loss * grad_scale)

    if COMPUTE_GRAD:
        # Pass 2: d(loss)/dx_j = softmax_j - (1 - eps) * [j == target] - eps / V.
        # Each block is read before it is written, so grad_ptr may alias logits_ptr.
        for start in range(0, num_classes, BLOCK_SIZE):
            mask = start + cols < num_classes
            x = tl.load(logits_row + start + cols, mask=mask, other=0.0).to(tl.float32)
            grad = tl.exp((x - m) - log_s) - label_smoothing / num_classes
            grad = tl.where(start + cols == target, grad - (1.0 - label_smoothing), grad)
            grad = tl.where(target_ok, grad, float("nan"))
            tl.store(grad_row + start + cols,
                     (grad * grad_scale).to(grad_ptr.dtype.element_ty), mask=mask)


@triton.jit
def target_scale_kernel(
    target_ptr,  # one class index per row
    scale_ptr,  # out: one float32, the scale of every row's loss and gradient
    num_rows,
    num_classes,
    ignore_index,
    MEAN: tl.constexpr,  # reduction="mean": the scale is 1 / (rows not ignored)
    BLOCK_SIZE: tl.constexpr,
):
    # One program reads every target once: the count of rows not ignored stays on the GPU,
    # so the host never waits for it, and a target outside [0, V) turns the scale into nan.
    valid = tl.zeros([BLOCK_SIZE], tl.int32)
    bad = tl.zeros([BLOCK_SIZE], tl.int32)
    for start in range(0, num_rows, BLOCK_SIZE):
        rows = start + tl.arange(0, BLOCK_SIZE)
        target = tl.load(target_ptr + rows, mask=rows < num_rows, other=ignore_index)
        kept = target != ignore_index
        valid += kept.to(tl.int32)
        bad += (kept & ((target < 0) | (target >= num_classes))).to(tl.int32)
    count = tl.sum(valid, axis=0).to(tl.float32)
    scale = 1.0 / count if MEAN else 1.0  # a mean over no rows: 1 / 0, and 0 * inf = nan
    scale = tl.where(tl.sum(bad, axis=0) > 0, float("nan"), scale)
    tl.store(scale_ptr, scale)


# Targets a program of target_scale_kernel reads per step.
TARGET_BLOCK = 1024


@triton.jit
def scale_if_not_one_kernel(
    x_ptr,  # a contiguous tensor, rescaled in place
    scale_ptr,  # one number, on the device
    num_elements,
    BLOCK_SIZE: tl.constexpr,
    INT64_OFFSETS: tl.constexpr,  # num_elements can pass 2**31 - 1
):
    # The test happens on the GPU, so the host never waits for the number: when it is 1
    # (loss.backward() on a mean or a sum), each program reads it and returns at once.
    scale = tl.load(scale_ptr).to(tl.float32)
    if scale != 1.0:
        # A fixed grid of a few programs per SM, each striding through the whole blocks
        # with unmasked (so 16-byte) loads; then the first program does the partial block.
        pid, num_programs = tl.program_id(0), tl.num_programs(0)
        whole_blocks = num_elements // BLOCK_SIZE
        for block in range(pid, whole_blocks, num_programs):
            if INT64_OFFSETS:
                block = block.to(tl.int64)
            offsets = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
            x = tl.load(x_ptr + offsets)
            tl.store(x_ptr + offsets, (x.to(tl.float32) * scale).to(x.dtype))
        if pid == 0:
            start = whole_blocks * BLOCK_SIZE
            if INT64_OFFSETS:
                start = whole_blocks.to(tl.int64) * BLOCK_SIZE
            offsets = start + tl.arange(0, BLOCK_SIZE)
            mask = offsets < num_elements
            x = tl.load(x_ptr + offsets, mask=mask)
            tl.store(x_ptr + offsets, (x.to(tl.float32) * scale).to(x.dtype), mask=mask)


# Elements per program and step of the rescale; programs per SM for its fixed grid.
SCALE_BLOCK = 4096
SCALE_PROGRAMS_PER_SM = 4


def scale_if_not_one(x: torch.Tensor, scale: torch.Tensor) -> None:
    """``x *= scale`` in place for a one-element ``scale``, skipped without a host sync
    (no element of ``x`` is read) when ``scale`` is 1."""
    if not x.is_contiguous():  # the kernel walks x as one flat run of elements
        x.mul_(scale.to(x.dtype))
        return
    if interpreting():
        programs = 4
    else:
        programs = SCALE_PROGRAMS_PER_SM * multiprocessors(x.device)
    grid = (max(1, min(programs, cdiv(x.numel(), SCALE_BLOCK))),)
    fast_launch(scale_if_not_one_kernel)[grid](
        x, scale, x.numel(), BLOCK_SIZE=SCALE_BLOCK,
        # the partial block's offsets reach up to a block past the end
        INT64_OFFSETS=needs_int64_offsets(x, largest_index=x.numel() + SCALE_BLOCK),
    )


def _warps_for_block(block: int) -> int:
    """The warps a block of ``block`` classes launches with."""
    return num_warps_for(block, most=8)


def cross_entropy_forward(
    logits: torch.Tensor, target: torch.Tensor, ignore_index: int, label_smoothing: float,
    reduction: str, compute_grad: bool, inplace_grad: bool, block_size: int,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Launch the kernel; return the loss and, if asked, the (scaled) gradient."""
    num_rows, num_classes = logits.shape
    scale = torch.empty(1, dtype=torch.float32, device=logits.device)
    fast_launch(target_scale_kernel)[(1,)](
        target, scale, num_rows, num_classes, ignore_index, MEAN=reduction == "mean",
        BLOCK_SIZE=TARGET_BLOCK,
    )
    losses = torch.empty(num_rows, dtype=torch.float32, device=logits.device)
    if compute_grad:
        grad = logits if inplace_grad else torch.empty_like(logits)
    else:
        grad = losses  # never written: COMPUTE_GRAD is False
    block = min(block_size, next_power_of_2(num_classes))
    fast_launch(cross_entropy_forward_kernel)[(num_rows,)](
        logits, logits.stride(0), target, losses, grad,
        grad.stride(0) if compute_grad else 0,
        num_classes, ignore_index, label_smoothing, scale,
        COMPUTE_GRAD=compute_grad, BLOCK_SIZE=block, num_warps=_warps_for_block(block),
    )
    # Each row's loss carries the mean's scale already (nan for a mean over no rows, as
    # torch gives), so every reduction but "none" is a sum.
    loss = losses if reduction == "none" else losses.sum()
    return loss.to(logits.dtype), (grad if compute_grad else None)


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, ignore_index, label_smoothing, reduction,
                compute_grad, inplace_grad, block_size):
        loss, grad = cross_entropy_forward(
            logits, target, ignore_index, label_smoothing, reduction, compute_grad,
            inplace_grad, block_size,
        )
        if compute_grad and inplace_grad:
            # The kernel wrote through a raw pointer, which autograd cannot see: tell it,
            # so that any other operation that saved these logits fails loudly in its
            # backward instead of reading gradients.
            torch.autograd.graph.increment_version(logits)
        if compute_grad:
            ctx.save_for_backward(grad.detach())
        ctx.reduction = reduction
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        (grad,) = ctx.saved_tensors
        if ctx.reduction == "none":
            grad.mul_(grad_loss.to(grad.dtype).unsqueeze(1))
        else:
            # The usual case, loss.backward(), passes 1: then the buffer is already the
            # answer, and the backward moves no bytes of it.
            scale_if_not_one(grad, grad_loss)
            # Whether it was rescaled is known only on the GPU: count it as modified, so
            # that a second backward through this loss fails instead of scaling twice.
            torch.autograd.graph.increment_version(grad)
        return grad, None, None, None, None, None, None, None


def check_inplace_target(logits: torch.Tensor) -> None:
    """Raise a ValueError unless the gradient may be written over ``logits`` (2-D, stride 1
    along the classes): not a leaf that requires grad nor a view of one (the kernel writes
    through a raw pointer, so autograd would not stop it from overwriting a parameter), and
    no two rows sharing memory (an expanded row would be written by every row's program)."""
    base = logits if logits._base is None else logits._base
    leaf = next((t for t in (logits, base) if t.is_leaf and t.requires_grad), None)
    if leaf is not None:
        what = "a leaf tensor" if leaf is logits else "a view of a leaf tensor"
        raise ValueError(
            f"inplace_grad=True would overwrite {what} that requires grad; pass "
            "inplace_grad=False, or logits computed from the leaf (e.g. x @ weight.T)"
        )
    rows, classes = logits.shape
    if rows > 1 and logits.stride(0) < classes:
        raise ValueError(
            f"inplace_grad=True needs rows of logits that do not overlap in memory, got "
            f"{classes} classes per row with rows {logits.stride(0)} elements apart; pass "
            "inplace_grad=False"
        )


def cross_entropy(
    logits: torch.Tensor, target: torch.Tensor, *, ignore_index: int = -100,
    label_smoothing: float = 0.0, reduction: str = "mean", inplace_grad: bool = False,
    block_size: int = VOCAB_BLOCK,
) -> torch.Tensor:
    """Cross-entropy between ``logits`` (rows x classes) and class indices ``target``.

    Matches ``torch.nn.functional.cross_entropy`` for 2-D logits: rows whose target equals
    ``ignore_index`` contribute neither loss nor gradient, ``label_smoothing`` mixes the
    one-hot target with the uniform distribution, and ``reduction`` is ``"mean"`` (over
    the rows not ignored: ``nan`` if all are), ``"sum"`` or ``"none"``. ``target`` holds
    one class index per row, of any of :data:`TARGET_DTYPES` (int64, int32, int16, int8 or
    uint8), compared with ``ignore_index`` by value.

    When ``logits`` requires a gradient, the forward also computes it (one more pass over
    the logits) into a new ``rows x classes`` buffer that lives until the backward.
    ``inplace_grad=True`` writes it over ``logits`` instead, saving that buffer: only do
    this when nothing else will read the logits after the loss (the usual case for the
    last layer of a language model). ``block_size`` (a power of two) is the number of
    classes a program reads per step.

    A target outside ``[0, classes)`` (other than ``ignore_index``) raises a ValueError under
    the interpreter. On a GPU the check would make the host wait for the GPU on every call
    (torch's own kernel stops the process with a device-side assert instead): there the
    loss comes out nan (every row's, whatever the reduction) and so does that row's gradient.
    """
    logits = check_tensor("logits", logits, ndim=2)
    target = check_tensor("target", target, dtypes=TARGET_DTYPES, ndim=1)
    # As int64, the kernel's and the checks' type: a narrower target compared with a
    # negative ignore_index (or a class past its range) would wrap round in its own dtype.
    # The copy is one integer per row, next to a row of logits.
    if target.dtype != torch.int64:
        target = target.long()
    if logits.stride(1) != 1:
        raise ValueError(
            f"logits must have stride 1 along the classes, got strides {logits.stride()}; "
            "pass logits.contiguous()"
        )
    num_rows, num_classes = logits.shape
    if target.shape[0] != num_rows:
        raise ValueError(
            f"target must hold one class index per row of logits ({num_rows}), got shape "
            f"{tuple(target.shape)}; for logits of shape (batch, seq, V) pass "
            "logits.view(-1, V) and target.view(-1)"
        )
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"ignore_index must be an int, got {ignore_index!r}")
    if not isinstance(label_smoothing, (int, float)) or not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0 and 1, got {label_smoothing!r}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if not isinstance(inplace_grad, bool):
        raise TypeError(f"inplace_grad must be a bool, got {type(inplace_grad).__name__}")
    block_size = check_block_size("block_size", block_size, num_warps=_warps_for_block,
                                  per_thread=MAX_ELEMENTS_PER_THREAD_EXP)
    # On the CPU (the interpreter) a bad target is found here; on a GPU that would make the
    # host wait for the GPU on every call, so there the kernels turn it into a nan loss.
    if not target.is_cuda:
        out_of_range = (target != ignore_index) & ((target < 0) | (target >= num_classes))
        if out_of_range.any():
            bad = int(out_of_range.nonzero()[0, 0])
            raise ValueError(
                f"target[{bad}] = {int(target[bad])} is not a class index: targets must lie "
                f"in [0, {num_classes}) or equal ignore_index ({ignore_index})"
            )
    compute_grad = torch.is_grad_enabled() and logits.requires_grad
    if inplace_grad and compute_grad:
        check_inplace_target(logits)
    return _CrossEntropy.apply(
        logits, target, ignore_index, float(label_smoothing), reduction, compute_grad,
        inplace_grad, block_size,
    )


def _example(device):
    target = torch.randint(0, 50, (7,), device=device)
    target[3] = -100
    return (torch.randn(7, 50, device=device), target), {}


# An autograd.Function rather than an Operator: its forward writes the gradient (over the
# logits with inplace_grad=True), which a PyTorch operator may not do.
register("cross_entropy", cross_entropy, cross_entropy_reference, example=_example,
         differentiable=True, compile_safe=False)
