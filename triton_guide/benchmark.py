"""Timing kernels on a GPU and drawing the results; shared by the example pages and
``benchmarks/report.py``.

Every timing is the median of many runs from ``triton.testing.do_bench``, which warms up
first, times with CUDA events and flushes the L2 cache before each run. Under the
interpreter nothing is timed: :func:`sweep` returns ``None`` and says why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import triton

from .runtime import describe, timings_meaningful

NO_TIMINGS = (
    "Timings need a GPU: under the Triton interpreter a kernel's run time measures numpy on "
    "the CPU, not the kernel, so this benchmark is skipped."
)


def median_ms(fn: Callable[[], object]) -> float:
    """Median run time of ``fn()`` in milliseconds."""
    if not timings_meaningful():
        raise RuntimeError(NO_TIMINGS)
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def gb_per_s(num_bytes: float, ms: float) -> float:
    return num_bytes / ms * 1e-6


def tflop_per_s(num_flops: float, ms: float) -> float:
    return num_flops / ms * 1e-9


def sweep(
    xs: Sequence,
    variants: dict[str, Callable[[object], Callable[[], object]]],
    rate: Callable[[object, float], float],
    *,
    label: str = "x",
) -> dict[str, list[float]] | None:
    """Time every variant at every x and convert each time to a rate.

    ``variants`` maps a name to a function that, given x, prepares inputs and returns the
    callable to time. ``rate(x, ms)`` turns a time into GB/s or TFLOP/s. Prints one line per
    x as it goes. Returns ``{name: [rate per x]}``, or ``None`` (after printing why) under the
    interpreter.
    """
    if not timings_meaningful():
        print(NO_TIMINGS)
        return None
    results: dict[str, list[float]] = {name: [] for name in variants}
    for x in xs:
        cells = []
        for name, prepare in variants.items():
            value = rate(x, median_ms(prepare(x)))
            results[name].append(value)
            cells.append(f"{name} {value:8.1f}")
        print(f"{label}={x}: " + "   ".join(cells), flush=True)
    return results


def plot(
    xs: Sequence,
    results: dict[str, list[float]],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool = True,
):
    """Draw one line per variant; the subtitle names the GPU and the software versions."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.2))
    for name, values in results.items():
        axes.plot(xs, values, marker="o", label=name)
    if logx:
        axes.set_xscale("log", base=2)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    axes.legend()
    axes.set_title(f"{title}\n{describe()}", fontsize=10)
    figure.tight_layout()
    return figure
