"""What an exercise is checked on: its cases (:class:`Case`, with :class:`Output` for the
argument the checker allocates, and the dry :func:`largest` cases), the helpers that make
their inputs (:func:`randn`, :func:`strided`, :func:`stored_by_columns`,
:func:`size_between`), the wrong solutions it must catch (:class:`Mistake`), and the
outcome of a check (:class:`CaseResult`, :class:`Report`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import torch

from .. import runtime
from .placement import contiguous_strides
from .watch import Launch

@dataclass(frozen=True)
class Output:
    """An output argument: the checker allocates it, filled with NaN, before calling ``solve``.

    ``strides=None`` means contiguous (row-major).
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...] | None = None


Argument = Union[torch.Tensor, Output, int, float]


@dataclass(frozen=True)
class Case:
    """One call of ``solve``: a name that says what is special, why, and the arguments in order.

    Tensors are float32 CPU tensors; the checker copies them, with their strides, to the
    device the kernels run on.
    """

    name: str
    why: str
    arguments: dict[str, Argument]
    # A dry case (see :func:`largest`) only records what solve launches, on meta tensors.
    dry: bool = False

    @property
    def output_name(self) -> str:
        names = [name for name, value in self.arguments.items() if isinstance(value, Output)]
        if len(names) != 1:
            raise ValueError(f"case {self.name} must have exactly one Output, has {names}")
        return names[0]

    def inputs(self) -> dict[str, torch.Tensor | int | float]:
        """The arguments without the output, for the reference."""
        return {k: v for k, v in self.arguments.items() if not isinstance(v, Output)}

    def describe(self) -> str:
        """``x (3, 1025) stride (2050, 2); n=1025``: what this case passes to ``solve``."""
        parts = []
        for name, value in self.arguments.items():
            if isinstance(value, torch.Tensor):
                parts.append(f"{name} {tuple(value.shape)} stride {tuple(value.stride())}")
            elif isinstance(value, Output):
                strides = value.strides or contiguous_strides(value.shape)
                parts.append(f"{name} (output) {tuple(value.shape)} stride {tuple(strides)}")
            else:
                parts.append(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}")
        return "; ".join(parts)

    def shapes(self) -> str:
        """``x (3, 1025) -> out (3,)``: the short form used on every report line."""
        inputs = [f"{k} {tuple(v.shape)}" for k, v in self.arguments.items()
                  if isinstance(v, torch.Tensor)]
        output = self.arguments[self.output_name]
        return f"{', '.join(inputs)} -> {self.output_name} {tuple(output.shape)}"


@dataclass(frozen=True)
class Mistake:
    """A plausible wrong solution: the reference solution with ``old`` replaced by ``new``.

    ``caught_by`` names the case that must fail for it, and ``reported``, if given, a phrase
    that the report of that case says (under the interpreter). ``needs_interpreter`` marks
    a mistake that only the interpreter can catch: what it reads wrongly is never stored, it
    copies an input, it depends on the order the programs run in, or it writes far outside
    every tensor (which only the interpreter stops before it happens).
    """

    name: str
    explanation: str
    old: str
    new: str
    caught_by: str
    reported: str = ""
    needs_interpreter: bool = False

    def caught(self) -> str:
        """Which case fails for this mistake, and where."""
        where = ", in the interpreter only" if self.needs_interpreter else ""
        return f"caught by {self.caught_by}{where}"


@dataclass
class CaseResult:
    case: Case
    passed: bool
    summary: str  # one line
    details: list[str] = field(default_factory=list)  # shown for the first failing case
    undefined_read: bool = False  # a load without other= had masked-off lanes (interpreter)
    launches: list[Launch] = field(default_factory=list, repr=False)  # what solve launched
    error: str = ""  # what solve raised, whole, if it raised


@dataclass
class Report:
    """The outcome of checking one ``solve`` on every case of an exercise."""

    exercise: str
    seed: int
    cases: int  # how many cases the exercise has
    width: int  # the longest case name
    results: list[CaseResult] = field(default_factory=list)
    stopped: str = ""  # why the cases after the last result were not run, if they were not
    notes: list[str] = field(default_factory=list)  # said at the end, whatever the verdict

    @property
    def passed(self) -> bool:
        return all(result.passed for result in self.results)

    @property
    def failed_cases(self) -> list[str]:
        return [result.case.name for result in self.results if not result.passed]

    @property
    def first_failure(self) -> CaseResult | None:
        return next((result for result in self.results if not result.passed), None)

    def header(self) -> list[str]:
        return [f"{self.exercise}: {plural(self.cases, 'case')}, seed {self.seed} "
                f"(--seed {self.seed} replays them)",
                f"on {runtime.describe()}"]

    def line(self, result: CaseResult) -> str:
        verdict = "PASS" if result.passed else "FAIL"
        return f"  {verdict}  {result.case.name:<{self.width}}  {result.summary}"

    def footer(self) -> list[str]:
        lines = []
        first = self.first_failure
        if first is not None:
            lines.append(f"first failing case: {first.case.name} ({first.case.why})")
            lines.append(f"  arguments: {first.case.describe()}")
            lines.extend(f"  {line}" for line in first.details)
        if self.stopped:
            lines.append(self.stopped)
        lines.extend(self.notes)
        total, failed = len(self.results), len(self.failed_cases)
        run = f"{total} cases" if total == self.cases else f"the {total} cases run"
        lines.append(f"all {run} pass" if self.passed else
                     f"FAILED: {failed} of {run} fail (first: {first.case.name})")
        return lines

    def text(self) -> str:
        return "\n".join([*self.header(), *map(self.line, self.results), *self.footer()])


def plural(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def largest(name: str, why: str, arguments: dict) -> Case:
    """A dry case at a statement's largest sizes: ``arguments`` as for a :class:`Case`, with
    the inputs given as shapes (tuples). ``solve`` runs on meta tensors, which have a shape
    and no data, and its launches are recorded, not run: each grid must fit a GPU's limits,
    and each kernel must compile for an H100 as launched, however large the blocks."""
    return Case(name, f"{why} (a dry run: launches checked and compiled, not run)",
                {key: torch.empty(value, device="meta") if isinstance(value, tuple) else value
                 for key, value in arguments.items()}, dry=True)


def randn(generator: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    """Standard normal float32 values drawn from ``generator``, times ``scale``."""
    return torch.randn(*shape, generator=generator) * scale


def strided(values: torch.Tensor, step_rows: int = 2, step_cols: int = 3) -> torch.Tensor:
    """A non-contiguous view holding ``values``: every ``step``-th row and column of a bigger one.

    A 1-D tensor becomes every ``step_rows``-th element of a longer one.
    """
    if values.dim() == 1:
        base = torch.full((values.shape[0] * step_rows,), float("nan"))
        view = base[::step_rows]
    else:
        rows, cols = values.shape
        base = torch.full((rows * step_rows, cols * step_cols), float("nan"))
        view = base[::step_rows, ::step_cols]
    view.copy_(values)
    return view


def stored_by_columns(values: torch.Tensor) -> torch.Tensor:
    """The matrix ``values`` stored column by column (strides ``(1, rows)``), as the
    transpose of a contiguous matrix is: a kernel that takes ``stride(1) == 1`` for granted
    reads it wrongly."""
    return values.t().contiguous().t()


def size_between(generator: torch.Generator, low: int, high: int) -> int:
    """A random integer in ``[low, high]`` drawn from ``generator``."""
    return int(torch.randint(low, high + 1, (1,), generator=generator))
