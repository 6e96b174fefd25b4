"""What the launchers ask of the GPU they launch on: its compute capability, its number of
streaming multiprocessors (SMs), whether it has the TMA copy engine and the alignment TMA
needs, the shared memory one program may use, and how many warps a tile of a given size
gets.

Every query takes the device of the tensors being launched on (``x.device``), never GPU 0:
on a machine with two different GPUs, each launch sizes itself for its own. Answers are
asked of torch once per GPU and kept: the launchers ask on every call, and torch's query
took 3-6 us of an H100 host's time.
"""

from __future__ import annotations

import functools

import torch

from .runtime import interpreting

# A tensor descriptor (TMA) needs its base and every stride but the last to be multiples of
# 16 bytes, so that every row it reads starts on a 16-byte boundary.
TMA_ALIGNMENT = 16


def _index(device: torch.device | str | int | None) -> int:
    """The CUDA device index of ``device`` (the current device for ``cuda`` without one,
    for ``None``, and for a CPU device, which the interpreter's tests launch on)."""
    if isinstance(device, int):
        return device
    device = torch.device(device) if device is not None else None
    if device is not None and device.type == "cuda" and device.index is not None:
        return device.index
    return torch.cuda.current_device()


def compute_capability(device: torch.device | str | int | None = None) -> tuple[int, int]:
    """``(major, minor)`` of ``device``'s GPU: (9, 0) for an H100 or H200."""
    return _capability_of(_index(device))


@functools.cache
def _capability_of(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


def multiprocessors(device: torch.device | str | int | None = None) -> int:
    """The number of SMs of ``device``'s GPU (132 on an H100 SXM or an H200)."""
    return _properties_of(_index(device)).multi_processor_count


def shared_memory_per_block(device: torch.device | str | int | None = None) -> int:
    """The most shared memory, in bytes, one program may ask for on ``device``'s GPU (the
    opt-in limit: 227 KiB on an H100, about 99 KiB on consumer Blackwell)."""
    return _properties_of(_index(device)).shared_memory_per_block_optin


@functools.cache
def _properties_of(index: int):
    return torch.cuda.get_device_properties(index)


def has_tma(device: torch.device | str | int | None = None) -> bool:
    """Whether ``device`` has the TMA copy engine (compute capability 9.0 or higher). Older
    GPUs would run a descriptor kernel with its descriptors turned back into pointers by
    Triton, a variant never measured here; they keep the pointer kernels. Under the
    interpreter, True: descriptors are tested there like any other code."""
    if interpreting():
        return True
    return compute_capability(device)[0] >= 9


def num_warps_for(elements: int, most: int = 32) -> int:
    """Warps for a program that holds a tile of ``elements`` values in registers: more for
    wider tiles keep the registers per thread bounded (on an H100, rows of 32768 float32
    values ran fastest on 32 warps, rows of 16384 on 16), capped at ``most`` for kernels
    that were only measured up to it."""
    if elements >= 32768:
        warps = 32
    elif elements >= 16384:
        warps = 16
    elif elements >= 2048:
        warps = 8
    else:
        warps = 4
    return min(warps, most)


def clear_caches() -> None:
    """Forget every GPU's answers (for tests that fake torch's)."""
    _capability_of.cache_clear()
    _properties_of.cache_clear()
