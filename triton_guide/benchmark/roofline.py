"""The roofline: each GPU's roof (its copy bandwidth times arithmetic intensity, capped at
its GEMM rate) with kernels placed under it at their intensity, drawn and printed."""

from __future__ import annotations

import math

from ..results import STALE
from .figures import MARKERS, SMALL_TEXT, _footer_lines, gpu_colour
from .tables import _decimals, _number


def roofline(placed, costs: dict, copy_gb_s: dict[str, float]):
    """Print and draw ``placed`` (a :class:`~triton_guide.benchmark.Results` of one variant,
    ``"achieved"`` TFLOP/s per kernel name, under a GEMM ceiling) on the roofline of each
    GPU. ``costs`` maps each kernel name to its cost (``intensity`` in FLOP per byte);
    ``copy_gb_s`` maps a GPU's slug to its copy bandwidth, the slope of its roof.

    Prints, per GPU, its two ceilings and ridge point, then each kernel's rate (in the
    precision of the sweep's table) and its fraction of its roof (the roof at the kernel's
    intensity). Each kernel's intensity is a dotted vertical line with the kernel's marker,
    hollow, at its foot; the legend shows that glyph beside the kernel's name. Returns the
    figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    # Each GPU's provenance under the plot, wrapped to the figure's width: 0.11 inches a line.
    # A stale run says so in STALE's words; the files that changed are in the printed text.
    footers = [_footer_lines(run.footer() + (f"  [{STALE}]" if run.stale else ""))
               for run in placed]
    footer = 0.11 * sum(text.count("\n") + 1 for text in footers) + 0.1
    height = 5.2 + footer
    figure = plt.figure(figsize=(8, height))
    axes = figure.add_axes((0.09, (0.55 + footer) / height, 0.6, 4.2 / height))
    names = list(costs)
    for j, cost in enumerate(costs.values()):  # each kernel's intensity, on the x axis
        axes.axvline(cost.intensity, color="gray", linestyle=":", linewidth=1)
        axes.plot(cost.intensity, 0.03, color="black", marker=MARKERS[j % len(MARKERS)],
                  markerfacecolor="white", transform=axes.get_xaxis_transform())
    grid = [2.0**e for e in range(-5, 13)]
    gpu_handles = []  # one legend entry per GPU: its roof and its points
    for i, run in enumerate(placed):
        colour = gpu_colour(run.gpu)
        peak = run.ceiling.value if run.ceiling else math.nan
        copy = copy_gb_s.get(run.slug, math.nan)
        ridge = peak * 1e3 / copy
        # The roof bends at the ridge point: drawn there, not at the nearest power of two.
        xs = sorted(grid + [ridge]) if math.isfinite(ridge) else grid
        axes.plot(xs, [min(peak, x * copy / 1e3) for x in xs], color=colour)
        # The first GPU's points filled, the others' hollow and larger: points that fall
        # at the same place (matmul and attention, near the flat roof) all stay visible.
        point = dict(markerfacecolor=colour if i == 0 else "none",
                     markersize=7 if i == 0 else 11, markeredgewidth=1.5)
        gpu_handles.append(Line2D(
            [], [], color=colour, marker="o", **point,
            label=f"{run.gpu}: roofline and\n{'filled' if i == 0 else 'hollow'} points; "
                  f"{copy:,.0f} GB/s,\n{peak:,.0f} TFLOP/s (fp16 GEMM)"))
        print(f"{run.gpu}: copy {copy:,.0f} GB/s, fp16 GEMM {peak:,.0f} TFLOP/s: "
              f"ridge point {ridge:.0f} FLOP/byte")
        decimals = _decimals(run["achieved"])  # as the sweep's table prints the column
        for name, achieved in zip(run.xs, run["achieved"]):
            if name not in costs:  # recorded under a name the page no longer uses
                continue
            intensity = costs[name].intensity
            axes.plot(intensity, achieved, color=colour, linestyle="",
                      marker=MARKERS[names.index(name) % len(MARKERS)], zorder=3 + i,
                      **point)
            roof = min(peak, intensity * copy / 1e3)
            print(f"  {name:<30} {_number(achieved, decimals):>8} TFLOP/s, "
                  f"{achieved / roof:5.0%} of its roof")
        above = sum(text.count("\n") + 1 for text in footers[:i])
        figure.text(0.01, (footer - 0.11 * above) / height, footers[i], color=colour,
                    fontsize=SMALL_TEXT - 1.5, verticalalignment="top", linespacing=1.2)
    if placed:
        axes.set_yscale("log")
        axes.set_ylim(bottom=axes.get_ylim()[0] / 4)  # room for the markers on the x axis
        axes.set_ylabel("TFLOP/s")
    else:
        axes.set_yticks([])
        axes.set_ylabel("TFLOP/s (no GPU recording yet)")
    axes.set_xscale("log", base=2)
    axes.set_xlabel("arithmetic intensity (FLOP/byte)")
    axes.grid(True, alpha=0.3)
    axes.set_title(placed.title, fontsize=10)
    # A kernel's entry is the glyph at the foot of its dotted line: its marker, hollow,
    # under a heading that says what the dotted lines are.
    heading = Line2D([], [], linestyle="", label="each kernel's marker;\ndotted: its intensity")
    handles = gpu_handles + [heading] + [
        Line2D([], [], color="black", linestyle=":", linewidth=1,
               marker=MARKERS[j % len(MARKERS)], markerfacecolor="white", label=name)
        for j, name in enumerate(names)]
    axes.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    return figure


def place_on_roofline(bench, title: str, costs: dict, prepare, *, label: str = "kernel",
                      gpu_time: bool = False):
    """Time each kernel named in ``costs`` (name -> its cost, with ``flops`` and
    ``intensity``) and draw them on each GPU's roofline: ``bench.sweep(title, ...)`` over the
    names, one variant ``"achieved"`` (``prepare(name)`` makes the inputs and returns the
    call, or with ``gpu_time`` a list of calls, as :meth:`Benchmark.sweep` takes them) in
    TFLOP/s under the float16 GEMM ceiling, its table left out, then :func:`roofline` (which
    prints each kernel's rate and share of its roof) with each GPU's copy ceiling
    (:meth:`Benchmark.ceilings`) as the roof's slope. Returns the
    :class:`~triton_guide.benchmark.Results`."""
    from .timing import tflop_per_s

    placed = bench.sweep(title, list(costs), {"achieved": prepare},
                         lambda name, ms: tflop_per_s(costs[name].flops, ms), label=label,
                         unit="TFLOP/s", ceiling="gemm_fp16", logx=False, gpu_time=gpu_time,
                         table=False)  # roofline prints each kernel's rate and share of its roof
    copy = bench.ceilings("copy")
    roofline(placed, costs, {run.slug: copy[run.gpu].value for run in placed if run.gpu in copy})
    return placed
