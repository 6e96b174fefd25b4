"""One benchmark's numbers: a :class:`Run` per GPU (measured live or recorded), gathered in
:class:`Results`, which a page iterates over for its prose, draws and tabulates."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from .ceilings import Ceiling
from .figures import OVERLAID_VARIANTS, draw
from .tables import print_summary


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
        """Draw every GPU's run on one figure and return it (None when there is no run):
        up to OVERLAID_VARIANTS variants on one axes, colour by GPU and line style by
        variant; more in one panel per GPU. Each GPU's ceiling is a wide pale line, and
        its provenance is under the legend (:func:`~triton_guide.benchmark.figures.draw`)."""
        return draw(self, title=title, ylabel=ylabel)

    def summary(self, ratios: Sequence[tuple[str, str]] = ()) -> dict[str, dict[str, float]]:
        """Print, one column per GPU, each variant's rate at the largest x, the ceiling, each
        variant's fraction of it and the ``(name, other)`` ratios asked for; return the table
        as ``{row: {gpu: value}}``."""
        return print_summary(self, ratios)
