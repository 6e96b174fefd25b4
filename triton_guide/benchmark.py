"""Timing kernels on a GPU, recording the timings, and drawing them; shared by the example
pages and ``benchmarks/report.py``.

A page's timing is, by default, the median of many runs from ``triton.testing.do_bench``
(:func:`median_ms`), which warms up first, times with CUDA events and flushes the L2 cache
before each run: one call as a program makes it, host included. :func:`gpu_ms`, which a
sweep with ``gpu_time=True`` (the matmul page's) and ``benchmarks/report.py`` use, leaves
the host out, as :func:`queued_ms` does for calls that a CUDA graph does not capture as
they are; :func:`host_us` measures the host's time alone. Under the interpreter nothing is
timed: a kernel's run time there measures numpy on the CPU.

**How a page benchmarks, records and recalls.** A page makes one :class:`Benchmark` in its first cell and prints its stamp, which says
where the page's outputs come from (live GPU, interpreter, which recordings)::

    from triton_guide.benchmark import Benchmark, gb_per_s

    bench = Benchmark()  # finds the page from sys.argv[0]; or Benchmark("path/to/page.py")
    print(bench.stamp())

Each benchmark is one :meth:`Benchmark.sweep`: a title (unique on the page, it names the
benchmark in the store), the x values, the variants, a rate, the unit of that rate and the
ceiling that bounds it (``"copy"`` for memory-bound kernels, ``"gemm_fp16"`` or
``"gemm_bf16"`` for compute-bound ones)::

    results = bench.sweep("vector add", sizes, {"triton_guide": ours, "torch": torch_add},
                          lambda n, ms: gb_per_s(12 * n, ms), label="n", unit="GB/s",
                          ceiling="copy", xlabel="elements (float32)")
    results.plot()                                    # every GPU, with its ceiling
    results.summary(ratios=[("triton_guide", "torch")])  # one column per GPU
    for run in results:                               # numbers for the prose
        print(f"{run.gpu}: {run.fraction_of_ceiling('triton_guide'):.0%} of the ceiling")

A number that is not a rate under a roof (peak memory, the wall time of a first call that
compiles) is one :meth:`Benchmark.measure`: each variant returns a callable that measures
once and returns the value in ``unit``; it is recorded and recalled the same way, without a
ceiling::

    peak = bench.measure("peak memory", rows, {"torch": torch_peak, "ours": our_peak},
                         label="rows", unit="GiB")

On a GPU, ``sweep`` times the variants now (and, with ``TRITON_GUIDE_RECORD=1``, as
``make bench`` sets it, writes them to ``results/<gpu>/<page>.json``); recordings of other
GPUs are drawn beside them. Without a GPU it times nothing: it returns the recordings of
every GPU, each labelled with its GPU, versions, date and commit, and flagged as stale when
the page's kernel source changed since (see :mod:`triton_guide.results`). With no
recording it says so in one line and returns an empty ``results``: ``plot`` and
``summary`` then do nothing and ``for run in results`` does not loop, so a page needs no
``if``. ``TRITON_GUIDE_TIMINGS=recorded`` makes a GPU build draw from the store too
(the site workflow does that after ``make bench``, so nothing is timed twice).
"""

from __future__ import annotations

import ast
import functools
import json
import math
import numbers
import os
import statistics
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import triton

from . import results as store
from .runtime import interpreting, timings_meaningful

NO_TIMINGS = (
    "Timings need a GPU: under the Triton interpreter a kernel's run time measures numpy on "
    "the CPU, not the kernel, so this benchmark is skipped."
)
NO_RECORDING_TO_INTERPRET = (
    "TRITON_GUIDE_RECORD=1 needs a CUDA GPU: under the Triton interpreter timings measure "
    "numpy on the CPU and are never recorded. Run `make bench` on a GPU machine, or unset "
    "TRITON_GUIDE_RECORD."
)


def median_ms(fn: Callable[[], object]) -> float:
    """Median run time of ``fn()`` in milliseconds."""
    if not timings_meaningful():
        raise RuntimeError(NO_TIMINGS)
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


# triton.testing.do_bench clears the L2 cache before each timed call by writing a buffer
# of this size (Triton 3.6 and 3.9: the driver's get_empty_cache_for_benchmark); a call's
# host time shorter than that write does not show in its timing.
DO_BENCH_CLEARING_BYTES = 256 * 2**20

# Calls timed by gpu_ms read at least this many bytes in all, so that together they overrun
# the L2 cache (50 MiB on an H100) and each call starts with its inputs in HBM.
COLD_BYTES = 256 * 2**20


