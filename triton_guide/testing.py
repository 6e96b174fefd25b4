"""Comparing a kernel's output with its reference, shared by the tests and the example pages."""

from __future__ import annotations

import torch

from .precision import dot_input_precision
from .runtime import interpreting


def relative_error(actual: torch.Tensor, reference: torch.Tensor) -> float:
    """``||actual - reference|| / ||reference||`` in float64 (the plain norm if ``reference`` is 0)."""
    difference = (actual.double() - reference.double()).norm().item()
    scale = reference.double().norm().item()
    return difference / scale if scale > 0 else difference


def tolerance(dtype: torch.dtype, *, tensor_cores: bool = False,
              input_precision: str | None = None) -> float:
    """The relative tolerance for results computed from inputs of ``dtype``.

    ``tensor_cores``: the kernel multiplies with ``tl.dot``. The interpreter computes it
    exactly. On a GPU, float32 operands are multiplied as ``input_precision`` says
    (by default as the package's ops do, following PyTorch's float32 matmul setting:
    :func:`triton_guide.precision.dot_input_precision`), see ``FLOAT32_DOT_TOLERANCE``.
    """
    if dtype == torch.float32:
        if not tensor_cores or interpreting():
            return 1e-5
        return FLOAT32_DOT_TOLERANCE[input_precision or dot_input_precision(torch.float32)]
    if dtype == torch.float16:
        return 1e-2
    if dtype == torch.bfloat16:
        return 5e-2
    raise ValueError(f"no tolerance defined for {dtype}")


# float32 tl.dot on a GPU, per input_precision. "tf32" keeps 10 of float32's 23 fraction
# bits: measured on an H100 (triton 3.6), float32 attention through tf32 lands 1.2e-3 to
# 2.1e-3 from the float64 reference over the whole tensor, with single elements beyond 1e-2
# in a few million, so it gets 3e-2. "tf32x3" leaves out terms of about 2**-22 of each
# product (float32 rounds at 2**-24), and "ieee" is float32 itself: float32's 1e-5
# loosened tenfold, still ten times below the error tf32 leaves over a whole tensor.
FLOAT32_DOT_TOLERANCE = {"tf32": 3e-2, "tf32x3": 1e-4, "ieee": 1e-4}


def assert_close(
    actual: torch.Tensor, reference: torch.Tensor, *, rtol: float, atol: float = 0.0,
    name: str = "output",
) -> float:
    """Check every element of ``actual`` against ``reference``; return the relative error.

    An element passes when ``|actual - reference| <= rtol * (|reference| + rms(reference)) +
    atol``: relative for large values, and measured against the tensor's typical size for
    values near zero (``atol`` matters only where the whole reference is about zero). NaN
    must appear exactly where the reference has NaN, and infinities must match exactly. On
    failure the message says how many elements differ and shows the worst one.
    """
    if actual.shape != reference.shape:
        raise AssertionError(f"{name}: shape {tuple(actual.shape)}, expected {tuple(reference.shape)}")
    got = actual.detach().double().cpu()
    want = reference.detach().double().cpu()
    bad, regular, error, allowed = _compare(got, want, rtol=rtol, atol=atol)
    if bad.any():
        count = int(bad.sum())
        excess = torch.where(regular, error - allowed, torch.full_like(error, float("inf")))
        excess = torch.where(bad, excess, torch.full_like(error, -float("inf")))
        worst = tuple(int(i) for i in torch.unravel_index(excess.argmax(), excess.shape))
        raise AssertionError(
            f"{name}: {count} of {got.numel()} elements differ beyond rtol={rtol:g}; worst at "
            f"index {worst}: got {got[worst].item():.6g}, expected {want[worst].item():.6g}; "
            f"relative error over finite elements {relative_error(got[regular], want[regular]):.3g}"
        )
    return relative_error(got[regular], want[regular]) if regular.any() else 0.0


def mismatches(
    actual: torch.Tensor, reference: torch.Tensor, *, rtol: float, atol: float = 0.0
) -> torch.Tensor:
    """A boolean tensor, True where ``actual`` fails the element rule of :func:`assert_close`."""
    if actual.shape != reference.shape:
        raise ValueError(f"shape {tuple(actual.shape)}, expected {tuple(reference.shape)}")
    got = actual.detach().double().cpu()
    want = reference.detach().double().cpu()
    return _compare(got, want, rtol=rtol, atol=atol)[0]


def _compare(got: torch.Tensor, want: torch.Tensor, *, rtol: float, atol: float):
    """The element rule of :func:`assert_close` on float64 CPU tensors of one shape."""
    nan_mismatch = torch.isnan(got) != torch.isnan(want)
    # Finite pairs are compared with the tolerance; anything else (inf) must match exactly.
    regular = torch.isfinite(got) & torch.isfinite(want)
    rms = want[regular].pow(2).mean().sqrt().item() if regular.any() else 0.0
    error = torch.where(regular, (got - want).abs(), torch.zeros_like(got))
    allowed = rtol * (want.abs() + rms) + atol
    special = ~regular & ~torch.isnan(got) & ~torch.isnan(want)
    bad = nan_mismatch | (regular & (error > allowed)) | (special & (got != want))
    return bad, regular, error, allowed
