"""Vector addition through raw addresses, in the ``solve(a_ptr, b_ptr, c_ptr, N)`` form that
LeetGPU-style judges call: the kernel receives integers, not tensors, and casts them to
typed pointers itself.

Nothing checks an address: the dtype, length, layout and device behind it are whatever the
caller promises. :func:`run_solve` is the local test harness: it takes tensors, checks them,
and hands their addresses to a ``solve`` function.
"""

from __future__ import annotations

import numbers

from collections.abc import Callable

import torch
import triton
import triton.language as tl

from .validation import check_contiguous, check_same_shape, check_tensor

BLOCK_SIZE = 1024


def solve_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """What ``solve`` writes into ``c``, in plain PyTorch."""
    return a + b


@triton.jit
def vector_add_raw_kernel(
    a_address,  # an integer: the address of a's first float32
    b_address,  # an integer: the address of b's first float32
    c_address,  # an integer: the address of c's first float32
    num_elements,  # how many float32 each buffer holds
    BLOCK_SIZE: tl.constexpr,  # elements per program; a power of two
):
    # The addresses arrive as 64-bit integers; the casts make them pointers to float32.
    a_ptr = a_address.to(tl.pointer_type(tl.float32))
    b_ptr = b_address.to(tl.pointer_type(tl.float32))
    c_ptr = c_address.to(tl.pointer_type(tl.float32))
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < num_elements
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(c_ptr + offsets, a + b, mask=mask)


def solve(a_ptr: int, b_ptr: int, c_ptr: int, N: int) -> None:  # noqa: N803 (judge's names)
    """Write ``a + b`` into ``c``: three float32 buffers of ``N`` elements at the given
    addresses, on the device the kernels run on (see :func:`triton_guide.runtime.device`).

    Only the integers themselves can be checked here; what lies behind them cannot.
    """
    def as_int(name, value):
        # numpy's integers too (they are numbers.Integral), but not a bool or a tensor.
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            hint = "the number of elements" if name == "N" else "tensor.data_ptr() for an address"
            raise TypeError(f"{name} must be an int, got {type(value).__name__}; pass {hint}")
        return int(value)

    a_ptr, b_ptr, c_ptr, N = (as_int(name, value) for name, value in  # noqa: N806
                              (("a_ptr", a_ptr), ("b_ptr", b_ptr), ("c_ptr", c_ptr), ("N", N)))
    for name, value in (("a_ptr", a_ptr), ("b_ptr", b_ptr), ("c_ptr", c_ptr)):
        if not 2**31 <= value < 2**63:
            # Triton passes an int below 2**31 as int32, and an address must be 64 bits; no
            # process has addresses at 2**63 or above, which int64 cannot hold.
            raise ValueError(f"{name} = {value} is not a device address; "
                             f"pass tensor.data_ptr() of a live tensor")
        if value % 4:
            # A float32 load needs an address that is a multiple of 4: a GPU stops the
            # kernel with a misaligned address, the interpreter reads shifted bytes.
            raise ValueError(f"{name} = {value} is not a multiple of 4, so it is not the "
                             "address of a float32; pass tensor.data_ptr() of a float32 tensor")
    if not 1 <= N < 2**31:
        raise ValueError(f"N must be between 1 and 2**31 - 1, got {N}")
    grid = (triton.cdiv(N, BLOCK_SIZE),)
    vector_add_raw_kernel[grid](a_ptr, b_ptr, c_ptr, N, BLOCK_SIZE=BLOCK_SIZE)


def run_solve(
    solve_fn: Callable[[int, int, int, int], object], a: torch.Tensor, b: torch.Tensor
) -> torch.Tensor:
    """Call ``solve_fn`` the way a judge does, on tensors checked first; return ``c``.

    ``a`` and ``b`` must be contiguous float32 tensors of one shape on the kernels' device.
    """
    a = check_tensor("a", a, dtypes=(torch.float32,))
    b = check_tensor("b", b, dtypes=(torch.float32,))
    check_same_shape("a", a, "b", b)
    check_contiguous("a", a)
    check_contiguous("b", b)
    c = torch.empty_like(a)
    solve_fn(a.data_ptr(), b.data_ptr(), c.data_ptr(), a.numel())
    if c.is_cuda:
        torch.cuda.synchronize()  # a judge reads c only after the kernel has finished
    return c
