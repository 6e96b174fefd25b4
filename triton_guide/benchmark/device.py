"""The sizes of each GPU a page ran on (SMs, L2, shared memory, HBM), read from the device
when the page runs on it and recorded with its timings, so that a build without a GPU can
print them too."""

from __future__ import annotations

import math

# What is read from torch.cuda.get_device_properties, in the unit its name says.
DEVICE_SIZES = {
    "SMs": lambda p: p.multi_processor_count,
    "L2 cache (MiB)": lambda p: p.L2_cache_size / 2**20,
    "shared memory per SM (KiB)":
        lambda p: getattr(p, "shared_memory_per_multiprocessor", math.nan) / 2**10,
    "HBM (GiB)": lambda p: p.total_memory / 2**30,
}


def _read(name: str):
    def read() -> float:
        import torch

        return DEVICE_SIZES[name](torch.cuda.get_device_properties(torch.cuda.current_device()))
    return read


def measure_device_sizes(bench) -> dict[str, dict[str, float]]:
    """Each GPU's sizes, as ``bench.measure("device sizes", ...)`` (``bench`` a
    :class:`~triton_guide.benchmark.Benchmark`): read live on a GPU, recalled from the
    recordings otherwise. Print one line per GPU; return ``{gpu: {size name: value}}``
    (nan for a size its recording lacks)."""
    results = bench.measure("device sizes", list(DEVICE_SIZES),
                            {"size": _read},
                            label="property", unit="unit in its name", of_kernels=False)
    sizes = {}
    for run in results:
        recorded = dict(zip(run.xs, run["size"]))
        size = sizes[run.gpu] = {name: recorded.get(name, math.nan) for name in DEVICE_SIZES}
        print(f"{run.gpu}: {size['SMs']:.0f} SMs, L2 {size['L2 cache (MiB)']:.0f} MiB, "
              f"shared memory {size['shared memory per SM (KiB)']:.0f} KiB per SM, "
              f"HBM {size['HBM (GiB)']:.0f} GiB")
    return sizes
