"""The sizes of each GPU a page ran on (SMs, L2, shared memory, HBM), read from the device
when the page runs on it and recorded with its timings, so that a build without a GPU can
print them too; and the read bandwidth of its memory levels against the size of the working
set (:func:`sweep_working_sets`)."""

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
                            label="property", unit="unit in its name", of_kernels=False,
                            table=False)  # printed once, below, each size in its own unit
    sizes = {}
    for run in results:
        recorded = dict(zip(run.xs, run["size"]))
        size = sizes[run.gpu] = {name: recorded.get(name, math.nan) for name in DEVICE_SIZES}
        print(f"{run.gpu}: {size['SMs']:.0f} SMs, L2 {size['L2 cache (MiB)']:.0f} MiB, "
              f"shared memory {size['shared memory per SM (KiB)']:.0f} KiB per SM, "
              f"HBM {size['HBM (GiB)']:.0f} GiB")
    return sizes


def sweep_working_sets(bench, title: str, working_sets: list[float], read, passes, sizes: dict,
                       *, from_l2: float = 4.0):
    """Sweep a kernel that reads a working set over and over in one launch, and print the
    rate of each level of the memory hierarchy it reached.

    ``read(data, passes)`` reads all of ``data`` (float32, on the device) ``passes`` times in
    one launch; at each working set of ``mib`` MiB (``working_sets``) it runs on fresh
    random data with ``passes(mib)`` passes, rated in GB/s of the bytes read per launch
    under the copy ceiling (``bench.sweep(title, ...)``, variant ``"read"``). Draws the sweep
    with each GPU's L2 size (``sizes``, from :func:`measure_device_sizes`) marked, and
    prints per GPU: the rate at the largest set (served from HBM) and its share of the copy
    ceiling; the median rate over the sets from ``from_l2`` MiB to half of L2 (served from
    L2) and its ratio to HBM's; the rate at the smallest set. Returns the
    :class:`~triton_guide.benchmark.Results`.
    """
    import torch

    from ..runtime import device
    from .figures import mark_each_gpu
    from .timing import gb_per_s

    def reader(mib):
        data = torch.randn(int(mib * 2**20) // 4, device=device())
        return lambda: read(data, passes(mib))

    levels = bench.sweep(title, working_sets, {"read": reader},
                         lambda mib, ms: gb_per_s(mib * 2**20 * passes(mib), ms), label="MiB",
                         unit="GB/s", ceiling="copy", xlabel="working set (MiB)")
    l2_mib = {gpu: size.get("L2 cache (MiB)", math.nan) for gpu, size in sizes.items()}
    mark_each_gpu(levels.plot(), l2_mib, "L2 {x:.0f} MiB")
    for run in levels:
        l2 = l2_mib.get(run.gpu, math.nan)
        in_l2 = sorted(r for mib, r in zip(run.xs, run["read"]) if from_l2 <= mib <= l2 / 2)
        in_hbm = run.at_largest("read")
        smallest = run["read"][min(range(len(run.xs)), key=run.xs.__getitem__)]
        line = (f"{run.gpu}: {run.xs[run.largest]:,.0f} MiB (from HBM) {in_hbm:,.0f} GB/s, "
                f"{run.fraction_of_ceiling('read'):.0%} of the copy")
        if in_l2:
            plateau = in_l2[len(in_l2) // 2]  # the median (the upper one of an even count)
            line += (f"; {from_l2:g} MiB to L2/2 (from L2): {plateau:,.0f} GB/s, "
                     f"{plateau / in_hbm:.1f}x HBM; smallest set {smallest:,.0f} GB/s")
        print(line)
    return levels
