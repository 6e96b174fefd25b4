"""One-line readings of a benchmark for a page's prose, one line per GPU, and the two
measurements that are not timings of a kernel: the extra peak memory of a call, and the
wall-clock time of a first call that compiles.

Each ``print_*`` function takes a :class:`~triton_guide.benchmark.Results` (live or
recorded runs), prints what a page would otherwise spell out in a loop, and returns the
numbers it printed, so that the page's prose can rest on them. With no run it prints
nothing and returns an empty dict.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence

from .tables import format_x

GIB = 2**30


def print_share_of(results, reference: str, *, context: str = ""
                   ) -> dict[str, dict[str, float]]:
    """Print, for each GPU, every variant's rate at the largest x as a share of
    ``reference``'s (a variant missing from a recording is said to be missing), with
    ``context`` (e.g. which sweep) after the GPU; return ``{gpu: {variant: share}}``."""
    shares = {}
    for run in results:
        x = run.xs[run.largest]
        shares[run.gpu] = {name: run.at_largest(name) / run.at_largest(reference)
                           for name in run.series if name != reference}
        missing = [name for name in results.variant_names() if name not in run.series]
        where = f"{run.gpu}, {context}" if context else run.gpu
        print(f"{where}, {results.label} = {format_x(x)}, share of {reference}'s {results.unit}: "
              + ", ".join(f"{name} {share:.0%}" for name, share in shares[run.gpu].items())
              + "".join(f"; {name} not in this recording" for name in missing))
    return shares


def print_share_range(results, reference: str) -> dict[str, dict[str, dict]]:
    """Print, for each GPU and each variant other than ``reference``, its best and its worst
    share of ``reference``'s rate over the x values, and at which x; return
    ``{gpu: {variant: {x: share}}}``."""
    found = {}
    for run in results:
        print(run.gpu)
        found[run.gpu] = {}
        for name in (variant for variant in run.series if variant != reference):
            share = found[run.gpu][name] = {x: ours / theirs for x, ours, theirs
                                            in zip(run.xs, run[name], run[reference])}
            best, worst = max(share, key=share.get), min(share, key=share.get)
            print(f"  {name:<26} best {share[best]:4.0%} of {reference} at {results.label} "
                  f"{format_x(best)}, worst {share[worst]:4.0%} at {format_x(worst)}")
    return found


def print_best_and_worst(results, within: float = 0.05) -> dict[str, tuple]:
    """Print, for each GPU, the best and the worst reading over every variant and x, and
    how many readings come within ``within`` of the best; return
    ``{gpu: (best, worst, near)}`` with ``best`` and ``worst`` as ``(value, variant, x)``
    and ``near`` the number of readings within ``within`` of the best."""
    found = {}
    for run in results:
        cells = [(value, name, run.xs[i])
                 for name, values in run.series.items() for i, value in enumerate(values)]
        best, worst = max(cells), min(cells)
        near = [x for value, _, x in cells if value >= (1 - within) * best[0]]
        found[run.gpu] = (best, worst, len(near))
        print(f"{run.gpu}: best {best[1]} at {results.label} {best[2]}, {best[0]:,.0f} "
              f"{results.unit}; worst {worst[1]} at {results.label} {worst[2]}, "
              f"{worst[0]:,.0f} ({best[0] / worst[0]:.1f}x less); within {within:.0%} of the "
              f"best: {len(near)} of {len(cells)}, at {results.label} {min(near)} to "
              f"{max(near)}")
    return found


def print_ratios(results, name: str, other: str) -> dict[str, list[float]]:
    """Print, for each GPU, ``name`` over ``other`` at every x, in one line; return
    ``{gpu: [ratio at each x]}``."""
    ratios = {}
    for run in results:
        ratios[run.gpu] = [a / b for a, b in zip(run[name], run[other])]
        print(f"{run.gpu}, {name} / {other} by {results.label}: " + ", ".join(
            f"{format_x(x)}: {ratio:.2f}" for x, ratio in zip(run.xs, ratios[run.gpu])))
    return ratios


def print_ridge_points(bench, gemm: str = "gemm_fp16", copy: str = "copy"
                       ) -> dict[str, float]:
    """Print, for each GPU with both ceilings, its ridge point: the FLOPs per byte moved
    that a kernel needs to be bound by arithmetic rather than by memory, the ``gemm``
    ceiling (TFLOP/s) over the ``copy`` ceiling (GB/s), both from ``bench`` (a
    :class:`~triton_guide.benchmark.Benchmark`: measured live, else recorded). Return
    ``{gpu: FLOP per byte}``."""
    gemm_roofs, copy_roofs = bench.ceilings(gemm), bench.ceilings(copy)
    ridges = {}
    for gpu in sorted(gemm_roofs.keys() & copy_roofs.keys()):
        tflops, gbps = gemm_roofs[gpu].value, copy_roofs[gpu].value
        ridges[gpu] = tflops * 1e3 / gbps
        print(f"{gpu}: {tflops:.0f} TFLOP/s over {gbps:.0f} GB/s, a ridge point of "
              f"{ridges[gpu]:.0f} FLOP per byte: below it memory bounds a kernel")
    return ridges


def print_ratio_range(results, name: str, others: Sequence[str], *, context: str = ""
                      ) -> dict[str, dict[str, tuple]]:
    """Print, for each GPU and each of ``others``, ``name`` over it across the x values in
    one line: the lowest and highest ratio, where the lowest is, and at how many x it
    reaches 1.0 (x where either reading is nan, such as a shape a baseline refused, left
    out). ``context`` (e.g. "GPU time") is said after the GPU. Return
    ``{gpu: {other: (lowest, highest, reaching 1.0, x counted)}}``; an other with no x
    left is ``(nan, nan, 0, 0)``."""
    found = {}
    for run in results:
        found[run.gpu] = {}
        for other in others:
            ratios = {x: a / b for x, a, b in zip(run.xs, run[name], run[other])
                      if not math.isnan(a / b)}
            where = f"{run.gpu}, {context}, " if context else f"{run.gpu}, "
            if not ratios:
                found[run.gpu][other] = (math.nan, math.nan, 0, 0)
                print(f"{where}{other} refused every {results.label}")
                continue
            low = min(ratios, key=ratios.get)
            reach = sum(ratio >= 1 for ratio in ratios.values())
            found[run.gpu][other] = (ratios[low], max(ratios.values()), reach, len(ratios))
            print(f"{where}{name} / {other} {ratios[low]:.2f}-{max(ratios.values()):.2f}x, "
                  f"lowest at {format_x(low)}; 1.0x or more at {reach} of {len(ratios)}")
    return found


def print_host_bound(gpu_time, as_called, name: str, work: Callable[[object], float],
                     factor: float = 2.0) -> dict[str, list]:
    """Print, for each GPU that has both runs, the x at which ``name`` as called (a sweep
    timed as called) took over ``factor`` times its kernel's GPU time (the same sweep
    with ``gpu_time=True``), times worked back from the rates and ``work(x)``, one call's
    bytes or FLOPs: there the host, not the kernel, set the time. Return
    ``{gpu: [(x, us as called, us on the GPU), ...]}``."""
    found = {}
    for kernel_run in gpu_time:
        called_run = next((r for r in as_called if r.slug == kernel_run.slug), None)
        if called_run is None:
            continue
        kernel = dict(zip(kernel_run.xs, kernel_run.us_per_call(name, work)))
        called = dict(zip(called_run.xs, called_run.us_per_call(name, work)))
        shared = [x for x in kernel_run.xs if x in called]
        slow = [(x, called[x], kernel[x]) for x in shared if called[x] > factor * kernel[x]]
        found[kernel_run.gpu] = slow
        print(f"{kernel_run.gpu}: {name} as called over {factor:g}x its GPU time at "
              f"{len(slow)} of {len(shared)} values of {gpu_time.label}" + (": " + ", ".join(
                  f"{format_x(x)} ({c:.0f} us, {g:.0f} on the GPU)" for x, c, g in slow)
                  if slow else ""))
    return found


def print_where_time_follows_work(results, names: Sequence[str],
                                  work: Callable[[object], float]) -> dict[str, dict]:
    """Print, for each GPU, the first x at which each of ``names`` takes twice its time per
    call at the smallest x (times worked back from the rates and ``work(x)``, one call's
    bytes or FLOPs), leaving out readings that a larger x beat (:func:`out_of_line`: they
    say more about the run than the kernel), and which readings were left out. Below that
    x a call costs about the same whatever it does: fixed costs (the host's, the
    launches') set the time, and ratios there compare those, not the kernels. Return
    ``{gpu: {name: x, or None where the time never doubled}}``."""
    from .timing import out_of_line

    found = {}
    for run in results:
        found[run.gpu], slow = {}, []
        for name in names:
            micros = run.us_per_call(name, work)
            left_out = out_of_line(micros)
            slow += [f"{name} at {format_x(run.xs[i])}" for i in left_out]
            kept = [(x, t) for i, (x, t) in enumerate(zip(run.xs, micros)) if i not in left_out]
            found[run.gpu][name] = next((x for x, t in kept if t >= 2 * kept[0][1]), None)
        print(f"{run.gpu}, time per call first twice the smallest {results.label}'s: "
              + ", ".join(f"{name} at {format_x(x)}" if x is not None else f"{name} never"
                          for name, x in found[run.gpu].items())
              + f"; left out, slower than at a larger {results.label}: "
              + (", ".join(slow) or "none"))
    return found


def print_in_units(results, unit: str, size_of: Callable[[object], float]
                   ) -> dict[str, dict[str, float]]:
    """Print, for each GPU, every variant's value at the largest x in units of
    ``size_of(x)`` (e.g. a peak in GiB over the GiB of one input tensor: the peak in
    tensors of that size); return ``{gpu: {variant: value in those units}}``. Where every
    GPU recorded the same values, say what that does to the plot."""
    found = {}
    for run in results:
        x = run.xs[run.largest]
        found[run.gpu] = {name: run.at_largest(name) / size_of(x) for name in run.series}
        print(f"{run.gpu}, {results.label} = {format_x(x)}, in {unit}: " + "; ".join(
            f"{name} {value:.1f}" for name, value in found[run.gpu].items()))
    if len(results) > 1 and len({tuple(map(tuple, run.series.values()))
                                 for run in results}) == 1:
        print(f"every GPU measured the same {results.unit}: in the plot, " + (
            "one GPU's lines hide the other's" if results.overlaid
            else "the panels are alike"))
    return found


def print_call_floors(host, kernels, ours: tuple[str, str], theirs: tuple[str, str],
                      work: Callable[[object], float]) -> dict[str, dict]:
    """Print, for each GPU and each x that both benchmarks have, the least time one call
    can take when a program calls it in a loop: the longer of its host time (``host``, a
    :meth:`~triton_guide.benchmark.Benchmark.measure` in microseconds per call) and its
    kernel's GPU time (worked back from the rates of ``kernels``, a ``gpu_time`` sweep, and
    ``work(x)``, one call's bytes or FLOPs), for ``ours`` and ``theirs``, each a pair
    ``(variant in host, variant in kernels)``; and ours at what speed of theirs that
    floor puts it. Return ``{gpu: {x: (host_us, kernel_us, floor_us, their_floor_us)}}``
    for ours."""
    found = {}
    for run in host:
        gpu = next((r for r in kernels if r.slug == run.slug), None)
        found[run.gpu], lines = {}, []
        for i, x in enumerate(run.xs):
            if gpu is None or x not in gpu.xs:
                continue
            j = gpu.xs.index(x)
            kernel = {side: gpu.us_per_call(name, work)[j]
                      for side, (_, name) in (("ours", ours), ("theirs", theirs))}
            floor = max(run[ours[0]][i], kernel["ours"])
            their_floor = max(run[theirs[0]][i], kernel["theirs"])
            found[run.gpu][x] = (run[ours[0]][i], kernel["ours"], floor, their_floor)
            lines.append(f"{host.label} = {format_x(x)}: host {run[ours[0]][i]:.0f} us, "
                         f"kernel {kernel['ours']:.1f} us; a call at least {floor:.0f} us "
                         f"against {theirs[0]}'s {their_floor:.0f}: "
                         f"{their_floor / floor:.2f}x its speed")
        print(f"{run.gpu}, {ours[0]}:\n  " + "\n  ".join(
            lines or ["no GPU-time recording of this GPU to set beside"]))
    return found


# -- measurements that are not timings -------------------------------------------------


def peak_memory(prepare: Callable[[object], Callable[[], object]]
                ) -> Callable[[object], Callable[[], float]]:
    """A :meth:`~triton_guide.benchmark.Benchmark.measure` variant made from a sweep's:
    given x, a callable that runs ``prepare(x)``'s call once and returns the peak memory
    it allocated on the GPU beyond what was allocated before it, in GiB (what the call
    returns is freed at once; the peak has counted it)."""
    def measure_at(x):
        call = prepare(x)

        def measure() -> float:
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            call()
            torch.cuda.synchronize()
            return (torch.cuda.max_memory_allocated() - before) / GIB
        return measure
    return measure_at


def host_time(prepare: Callable[[object], Callable[[], object]]
              ) -> Callable[[object], Callable[[], float]]:
    """A :meth:`~triton_guide.benchmark.Benchmark.measure` variant made from a sweep's:
    given x, a callable that returns the host's time per call of ``prepare(x)``'s call in
    microseconds (:func:`~triton_guide.benchmark.host_us`: many calls back to back, which
    return once their kernels are queued)."""
    from . import timing

    return lambda x: functools.partial(timing.host_us, prepare(x))


@contextlib.contextmanager
def empty_triton_cache():
    """Point Triton's on-disk cache of compiled kernels at a new, empty folder for the
    duration, so that a first call compiles for real; the previous setting comes back."""
    previous = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="triton-guide-") as directory:
        os.environ["TRITON_CACHE_DIR"] = directory
        try:
            yield directory
        finally:
            if previous is None:
                del os.environ["TRITON_CACHE_DIR"]
            else:
                os.environ["TRITON_CACHE_DIR"] = previous


def first_call_ms(fn: Callable[[], object]) -> float:
    """Wall-clock milliseconds of one call of ``fn`` on the GPU with an empty Triton cache,
    from Python until its kernels have finished: compilation (and autotuning) included."""
    import torch

    with empty_triton_cache():
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1e3


def on_cold_copies(prepare: Callable[[object], Callable[[], object]],
                   work: Callable[[object], float]) -> Callable[[object], list]:
    """A ``gpu_time=True`` sweep variant made from a host-timed one: given x, ``prepare(x)``
    called as many times as it takes for the calls' inputs, ``work(x)`` bytes each, to
    overrun the L2 cache together (:func:`~triton_guide.benchmark.copies_for_cold_cache`),
    so that each call of the replayed list starts with its inputs in HBM."""
    from .timing import copies_for_cold_cache

    return lambda x: [prepare(x) for _ in range(copies_for_cold_cache(work(x)))]
