"""Input checks shared by every launcher.

A launcher calls these before it launches anything, so that a bad argument ends in a
``TypeError`` or ``ValueError`` that names the argument, never in a crash inside Triton or
a silently wrong result.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence

import numpy as np
import torch
import triton

from .runtime import device, interpreting

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# The most elements one block tensor may hold inside a Triton kernel (2**20 in Triton 3.x).
MAX_BLOCK_ELEMENTS = getattr(triton.language, "TRITON_MAX_TENSOR_NUMEL", 2**20)
# Offsets up to this fit in int32; past it a kernel must compute them in int64.
INT32_MAX = 2**31 - 1
# CUDA launch grids allow at most this many programs along axes 1 and 2.
MAX_GRID_AXIS_1 = 65535


def _dtype_names(dtypes: Sequence[torch.dtype]) -> str:
    return ", ".join(str(d).removeprefix("torch.") for d in dtypes)


# Looked up once: check_tensor runs for every tensor argument of every call, and on a GPU
# host each attribute lookup through the torch namespace costs a fraction of a microsecond.
_is_compiling = torch.compiler.is_compiling
_is_batched = torch._C._functorch.is_batchedtensor
_STRIDED = torch.strided
_ON_GPU = not interpreting()
_current_cuda_device = torch._C._cuda_getDevice if _ON_GPU else None


def check_tensor(
    name: str,
    value: object,
    *,
    dtypes: Sequence[torch.dtype] = FLOAT_DTYPES,
    ndim: int | None = None,
    min_ndim: int | None = None,
) -> torch.Tensor:
    """Check one tensor argument's kind, device, dtype, rank and size; return it.

    A view with the negative or conjugate bit set (``z.conj().imag``, ``x._neg_view()``)
    points at memory that holds the un-negated values, so it is returned resolved (copied
    with the sign applied): the kernels read raw memory and would miss the bit.
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    # Under torch.compile the tensors are stand-ins without these properties (and Dynamo
    # cannot trace the queries); the compiled graph resolves neg and conj bits itself.
    if not _is_compiling():
        if _is_batched(value):
            raise TypeError(
                f"{name} is a batched tensor from torch.func.vmap, which the Triton kernels "
                f"cannot read: call the op outside vmap on the whole batch (ops that take "
                f"leading dimensions, such as softmax and attention, handle a batch as is)"
            )
        if value.is_neg() or value.is_conj():
            value = value.resolve_neg().resolve_conj()
        index = value.get_device()  # -1 on the CPU
        if index >= 0 and _ON_GPU and index != _current_cuda_device():
            current = _current_cuda_device()
            raise ValueError(
                f"{name} is on {value.device}, but kernels launch on the current device, "
                f"cuda:{current}: call the op inside "
                f"`with torch.cuda.device({name}.device):`, or torch.cuda.set_device first"
            )
    if value.is_nested:
        raise TypeError(
            f"{name} is a nested tensor, which has no single strided layout for a kernel to "
            f"read: pass {name}.to_padded_tensor(0.0), or call the op once per component"
        )
    if value.layout is not _STRIDED:
        raise TypeError(
            f"{name} has layout {value.layout}; the kernels read dense strided memory: "
            f"pass {name}.to_dense()"
        )
    if value.is_cuda if _ON_GPU else value.is_cpu:
        pass  # the device the kernels run on
    else:
        expected_device = device()
        if value.is_meta:
            raise ValueError(
                f"{name} is on meta: a meta tensor has a shape but no data, so no kernel can "
                f"read it; create it with data on {expected_device.type} instead "
                f"(for example torch.randn(..., device='{expected_device.type}'))"
            )
        mode = "the GPU" if _ON_GPU else "the Triton interpreter"
        raise ValueError(
            f"{name} is on {value.device}, but kernels run on {mode} here: "
            f"move it with {name}.to('{expected_device.type}')"
        )
    if value.dtype not in dtypes:
        raise TypeError(f"{name} has dtype {value.dtype}; expected one of: {_dtype_names(dtypes)}")
    if not _ON_GPU and value.dtype == torch.bfloat16:
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
    return value


def farthest_offset(tensor: torch.Tensor) -> int:
    """The largest offset, in elements, from the start of ``tensor``'s storage that it reaches.

    That is the storage offset plus ``sum((size - 1) * stride)``; a kernel addresses every
    element of the view with an offset no larger than this (counted from the view's first
    element, which is never further).
    """
    if tensor.numel() == 0:
        return 0
    reach = sum((size - 1) * abs(stride) for size, stride in zip(tensor.shape, tensor.stride()))
    return tensor.storage_offset() + reach


def needs_int64_offsets(*tensors: torch.Tensor, largest_index: int = 0) -> bool:
    """Whether a kernel over ``tensors`` must compute its offsets in int64.

    Triton computes ``index * stride`` in int32 unless an operand is int64; past
    ``2**31 - 1`` that product wraps round and the kernel reads the wrong address. Each
    launcher asks this once per launch and passes the answer as the ``INT64_OFFSETS``
    constexpr, so small problems keep the cheaper int32 arithmetic. ``largest_index``: a
    flat index the kernel forms before masking (a 1D kernel's last program reaches past the
    end by up to a block), which must fit too.
    """
    if largest_index > INT32_MAX:
        return True
    # A view never reaches past the end of its storage, so a storage of at most 2**31 - 1
    # elements settles it without the sum over dimensions (this runs on every launch).
    return any(t.untyped_storage().nbytes() // t.element_size() > INT32_MAX
               and farthest_offset(t) > INT32_MAX for t in tensors)


