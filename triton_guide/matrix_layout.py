"""Where a matrix's values lie, for the matmul kernels: row by row or column by column, on
which boundaries its rows start, and the copies that give a kernel the layout it reads best.

A tensor descriptor (TMA) reads rows that start on 16-byte boundaries (:func:`descriptor_ready`,
:func:`row_aligned`); the pointer kernel reads 16 bytes at a time where the launcher can
prove the alignment (:func:`layout`, :func:`unaligned_runs`, :func:`aligned_copies`); and
Hopper's tensor cores take float32 (TF32) operands in one order only (:func:`k_major`).
"""

from __future__ import annotations

import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from .hardware import TMA_ALIGNMENT
from .launch import cdiv, unchecked_descriptor


def padded_length(length: int, item_size: int) -> int:
    """``length`` values of ``item_size`` bytes, rounded up to fill a multiple of 16 bytes."""
    per_boundary = TMA_ALIGNMENT // item_size
    return cdiv(length, per_boundary) * per_boundary


def descriptor_ready(x: torch.Tensor) -> bool:
    """True when a tensor descriptor can read the matrix ``x``: x is stored row by row or
    column by column, and its start and the distance between its rows (columns) are
    multiples of 16 bytes, so every row (column) starts on a 16-byte boundary."""
    columns = stored_by_columns(x)
    stride = x.stride(1) if columns else x.stride(0)
    inner = x.stride(0) if columns else x.stride(1)
    return (inner == 1 and stride > 0 and x.data_ptr() % TMA_ALIGNMENT == 0
            and stride * x.element_size() % TMA_ALIGNMENT == 0)


def row_aligned(x: torch.Tensor) -> torch.Tensor:
    """``x`` itself if :func:`descriptor_ready`, else the same values in a new buffer whose
    rows start on 16-byte boundaries: a view of x's shape, stored in x's order (row by row, or
    column by column if x is), so the copy reads and writes memory in long runs. The padding
    at the end of each row is never read: a descriptor has x's shape, and the copy engine
    returns zeros past it."""
    if descriptor_ready(x):
        return x
    if stored_by_columns(x):
        return row_aligned(x.t()).t()
    rows, cols = x.shape
    buffer = torch.empty((rows, padded_length(cols, x.element_size())), dtype=x.dtype,
                         device=x.device)
    buffer[:, :cols] = x
    return buffer[:, :cols]


def descriptor(x: torch.Tensor) -> TensorDescriptor:
    """A tensor descriptor over ``x`` (over ``x.t()`` if x is stored column by column), with
    a placeholder tile shape: the autotuner's pre-hook sets each configuration's."""
    if stored_by_columns(x):
        x = x.t()
    # kernel_inputs has checked that TMA can read x (descriptor_ready).
    return unchecked_descriptor(x, list(x.shape), list(x.stride()), [16, 16])


def alignment(*values: int) -> int:
    """The largest power of two, up to 16, that divides every one of ``values``."""
    bits = 16  # the lowest bit set in any of them (or 16) is that power of two
    for value in values:
        bits |= value
    return bits & -bits


def layout(x: torch.Tensor) -> tuple[bool, int]:
    """How the matrix ``x`` is laid out: ``(columns, align)``.

    ``columns`` is True when x is stored column by column (a stride of 1 down its columns,
    as in a transposed view) rather than row by row. ``align`` is the largest power of two,
    up to 16, that divides both the distance between those rows (columns) and their length:
    each starts on a boundary of that many elements. It is 1 when x has no stride of 1.
    """
    if stored_by_columns(x):
        return True, alignment(x.stride(1), x.shape[0])
    if x.stride(1) == 1:
        return False, alignment(x.stride(0), x.shape[1])
    return False, 1


def stored_by_columns(x: torch.Tensor) -> bool:
    """``layout(x)[0]`` without the alignment: x has a stride of 1 down its columns and
    not along its rows (a transposed view)."""
    return x.stride(1) != 1 and x.stride(0) == 1


def unaligned_runs(x: torch.Tensor) -> bool:
    """True when ``x`` is stored row by row (or column by column) in rows the kernel cannot
    read 16 bytes at a time: their stride or length is not a multiple of 16 bytes, or the
    data does not start on a 16-byte boundary. False when x has no stride of 1 at all."""
    if x.stride(1) != 1 and x.stride(0) != 1:
        return False
    return layout(x)[1] * x.element_size() < 16 or x.data_ptr() % 16 != 0


def aligned_copies(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``a`` and ``b`` copied so that every row the kernel reads starts on a 16-element
    boundary: ``a`` as M x K' rows, ``b`` as K' x N stored column by column (the copy of
    ``b.t()``), where K' is K rounded up to a multiple of 16 and the added columns of ``a``
    and rows of ``b`` are zeros, which add nothing to the products.

    Column by column, ``b`` needs no padding along N: the kernel reads each column of ``b``
    along K, and only K has to be padded for that.
    """
    padding = -a.shape[1] % 16
    a = torch.nn.functional.pad(a, (0, padding))
    b = torch.nn.functional.pad(b.t(), (0, padding)).t()
    return a, b


# float32 under TF32 (and tf32x3): Hopper's wgmma takes TF32 operands only K-major (a by
# rows, b by columns). In any other order the kernel transposes each tile through registers
# and shared memory in its inner loop: compiled for sm_90 by triton 3.6 at 128 x 128 x 32,
# 16 st.shared, 4 ld.shared and 4 bar.sync beside 4 wgmma. On the H100 (GPU time) "high"
# at 4096^3 ran 86 TFLOP/s with b by rows, 304 with b by columns, 232 counting the copy
# (cuBLAS 344); the copy won at every size measured, 128 x 4096 x 4096 to 8192^3.
def k_major(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 ``a`` stored by rows and ``b`` by columns, copying whichever is not, with
    rows (columns) that start on 16-byte boundaries."""
    if not stored_by_columns(b):
        b = row_aligned(b.t().contiguous()).t()
    if stored_by_columns(a) or a.stride(1) != 1:
        a = row_aligned(a.contiguous())
    return a, b
