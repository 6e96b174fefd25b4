"""Input checks shared by every launcher.

A launcher calls these before it launches anything, so that a bad argument ends in a
``TypeError`` or ``ValueError`` that names the argument, never in a crash inside Triton or
a silently wrong result.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .runtime import device, interpreting

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _dtype_names(dtypes: Sequence[torch.dtype]) -> str:
    return ", ".join(str(d).removeprefix("torch.") for d in dtypes)


def check_tensor(
    name: str,
    value: object,
    *,
    dtypes: Sequence[torch.dtype] = FLOAT_DTYPES,
    ndim: int | None = None,
    min_ndim: int | None = None,
) -> torch.Tensor:
    """Check one tensor argument's type, device, dtype, rank and size; return it."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    expected_device = device()
    if value.device.type != expected_device.type:
        mode = "the Triton interpreter" if interpreting() else "the GPU"
        raise ValueError(
            f"{name} is on {value.device}, but kernels run on {mode} here: "
            f"move it with {name}.to('{expected_device.type}')"
        )
    if value.dtype not in dtypes:
        raise TypeError(f"{name} has dtype {value.dtype}; expected one of: {_dtype_names(dtypes)}")
    if interpreting() and value.dtype == torch.bfloat16:
        raise TypeError(
            f"{name} is bfloat16, which the Triton interpreter cannot compute with "
            "(numpy has no bfloat16); use float16 or float32, or run on a GPU"
        )
    if ndim is not None and value.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(value.shape)}")
    if min_ndim is not None and value.dim() < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimension(s), got shape {tuple(value.shape)}"
        )
    if value.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(value.shape)}); nothing to compute")
    if value.numel() >= 2**31:
        raise ValueError(
            f"{name} has {value.numel()} elements; the kernels index with 32-bit offsets "
            "and take fewer than 2**31"
        )
    return value


def check_contiguous(name: str, value: torch.Tensor) -> None:
    """Refuse a tensor whose elements are not laid out densely in row-major order."""
    if not value.is_contiguous():
        raise ValueError(
            f"{name} is not contiguous (strides {value.stride()} for shape "
            f"{tuple(value.shape)}); pass {name}.contiguous()"
        )


def check_same_shape(name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor) -> None:
    if a.shape != b.shape:
        raise ValueError(
            f"{name_a} and {name_b} must have the same shape, got "
            f"{tuple(a.shape)} and {tuple(b.shape)}"
        )


def check_same_dtype(name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor) -> None:
    if a.dtype != b.dtype:
        raise TypeError(
            f"{name_a} and {name_b} must have the same dtype, got {a.dtype} and {b.dtype}"
        )
