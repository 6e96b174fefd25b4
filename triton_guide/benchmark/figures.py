"""Figures: one benchmark's runs on every GPU drawn on one figure, laid out by measuring
what it holds (title, panels, tick labels, legends, each GPU's provenance) so that the
figure is exactly as tall as its contents at the site's width."""

from __future__ import annotations

import itertools
import math
import re
import textwrap
import zlib

from ..results import STALE

LINESTYLES = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3))]
MARKERS = ["o", "s", "^", "D", "v", "P"]
# The first variant's markers are small and filled, the others' larger and hollow, so a
# point that lands on another stays visible inside it; legend handles are long enough to
# show two dashes of a dashed line.
FIRST_MARKER_SIZE, OTHER_MARKER_SIZE = 4, 6.5
LEGEND_HANDLE_LENGTH = 4
# Up to this many variants share one axes, each GPU in its colour. More pile up there
# (the norms page draws five on two GPUs), so each GPU gets a panel of its own and each
# variant a colour.
OVERLAID_VARIANTS = 3
# The site shows the 8-inch figure about 800 px wide: 8-point text is 11 px there, the
# least that reads.
SMALL_TEXT = 8
# In inches: the figure's width, the axes' height, the space left and right of the axes,
# between panels, along the figure's edges and between the blocks under the axes.
WIDTH, AXES_HEIGHT, LEFT, RIGHT, PANEL_GAP, MARGIN, GAP = 8, 3.4, 0.85, 0.2, 0.25, 0.12, 0.15
# Characters of the 8-point provenance text that fit across an 8-inch figure.
FOOTER_CHARS = 120
# One colour per GPU, the same on every page and in every build (by position in the
# build's list of GPUs, a GPU's colour changed with which GPUs the build had). A GPU not
# named here gets one of OTHER_GPU_COLOURS, picked from its name.
GPU_COLOURS = {"H100": "#1f77b4", "H200": "#d62728", "A100": "#2ca02c", "B200": "#9467bd"}
OTHER_GPU_COLOURS = ["#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
# Two lines whose values are this close at every x are said, in the figure, to coincide.
COINCIDE = 0.03
# A y axis is logarithmic when its values span this factor or more.
LOG_Y_SPAN = 100


def gpu_colour(gpu: str) -> str:
    """The colour of GPU ``gpu`` (a short name, e.g. ``H100 80GB HBM3``) in every figure."""
    for model, colour in GPU_COLOURS.items():
        if re.search(rf"\b{model}\b", gpu):
            return colour
    return OTHER_GPU_COLOURS[zlib.crc32(gpu.encode()) % len(OTHER_GPU_COLOURS)]


def coinciding(lines: dict[str, list[float]], tolerance: float = COINCIDE) -> list[tuple]:
    """Pairs of ``lines`` (label -> values at the same x) within ``tolerance`` of each other
    at every x where both have a value (two such x at least): drawn, one hides the other."""
    pairs = []
    for (first, a), (second, b) in itertools.combinations(lines.items(), 2):
        shared = [(u, v) for u, v in zip(a, b) if not (math.isnan(u) or math.isnan(v))]
        if len(shared) >= 2 and all(abs(u - v) <= tolerance * max(abs(u), abs(v))
                                    for u, v in shared):
            pairs.append((first, second))
    return pairs


def shared_ceiling_label(roofs: list) -> str:
    """The label one legend entry gives the ceilings of several GPUs' panels: their common
    label, or, where the GPUs' differ (each recording's runs and dates), what was measured
    (the label up to its first "; "), each GPU's value being in its panel's title."""
    labels = {roof.label for roof in roofs}
    return labels.pop() if len(labels) == 1 else roofs[0].label.split("; ")[0]


def _wants_log_y(values: list[float]) -> bool:
    finite = [v for v in values if not math.isnan(v)]
    return bool(finite) and min(finite) > 0 and max(finite) / min(finite) >= LOG_Y_SPAN


def _footer_lines(text: str) -> str:
    """``text`` in lines of at most FOOTER_CHARS, broken after a semicolon where it can
    be (a version number cut in two reads badly), the lines after the first indented to
    set each GPU's footer apart."""
    lines: list[str] = []
    for part in text.split("; "):
        if lines and len(lines[-1]) + len(part) + 2 < FOOTER_CHARS:
            lines[-1] += "; " + part
        else:
            if lines:
                lines[-1] += ";"
            lines += textwrap.wrap(part, FOOTER_CHARS - 1, subsequent_indent="    ",
                                   initial_indent="    " if lines else "")
    return "\n".join(lines)


def _inches(artist) -> tuple[float, float]:
    """An artist's width and height as drawn, in inches."""
    figure = artist.figure
    box = artist.get_window_extent(figure.canvas.get_renderer())
    return box.width / figure.dpi, box.height / figure.dpi


def _lay_out(figure, panels, suptitle, legends, footers) -> None:
    """Set the figure's height to what it holds, measured, and place it all from the top:
    the title, the panels, their tick labels, the legends (rows of as many as fit across)
    and the footers."""
    figure.draw_without_rendering()  # places the tick labels, to measure them
    renderer = figure.canvas.get_renderer()
    tight = [axes.get_tightbbox(renderer) for axes in panels]
    above = max(box.y1 - axes.bbox.y1 for axes, box in zip(panels, tight)) / figure.dpi
    below = max(axes.bbox.y0 - box.y0 for axes, box in zip(panels, tight)) / figure.dpi
    title = _inches(suptitle)[1] + GAP if suptitle else 0
    sizes = [_inches(legend) for legend in legends]
    per_row = max(1, min(len(legends), int(WIDTH // max(width for width, _ in sizes))))
    rows = [max(height for _, height in sizes[k:k + per_row])
            for k in range(0, len(sizes), per_row)]
    footer_heights = [_inches(text)[1] for text in footers]
    height = (MARGIN + title + above + AXES_HEIGHT + below + GAP + sum(rows) + GAP
              + sum(footer_heights) + MARGIN)
    figure.set_size_inches(WIDTH, height)
    top = height - MARGIN
    if suptitle:  # centred over the panels
        suptitle.set_position(((LEFT + WIDTH - RIGHT) / 2 / WIDTH, top / height))
    top -= title + above
    panel_width = (WIDTH - LEFT - RIGHT - PANEL_GAP * (len(panels) - 1)) / len(panels)
    figure.subplots_adjust(left=LEFT / WIDTH, right=1 - RIGHT / WIDTH, top=top / height,
                           bottom=(top - AXES_HEIGHT) / height, wspace=PANEL_GAP / panel_width)
    top -= AXES_HEIGHT + below + GAP
    for k, legend in enumerate(legends):
        row, column = divmod(k, per_row)
        legend.set_bbox_to_anchor(((column + 0.5) / per_row, (top - sum(rows[:row])) / height))
    top -= sum(rows) + GAP
    for text, text_height in zip(footers, footer_heights):
        text.set_y(top / height)
        top -= text_height


def draw(results, *, title: str | None = None, ylabel: str | None = None):
    """The figure of a :class:`~triton_guide.benchmark.Results` (its ``plot``), None when
    it has no run. Each GPU's ceiling as a wide pale line. Up to OVERLAID_VARIANTS variants
    share one axes, colour by GPU (:func:`gpu_colour`) and line style by variant, with a
    legend column per GPU headed by its name; more get one panel per GPU on a shared y
    axis, colour and line style by variant, and one legend. The y axis is logarithmic
    where the values span LOG_Y_SPAN or more. Under the legend, a note for each pair of
    lines that coincide (:func:`coinciding`), then each GPU's provenance."""
    if not results.runs:
        return None
    import matplotlib.pyplot as plt

    names, overlaid = results.variant_names(), results.overlaid
    figure = plt.figure(figsize=(WIDTH, 2 * AXES_HEIGHT))  # the height is set to fit below
    panels = figure.subplots(1, 1 if overlaid else len(results.runs), sharey=True,
                             squeeze=False)[0]
    drawn = []  # each run's lines: its variants', then its ceiling's
    shown: list[dict[str, list[float]]] = [{} for _ in panels]  # per axes, label -> values
    for i, run in enumerate(results.runs):
        axes, lines = panels[0 if overlaid else i], []
        for j, name in enumerate(names):
            values = run.series.get(name)
            if values is not None:
                shown[0 if overlaid else i][f"{run.gpu}: {name}"] = list(values)
            colour, first = gpu_colour(run.gpu) if overlaid else f"C{j}", j == 0
            lines += axes.plot(
                run.xs, values if values is not None else [math.nan] * len(run.xs),
                color=colour, linestyle=LINESTYLES[j % len(LINESTYLES)],
                marker=MARKERS[j % len(MARKERS)],
                markersize=FIRST_MARKER_SIZE if first else OTHER_MARKER_SIZE,
                markerfacecolor=colour if first else "none",
                zorder=3 if first else 2, label=f"{run.gpu}: {name}")
        roof = run.ceiling
        if roof is not None or results.has_ceiling:
            lines.append(axes.axhline(
                roof.value if roof else math.nan, color=gpu_colour(run.gpu) if overlaid else "grey",
                linewidth=3, alpha=0.35, label=f"{run.gpu}: ceiling, {roof.label} "
                f"{roof.value:,.0f} {roof.unit}" if roof else f"{run.gpu}: no ceiling"))
        if not overlaid:
            axes.set_title(f"{run.gpu}, ceiling {roof.value:,.0f} {roof.unit}" if roof
                           else run.gpu, fontsize=9)
        drawn.append(lines)
    for axes in panels:
        if results.logx:
            axes.set_xscale("log", base=2)
        axes.set_xlabel(results.xlabel)
        axes.grid(True, alpha=0.3)
    panels[0].set_ylabel(ylabel or results.unit)
    plotted = [v for lines in shown for values in lines.values() for v in values]
    if _wants_log_y(plotted):  # sizes that span decades: small values stay readable
        for axes in panels:
            axes.set_yscale("log")
    else:
        panels[0].set_ylim(bottom=0, top=panels[0].get_ylim()[1] * 1.06)  # room above roofs

    style = dict(loc="upper center", fontsize=SMALL_TEXT, frameon=False,
                 handlelength=LEGEND_HANDLE_LENGTH)
    if overlaid:
        panels[0].set_title(title or results.title, fontsize=10)
        suptitle, legends = None, []
        for i, (run, lines) in enumerate(zip(results.runs, drawn)):
            legends.append(figure.legend(
                lines, [line.get_label().removeprefix(f"{run.gpu}: ") for line in lines],
                title=run.gpu, title_fontproperties={"size": SMALL_TEXT, "weight": "bold"},
                alignment="left", **style))
            legends[-1].get_title().set_color(gpu_colour(run.gpu))
    else:
        suptitle = figure.suptitle(title or results.title, fontsize=10,
                                   verticalalignment="top")
        handles, labels = drawn[0][:len(names)], list(names)
        roofs = [(run.ceiling, lines[-1]) for run, lines in zip(results.runs, drawn)
                 if run.ceiling]
        if roofs:  # its value on each GPU is in that GPU's panel title
            handles.append(roofs[0][1])
            labels.append(f"ceiling, {shared_ceiling_label([roof for roof, _ in roofs])}")
        # As few rows as fit across the figure.
        for rows in range(1, len(handles) + 1):
            legends = [figure.legend(handles, labels, ncol=math.ceil(len(handles) / rows),
                                     **style)]
            if _inches(legends[0])[0] <= WIDTH - 2 * MARGIN or rows == len(handles):
                break
            legends[0].remove()
    notes = [f"{first} and {second} coincide (within {COINCIDE:.0%} at every "
             f"{results.label}): one line hides the other"
             for lines in shown for first, second in coinciding(lines)]
    footers = [figure.text(MARGIN / WIDTH, 0, _footer_lines(note), fontsize=SMALL_TEXT,
                           style="italic", verticalalignment="top") for note in notes]
    # A stale run's footer says so (STALE, the reason's first words); the files that
    # changed are in the text the sweep printed, where a list of them does not crowd it.
    footers += [figure.text(MARGIN / WIDTH, 0, _footer_lines(
                    run.footer() + (f"  [{STALE}]" if run.stale else "")),
                color=gpu_colour(run.gpu) if overlaid else "black", fontsize=SMALL_TEXT,
                verticalalignment="top", linespacing=1.2,
                fontweight="bold" if run.stale else "normal")
                for run in results.runs]
    _lay_out(figure, panels, suptitle, legends, footers)
    return figure


def mark_each_gpu(figure, x_by_gpu: dict[str, float], label: str) -> None:
    """On ``figure``'s first axes (a figure that :meth:`Results.plot` returned, or None when
    there was nothing to draw), a dashed vertical line at each GPU's x in the GPU's colour,
    with the text ``"{gpu}: " + label.format(x=x)`` beside it (``label`` such as
    ``"L2 {x:.0f} MiB"``); a GPU whose x is nan gets no line."""
    if figure is None:
        return
    axes = figure.axes[0]
    shown = [(gpu, x) for gpu, x in x_by_gpu.items() if not math.isnan(x)]
    for i, (gpu, x) in enumerate(shown):
        axes.axvline(x, color=gpu_colour(gpu), linestyle="--")
        axes.text(x, 0.03 + 0.07 * i, f" {gpu}: {label.format(x=x)}", color=gpu_colour(gpu),
                  fontsize=SMALL_TEXT - 1, transform=axes.get_xaxis_transform())
