"""Tables: every x of a benchmark, a group of columns per GPU (:func:`print_table`), and the
summary at the largest size, one column per GPU (:func:`print_summary`), in fixed formats
that fit an output block of the site."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runs import Run

TABLE_WIDTH = 88  # characters: what an output block shows at 1280 px without wrapping


def print_table(label: str, unit: str, runs: list[Run]) -> None:
    """Every x of every run: a group of columns per GPU, one column per variant; one table
    per GPU when the groups side by side would be wider than :data:`TABLE_WIDTH`."""
    xs = list(dict.fromkeys(x for run in runs for x in run.xs))  # first seen first
    if all(isinstance(x, numbers.Real) for x in xs):
        xs.sort()
    first = max([len(label), *(len(format_x(x)) for x in xs)])
    groups = []
    for run in runs:
        widths = [max(len(name), 8) for name in run.series]
        groups.append((run, widths, sum(widths) + 2 * len(widths)))
    if len(runs) > 1 and first + sum(span + 2 for *_, span in groups) + len(
            f"   ({unit})") > TABLE_WIDTH:
        for run in runs:
            print_table(label, unit, [run])
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
        print(f"{format_x(x):>{first}} |" + " |".join(cells))


def format_x(x) -> str:
    """An x value as tables and readings print it: integers with thousands separators,
    anything else (a shape's name, a float) as it is."""
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
    that a column of small numbers reads in one fixed format, not in scientific notation.
    A column of whole numbers only (counts) gets none."""
    finite = [v for v in values if not math.isnan(v)]
    if finite and all(float(v).is_integer() for v in finite):
        return 0
    largest = max((abs(v) for v in finite), default=0.0)
    if largest >= 10:
        return 1
    if largest == 0:
        return 2
    return min(6, 2 - math.floor(math.log10(largest)))


def _number(value: float, decimals: int) -> str:
    return f"{value:,.{decimals}f}"


def print_summary(results, ratios: Sequence[tuple[str, str]] = ()) -> dict[str, dict[str, float]]:
    """Print, one column per GPU, each variant's rate at the largest x, the ceiling, each
    variant's fraction of it and the ``(name, other)`` ratios asked for; return the table
    as ``{row: {gpu: value}}``."""
    if not results.runs:
        return {}
    rows: dict[str, dict[str, float]] = {}

    def add(row: str, value_of: Callable[[Run], float]) -> None:
        rows[row] = {}
        for run in results.runs:
            try:
                rows[row][run.gpu] = value_of(run)
            except (KeyError, ZeroDivisionError):
                rows[row][run.gpu] = math.nan

    add(f"largest {results.label}", lambda run: run.xs[run.largest])
    for name in results.variant_names():
        add(f"{name} ({results.unit})", lambda run, name=name: run.at_largest(name))
    if results.has_ceiling:
        add(f"ceiling ({results.unit})",
            lambda run: run.ceiling.value if run.ceiling else math.nan)
        for name in results.variant_names():
            add(f"{name} / ceiling",
                lambda run, name=name: run.fraction_of_ceiling(name))
    for name, other in ratios:
        add(f"{name} / {other}", lambda run, n=name, o=other: run.ratio(n, o))

    width = max(len(row) for row in rows) + 2
    columns = [run.gpu for run in results.runs]
    print(f"{results.title}, at the largest size:")
    print(" " * width + "".join(f"{gpu:>18}" for gpu in columns))
    source = {run.gpu: "live" if run.live else ("recorded, stale" if run.stale else "recorded")
              for run in results.runs}
    print(f"{'source':<{width}}" + "".join(f"{source[gpu]:>18}" for gpu in columns))
    for row, values in rows.items():
        cells = "".join(f"{_format(values[gpu], row):>18}" for gpu in columns)
        print(f"{row:<{width}}{cells}")
    return rows

