"""One-line readings of a benchmark for a page's prose, one line per GPU.

Each ``print_*`` function takes a :class:`~triton_guide.benchmark.Results` (live or
recorded runs; :func:`print_at_ceilings` takes the page's
:class:`~triton_guide.benchmark.Benchmark`, for its ceilings), prints what a page would
otherwise spell out in a loop, and returns the numbers it printed, so that the page's prose
can rest on them. With no run it prints nothing and returns an empty dict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .runs import _US_PER_WORK_OVER_RATE
from .tables import format_x
from .timing import out_of_line

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
    for _, name, share, best, worst in _shares_by_variant(results, reference, found):
        print(f"  {name:<26} best {share[best]:4.0%} of {reference} at {results.label} "
              f"{format_x(best)}, worst {share[worst]:4.0%} at {format_x(worst)}")
    return found


def _shares_by_variant(results, reference: str, found: dict):
    """For each GPU (its name printed first) and each variant other than ``reference``:
    ``(run, name, {x: share of reference's rate}, best x, worst x)``, each share also kept
    in ``found[gpu][name]``."""
    for run in results:
        print(run.gpu)
        found[run.gpu] = {}
        for name in (variant for variant in run.series if variant != reference):
            share = found[run.gpu][name] = {x: ours / theirs for x, ours, theirs
                                            in zip(run.xs, run[name], run[reference])}
            yield run, name, share, max(share, key=share.get), min(share, key=share.get)


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


def print_ratios(results, name: str, other: str, *, beside: float | None = None
                 ) -> dict[str, list[float]]:
    """Print, for each GPU, ``name`` over ``other`` at every x, in one line; with
    ``beside`` (a ratio worked out on paper, such as a ratio of bytes moved), also the x
    where the measured ratio falls below it. Return ``{gpu: [ratio at each x]}``."""
    ratios = {}
    for run in results:
        ratios[run.gpu] = [a / b for a, b in zip(run[name], run[other])]
        below = "" if beside is None else f"; below {beside:.1f} at: " + (", ".join(
            format_x(x) for x, ratio in zip(run.xs, ratios[run.gpu]) if ratio < beside)
            or "none")
        print(f"{run.gpu}, {name} / {other} by {results.label}: " + ", ".join(
            f"{format_x(x)}: {ratio:.2f}" for x, ratio in zip(run.xs, ratios[run.gpu])) + below)
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


def print_where_time_follows_work(results, names: Sequence[str],
                                  work: Callable[[object], float]) -> dict[str, dict]:
    """Print, for each GPU, the first x at which each of ``names`` takes twice its time per
    call at the smallest x (times worked back from the rates and ``work(x)``, one call's
    bytes or FLOPs), leaving out readings that a larger x beat (:func:`out_of_line`: they
    say more about the run than the kernel), and which readings were left out. Below that
    x a call costs about the same whatever it does: fixed costs (the host's, the
    launches') set the time, and ratios there compare those, not the kernels. Return
    ``{gpu: {name: x, or None where the time never doubled}}``."""
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


def print_step_gains(results, steps: Sequence[str]) -> dict[str, dict[str, float]]:
    """Print, for each GPU, what each of ``steps`` (variants in the order a page builds
    them) bought at the largest x: its rate over the step before's (a step missing from a
    recording is said to be missing, and the next is set over the one before it). Return
    ``{gpu: {step: gain}}`` for each step after the first that has one."""
    gains = {}
    for run in results:
        present = [step for step in steps if step in run.series]
        gains[run.gpu] = {step: run.at_largest(step) / run.at_largest(before)
                          for before, step in zip(present, present[1:])}
        missing = [step for step in steps if step not in run.series]
        print(f"{run.gpu}, {results.label} = {format_x(run.xs[run.largest])}, each step over the "
              "one before: " + ", ".join(f"{step} {gain:.2f}x"
                                         for step, gain in gains[run.gpu].items())
              + "".join(f"; {step} not in this recording" for step in missing))
    return gains


def print_memory_cap(results, name: str, bytes_read: Callable[[object], float],
                     copy: dict, work: Callable[[object], float]) -> dict[str, tuple]:
    """Print, for each GPU with a copy ceiling in ``copy`` (``{gpu: Ceiling}``, from
    :meth:`~triton_guide.benchmark.Benchmark.ceilings`), the most ``name``'s rate at the
    largest x could be if all of its ``bytes_read(x)`` bytes came from memory at the copy
    rate, against the rate measured (``work(x)``, one call's bytes or FLOPs, turns a rate
    into time). Where the measured rate is above that cap, memory could have delivered only
    ``cap / measured`` of the bytes in the time: at least the rest came from the L2 cache.
    Return ``{gpu: (cap, measured)}``."""
    found = {}
    for run in results:
        if run.gpu not in copy or name not in run.series:
            continue
        x = run.xs[run.largest]
        measured, nbytes, gbps = run.at_largest(name), bytes_read(x), copy[run.gpu].value
        cap = measured * run.us_per_call(name, work)[run.largest] / (nbytes / gbps * 1e-3)
        found[run.gpu] = (cap, measured)
        print(f"{run.gpu}, {name} at {results.label} = {format_x(x)}: {nbytes / 1e9:.1f} GB at "
              f"{gbps:,.0f} GB/s allow {cap:,.0f} {results.unit}, measured {measured:,.0f}"
              + (f": at least {1 - cap / measured:.0%} of the reads came from L2"
                 if measured > cap else ", within what memory alone allows"))
    return found


def print_at_ceilings(bench, amounts: dict[str, tuple[float, str]]
                      ) -> dict[str, dict[str, float]]:
    """Print, for each GPU that has every ceiling ``amounts`` names (live or recorded:
    :meth:`~triton_guide.benchmark.Benchmark.ceilings`), how long each amount of work
    takes at its ceiling, and which takes longest, over the next longest: the one that
    sets the time. ``amounts`` maps a label to ``(bytes or FLOPs, ceiling kind)``, e.g.
    ``{"the traffic": (2e9, "copy"), "the math": (1e12, "gemm_fp16")}``. Return
    ``{gpu: {label: milliseconds}}``."""
    kinds = list(dict.fromkeys(kind for _, kind in amounts.values()))
    roofs = {kind: bench.ceilings(kind) for kind in kinds}
    found = {}
    for gpu in sorted(set.intersection(*(set(roofs[kind]) for kind in kinds))):
        found[gpu] = {label: amount / roofs[kind][gpu].value
                      * _US_PER_WORK_OVER_RATE[roofs[kind][gpu].unit] * 1e-3
                      for label, (amount, kind) in amounts.items()}
        print(f"{gpu} (" + ", ".join(f"{roofs[kind][gpu].value:,.0f} {roofs[kind][gpu].unit}"
                                     for kind in kinds) + "): " + ", ".join(
            f"{label} {ms:,.0f} ms" for label, ms in found[gpu].items())
              + _longest(found[gpu]))
    return found


def _longest(times: dict[str, float]) -> str:
    """'; the longest: <label>, <ratio>x <next>' for two or more times, else ''."""
    if len(times) < 2:
        return ""
    (first, longest), (second, after) = sorted(times.items(), key=lambda item: -item[1])[:2]
    return f"; the longest: {first}, {longest / after:.1f}x {second}"


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


def print_share_and_gain(results, reference: str, *, step_to=None
                         ) -> dict[str, dict[str, dict]]:
    """Print, for each GPU and each variant other than ``reference``, over a sweep of a
    setting (x: a stage count, a block size): its best and worst share of ``reference``'s
    rate and at which x, what its best x gained over the first x, and, with ``step_to`` (an
    x where something changes), what it gained there over the x before. Gains are ratios
    of shares, each taken against ``reference`` timed at the same x, so that a drift of the
    GPU's clock through the sweep cancels. Return ``{gpu: {variant: {x: share}}}``, as
    :func:`print_share_range` does."""
    found = {}
    for run, name, share, best, worst in _shares_by_variant(results, reference, found):
        first = run.xs[0]
        line = (f"  {name:<26} best {share[best]:4.0%} of {reference} at {results.label} "
                f"{format_x(best)} ({share[best] / share[first]:.2f}x its share at "
                f"{format_x(first)}), worst {share[worst]:4.0%} at {format_x(worst)}")
        if step_to in run.xs[1:]:
            before = run.xs[run.xs.index(step_to) - 1]
            line += (f"; from {format_x(before)} to {format_x(step_to)}: "
                     f"{share[step_to] / share[before]:.2f}x")
        print(line)
    return found


def print_gain_against_spread(results, name: str, other: str, at, same_at, *,
                              context: str = "", bullet: bool = False
                              ) -> dict[str, tuple[float, float]]:
    """Print, for each GPU, what ``name`` gains over ``other`` at x = ``at`` (its rate over
    theirs, less 1), beside their gap at x = ``same_at``, where the two variants run the same
    code, so that gap is one sample of the measurement's spread: a gain no larger than it
    is not shown by the run. ``context`` is said after the GPU; ``bullet`` starts each line
    with ``* `` (for a page's takeaways). A GPU whose run lacks either x or either variant
    is said to lack it. Return ``{gpu: (gain, gap)}``."""
    found = {}
    for run in results:
        lead = ("* " if bullet else "") + (f"{run.gpu}, {context}" if context else run.gpu)
        if not ({at, same_at} <= set(run.xs) and {name, other} <= set(run.series)):
            print(f"{lead}: {name} and {other} at {results.label} = {format_x(at)} and "
                  f"{format_x(same_at)} not all in this recording")
            continue
        gain, gap = (run[name][run.xs.index(x)] / run[other][run.xs.index(x)] - 1
                     for x in (at, same_at))
        found[run.gpu] = (gain, gap)
        verdict = "larger than" if abs(gain) > abs(gap) else "within"
        print(f"{lead}: {name} over {other} {gain:+.1%} at {results.label} = {format_x(at)}, "
              f"{verdict} the {gap:+.1%} between two timings of the same code at "
              f"{results.label} = {format_x(same_at)}")
    return found
