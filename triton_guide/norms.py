"""LayerNorm and RMSNorm over the last dimension, forward and backward.

The two norms share their kernels: RMSNorm is LayerNorm without the mean (``SUBTRACT_MEAN``)
and, here, without a bias. One program normalises one row, which must fit in one block of
at most :data:`MAX_BLOCK` elements. The forward saves each row's mean and ``1 / std``
(``rstd``) in float32 so that the backward does not recompute the statistics.

The backward has two kinds of output. ``dx`` belongs to one row, so each program writes it
directly. ``dweight`` (and ``dbias``) sum over every row, so many programs contribute to each
element: each program handles a contiguous range of rows, sums its rows' contributions in
registers, and writes one row of partial sums; a second kernel then adds the partial rows
up (:func:`column_sums_kernel`). No atomics, no locks, and the same result on every run.
Both sums are compensated (Kahan): each carries the low-order bits its float32 additions
round away and adds them back in, so that the gradients stay as accurate as float32
allows however many rows are summed (:func:`compensated_add`).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import triton
import triton.language as tl

from .hardware import multiprocessors, num_warps_for
from .launch import cdiv, fast_launch, next_power_of_2
from .library import Operator
from .registry import register
from .runtime import interpreting
from .validation import check_same_dtype, check_tensor

# The widest row (elements) a program normalises in one block.
MAX_BLOCK = 16384
# Columns per program in the kernel that adds the partial sums up.
COLUMN_SUM_BLOCK = 128


def layer_norm_reference(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """What :func:`layer_norm` computes, in plain PyTorch."""
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def rms_norm_reference(
    x: torch.Tensor, weight: torch.Tensor, eps: float | None = None
) -> torch.Tensor:
    """What :func:`rms_norm` computes, in plain PyTorch."""
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)


@triton.jit
def norm_forward_kernel(
    x_ptr,
    y_ptr,
    weight_ptr,
    bias_ptr,  # ignored unless HAS_BIAS
    mean_ptr,  # float32, one per row; written only if SUBTRACT_MEAN
    rstd_ptr,  # float32, one per row: 1 / sqrt(variance + eps)
    x_row_stride,  # elements between the starts of two rows of x
    y_row_stride,
    num_cols,  # the normalised size (hidden size)
    eps,
    SUBTRACT_MEAN: tl.constexpr,  # True: LayerNorm; False: RMSNorm
    HAS_BIAS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,  # a power of two >= num_cols: the whole row in one block
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < num_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    if SUBTRACT_MEAN:
        mean = tl.sum(x, axis=0) / num_cols
        tl.store(mean_ptr + row, mean)
        # Padding lanes must stay 0, or they would count in the variance below.
        x = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / num_cols + eps)
    tl.store(rstd_ptr + row, rstd)
    y = x * rstd * tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        y += tl.load(bias_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def compensated_add(total, compensation, value, COMPENSATED: tl.constexpr):
    """``total + value`` in float32, and the new compensation: with COMPENSATED, a Kahan
    sum, which keeps what rounding drops from each addition and feeds it into the next.

    A plain float32 sum of n terms can lose up to about n * 2**-24 of the terms' size: a
    long sum gets worse with every term (a weight gradient summed over 4096 rows by four
    programs came out 3.4-5x less accurate than torch's float32 against float64; Kahan's,
    0.5x). Kahan's error stays at about 2**-24 whatever n. It costs three more additions
    per term and a register per element for each compensation. The backward kernel moves
    12 bytes per element and row in float32 (x and grad_y read, dx written) and does about
    fifteen operations on them; three more leave it bound by memory. Compiled for an H100
    (sm_90, triton 3.9), 4096-wide rows take 179-190 registers per thread instead of
    144-149, with no spills either way and the same one program per SM; at 16384 (16
    warps, 128 registers at most) the spills grow from 344 to 1232 bytes per thread.
    """
    if COMPENSATED:
        corrected = value - compensation
        new_total = total + corrected
        # What the addition rounded away (exact in float32): subtracted from the next term.
        compensation = (new_total - total) - corrected
    else:
        new_total = total + value
    return new_total, compensation


@triton.jit
def norm_backward_kernel(
    x_ptr,
    grad_y_ptr,
    grad_x_ptr,
    weight_ptr,
    mean_ptr,  # read only if SUBTRACT_MEAN
    rstd_ptr,
    partial_grad_weight_ptr,  # float32 (num_programs, num_cols): this program's row sums
    partial_grad_bias_ptr,  # the same for the bias; ignored unless HAS_BIAS
    x_row_stride,
    grad_y_row_stride,
    grad_x_row_stride,
    num_rows,
    num_cols,
    rows_per_program,  # this program handles rows [pid * rows_per_program, ...) of them
    SUBTRACT_MEAN: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    COMPENSATED: tl.constexpr = True,  # Kahan sums of the rows (see compensated_add)
):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < num_cols
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    grad_weight = tl.zeros([BLOCK_SIZE], tl.float32)
    grad_bias = tl.zeros([BLOCK_SIZE], tl.float32)
    weight_compensation = tl.zeros([BLOCK_SIZE], tl.float32)
    bias_compensation = tl.zeros([BLOCK_SIZE], tl.float32)

    row_start = pid.to(tl.int64) * rows_per_program  # 64-bit offsets from here on
    row_end = tl.minimum(row_start + rows_per_program, num_rows)
    for row in range(row_start, row_end):
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0)
        x = x.to(tl.float32)
        grad_y = tl.load(grad_y_ptr + row * grad_y_row_stride + cols, mask=mask, other=0.0)
        grad_y = grad_y.to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        if SUBTRACT_MEAN:
            x = x - tl.load(mean_ptr + row)
        x_hat = tl.where(mask, x * rstd, 0.0)  # the normalised row, 0 in the padding
        g = grad_y * weight  # the gradient with respect to x_hat
        # dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)); RMSNorm has no mean(g) term
        # because it subtracts no mean in the forward.
        correction = x_hat * (tl.sum(g * x_hat, axis=0) / num_cols)
        if SUBTRACT_MEAN:
            correction += tl.sum(g, axis=0) / num_cols
        grad_x = (g - correction) * rstd
        tl.store(grad_x_ptr + row * grad_x_row_stride + cols,
                 grad_x.to(grad_x_ptr.dtype.element_ty), mask=mask)
        grad_weight, weight_compensation = compensated_add(
            grad_weight, weight_compensation, grad_y * x_hat, COMPENSATED)
        if HAS_BIAS:
            grad_bias, bias_compensation = compensated_add(
                grad_bias, bias_compensation, grad_y, COMPENSATED)

    tl.store(partial_grad_weight_ptr + pid * num_cols + cols, grad_weight, mask=mask)
    if HAS_BIAS:
        tl.store(partial_grad_bias_ptr + pid * num_cols + cols, grad_bias, mask=mask)


@triton.jit
def column_sums_kernel(
    partial_ptr,  # float32 (num_partials, num_cols), contiguous: one row per program above
    out_ptr,  # (num_cols,): the column sums, in out_ptr's dtype
    num_partials,
    num_cols,
    BLOCK_SIZE: tl.constexpr,  # columns per program
    COMPENSATED: tl.constexpr = True,  # a Kahan sum down each column (see compensated_add)
):
    # The sums of the columns of the partial rows: each program walks down BLOCK_SIZE
    # columns, adding one partial row at a time.
    cols = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < num_cols
    total = tl.zeros([BLOCK_SIZE], tl.float32)
    compensation = tl.zeros([BLOCK_SIZE], tl.float32)
    for partial in range(0, num_partials):
        value = tl.load(partial_ptr + partial * num_cols + cols, mask=mask, other=0.0)
        total, compensation = compensated_add(total, compensation, value, COMPENSATED)
    tl.store(out_ptr + cols, total.to(out_ptr.dtype.element_ty), mask=mask)


def default_num_partials(num_rows: int, device: torch.device | None = None) -> int:
    """How many programs the backward splits the rows among (= rows of partial sums).

    On a GPU, two per streaming multiprocessor of ``device`` (the current GPU by default):
    enough to keep every SM busy, few enough that the partial sums stay small next to
    ``x``. Under the interpreter, 4, so that the tests see programs with several rows each.
    """
    if interpreting():
        wanted = 4
    else:
        wanted = 2 * multiprocessors(device)
    return max(1, min(num_rows, wanted))


def norm_forward(
    x_rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float,
    subtract_mean: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Launch the forward kernel on 2-D ``x_rows``; return ``y``, ``mean`` and ``rstd``."""
    num_rows, num_cols = x_rows.shape
    y = torch.empty((num_rows, num_cols), dtype=x_rows.dtype, device=x_rows.device)
    mean = torch.empty(num_rows if subtract_mean else 1, dtype=torch.float32,
                       device=x_rows.device)
    rstd = torch.empty(num_rows, dtype=torch.float32, device=x_rows.device)
    block = next_power_of_2(num_cols)
    fast_launch(norm_forward_kernel)[(num_rows,)](
        x_rows, y, weight, weight if bias is None else bias, mean, rstd,
        x_rows.stride(0), y.stride(0), num_cols, eps,
        SUBTRACT_MEAN=subtract_mean, HAS_BIAS=bias is not None, BLOCK_SIZE=block,
        num_warps=num_warps_for(block, most=16),
    )
    return y, mean, rstd


