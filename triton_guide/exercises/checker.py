"""Checking a reader's ``solve`` against an exercise's torch reference, one named case at a time.

Every case builds fresh inputs from a seed, calls ``solve`` with them and compares the output
with the reference computed in float64. The checker sets three traps that a plain
``torch.allclose`` would miss:

* outputs arrive filled with NaN (with a payload of the checker's own), so an element the
  kernel never writes shows up, and is told apart from a NaN the kernel computed;
* every tensor sits inside a larger buffer with margins before and after it: an unmasked
  load past the end of an input reads NaN, and a store past the end of the output (a
  missing mask) changes the output's margins, which is caught instead of silently
  scribbling on memory that happens to belong to nobody;
* inputs are compared after the call, so a kernel that writes into its input is caught.

A report names every case with PASS or FAIL and, for the first failing one, the arguments
(shapes, strides, scalars) and the first wrong positions with the expected and actual values.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Union

import torch

from .. import runtime
from ..testing import mismatches

# Elements of NaN kept before and after every tensor handed to ``solve`` (at least the span of
# the tensor itself): wide enough for a whole block of 4096 lanes to run past the end.
MARGIN = 4096
# The NaN an output is filled with: a quiet NaN with a payload of its own. An element still
# holding these bits was never written, or was computed from the poison (on a CPU, NaN + 1
# keeps the payload); a NaN the kernel computes from its inputs has other bits.
POISON_BITS = 0x7FC0DEAD
# What the margins around an output hold. Not NaN: an unmasked store past the end often
# stores NaN (read from an input's margin), which must show up as a change.
OUTPUT_MARGIN_FILL = -12345.0
# How many wrong positions a failure report lists.
SHOWN_POSITIONS = 5


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
                strides = value.strides or _contiguous_strides(value.shape)
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

    ``caught_by`` names the case that must fail for it.
    """

    name: str
    explanation: str
    old: str
    new: str
    caught_by: str


@dataclass
class CaseResult:
    case: Case
    passed: bool
    summary: str  # one line
    details: list[str] = field(default_factory=list)  # shown for the first failing case


@dataclass
class Report:
    """The outcome of checking one ``solve`` on every case of an exercise."""

    exercise: str
    seed: int
    results: list[CaseResult]

    @property
    def passed(self) -> bool:
        return all(result.passed for result in self.results)

    @property
    def failed_cases(self) -> list[str]:
        return [result.case.name for result in self.results if not result.passed]

    @property
    def first_failure(self) -> CaseResult | None:
        return next((result for result in self.results if not result.passed), None)

    def text(self) -> str:
        width = max(len(result.case.name) for result in self.results)
        lines = [
            f"{self.exercise}: {len(self.results)} cases, seed {self.seed} "
            f"(--seed {self.seed} replays them)",
            f"on {runtime.describe()}",
        ]
        for result in self.results:
            verdict = "PASS" if result.passed else "FAIL"
            lines.append(f"  {verdict}  {result.case.name:<{width}}  {result.summary}")
        first = self.first_failure
        if first is not None:
            lines.append(f"first failing case: {first.case.name} ({first.case.why})")
            lines.append(f"  arguments: {first.case.describe()}")
            lines.extend(f"  {line}" for line in first.details)
        total, failed = len(self.results), len(self.failed_cases)
        lines.append(f"all {total} cases pass" if self.passed else
                     f"FAILED: {failed} of {total} cases fail (first: {first.case.name})")
        return "\n".join(lines)


class SolveNotFound(Exception):
    """The file to check could not be loaded, or defines no callable ``solve``."""


def load_solve(path: str | os.PathLike) -> Callable:
    """Import the Python file at ``path`` and return its ``solve`` function."""
    path = Path(path)
    if not path.is_file():
        raise SolveNotFound(f"no file at {path}: give the path of a .py file that defines solve")
    module_name = f"_triton_guide_solve_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise SolveNotFound(f"{path} cannot be imported: is it a .py file?")
    module = importlib.util.module_from_spec(spec)
    # Registered as an import would be, for code in the file that looks its module up.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise SolveNotFound(
            f"importing {path} failed: {type(error).__name__}: {error}\n"
            + "".join(traceback.format_exc(limit=-3))
        ) from error
    solve = getattr(module, "solve", None)
    if not callable(solve):
        raise SolveNotFound(f"{path} defines no function named solve: start from the stub")
    return solve


def new_seed() -> int:
    return int.from_bytes(os.urandom(4), "little")


def check(exercise, solve: Callable, *, seed: int | None = None) -> Report:
    """Run ``solve`` on every case of ``exercise`` (an :class:`~triton_guide.exercises.Exercise`).

    ``seed`` fixes every input (and the sizes of the random cases); by default a fresh one is
    drawn, and the report prints it so that a failure can be replayed.
    """
    seed = new_seed() if seed is None else seed
    generator = torch.Generator().manual_seed(seed)
    results = [_run_case(exercise, solve, case) for case in exercise.cases(generator)]
    return Report(exercise.name, seed, results)


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


@dataclass
class _Placed:
    buffer: torch.Tensor  # the whole allocation, margins included
    view: torch.Tensor  # what solve receives
    margin: int
    span: int  # elements from the view's first to its last element


