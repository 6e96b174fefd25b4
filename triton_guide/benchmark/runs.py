"""One benchmark's numbers: a :class:`Run` per GPU (measured live or recorded), gathered in
:class:`Results`, which a page iterates over for its prose, draws and tabulates."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from .ceilings import Ceiling
from .figures import OVERLAID_VARIANTS, draw
from .tables import format_x, print_summary
from .timing import OUT_OF_LINE, out_of_line

# Microseconds per call from work over rate: bytes / (GB/s), FLOPs / (TFLOP/s).
_US_PER_WORK_OVER_RATE = {"GB/s": 1e-3, "TFLOP/s": 1e-6}


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

    def us_per_call(self, name: str, work: Callable[[object], float]) -> list[float]:
        """``name``'s time per call at each x, in microseconds, worked back from its rate
        and ``work(x)``, the bytes (for GB/s) or FLOPs (for TFLOP/s) one call does."""
        scale = _US_PER_WORK_OVER_RATE[self.unit]
        return [work(x) / rate * scale for x, rate in zip(self.xs, self.series[name])]

    def slow_readings(self, name: str, work: Callable[[object], float]) -> list[int]:
        """Indices of ``name``'s readings that took over OUT_OF_LINE times as long as a
        call at a larger x (:func:`~triton_guide.benchmark.out_of_line`): more work cannot
        take that much less time, so they say more about the run than the kernel."""
        return out_of_line(self.us_per_call(name, work))


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
        """Draw every GPU's run on one figure and return it (None when there is no run):
        up to OVERLAID_VARIANTS variants on one axes, colour by GPU and line style by
        variant; more in one panel per GPU. Each GPU's ceiling is a wide pale line, and
        its provenance is under the legend (:func:`~triton_guide.benchmark.figures.draw`)."""
        return draw(self, title=title, ylabel=ylabel)

    def compare(self, name: str, other: str, work: Callable[[object], float]) -> dict:
        """Print, for each GPU, ``name`` against ``other``: at the largest x, the ratio of
        their rates and ``name``'s fraction of the ceiling; at the smaller x, the range of
        the ratio, leaving out the readings either variant got out of line (slow
        readings, :meth:`Run.slow_readings`; ``work(x)`` is one call's bytes or FLOPs).
        Return ``{gpu: (lowest, highest)}`` ratios at the smaller x (nan where none is
        left), so that a page's prose can rest on what it printed."""
        spans = {}
        for run in self.runs:
            largest, x_of = run.largest, lambda i, run=run: f"{self.label} = {format_x(run.xs[i])}"
            roof = run.fraction_of_ceiling(name)
            print(f"{run.gpu}, {x_of(largest)}: {name} at {run.ratio(name, other):.2f}x "
                  f"{other}'s {self.unit}" + ("" if math.isnan(roof) else
                                              f", {roof:.0%} of the ceiling"))
            slow = set()
            for variant in (name, other):
                micros = run.us_per_call(variant, work)
                for i in run.slow_readings(variant, work):
                    print(f"  left out, a slow reading: {variant} at {x_of(i)}, "
                          f"{micros[i]:.1f} us per call, over {OUT_OF_LINE:g}x a call at "
                          f"a larger {self.label} (more work cannot take that much less)")
                    slow.add(i)
            ratios = {i: run[name][i] / run[other][i] for i in range(len(run.xs))
                      if i != largest and i not in slow}
            if not ratios:
                spans[run.gpu] = (math.nan, math.nan)
                continue
            low, high = min(ratios, key=ratios.get), max(ratios, key=ratios.get)
            spans[run.gpu] = (ratios[low], ratios[high])
            print(f"  at smaller {self.label}: {name} from {ratios[low]:.2f}x "
                  f"({x_of(low)}) to {ratios[high]:.2f}x ({x_of(high)}) {other}'s")
        return spans

    def per_call(self, names: Sequence[str], work: Callable[[object], float]) -> None:
        """Print, for each GPU, the time per call of each of ``names`` at every x (worked
        back from the rates, :meth:`Run.us_per_call`), and how much it grew from the
        smallest x to the largest against the work: a time that grows far less than the
        work is set by a cost per call (the launch, the host), not by the kernel."""
        for run in self.runs:
            first, last = min(range(len(run.xs)), key=lambda i: work(run.xs[i])), run.largest
            micros = {name: run.us_per_call(name, work) for name in names}
            cells = "; ".join(f"{x}: " + " / ".join(f"{micros[name][i]:.0f}" for name in names)
                              for i, x in enumerate(run.xs))
            print(f"{run.gpu}, us per call ({' / '.join(names)}) by {self.label}: {cells}")
            growth = ", ".join(f"{name} {micros[name][last] / micros[name][first]:.1f}x"
                               for name in names)
            print(f"{run.gpu}, time per call at {self.label} {run.xs[last]} over "
                  f"{run.xs[first]} ({work(run.xs[last]) / work(run.xs[first]):.0f}x the "
                  f"work): {growth}")

    def summary(self, ratios: Sequence[tuple[str, str]] = ()) -> dict[str, dict[str, float]]:
        """Print, one column per GPU, each variant's rate at the largest x, the ceiling, each
        variant's fraction of it and the ``(name, other)`` ratios asked for; return the table
        as ``{row: {gpu: value}}``."""
        return print_summary(self, ratios)