def check_int(name: str, value: object, *, expected: str = "an int") -> int:
    """``value`` as a Python int if it is a Python or numpy integer (not a bool); otherwise
    a TypeError saying that ``name`` must be ``expected``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__} {value!r}")
    return int(value)


# Threads per warp on NVIDIA GPUs.
THREADS_PER_WARP = 32
# Triton's number of warps for a launch that does not name one.
DEFAULT_NUM_WARPS = 4
# The most elements of a block each thread may hold. A block of B elements launched with W
# warps gives each of its 32 * W threads B / (32 * W) elements of every block tensor the
# kernel computes, all meant for registers (at most 255 per thread, and 65536 per SM, so
# 64 per thread with 32 warps): past that the compiler spills to local memory, and its own
# work grows with the code, which is unrolled once per element. Measured by compiling for
# an H100 (sm_90, triton 3.9, on a two-core CPU host; float32): vector_add_kernel (4 warps)
# takes 158 registers at 64 elements per thread, 254 at 128 (the last without spills);
# at 256 it spills 616 bytes per thread and compiles in 1.4 s, at 512 in 4.9 s, at 1024 in
# 28 s and at 2048 in 51 s; at 8192 (block_size=2**20) it was still compiling after 180 s
# on an H100 (triton 3.6). At 256 per thread the copy, transpose and sum kernels compile
# in 1.1-3.7 s; so kernels that load an element, combine it with another and store or sum
# it get 256, one doubling past their registers (a page can still show what spilling
# costs) at a few seconds' compile.
MAX_ELEMENTS_PER_THREAD = 256
# Kernels that keep several float32 values per element across a loop and take
# exponentials (the online softmax, cross-entropy) compile far slower: at 256 per thread
# 24 s and 13.5 s, at 128 3.5 s and 2.8 s (and 1.7 s and 1.2 s at 64). They get 128.
MAX_ELEMENTS_PER_THREAD_EXP = 128


def max_block_size(num_warps: int, per_thread: int = MAX_ELEMENTS_PER_THREAD) -> int:
    """The largest block with at most ``per_thread`` elements per thread of ``num_warps``
    warps (and at most a Triton block's ``MAX_BLOCK_ELEMENTS``)."""
    return min(MAX_BLOCK_ELEMENTS, per_thread * THREADS_PER_WARP * num_warps)


def check_elements_per_thread(name: str, elements: int, num_warps: int, fix: str,
                              per_thread: int = MAX_ELEMENTS_PER_THREAD) -> None:
    """Refuse a block of ``elements`` (named ``name``) that gives each thread of ``num_warps``
    warps more than ``per_thread`` elements; ``fix`` says what to pass instead."""
    held = elements // (THREADS_PER_WARP * num_warps)
    if held > per_thread:
        raise ValueError(
            f"{name} is {elements}: launched with {num_warps} warp{'s' * (num_warps != 1)} of "
            f"{THREADS_PER_WARP} threads, that is {held} elements per thread, more than the "
            f"{per_thread} per thread that this kernel compiles in bounded time (past that, "
            f"registers run out and compilation takes minutes); {fix}"
        )


def check_block_size(
    name: str, value: object, *, max_value: int = MAX_BLOCK_ELEMENTS,
    num_warps: int | Callable[[int], int] = DEFAULT_NUM_WARPS,
    per_thread: int = MAX_ELEMENTS_PER_THREAD,
) -> int:
    """Check a tuning argument that must be a power-of-two integer no larger than ``max_value``
    and that compiles in bounded time: at most ``per_thread`` elements per thread (see
    ``MAX_ELEMENTS_PER_THREAD``) for a block launched with ``num_warps`` warps (or
    ``num_warps(value)``, for launchers whose warps follow the block size).

    Accepts Python and numpy integers (not bools); returns the value as a Python int.
    """
    key = (name, value, max_value, num_warps, per_thread) if type(value) is int else None
    if key in _accepted_block_sizes:  # launchers check the same few values on every call
        return value
    value = check_int(name, value, expected="an int (a power of two)")
    if value < 1 or value & (value - 1):
        suggestion = triton.next_power_of_2(max(value, 1))
        raise ValueError(
            f"{name} must be a power of two, got {value}; try {min(suggestion, max_value)}"
        )
    if value > max_value:
        raise ValueError(
            f"{name} is {value}, but a Triton block holds at most {max_value} elements; "
            f"pass {name}={max_value} or less"
        )
    warps = num_warps(value) if callable(num_warps) else num_warps
    check_elements_per_thread(name, value, warps,
                              f"pass {name}={max_block_size(warps, per_thread)} or less",
                              per_thread)
    if key is not None and len(_accepted_block_sizes) < 4096:
        _accepted_block_sizes.add(key)
    return value


_accepted_block_sizes: set[tuple] = set()


def check_bool(name: str, value: object) -> bool:
    """Accept ``bool`` and ``numpy.bool_``; return a Python bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool (True or False), got {type(value).__name__} {value!r}")
    return bool(value)


def check_positive_number(name: str, value: object) -> float:
    """Accept a finite real number above zero (Python or numpy, not bool); return a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def check_grid_axis(name: str, programs: int, fix: str) -> None:
    """Refuse a launch whose grid axis 1 would exceed CUDA's limit (checked in both modes)."""
    if programs > MAX_GRID_AXIS_1:
        raise ValueError(
            f"{name} needs {programs} programs along launch-grid axis 1, but CUDA allows "
            f"at most {MAX_GRID_AXIS_1} there; {fix}"
        )


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
