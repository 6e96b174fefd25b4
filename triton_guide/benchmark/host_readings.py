"""Readings of a call's host time beside its GPU time, one line per GPU: where the host,
not the kernel, set the time as called (:func:`print_host_bound`), both times per call
beside a sweep's (:func:`print_host_and_gpu`, reading the variants that
:func:`~triton_guide.benchmark.host_and_gpu_time` makes), and the floor each side's call
sets (:func:`print_call_floors`). Like :mod:`~triton_guide.benchmark.readings`, each prints
what a page would otherwise spell out in a loop and returns what it printed; with no run it
prints nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .tables import format_x
from .timing import DO_BENCH_CLEARING_BYTES, us_per_call


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


# How :func:`~triton_guide.benchmark.host_and_gpu_time` names the two variants it makes
# of a name, and :func:`print_host_and_gpu` reads them: "<name>, host", "<name>, GPU alone".
HOST, GPU_ALONE = "host", "GPU alone"


def print_host_and_gpu(times, sweep, names: Sequence[str], work: Callable[[object], float]
                       ) -> dict[str, dict]:
    """Print, for each GPU of ``times`` (a :meth:`~triton_guide.benchmark.Benchmark.measure`
    of :func:`~triton_guide.benchmark.host_and_gpu_time` variants, in microseconds per
    call) and each of its x, the host's time per call of each of ``names``, their GPU time
    alone and, where ``sweep`` has that GPU and x, their time per call there (worked back
    from its rates and ``work(x)``, one call's bytes or FLOPs). Where the sweep's ceiling
    is a copy rate, each GPU's first line also says how long ``do_bench``'s clearing of
    the L2 cache takes at that rate (a host time shorter than that hides behind it in a
    sweep), and each x how long its bytes take at that rate. Return
    ``{gpu: {x: {name: (host, GPU alone, in the sweep or nan)}}}``."""
    found = {}
    for run in times:
        timed = next((r for r in sweep if r.slug == run.slug), None)
        copy = (timed.ceiling.value if timed is not None and timed.ceiling is not None
                and timed.ceiling.unit == "GB/s" else None)
        head = f"{run.gpu}, {' / '.join(names)}, us per call"
        if copy is not None:
            head += (f" (do_bench's clearing writes {DO_BENCH_CLEARING_BYTES / 2**20:.0f} MiB: "
                     f"{us_per_call(DO_BENCH_CLEARING_BYTES, copy):.0f} us at the copy rate)")
        lines, found[run.gpu] = [head + ":"], {}
        for i, x in enumerate(run.xs):
            in_sweep = (timed is not None and x in timed.xs
                        and all(name in timed.series for name in names))
            found[run.gpu][x] = {name: (
                run[f"{name}, {HOST}"][i], run[f"{name}, {GPU_ALONE}"][i],
                timed.us_per_call(name, work)[timed.xs.index(x)] if in_sweep else math.nan)
                for name in names}
            columns = (HOST, GPU_ALONE, "in the sweep")[:3 if in_sweep else 2]
            at_copy = ("" if copy is None else
                       f" ({work(x) / 1e6:.1f} MB, {us_per_call(work(x), copy):.1f} us at "
                       "the copy rate)")
            lines.append(f"  {times.label} = {format_x(x)}{at_copy}: " + "; ".join(
                f"{column} " + " / ".join(f"{found[run.gpu][x][name][k]:.1f}" for name in names)
                for k, column in enumerate(columns)))
        print("\n".join(lines))
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
