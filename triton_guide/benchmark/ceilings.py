"""Ceilings: the roof a benchmark is drawn under, measured on the GPU in the same run (a
device-to-device copy for memory-bound kernels, a large cuBLAS GEMM for compute-bound
ones)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..runtime import timings_meaningful
from .timing import NO_TIMINGS, gb_per_s, median_ms, tflop_per_s

CEILING_UNITS = {"copy": "GB/s", "gemm_fp16": "TFLOP/s", "gemm_bf16": "TFLOP/s"}
COPY_ELEMENTS = 2**28  # float32: 1 GiB read and 1 GiB written, far beyond any L2 cache
GEMM_SIZE = 8192


@dataclass(frozen=True)
class Ceiling:
    """The roof that bounds a benchmark on one GPU, measured in the same run."""

    kind: str
    label: str
    value: float
    unit: str


def check_ceiling(kind: str) -> None:
    if kind not in CEILING_UNITS:
        raise ValueError(f"ceiling={kind!r} is not one of {sorted(CEILING_UNITS)}: use 'copy' "
                         "for a memory-bound kernel, 'gemm_fp16' or 'gemm_bf16' for a "
                         "compute-bound one")


def _copy_ceiling() -> Ceiling:
    import torch

    source = torch.empty(COPY_ELEMENTS, device="cuda", dtype=torch.float32)
    target = torch.empty_like(source)
    ms = median_ms(lambda: target.copy_(source))
    value = gb_per_s(2 * source.numel() * source.element_size(), ms)
    return Ceiling("copy", "device-to-device copy of 1 GiB", value, "GB/s")


def _gemm_ceiling(kind: str) -> Ceiling:
    import torch

    dtype = torch.float16 if kind == "gemm_fp16" else torch.bfloat16
    a = torch.randn(GEMM_SIZE, GEMM_SIZE, device="cuda", dtype=dtype)
    b = torch.randn_like(a)
    value = tflop_per_s(2 * GEMM_SIZE**3, median_ms(lambda: a @ b))
    name = str(dtype).removeprefix("torch.")
    return Ceiling(kind, f"cuBLAS {name} GEMM {GEMM_SIZE}^3", value, "TFLOP/s")


@functools.cache
def measure_ceiling(kind: str) -> Ceiling:
    """Measure, on this GPU and once per process, the roof named by ``kind``.

    ``"copy"``: ``y.copy_(x)`` of 2^28 float32 (1 GiB), bytes read plus written per second,
    the bandwidth a memory-bound kernel can hope for. ``"gemm_fp16"`` / ``"gemm_bf16"``:
    an 8192 x 8192 x 8192 cuBLAS product, the TFLOP/s a compute-bound kernel can hope for.
    """
    check_ceiling(kind)
    if not timings_meaningful():
        raise RuntimeError(NO_TIMINGS)
    import torch

    ceiling = _copy_ceiling() if kind == "copy" else _gemm_ceiling(kind)
    torch.cuda.empty_cache()
    return ceiling