def _place(shape, strides, device, values: torch.Tensor | None) -> _Placed:
    """A tensor of ``shape`` and ``strides`` inside a buffer with margins on both sides.

    An input (``values`` given) gets NaN margins; an output (``values=None``) is NaN inside
    and ``OUTPUT_MARGIN_FILL`` in its margins.
    """
    span = 1 + sum((size - 1) * stride for size, stride in zip(shape, strides))
    margin = max(MARGIN, span)
    fill = float("nan") if values is not None else OUTPUT_MARGIN_FILL
    buffer = torch.full((margin + span + margin,), fill, device=device)
    if values is None:
        buffer[margin: margin + span].view(torch.int32).fill_(POISON_BITS)
    view = buffer.as_strided(shape, strides, margin)
    if values is not None:
        view.copy_(values)
    return _Placed(buffer, view, margin, span)


def _margin_writes(placed: _Placed) -> tuple[int, int]:
    """How many margin elements, before and after an output, a kernel has changed."""
    before = placed.buffer[: placed.margin]
    after = placed.buffer[placed.margin + placed.span:]
    return int((before != OUTPUT_MARGIN_FILL).sum()), int((after != OUTPUT_MARGIN_FILL).sum())


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _run_case(exercise, solve: Callable, case: Case) -> CaseResult:
    device = runtime.device()
    output_name = case.output_name
    placed: dict[str, _Placed] = {}
    call_arguments = []
    for name, value in case.arguments.items():
        if isinstance(value, torch.Tensor):
            placed[name] = _place(value.shape, value.stride(), device, value)
            call_arguments.append(placed[name].view)
        elif isinstance(value, Output):
            strides = value.strides or _contiguous_strides(value.shape)
            placed[name] = _place(value.shape, strides, device, None)
            call_arguments.append(placed[name].view)
        else:
            call_arguments.append(value)

    try:
        with warnings.catch_warnings():
            # The interpreter computes with numpy, which warns on overflow (a wrong kernel's
            # exp(1e4)); the comparison below reports the result.
            warnings.simplefilter("ignore", RuntimeWarning)
            solve(*call_arguments)
        if device.type == "cuda":
            torch.cuda.synchronize()
    except Exception as error:
        message = str(error).strip().splitlines()
        first_line = message[-1] if message else ""
        tail = traceback.format_exc().rstrip().splitlines()[-12:]
        return CaseResult(case, False, f"solve raised {type(error).__name__}: {first_line}"[:160],
                          ["the end of the traceback:", *tail])

    # Stores past either end of the output: the classic missing mask.
    before, after = _margin_writes(placed[output_name])
    if before or after:
        where = []
        if after:
            where.append(f"{_count(after, 'element')} past the end")
        if before:
            where.append(f"{_count(before, 'element')} before the start")
        return CaseResult(case, False, f"wrote {' and '.join(where)} of {output_name}", [
            f"solve stored {' and '.join(where)} of {output_name}:",
            "is a tl.store missing its mask, or are offsets computed with the wrong stride?"])

    for name, value in case.arguments.items():
        if isinstance(value, torch.Tensor) and not torch.equal(
            placed[name].view.cpu().nan_to_num(7.0), value.nan_to_num(7.0)
        ):
            return CaseResult(case, False, f"changed the input {name}", [
                f"solve modified its input {name}: write only to {output_name}"])

    reference_inputs = {k: v.double() if isinstance(v, torch.Tensor) else v
                        for k, v in case.inputs().items()}
    expected = exercise.reference(**reference_inputs)
    output = placed[output_name].view.detach().cpu()
    unwritten = output.view(torch.int32) == POISON_BITS
    actual = output.double()
    rtol, atol = exercise.tolerance(**reference_inputs)
    bad = mismatches(actual, expected, rtol=rtol, atol=atol)
    if not bad.any():
        return CaseResult(case, True, case.shapes())

    count, total = int(bad.sum()), bad.numel()
    never_written = int((bad & unwritten).sum())
    summary = f"{count} of {total} elements of {output_name} wrong"
    if never_written:
        verb = "holds" if never_written == 1 else "hold"
        summary += f" ({never_written} still {verb} the checker's NaN)"
    details = [f"{count} of {total} elements of {output_name} differ beyond "
               f"rtol={rtol:g}, atol={atol:g}; the first wrong positions:"]
    for position in bad.nonzero()[:SHOWN_POSITIONS].tolist():
        index = tuple(position)
        got, want = actual[index].item(), expected[index].item()
        note = "  (the checker's NaN)" if unwritten[index] else ""
        details.append(f"  {output_name}{list(index)}: expected {want:.7g}, got {got:.7g}{note}")
    if never_written:
        details.append("The checker's NaN: the element was never stored, or was computed "
                       f"from {output_name}'s\n  initial value. Does the grid cover every "
                       "block? Is a store masked off?")
    return CaseResult(case, False, summary, details)


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


def size_between(generator: torch.Generator, low: int, high: int) -> int:
    """A random integer in ``[low, high]`` drawn from ``generator``."""
    return int(torch.randint(low, high + 1, (1,), generator=generator))