def norm_backward(
    grad_y: torch.Tensor, x_rows: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,
    rstd: torch.Tensor, has_bias: bool, subtract_mean: bool, num_partials: int | None = None,
    compensated: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Launch the backward kernels; return ``dx`` (2-D), ``dweight`` and ``dbias``.

    ``compensated=False`` sums the rows and the partial rows plainly, as float32 additions
    one after another (to compare: see :func:`compensated_add`)."""
    num_rows, num_cols = x_rows.shape
    grad_y = grad_y.contiguous().view(num_rows, num_cols)
    if num_partials is None:
        num_partials = default_num_partials(num_rows, x_rows.device)
    rows_per_program = cdiv(num_rows, num_partials)
    grad_x = torch.empty((num_rows, num_cols), dtype=x_rows.dtype, device=x_rows.device)
    partial_shape = (num_partials, num_cols)
    partial_weight = torch.empty(partial_shape, dtype=torch.float32, device=x_rows.device)
    partial_bias = torch.empty(partial_shape if has_bias else (1,), dtype=torch.float32,
                               device=x_rows.device)
    block = next_power_of_2(num_cols)
    fast_launch(norm_backward_kernel)[(num_partials,)](
        x_rows, grad_y, grad_x, weight, mean, rstd, partial_weight, partial_bias,
        x_rows.stride(0), grad_y.stride(0), grad_x.stride(0),
        num_rows, num_cols, rows_per_program,
        SUBTRACT_MEAN=subtract_mean, HAS_BIAS=has_bias, BLOCK_SIZE=block,
        COMPENSATED=compensated, num_warps=num_warps_for(block, most=16),
    )
    sum_grid = (cdiv(num_cols, COLUMN_SUM_BLOCK),)
    grad_weight = torch.empty_like(weight)
    fast_launch(column_sums_kernel)[sum_grid](
        partial_weight, grad_weight, num_partials, num_cols, BLOCK_SIZE=COLUMN_SUM_BLOCK,
        COMPENSATED=compensated)
    grad_bias = None
    if has_bias:
        grad_bias = torch.empty_like(weight)
        fast_launch(column_sums_kernel)[sum_grid](
            partial_bias, grad_bias, num_partials, num_cols, BLOCK_SIZE=COLUMN_SUM_BLOCK,
            COMPENSATED=compensated)
    return grad_x, grad_weight, grad_bias


def _norm_operators(name: str, subtract_mean: bool) -> Operator:
    """The forward Operator of ``layer_norm`` (``subtract_mean``) or ``rms_norm``, with its
    backward Operator (see triton_guide.library)."""

    def launch(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
               eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y, mean, rstd = norm_forward(x.view(-1, x.shape[-1]), weight, bias, eps, subtract_mean)
        return y.view(x.shape), mean, rstd

    def fake(x, weight, bias, eps):
        rows = x.numel() // x.shape[-1]
        y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        mean = torch.empty(rows if subtract_mean else 1, dtype=torch.float32, device=x.device)
        return y, mean, torch.empty(rows, dtype=torch.float32, device=x.device)

    def launch_backward(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                        mean: torch.Tensor, rstd: torch.Tensor, has_bias: bool,
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        grad_x, grad_weight, grad_bias = norm_backward(
            grad_y, x.view(-1, x.shape[-1]), weight, mean, rstd, has_bias, subtract_mean)
        # An operator returns tensors only: no bias, an empty one in its place.
        if grad_bias is None:
            grad_bias = grad_weight.new_empty(0)
        return grad_x.view(x.shape), grad_weight, grad_bias

    def fake_backward(grad_y, x, weight, mean, rstd, has_bias):
        return (torch.empty(x.shape, dtype=x.dtype, device=x.device), torch.empty_like(weight),
                torch.empty_like(weight) if has_bias else weight.new_empty(0))

    def save(ctx, inputs, output):
        x, weight, bias, eps = inputs
        _, mean, rstd = output
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.has_bias = bias is not None
        ctx.mark_non_differentiable(mean, rstd)

    def grad(ctx, grad_y, grad_mean, grad_rstd):
        x, weight, mean, rstd = ctx.saved_tensors
        grad_x, grad_weight, grad_bias = backward(grad_y, x, weight, mean, rstd, ctx.has_bias)
        return grad_x, grad_weight, grad_bias if ctx.has_bias else None, None

    backward = Operator(f"{name}_backward", launch_backward, fake=fake_backward,
                        refuse_name=name)
    return Operator(name, launch, fake=fake, backward=grad, setup_context=save)


_layer_norm = _norm_operators("layer_norm", subtract_mean=True)
_rms_norm = _norm_operators("rms_norm", subtract_mean=False)


def _check_inputs(x, weight, bias, eps):
    """Check the arguments; return ``x``, ``weight`` and ``bias`` as :func:`check_tensor`
    returns them (a negative-bit view resolved)."""
    x = check_tensor("x", x, min_ndim=1)
    if x.stride(-1) != 1:
        raise ValueError(
            f"x must have stride 1 along its last dimension, got strides {x.stride()}; "
            "pass x.contiguous()"
        )
    num_cols = x.shape[-1]
    try:
        x.view(-1, num_cols)
    except RuntimeError:
        raise ValueError(
            f"the leading dimensions of x (strides {x.stride()}) cannot be flattened into "
            "rows without a copy; pass x.contiguous()"
        ) from None
    if next_power_of_2(num_cols) > MAX_BLOCK:
        raise ValueError(
            f"rows of {num_cols} elements do not fit one block (at most {MAX_BLOCK}); "
            "normalise in chunks with torch instead"
        )
    checked = {}
    for name, value in (("weight", weight), ("bias", bias)):
        if value is None and name == "bias":
            checked[name] = None
            continue
        value = checked[name] = check_tensor(name, value, ndim=1)
        check_same_dtype("x", x, name, value)
        if value.shape[0] != num_cols:
            raise ValueError(
                f"{name} must have one element per column of x ({num_cols}), got shape "
                f"{tuple(value.shape)}"
            )
        if value.stride(0) != 1:
            raise ValueError(f"{name} must be contiguous; pass {name}.contiguous()")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (
        math.isfinite(eps) and eps > 0
    ):
        raise ValueError(f"eps must be a positive finite number, got {eps!r}")
    return x, checked["weight"], checked["bias"]


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last dimension.

    Like ``torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)``, and
    differentiable in ``x``, ``weight`` and ``bias``. ``x`` may have any rank (leading
    dimensions are flattened into rows, which may be strided); ``weight`` and ``bias``
    (optional) have one element per column and ``x``'s dtype. Rows of up to
    :data:`MAX_BLOCK` elements.
    """
    x, weight, bias = _check_inputs(x, weight, bias, eps)
    return _layer_norm(x, weight, bias, float(eps))[0]


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float | None = None
) -> torch.Tensor:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last dimension.

    Like ``torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)``, and
    differentiable in ``x`` and ``weight``. As in torch, ``eps=None`` means
    ``torch.finfo(x.dtype).eps``. Same shapes and limits as :func:`layer_norm`.
    """
    if eps is None and isinstance(x, torch.Tensor) and x.is_floating_point():
        eps = torch.finfo(x.dtype).eps
    x, weight, _ = _check_inputs(x, weight, None, eps)
    return _rms_norm(x, weight, None, float(eps))[0]


def _example_layer_norm(device):
    return (torch.randn(3, 5, 40, device=device), torch.randn(40, device=device),
            torch.randn(40, device=device)), {}


def _example_rms_norm(device):
    return (torch.randn(3, 5, 40, device=device), torch.randn(40, device=device)), {}


register("layer_norm", layer_norm, layer_norm_reference, example=_example_layer_norm,
         differentiable=True, compile_safe=True)
register("rms_norm", rms_norm, rms_norm_reference, example=_example_rms_norm,
         differentiable=True, compile_safe=True)