def copies_for_cold_cache(bytes_per_call: int, at_least: int = 4) -> int:
    """How many copies of a call's inputs :func:`gpu_ms` needs: enough to overrun L2."""
    return max(at_least, math.ceil(COLD_BYTES / bytes_per_call))


# How long gpu_ms replays its graph untimed before timing it, in seconds.
WARMUP_S = 0.1

# Rounds of a host-timed sweep (Benchmark.sweep without gpu_time): every variant at every x
# is timed once per round, the rounds one after the other, and the median of the rounds
# kept. do_bench hides a call's host time only while its L2-clearing kernel runs (tens of
# microseconds); a launcher that needs 30-50 us of Python sits near that edge, and a spell
# of slow host (another process, say) lasting a few of do_bench's 0.1 s windows showed as
# one variant 2-5x slower at two or three neighbouring sizes in a recording and not in
# the next (seen on an H200). A spell shorter than a round spoils
# one round of a point, which the median drops.
HOST_TIMED_ROUNDS = 3


def gpu_ms(calls: Sequence[Callable[[], object]], replays: int = 25) -> float:
    """Median GPU time of one call, with the host's launch time left out, in milliseconds.

    ``calls`` do the same work on distinct copies of the inputs (see
    :func:`copies_for_cold_cache`). They are run once (to compile and autotune), captured
    back to back in one CUDA graph, and the graph is replayed untimed for WARMUP_S seconds,
    then ``replays`` times timed: a replay launches every kernel from the GPU's side, so no
    call waits for Python, and a call's inputs are out of L2 by the time it comes round
    again. ``median_ms`` (``do_bench``)
    times one call as a program makes it, host included whenever the host is the slower.
    """
    if not timings_meaningful():
        raise RuntimeError(NO_TIMINGS)
    import torch

    for call in calls:
        call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    # A GPU that has been idle runs at a low clock and takes tens of milliseconds to speed
    # up; replays that short would time the ramp (the first size of a sweep came out 10-20%
    # slow on an H100 when it opened a page's first heavy section). So replay untimed first.
    warm_until = time.perf_counter() + WARMUP_S
    while True:
        graph.replay()
        torch.cuda.synchronize()
        if time.perf_counter() >= warm_until:
            break
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del graph
    return sorted(times)[len(times) // 2] / len(calls)


def host_us(fn: Callable[[], object], calls: int = 200, repeats: int = 5) -> float:
    """The host's time per call of ``fn()``, in microseconds: the wall time of ``calls``
    back-to-back calls, the median over ``repeats``. A call returns once its kernels are
    queued, so this is the time Python and the launch take, as long as the queue never
    fills (``calls`` well below the ~1000 launches CUDA queues before the host waits)."""
    if not timings_meaningful():
        raise RuntimeError(NO_TIMINGS)
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return sorted(times)[len(times) // 2]


def queued_ms(calls: Sequence[Callable[[], object]], rounds: int = 5) -> tuple[float, bool]:
    """GPU time of one call, in milliseconds, for calls that :func:`gpu_ms` cannot capture
    as they are: ``torch.autograd.grad`` runs each backward kernel on the stream of its
    forward, which ran before the capture began.

    Each round queues every call behind a GPU sleep longer than the host needs to launch
    them all, then times the calls with CUDA events. The GPU never waits for Python, so the
    time is the kernels' own, gaps between launches included; with rotating copies of the
    inputs (:func:`copies_for_cold_cache`) each call finds them out of L2. A round whose
    launches outlast its sleep (the GPU may have waited for the host) is thrown away and
    the sleep doubled. Returns the median GPU time per call over the rounds kept, and
    whether ``rounds`` of them were kept within ``4 * rounds`` tries.
    """
    if not timings_meaningful():
        raise RuntimeError(NO_TIMINGS)
    import torch

    for call in calls:  # compiles and autotunes; then one timed pass of the host alone
        call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for call in calls:
        call()
    host_s = time.perf_counter() - start
    torch.cuda.synchronize()
    # How many cycles torch.cuda._sleep spins per second on this GPU, measured.
    probe, begin, end = 10**7, torch.cuda.Event(enable_timing=True), torch.cuda.Event(
        enable_timing=True)
    begin.record()
    torch.cuda._sleep(probe)
    end.record()
    end.synchronize()
    cycles_per_s = probe / (begin.elapsed_time(end) * 1e-3)
    sleep_s = 4 * host_s + 5e-3
    gpu = []
    for _ in range(4 * rounds):
        if len(gpu) == rounds:
            break
        torch.cuda._sleep(int(cycles_per_s * sleep_s))
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start = time.perf_counter()
        begin.record()
        for call in calls:
            call()
        end.record()
        launched_s = time.perf_counter() - start
        end.synchronize()
        if launched_s < sleep_s:
            gpu.append(begin.elapsed_time(end))
        else:
            sleep_s *= 2
    if not gpu:
        return math.nan, False
    return sorted(gpu)[len(gpu) // 2] / len(calls), len(gpu) == rounds


def cold_matmul_inputs(m: int, n: int, k: int, dtype, device: str = "cuda") -> list[tuple]:
    """Random ``(a, b)`` pairs of an ``m x k`` by ``k x n`` product: as many as
    :func:`gpu_ms` needs for each call's inputs to be out of L2 when it runs."""
    import torch

    copies = copies_for_cold_cache((m * k + k * n) * dtype.itemsize)
    return [(torch.randn(m, k, device=device, dtype=dtype),
             torch.randn(k, n, device=device, dtype=dtype)) for _ in range(copies)]


def calls_on(fn: Callable[[object, object], object], pairs: Sequence[tuple]) -> list:
    """One call of ``fn(a, b)`` per pair (from :func:`cold_matmul_inputs`), for
    :func:`gpu_ms`."""
    return [lambda a=a, b=b: fn(a, b) for a, b in pairs]


def matmul_tflop_per_s(fn: Callable[[object, object], object], pairs: Sequence[tuple]) -> float:
    """The rate of ``fn(a, b)`` over ``pairs`` (from :func:`cold_matmul_inputs`) in GPU time,
    counting 2 * M * N * K floating-point operations per product."""
    (m, k), n = pairs[0][0].shape, pairs[0][1].shape[1]
    return tflop_per_s(2 * m * n * k, gpu_ms(calls_on(fn, pairs)))


def gb_per_s(num_bytes: float, ms: float) -> float:
    return num_bytes / ms * 1e-6


def tflop_per_s(num_flops: float, ms: float) -> float:
    return num_flops / ms * 1e-9


def us_per_call(num_bytes: float, rate_gb_per_s: float) -> float:
    """The time of one call, in microseconds, worked back from its rate (gb_per_s's inverse)."""
    return num_bytes / rate_gb_per_s * 1e-3


# A call that took this many times as long as a call of the same sweep doing more work.
OUT_OF_LINE = 1.5


def out_of_line(times: Sequence[float], factor: float = OUT_OF_LINE) -> list[int]:
    """Indices of the readings in ``times`` (one call's time per size, the sizes growing,
    each doing more work than the one before) that took over ``factor`` times as long as
    a later, larger call. More work cannot take that much less time, so such a reading
    says something about the run (the host busy, the clock not yet up), not the kernel.
    The factor leaves room for the noise of host-bound calls, whose times are level."""
    return [i for i, time_ in enumerate(times)
            if any(time_ > factor * later for later in times[i + 1:])]


# -- ceilings ------------------------------------------------------------------------------

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


def _check_ceiling(kind: str) -> None:
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
    _check_ceiling(kind)
    if not timings_meaningful():
        raise RuntimeError(NO_TIMINGS)
    import torch

    ceiling = _copy_ceiling() if kind == "copy" else _gemm_ceiling(kind)
    torch.cuda.empty_cache()
    return ceiling


# -- one benchmark across GPUs ---------------------------------------------------------------

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


@dataclass
class Run:
    """One GPU's timings of one benchmark: measured live in this process, or recorded."""

    gpu: str  # short GPU name, e.g. "H100 80GB HBM3"
    slug: str
    live: bool
    provenance: str  # GPU, versions, date, commit
    xs: list
    series: dict[str, list[float]]
    unit: str
    ceiling: Ceiling | None
    stale: str | None = None  # why a recording may be out of date, or None
    notes: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> list[float]:
        return self.series[name]

    @property
    def largest(self) -> int:
        """Index of the largest x (the last, when the x values are names)."""
        if not all(isinstance(x, numbers.Real) for x in self.xs):
            return len(self.xs) - 1
        return max(range(len(self.xs)), key=lambda i: self.xs[i])

    def at_largest(self, name: str) -> float:
        return self.series[name][self.largest]

    def fraction_of_ceiling(self, name: str) -> float:
        """``name``'s rate at the largest x over the ceiling measured in the same run."""
        if self.ceiling is None:
            return math.nan
        return self.at_largest(name) / self.ceiling.value

    def footer(self) -> str:
        """One line for under a plot: how and where these numbers were measured."""
        return f"{self.gpu}: {'measured live' if self.live else 'recorded'}, {self.provenance}"

    def ratio(self, name: str, other: str) -> float:
        """``name`` over ``other``, at the largest x."""
        return self.at_largest(name) / self.at_largest(other)


class Results:
    """The runs of one benchmark, one per GPU (live first); empty when there is none.

    Iterate over it for the numbers a page prints; :meth:`plot` and :meth:`summary` draw and
    tabulate every GPU together.
    """

    def __init__(self, title: str, *, label: str, xlabel: str, unit: str, logx: bool,
                 runs: list[Run]):
        self.title, self.label, self.xlabel = title, label, xlabel
        self.unit, self.logx, self.runs = unit, logx, runs

    def __iter__(self) -> Iterator[Run]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def __bool__(self) -> bool:
        return bool(self.runs)

    @property
    def has_ceiling(self) -> bool:
        """Whether any run has a ceiling (a :meth:`Benchmark.measure` has none)."""
        return any(run.ceiling is not None for run in self.runs)

    def variant_names(self) -> list[str]:
        names: list[str] = []
        for run in self.runs:
            names += [name for name in run.series if name not in names]
        return names

    @property
    def overlaid(self) -> bool:
        """Whether :meth:`plot` draws every GPU on one axes (else one panel per GPU)."""
        return len(self.variant_names()) <= OVERLAID_VARIANTS

    def plot(self, *, title: str | None = None, ylabel: str | None = None):
        """Each GPU's ceiling as a wide pale line. Up to OVERLAID_VARIANTS variants share
        one axes, colour by GPU and line style by variant, with a legend column per GPU
        headed by its name; more get one panel per GPU on a shared y axis, colour and line
        style by variant, and one legend. Under the legend, each GPU's provenance."""
        if not self.runs:
            return None
        import matplotlib.pyplot as plt

        names, overlaid = self.variant_names(), self.overlaid
        figure = plt.figure(figsize=(WIDTH, 2 * AXES_HEIGHT))  # the height is set to fit below
        panels = figure.subplots(1, 1 if overlaid else len(self.runs), sharey=True,
                                 squeeze=False)[0]
        drawn = []  # each run's lines: its variants', then its ceiling's
        for i, run in enumerate(self.runs):
            axes, lines = panels[0 if overlaid else i], []
            for j, name in enumerate(names):
                values = run.series.get(name)
                colour, first = f"C{i if overlaid else j}", j == 0
                lines += axes.plot(
                    run.xs, values if values is not None else [math.nan] * len(run.xs),
                    color=colour, linestyle=LINESTYLES[j % len(LINESTYLES)],
                    marker=MARKERS[j % len(MARKERS)],
                    markersize=FIRST_MARKER_SIZE if first else OTHER_MARKER_SIZE,
                    markerfacecolor=colour if first else "none",
                    zorder=3 if first else 2, label=f"{run.gpu}: {name}")
            roof = run.ceiling
            if roof is not None or self.has_ceiling:
                lines.append(axes.axhline(
                    roof.value if roof else math.nan, color=f"C{i}" if overlaid else "grey",
                    linewidth=3, alpha=0.35, label=f"{run.gpu}: ceiling, {roof.label} "
                    f"{roof.value:,.0f} {roof.unit}" if roof else f"{run.gpu}: no ceiling"))
            if not overlaid:
                axes.set_title(f"{run.gpu}, ceiling {roof.value:,.0f} {roof.unit}" if roof
                               else run.gpu, fontsize=9)
            drawn.append(lines)
        for axes in panels:
            if self.logx:
                axes.set_xscale("log", base=2)
            axes.set_xlabel(self.xlabel)
            axes.grid(True, alpha=0.3)
        panels[0].set_ylabel(ylabel or self.unit)
        panels[0].set_ylim(bottom=0, top=panels[0].get_ylim()[1] * 1.06)  # room above ceilings

        style = dict(loc="upper center", fontsize=SMALL_TEXT, frameon=False,
                     handlelength=LEGEND_HANDLE_LENGTH)
        if overlaid:
            panels[0].set_title(title or self.title, fontsize=10)
            suptitle, legends = None, []
            for i, (run, lines) in enumerate(zip(self.runs, drawn)):
                legends.append(figure.legend(
                    lines, [line.get_label().removeprefix(f"{run.gpu}: ") for line in lines],
                    title=run.gpu, title_fontproperties={"size": SMALL_TEXT, "weight": "bold"},
                    alignment="left", **style))
                legends[-1].get_title().set_color(f"C{i}")
        else:
            suptitle = figure.suptitle(title or self.title, fontsize=10,
                                       verticalalignment="top")
            handles, labels = drawn[0][:len(names)], list(names)
            roofs = [(run.ceiling, lines[-1]) for run, lines in zip(self.runs, drawn)
                     if run.ceiling]
            if roofs:  # its value on each GPU is in that GPU's panel title
                handles.append(roofs[0][1])
                labels.append(f"ceiling, {roofs[0][0].label}")
            # As few rows as fit across the figure.
            for rows in range(1, len(handles) + 1):
                legends = [figure.legend(handles, labels, ncol=math.ceil(len(handles) / rows),
                                         **style)]
                if _inches(legends[0])[0] <= WIDTH - 2 * MARGIN or rows == len(handles):
                    break
                legends[0].remove()
        footers = [figure.text(MARGIN / WIDTH, 0, _footer_lines(
                       run.footer() + (f"  [{run.stale}]" if run.stale else "")),
                   color=f"C{i}" if overlaid else "black", fontsize=SMALL_TEXT,
                   verticalalignment="top", linespacing=1.2,
                   fontweight="bold" if run.stale else "normal")
                   for i, run in enumerate(self.runs)]
        _lay_out(figure, panels, suptitle, legends, footers)
        return figure

    def summary(self, ratios: Sequence[tuple[str, str]] = ()) -> dict[str, dict[str, float]]:
        """Print, one column per GPU, each variant's rate at the largest x, the ceiling, each
        variant's fraction of it and the ``(name, other)`` ratios asked for; return the table
        as ``{row: {gpu: value}}``."""
        if not self.runs:
            return {}
        rows: dict[str, dict[str, float]] = {}

        def add(row: str, value_of: Callable[[Run], float]) -> None:
            rows[row] = {}
            for run in self.runs:
                try:
                    rows[row][run.gpu] = value_of(run)
                except (KeyError, ZeroDivisionError):
                    rows[row][run.gpu] = math.nan

        add(f"largest {self.label}", lambda run: run.xs[run.largest])
        for name in self.variant_names():
            add(f"{name} ({self.unit})", lambda run, name=name: run.at_largest(name))
        if self.has_ceiling:
            add(f"ceiling ({self.unit})",
                lambda run: run.ceiling.value if run.ceiling else math.nan)
            for name in self.variant_names():
                add(f"{name} / ceiling",
                    lambda run, name=name: run.fraction_of_ceiling(name))
        for name, other in ratios:
            add(f"{name} / {other}", lambda run, n=name, o=other: run.ratio(n, o))

        width = max(len(row) for row in rows) + 2
        columns = [run.gpu for run in self.runs]
        print(f"{self.title}, at the largest size:")
        print(" " * width + "".join(f"{gpu:>18}" for gpu in columns))
        source = {run.gpu: "live" if run.live else ("STALE" if run.stale else "recorded")
                  for run in self.runs}
        print(f"{'source':<{width}}" + "".join(f"{source[gpu]:>18}" for gpu in columns))
        for row, values in rows.items():
            cells = "".join(f"{_format(values[gpu], row):>18}" for gpu in columns)
            print(f"{row:<{width}}{cells}")
        return rows


TABLE_WIDTH = 88  # characters: what an output block shows at 1280 px without wrapping


def _print_table(label: str, unit: str, runs: list[Run]) -> None:
    """Every x of every run: a group of columns per GPU, one column per variant; one table
    per GPU when the groups side by side would be wider than :data:`TABLE_WIDTH`."""
    xs = list(dict.fromkeys(x for run in runs for x in run.xs))  # first seen first
    if all(isinstance(x, numbers.Real) for x in xs):
        xs.sort()
    first = max([len(label), *(len(_shown(x)) for x in xs)])
    groups = []
    for run in runs:
        widths = [max(len(name), 8) for name in run.series]
        groups.append((run, widths, sum(widths) + 2 * len(widths)))
    if len(runs) > 1 and first + sum(span + 2 for *_, span in groups) + len(
            f"   ({unit})") > TABLE_WIDTH:
        for run in runs:
            _print_table(label, unit, [run])
        return
    headings = [run.gpu[:span] for run, _, span in groups]
    # The unit goes after the last GPU's name, inside its columns where it fits there.
    trailer = f"   ({unit})"
    if len(headings[-1] + trailer) <= groups[-1][2]:
        headings[-1], trailer = headings[-1] + trailer, ""
    print(f"{'':>{first}} |" + " |".join(f"{heading:>{span}}" for heading, (*_, span)
                                         in zip(headings, groups)) + trailer)
    print(f"{label:>{first}} |" + " |".join(
        "".join(f"{name:>{width + 2}}" for name, width in zip(run.series, widths))
        for run, widths, _ in groups))
    decimals = {(run.slug, name): _decimals(values)
                for run in runs for name, values in run.series.items()}
    for x in xs:
        cells = []
        for run, widths, _ in groups:
            i = run.xs.index(x) if x in run.xs else None
            values = [run.series[name][i] if i is not None else math.nan
                      for name in run.series]
            cells.append("".join(
                f"{_number(value, decimals[run.slug, name]):>{width + 2}}"
                for value, name, width in zip(values, run.series, widths)))
        print(f"{_shown(x):>{first}} |" + " |".join(cells))


def _shown(x) -> str:
    """An x value as a table prints it: integers with thousands separators."""
    return f"{x:,}" if isinstance(x, numbers.Integral) else str(x)


def _format(value: float | str, row: str) -> str:
    if isinstance(value, str):  # a categorical x (a kernel's name, a device property)
        return value
    if math.isnan(value):
        return "-"
    if row.startswith("largest"):
        return f"{value:,}" if isinstance(value, int) else str(value)
    if " / " in row:
        return f"{value:.2f}"
    return _number(value, _decimals([value]))


def _decimals(values: Sequence[float]) -> int:
    """Decimals for one column of a table: one where its largest value is 10 or more;
    otherwise enough for three significant digits of that largest value (at most 6), so
    that a column of small numbers reads in one fixed format, not in scientific notation."""
    largest = max((abs(v) for v in values if not math.isnan(v)), default=0.0)
    if largest >= 10:
        return 1
    if largest == 0:
        return 2
    return min(6, 2 - math.floor(math.log10(largest)))


def _number(value: float, decimals: int) -> str:
    return f"{value:,.{decimals}f}"


# -- a page's benchmarks ----------------------------------------------------------------------


class Benchmark:
    """The benchmarks of one example page: measured live on a GPU, recorded with
    ``TRITON_GUIDE_RECORD=1``, recalled from ``results/`` otherwise (module docstring).

    ``page`` is the page's path; by default ``sys.argv[0]``, which is the page both when it
    runs as a script and under sphinx-gallery. ``results_dir`` overrides where results live.
    """

    def __init__(self, page: str | Path | None = None, *, results_dir: str | Path | None = None):
        page = page or store.running_from()
        if not page:
            raise ValueError("Benchmark(page=None) could not tell which page is running "
                             "(sys.argv[0] is not a .py file): pass the page's path")
        self.page = Path(page).resolve()
        self.key = store.page_key(self.page)
        self.results_dir = Path(results_dir) if results_dir else store.results_dir()
        source = self.page.read_text()
        self.kernel = store.kernel_source(source)
        self.has_benchmarks = _calls_sweep(source)
        self.recording = store.recording_requested()
        if self.recording and interpreting():
            raise RuntimeError(NO_RECORDING_TO_INTERPRET)
        self.live = timings_meaningful() and not _timings_from_store()
        if self.recording and not self.live:
            raise RuntimeError(f"TRITON_GUIDE_RECORD=1 and {store.TIMINGS_ENV}=recorded "
                               "contradict each other: unset one")
        self.gpu = store.gpu_environment() if timings_meaningful() else None
        own = self.gpu["slug"] if self.live else None
        self.recordings = [r for r in store.load(self.key, self.results_dir)
                           if r["gpu"]["slug"] != own]
        for record in self.recordings:
            record["stale"] = store.stale_reason(record["kernel_source"], self.kernel)
        self._record: dict | None = None
        self._titles: set[str] = set()

    def _relative(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(store.REPO_ROOT))
        except ValueError:
            return str(path)

    def stamp(self) -> str:
        """Where this page's outputs come from: the machine and versions of this build,
        whether timings are live, and which recordings (GPU, versions, date, commit)."""
        commit, dirty = store.git_state()
        build = f"commit {commit[:7]}" if commit else "commit unknown"
        build += " + local changes" if dirty else ""
        soft = store.software()
        versions = f"triton {soft['triton']}, torch {soft['torch']}"
        today = store.now()[:10]
        if self.gpu is None:
            lines = [f"Outputs: computed in this build by the Triton interpreter on the CPU "
                     f"({versions}; {build}; {today}), at small sizes; nothing is timed."]
        else:
            gpu = self.gpu
            lines = [f"Outputs: computed in this build on {gpu['name']} (CUDA {gpu['cuda']}, "
                     f"driver {gpu['driver']}; {versions}; {build}; {today})."]
        if self.live and self.has_benchmarks:
            where = self._relative(store.record_path(self.gpu["slug"], self.key,
                                                     self.results_dir))
            lines.append("Timings: measured live in this build"
                         + (f", and recorded to {where}." if self.recording else "."))
        if self.recordings:
            lines.append("Timings recorded earlier on other GPUs, drawn beside them:"
                         if self.live else
                         "Timings: recorded results (not measured in this build) of")
            for record in self.recordings:
                stale = f"; {record['stale']}" if record["stale"] else ""
                lines.append(f"  - {store.describe_record(record)}{stale}")
        elif self.has_benchmarks and not self.live:
            lines.append(f"Timings: none recorded for this page yet (on a GPU, "
                         f"`make bench PAGE={self.key}` records them).")
        return "\n".join(lines)

    def ceilings(self, kind: str) -> dict[str, Ceiling]:
        """The ceiling ``kind`` on each GPU this page can speak of, by GPU short name: on a
        GPU whose timings are live, measured now (:func:`measure_ceiling`); for every other
        GPU, as recorded beside this page's benchmarks, else beside another page's (the
        first in path order), so that a page can use a roof another page's benchmark
        measured, such as the copy ceiling on a compute-bound page."""
        _check_ceiling(kind)
        found: dict[str, Ceiling] = {}
        if self.live:
            found[store.short_gpu_name(self.gpu["name"])] = measure_ceiling(kind)
        records = sorted(store.load(None, self.results_dir),
                         key=lambda r: (Path(r["path"]).stem != self.key, Path(r["path"])))
        for record in records:
            if self.live and record["gpu"]["slug"] == self.gpu["slug"]:
                continue
            name = store.short_gpu_name(record["gpu"]["name"])
            roofs = [entry["ceiling"] for entry in record["benchmarks"]
                     if (entry.get("ceiling") or {}).get("kind") == kind]
            if roofs and name not in found:
                found[name] = Ceiling(**roofs[0])
        return found

    def sweep(
        self,
        title: str,
        xs: Sequence,
        variants: dict[str, Callable[[object], Callable[[], object]]],
        rate: Callable[[object, float], float],
        *,
        label: str = "x",
        unit: str,
        ceiling: str,
        xlabel: str | None = None,
        logx: bool = True,
        gpu_time: bool = False,
    ) -> Results:
        """Time every variant at every x on this GPU (live), or recall the recordings.

        ``title`` names the benchmark on the page and in the store. ``variants`` maps a
        name to a function that, given x, prepares inputs and returns the callable to time;
        ``rate(x, ms)`` turns a median time into the rate; ``unit`` is its unit (``"GB/s"`` or
        ``"TFLOP/s"``) and ``ceiling`` the roof measured beside it (``"copy"``,
        ``"gemm_fp16"``, ``"gemm_bf16"``), which must share that unit.

        Each call is timed as a program makes it, host included (:func:`median_ms`), in
        :data:`HOST_TIMED_ROUNDS` rounds whose median is kept, unless ``gpu_time``: then the
        host is left out (:func:`gpu_ms`, which takes a median of its own), and each
        variant, given x, returns a list of calls doing the same work on distinct copies of
        the inputs (:func:`cold_matmul_inputs` makes such copies for a matmul).
        """
        _check_ceiling(ceiling)
        if CEILING_UNITS[ceiling] != unit:
            raise ValueError(f"unit={unit!r} does not match ceiling={ceiling!r}, which is in "
                             f"{CEILING_UNITS[ceiling]}: give the rate in that unit or "
                             "choose the ceiling that bounds this kernel")

        def value(x, prepare):
            return rate(x, (gpu_ms if gpu_time else median_ms)(prepare(x)))

        return self._collect(title, xs, variants, value, label=label, unit=unit,
                             ceiling=ceiling, xlabel=xlabel, logx=logx,
                             rounds=1 if gpu_time else HOST_TIMED_ROUNDS)

    def measure(
        self,
        title: str,
        xs: Sequence,
        variants: dict[str, Callable[[object], Callable[[], float]]],
        *,
        label: str = "x",
        unit: str,
        xlabel: str | None = None,
        logx: bool = True,
    ) -> Results:
        """Like :meth:`sweep`, for a GPU quantity that is not a rate under a roof: peak
        memory, or a wall-clock time that ``do_bench`` cannot take (a first call that
        compiles). Each variant, given x, returns a callable that makes one measurement on
        the GPU and returns it in ``unit``; it is called once. Recorded and recalled like a
        sweep; there is no ceiling.
        """

        def value(x, prepare):
            return float(prepare(x)())

        return self._collect(title, xs, variants, value, label=label, unit=unit,
                             ceiling=None, xlabel=xlabel, logx=logx)

    def _collect(self, title, xs, variants, value, *, label, unit, ceiling, xlabel,
                 logx, rounds=1) -> Results:
        if title in self._titles:
            raise ValueError(f"title={title!r} is used twice on this page: each benchmark "
                             "needs its own title, which names it in the store")
        self._titles.add(title)
        xs = list(xs)
        xlabel = xlabel or label
        runs = []
        if self.live:
            runs.append(self._measure(title, xs, variants, value, label, unit, ceiling,
                                      xlabel, logx, rounds))
        recalled = [self._recalled(record, title, xs, variants, ceiling)
                    for record in self.recordings]
        runs += [run for run in recalled if run is not None]
        if runs:  # one table: a group of columns per GPU, the live one first
            _print_table(label, unit, runs)
        if not runs:
            print(f"{title}: no GPU timings recorded yet (on a GPU, `make bench "
                  f"PAGE={self.key}` records them); interpreter timings are never shown.")
        return Results(title, label=label, xlabel=xlabel, unit=unit, logx=logx, runs=runs)

    def _measure(self, title, xs, variants, value, label, unit, ceiling, xlabel, logx,
                 rounds) -> Run:
        roof = measure_ceiling(ceiling) if ceiling else None
        name = store.short_gpu_name(self.gpu["name"])
        print(f"{title}: measured now on {name}" + (
            f"; ceiling ({roof.label}) {roof.value:,.0f} {unit}" if roof else "")
            + (f"; median of {rounds} rounds" if rounds > 1 else ""), flush=True)
        samples = {variant: [[] for _ in xs] for variant in variants}
        for _ in range(rounds):
            for i, x in enumerate(xs):
                for variant, prepare in variants.items():
                    samples[variant][i].append(value(x, prepare))
        series = {variant: [statistics.median(values) for values in per_x]
                  for variant, per_x in samples.items()}
        if self.recording:
            self._save({
                "title": title, "label": label, "xlabel": xlabel, "unit": unit, "logx": logx,
                "x": xs, "ceiling": vars(roof).copy() if roof else None,
                "series": [{"label": variant, "unit": unit, "x": xs, "values": values}
                           for variant, values in series.items()],
            })
        commit, dirty = store.git_state()
        provenance = store.provenance(date=store.now(), commit=commit, dirty=dirty,
                                      gpu=self.gpu, software=store.software())
        return Run(gpu=name, slug=self.gpu["slug"], live=True, provenance=provenance, xs=xs,
                   series=series, unit=unit, ceiling=roof)

    def _save(self, entry: dict) -> None:
        if self._record is None:  # the first benchmark of this run replaces the old file
            self._record = store.new_record(page=self._relative(self.page), key=self.key,
                                            gpu=self.gpu, kernel=self.kernel)
        self._record["benchmarks"].append(entry)
        path = store.save(self._record, self.results_dir)
        print(f"recorded to {self._relative(path)}", flush=True)

    def _recalled(self, record: dict, title: str, xs: list, variants: dict,
                  ceiling: str | None) -> Run | None:
        name = store.short_gpu_name(record["gpu"]["name"])
        entry = store.find_benchmark(record, title)
        if entry is None:
            print(f"{title}: {name} has no recording of this benchmark (on that GPU, "
                  f"`make bench PAGE={self.key}` records it).")
            return None
        series = {s["label"]: s["values"] for s in entry["series"]}
        roof = Ceiling(**entry["ceiling"]) if entry.get("ceiling") else None
        notes = []
        if entry["x"] != _as_json(xs) or list(series) != list(variants) or (
                (roof.kind if roof else None) != ceiling):
            notes.append("recorded with other sizes, variants or ceiling than this page now "
                         "asks for")
        synthetic = "SYNTHETIC TEST DATA " if record.get("synthetic") else ""
        run = Run(gpu=name, slug=record["gpu"]["slug"], live=False,
                  provenance=synthetic + store.provenance(
                      date=record["date"], commit=record.get("commit"),
                      dirty=record.get("dirty"), gpu=record["gpu"],
                      software=record["software"]),
                  xs=entry["x"], series=series,
                  unit=entry["unit"], ceiling=roof, stale=record.get("stale"), notes=notes)
        ceiling_text = (f"; ceiling ({roof.label}) {roof.value:,.0f} {roof.unit}"
                        if roof is not None else "" if ceiling is None
                        else "; no ceiling recorded")
        print(f"{title}: recorded on {store.describe_record(record)}{ceiling_text}")
        for warning in ([run.stale] if run.stale else []) + notes:
            print(f"  NOTE: {warning}")
        return run


def _as_json(value):
    return json.loads(json.dumps(value))


def _timings_from_store() -> bool:
    return os.environ.get(store.TIMINGS_ENV, "") == "recorded"


def _calls_sweep(source: str) -> bool:
    """Whether a page's source calls ``<something>.sweep(...)`` or ``.measure(...)``, i.e.
    has benchmarks."""
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr in ("sweep", "measure")
               for node in ast.walk(ast.parse(source)))
