"""Checking a reader's ``solve`` against an exercise's torch reference, one named case at a time.

Every case builds fresh inputs from a seed, calls ``solve`` with them and compares the output
with the reference computed in float64. The checker sets traps that a plain
``torch.allclose`` would miss:

* outputs arrive filled with NaN (with a payload of the checker's own), so an element the
  kernel never writes shows up, and is told apart from a NaN the kernel computed;
* every tensor sits inside a larger buffer with margins before and after it (and, for a
  strided view, gaps between its elements);
* inputs are compared after the call, so a kernel that writes into its input is caught;
* a ``solve`` that launches no Triton kernel, passes a float argument or a size (``n``,
  ``M``...) to one as a ``tl.constexpr``, or computes from an input with PyTorch
  (``x.amax(dim=1)``, ``alpha * x``: anything but shapes, strides, views and allocations)
  fails even when its output is right; so does one that hands a kernel a tensor it made
  without ``device=`` (on the CPU, where the interpreter runs, and no GPU kernel can read).

In the Triton interpreter (no GPU) the checker also sees every address a kernel touches
(:mod:`triton_guide.exercises.watch`): an access off the elements of the tensors, even one
whose value is thrown away, fails the case, and an access far outside every tensor is
switched off before it happens, so that no kernel can scribble on the checker's own
memory. The masked-off lanes of a load without ``other=`` read NaN (and, in further runs of
a case that passed, ``3e38`` and ``-3e38``, which a maximum or a minimum does not skip),
the programs of a launch run in reverse order, an element one program stores and another
touches in the same launch is reported as a race, and a copy of an input
(``x.contiguous()``) is noticed because the kernels never read the input itself. The
interpreter runs a kernel's Python without compiling it, so it accepts kernels a GPU's
compiler refuses; each case that passes also compiles, for an H100, the kernels of
``solve``'s file as that case launched them, launch options included (each distinct launch
once per check, in a separate process: :func:`triton_guide.debugging.compile_kernels`),
and fails if one does not compile or needs more shared memory or warps a program than an
H100 has. The interpreter also rounds the float32 operands of ``tl.dot`` to tf32, as a
GPU's tensor cores do, unless the exercise asks for ``tl.dot`` (``EXACT_DOT``).

On a GPU the checker sees only what lands in memory: a store past the end shows in the
output's margins, and an unmasked load past an input's end reads its margin, filled first
with NaN and then, in a second run of the case, with ``3e38`` (a maximum ignores NaN). A
load whose value is thrown away, a load without ``other=``, a copy of an input, races, and
the order of the programs are not checked there.

Once every case passes, the dry cases (:func:`largest`) call ``solve`` at the statement's
largest sizes on meta tensors, which have shapes and no data, recording its launches
without running them: each grid must fit a GPU's limits and each kernel must compile for an
H100 as launched (a block sized to the whole input passes every smaller case and fails
there).

A report names every case with PASS or FAIL as it finishes and, for the first failing one,
the arguments (shapes, strides, scalars) and the first wrong positions with the expected
and actual values.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Union

import torch

from .. import runtime
from ..debugging import Compiled, compile_kernels
from ..testing import mismatches
from .watch import UNDEFINED_BITS, Launch, Region, TorchCalls, Watch

# Elements kept before and after every tensor handed to ``solve`` (at least the span of the
# tensor itself): wide enough for a whole block of 4096 lanes to run past the end.
MARGIN = 4096
# The NaN an output is filled with: a quiet NaN with a payload of its own. An element still
# holding these bits was never written, or was computed from the poison (on a CPU, NaN + 1
# keeps the payload); a NaN the kernel computes from its inputs has other bits.
POISON_BITS = 0x7FC0DEAD
# The NaN in the margins and gaps around an input, with a payload of its own too.
INPUT_MARGIN_BITS = 0x7FC0FEED
# What the margins around an input hold in the second run of a case, where the checker
# cannot watch the addresses (on a GPU): finite and larger than any input, so that an
# unmasked load past the end wins a maximum, which ignores NaN.
LARGE_MARGIN_FILL = 3.0e38
# What the margins around an output hold. Not NaN: an unmasked store past the end often
# stores NaN (read from an input's margin), which must show up as a change.
OUTPUT_MARGIN_FILL = -12345.0
# How many wrong positions a failure report lists.
SHOWN_POSITIONS = 5
# Whether the kernels' addresses are watched (see the module docstring); tests switch it off
# to check what a GPU run sees.
WATCH_MEMORY = runtime.interpreting()


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
        return [f"{self.exercise}: {_count(self.cases, 'case')}, seed {self.seed} "
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


def check(exercise, solve: Callable, *, seed: int | None = None, only: str | None = None,
          progress: Callable[[str], None] | None = None) -> Report:
    """Run ``solve`` on every case of ``exercise`` (an :class:`~triton_guide.exercises.Exercise`).

    ``seed`` fixes every input (and the sizes of the random cases); by default a fresh one is
    drawn, and the report prints it so that a failure can be replayed. ``only`` names the
    one case to run (``KeyError`` if there is none of that name). ``progress``, if given,
    receives each line of the report as soon as it is known: the verdict of a case as the
    case finishes.
    """
    seed = new_seed() if seed is None else seed
    cases = exercise.all_cases(torch.Generator().manual_seed(seed))
    if only is not None:
        names = [case.name for case in cases]
        if only not in names:
            raise KeyError(f"{exercise.name} has no case named {only!r}; its cases are: "
                           f"{', '.join(names)}")
        cases = [cases[names.index(only)]]
    report = Report(exercise.name, seed, len(cases), max(len(case.name) for case in cases))
    emit = progress or (lambda line: None)
    for line in report.header():
        emit(line)
    compiled: dict[tuple, Compiled] = {}  # each distinct launch compiled for a GPU, once
    for case in cases:
        if case.dry and not report.passed:
            left = len(cases) - len(report.results)
            report.stopped = (f"The {_count(left, 'dry case')} at the statement's largest sizes "
                              "did not run (dry cases run once every other case passes).")
            break
        if case.dry:
            result = _dry_run(solve, case, compiled)
            report.results.append(result)
            emit(report.line(result))
            continue
        result = _run_case(exercise, solve, case, INPUT_MARGIN_BITS)
        for fill in UNDEFINED_FILLS if result.passed and result.undefined_read else ():
            again = _run_case(exercise, solve, case, INPUT_MARGIN_BITS, undefined=fill)
            if not again.passed:
                again.details.insert(0, f"With the masked-off lanes of loads without other= "
                                        f"reading {fill:g} instead of NaN (which tl.max and "
                                        "tl.min skip): does a masked load need other=?")
                result = again
                break
        if result.passed and not WATCH_MEMORY:
            again = _run_case(exercise, solve, case, LARGE_MARGIN_FILL)
            if not again.passed:
                again.details.insert(0, f"With the inputs' margins filled with "
                                        f"{LARGE_MARGIN_FILL:g} instead of NaN (which a "
                                        "maximum ignores): a load past the end of an input?")
                result = again
        if result.passed and runtime.interpreting():
            result = _gpu_compile_failure(case, solve, result.launches, compiled) or result
        report.results.append(result)
        emit(report.line(result))
        left = len(cases) - len(report.results)
        if left and any(sign in result.error for sign in CONTEXT_LOST):
            report.stopped = (
                f"The GPU reported an error that leaves this process's CUDA context unusable, "
                f"so the other {_count(left, 'case')} were not run (each would report the "
                "same error). Check again in a new process; in the interpreter "
                "(TRITON_INTERPRET=1) the checker names the access that went astray.")
            break
    missing = {c.message for c in compiled.values() if not c.found}
    report.notes.extend(f"not compiled for a GPU: {message}" for message in sorted(missing))
    for line in report.footer():
        emit(line)
    return report


def _source_file(function) -> str | None:
    try:
        return os.path.realpath(inspect.getsourcefile(function))
    except (TypeError, OSError):
        return None


# The most programs a GPU launches along each axis of a grid.
GRID_LIMITS = (2**31 - 1, 65535, 65535)


def largest(name: str, why: str, arguments: dict) -> Case:
    """A dry case at a statement's largest sizes: ``arguments`` as for a :class:`Case`, with
    the inputs given as shapes (tuples). ``solve`` runs on meta tensors, which have a shape
    and no data, and its launches are recorded, not run: each grid must fit a GPU's limits,
    and each kernel must compile for an H100 as launched, however large the blocks."""
    return Case(name, f"{why} (a dry run: launches checked and compiled, not run)",
                {key: torch.empty(value, device="meta") if isinstance(value, tuple) else value
                 for key, value in arguments.items()}, dry=True)


# A block of this many elements or more is not something a program can hold; Triton's
# compiler takes minutes over one of 2**20 (its largest) before anything can fail.
HUGE_BLOCK = 2**17


def _dry_run(solve: Callable, case: Case, compiled: dict) -> CaseResult:
    """Call ``solve`` on meta tensors shaped as ``case`` says, without running its kernels,
    then check each launch's grid and compile it (see :func:`largest`)."""
    arguments = []
    for value in case.arguments.values():
        if isinstance(value, Output):
            strides = value.strides or _contiguous_strides(value.shape)
            value = torch.empty_strided(value.shape, strides, device="meta")
        elif isinstance(value, torch.Tensor):  # fresh, in case solve changes one in place
            value = torch.empty_strided(value.shape, value.stride(), device="meta")
        arguments.append(value)
    with Watch([], memory=False, dry=True, compile_dry=not runtime.interpreting()) as watch:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                solve(*arguments)
        except Exception as error:
            if "meta" not in str(error).lower() and "active drivers" not in str(error):
                return CaseResult(case, False, f"solve raised {type(error).__name__} at the "
                                  "statement's largest sizes", [
                    f"solve, called at the statement's largest sizes (on tensors without "
                    f"data), raised {type(error).__name__}: {str(error)[:300]}"])
            # Meta tensors hold no data: a solve that reads some (out.sum().item()) cannot
            # be tried this way. Not a fault of solve's.
            return CaseResult(case, True, f"{case.shapes()} (not tried: solve needs the data, "
                              f"{type(error).__name__})")
    if watch.autotuned:
        return CaseResult(case, True, f"{case.shapes()} (not tried: triton.autotune picks "
                          "its configuration by timing, which a dry run cannot)")
    for launch in watch.launches:
        grid = launch.grid or ()
        if any(size > limit for size, limit in zip(grid, GRID_LIMITS)):
            return CaseResult(case, False, f"grid {grid} too large for a GPU", [
                f"At this size {launch.kernel} launches a grid of {grid} programs. A GPU "
                f"launches at most 2**31 - 1 programs along axis 0 and {GRID_LIMITS[1]} along "
                "axes 1 and 2: put the longest count of programs on axis 0 "
                "(tl.program_id(0)), or have each program take several blocks."])
        huge = {name: value for name, value in launch.constexprs.items()
                if isinstance(value, int) and not isinstance(value, bool)
                and value >= HUGE_BLOCK}
        if huge:
            name, value = next(iter(huge.items()))
            return CaseResult(case, False, f"{launch.kernel} takes a block of {value} at this "
                              "size", [
                f"At this size {launch.kernel} gets {name}={value}: a block that grows with "
                "the input. A program's block lives in its registers, and one of "
                f"{HUGE_BLOCK} elements or more does not fit (Triton refuses blocks past "
                "2**20 elements, and compiles ones near that for minutes). Give the block a "
                "fixed size, a few hundred to a few thousand elements, and launch more "
                "programs, or loop over the input in blocks."])
    try:
        failure = _gpu_compile_failure(case, solve, watch.launches, compiled,
                                       at="at the statement's largest sizes")
    except (subprocess.TimeoutExpired, RuntimeError) as error:
        return CaseResult(case, False, "compiling for a GPU at the statement's largest sizes "
                          "failed", [f"The compiler did not finish: {type(error).__name__}: "
                                     f"{str(error)[:300]}"])
    return failure or CaseResult(case, True, case.shapes())


def _gpu_compile_failure(case: Case, solve: Callable, launches: list[Launch],
                         compiled: dict, at: str = "") -> CaseResult | None:
    """Compile for an H100 each kernel from ``solve``'s file as this case launched it, and
    fail the case if one does not compile: the interpreter runs a kernel without compiling
    it, so it lets through what a GPU's compiler refuses (an accumulator that changes type
    in a loop, ``tl.dot`` on tiles smaller than the GPU's instructions take). ``compiled``
    keeps each distinct launch's result across the cases of one check, so each compiles
    once."""
    source = _source_file(solve)
    launched: dict[tuple, Launch] = {}
    for launch in launches:
        if launch.compile_as is None or _source_file(launch.jitted.fn) != source:
            continue
        signature, constexprs = launch.compile_as
        key = (launch.kernel, tuple(signature.items()), tuple(sorted(constexprs.items())),
               tuple(sorted(launch.options.items())))
        launched.setdefault(key, launch)
    for key, launch in launched.items():
        if launch.native is not None:  # compiled already, on this GPU (a dry run)
            compiled[key] = launch.native
    new = [key for key in launched if key not in compiled]
    if new:
        results = compile_kernels([(launched[key].jitted, *launched[key].compile_as, [],
                                    launched[key].options) for key in new], whole_file=True)
        compiled.update(zip(new, results))
    for key, launch in launched.items():
        result = compiled[key]
        if result.found and result.error_type is not None:
            if at:
                return CaseResult(case, False, f"{launch.kernel} does not compile {at}", [
                    f"Compiled for an H100 as solve launches it {at}, {launch.kernel} "
                    "fails: the cases above are smaller than the statement allows.",
                    *_compiler_message(result), *_compile_hints(result)])
            return CaseResult(case, False, f"{launch.kernel} runs in the interpreter but does "
                              "not compile for a GPU", [
                f"Compiled for an H100 as this case launched it, {launch.kernel} fails. The "
                "interpreter runs a kernel's Python without compiling it, so it lets through "
                "what the GPU's compiler refuses; every launch on a GPU compiles first.",
                *_compiler_message(result), *_compile_hints(result)])
        too_large = _over_the_gpus_limits(launch, result)
        if too_large:
            return CaseResult(case, False, f"{launch.kernel} compiles but cannot launch on "
                              f"a GPU{' ' + at if at else ''}", [
                f"Compiled for an H100 with this case's argument types and launch options, "
                f"{launch.kernel} asks for more than one program may have there, and a "
                "launch would fail (out of resources). The interpreter has no such limits.",
                *too_large])
    return None


# What one program may use on an H100: shared memory (227 KiB, the most a block may opt
# into on compute capability 9.0) and threads (1024, so 32 warps of 32).
GPU_SHARED_MEMORY = 227 * 1024
GPU_MAX_WARPS = 32


def _over_the_gpus_limits(launch: Launch, result: Compiled) -> list[str]:
    """What about a compiled launch exceeds an H100's limits for one program, one line
    per limit; empty when it fits."""
    over = []
    warps = launch.options.get("num_warps", 4)
    if warps > GPU_MAX_WARPS:
        over.append(f"num_warps={warps} is {warps * 32} threads a program; a GPU runs at "
                    f"most {GPU_MAX_WARPS * 32} (num_warps={GPU_MAX_WARPS}). 4 or 8 warps "
                    "suit most kernels.")
    if result.found and result.shared > GPU_SHARED_MEMORY:
        stages = launch.options.get("num_stages")
        given = f"num_stages={stages}" if stages is not None else "Triton's default num_stages"
        over.append(f"It needs {result.shared / 1024:.0f} KiB of shared memory a program, "
                    f"with {given}; an H100 has {GPU_SHARED_MEMORY // 1024} KiB. Each "
                    "pipeline stage keeps another copy of the tiles a loop loads for tl.dot: "
                    "lower num_stages, or make those tiles smaller.")
    return over


def _compiler_message(result: Compiled, lines: int = 12) -> list[str]:
    """The compiler's message, the last ``lines`` lines (Triton ends with the line of the
    kernel at fault and the error), and its MLIR diagnostics."""
    message = [f"{result.error_type}:", *result.message.strip().splitlines()[-lines:]]
    if result.diagnostics:
        message += ["the compiler also said:", *result.diagnostics.splitlines()[:4]]
    return [f"  {line}" for line in message]


def _compile_hints(result: Compiled) -> list[str]:
    text = result.message + result.diagnostics
    hints = []
    if "Loop-carried variable" in text:
        hints.append("A variable changes type inside a loop: create it with the type it will "
                     "hold. tl.dot returns float32, so an accumulator that adds tl.dot's "
                     "results starts as tl.zeros(..., dtype=tl.float32); convert it when "
                     "storing (tl.store converts to the output's type).")
    if "num_warps must be a power of 2" in text:
        hints.append("Give num_warps a power of two: 1, 2, 4, 8, 16 or 32 (4 by default).")
    if "Input shapes should have" in text:
        hints.append("tl.dot on a GPU has a smallest tile, named in the message above: make "
                     "the blocks that feed tl.dot at least that large (16 on every side is "
                     "safe for every dtype).")
    return hints


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


def _fill(tensor: torch.Tensor, value: float | int) -> None:
    """Fill a float32 ``tensor`` with ``value``: a float, or an int taken as the bits of one."""
    if isinstance(value, int):
        tensor.view(torch.int32).fill_(value)
    else:
        tensor.fill_(value)


def _place(shape, strides, device, values: torch.Tensor | None,
           margin_fill: float | int) -> _Placed:
    """A tensor of ``shape`` and ``strides`` inside a buffer with margins on both sides.

    An input (``values`` given) gets ``margin_fill`` in its margins and gaps; an output
    (``values=None``) is the poison NaN inside and ``OUTPUT_MARGIN_FILL`` in its margins.
    """
    span = 1 + sum((size - 1) * stride for size, stride in zip(shape, strides))
    margin = max(MARGIN, span)
    buffer = torch.empty((margin + span + margin,), device=device)
    view = buffer.as_strided(shape, strides, margin)
    if values is None:
        _fill(buffer, OUTPUT_MARGIN_FILL)
        _fill(buffer[margin: margin + span], POISON_BITS)
    else:
        _fill(buffer, margin_fill)
        view.copy_(values)
    return _Placed(buffer, view, margin, span)


def _margin_writes(placed: _Placed) -> tuple[int, int]:
    """How many margin elements, before and after an output, a kernel has changed."""
    before = placed.buffer[: placed.margin]
    after = placed.buffer[placed.margin + placed.span:]
    return int((before != OUTPUT_MARGIN_FILL).sum()), int((after != OUTPUT_MARGIN_FILL).sum())


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _nan_bits(values: torch.Tensor) -> torch.Tensor:
    """The float32 bits of ``values``, for telling the checker's NaNs apart."""
    return values.float().contiguous().view(torch.int32)


# What an access off the elements of a tensor means, by where it lands.
_STRAY_HINTS = {
    "outside every tensor": "Far from every tensor the kernel received (the checker "
    "switched those lanes off): offsets computed with the wrong strides, or strides passed "
    "in the wrong order? On a GPU such an access overwrites other memory or stops the "
    "program with an illegal address.",
    "past the end of": "Is a tl.load or tl.store missing its mask, is the mask wrong, or an "
    "offset computed with a wrong stride? On a GPU those lanes touch another tensor's "
    "memory, even when the value is not used.",
    "before the start of": "Is an offset negative, or a stride wrong?",
    "between the elements of": "The tensor is a strided view, with gaps between its rows or "
    "columns: address it through its strides, never through its shape.",
}


def _lines_in(filename: str | None, error: BaseException) -> list[str]:
    """The lines of ``filename`` (the reader's file) in the tracebacks of ``error`` and of
    the exceptions it was raised from: the interpreter raises its own error from the one
    a kernel line raised, and the end of the traceback shows only Triton's frames."""
    if filename is None:
        return []
    lines, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        for frame in traceback.extract_tb(error.__traceback__):
            if frame.filename == filename:
                lines.append(f"  {Path(filename).name}, line {frame.lineno}: {frame.line}")
        error = error.__cause__ or error.__context__
    return list(dict.fromkeys(lines))


def _stray_result(case: Case, strays) -> CaseResult:
    described = []
    for verb, where, name, count in strays:
        described.append(f"{verb} {_count(count, 'element')} {where}"
                         + (f" {name}" if name else ""))
    details = [f"solve {line}" for line in described]
    details.extend(_STRAY_HINTS[where] for where in dict.fromkeys(w for _, w, _, _ in strays))
    summary = described[0] + (f" (and {len(described) - 1} more)" if len(described) > 1 else "")
    return CaseResult(case, False, summary, details)


# What CUDA says of an error after which the process can launch nothing more on the GPU.
CONTEXT_LOST = ("illegal memory access", "illegal address", "unspecified launch failure",
                "device-side assert triggered", "misaligned address")

# What the masked-off lanes of a load without other= read in the further runs of a case
# (interpreter only): on a GPU they hold whatever the registers held, and NaN hides that
# from a maximum or a minimum.
UNDEFINED_FILLS = (3e38, -3e38)

# What a race on an element means, for the report.
_RACE_HINT = ("Programs run in no set order on a GPU: an element that one program stores "
              "and another reads, stores or adds into in the same launch can end up with "
              "either's value, or lose an update (a load, an add and a store into a shared "
              "total loses the additions of programs in between). If every element should "
              "have one owner, check the offsets first: two programs that compute the same "
              "offset (a wrong stride, a missing * BLOCK, the wrong program_id axis) store "
              "into each other's elements. If the elements are meant to be shared, update "
              "them only with tl.atomic_* (after zeroing them before the launch, not from a "
              "program).")


def _run_case(exercise, solve: Callable, case: Case, margin_fill: float | int,
              undefined: float | None = None) -> CaseResult:
    device = runtime.device()
    output_name = case.output_name
    placed: dict[str, _Placed] = {}
    call_arguments = []
    for name, value in case.arguments.items():
        if isinstance(value, torch.Tensor):
            placed[name] = _place(value.shape, value.stride(), device, value, margin_fill)
            call_arguments.append(placed[name].view)
        elif isinstance(value, Output):
            strides = value.strides or _contiguous_strides(value.shape)
            placed[name] = _place(value.shape, strides, device, None, margin_fill)
            call_arguments.append(placed[name].view)
        else:
            call_arguments.append(value)
    read_once = set(exercise.read_once)
    regions = [Region(name, p.view, p.buffer, count_reads=name in read_once)
               for name, p in placed.items()]

    returned, error = None, None
    inputs = [region for region in regions if region.name != output_name]
    with Watch(regions, memory=WATCH_MEMORY, undefined=undefined,
               tf32=not exercise.exact_dot) as watch, \
            TorchCalls(inputs, _source_file(solve)) as torch_calls:
        try:
            with warnings.catch_warnings():
                # The interpreter computes with numpy, which warns on overflow (a wrong
                # kernel's exp(1e4)); the comparison below reports the result.
                warnings.simplefilter("ignore", RuntimeWarning)
                returned = solve(*call_arguments)
            if device.type == "cuda":
                torch.cuda.synchronize()
        except Exception as raised:
            error = raised
            tail = traceback.format_exc().rstrip().splitlines()[-12:]

    # Accesses off the tensors' elements come first: they explain an exception or a NaN.
    strays = watch.strays()
    if strays:
        return _stray_result(case, strays)
    races = watch.races()
    if races:
        described = [f"{_count(count, 'element')} of {name}" for name, count in races]
        return CaseResult(case, False, f"race on {' and '.join(described)}", [
            f"solve: {' and '.join(described)} stored by one program with tl.store and, in "
            "the same launch, read or updated by another, or stored by another with other "
            "values", _RACE_HINT])
    if error is not None:
        message = str(error).strip().splitlines()
        # The interpreter's message ends with the cause; CUDA's starts with it.
        first_line = (message[0] if message and message[0].startswith("CUDA error")
                      else message[-1] if message else "")
        yours = _lines_in(getattr(getattr(solve, "__code__", None), "co_filename", None), error)
        where = ["where in your file:", *yours] if yours else []
        if "active drivers" in str(error) and runtime.interpreting():
            where.append("triton.autotune times its configurations on a GPU, which the "
                         "interpreter has none of: check with one configuration (or a fixed "
                         "block size) on a CPU, and autotune on a GPU.")
        return CaseResult(case, False, f"solve raised {type(error).__name__}: {first_line}"[:160],
                          [*where, "the end of the traceback:", *tail], error=str(error))

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

    # Whether a kernel stored into the output at all, where the checker can see it.
    stored = next(r.written for r in regions if r.name == output_name) if WATCH_MEMORY else None
    wrong = _compare(exercise, case, placed[output_name].view, returned, stored,
                     watch.undefined_read, watch.tf32_dots)
    if wrong is not None:
        return wrong
    broken = (_made_on_cpu(case, watch, torch_calls) or _broken_constraint(
        case, watch, regions, exercise.grid_dims, torch_calls.found))
    if broken is not None:
        return broken
    return CaseResult(case, True, case.shapes(), undefined_read=watch.undefined_read,
                      launches=watch.launches)


def _compare(exercise, case: Case, output: torch.Tensor, returned,
             stored: bool | None, undefined_read: bool = False,
             tf32_dots: int = 0) -> CaseResult | None:
    """The failure, if ``output`` differs from the reference; ``None`` if it matches.

    ``stored`` says whether a kernel stored into ``output`` (``None``: not known);
    ``undefined_read``, whether a load without ``other=`` had masked-off lanes;
    ``tf32_dots``, how many ``tl.dot`` calls had float32 operands rounded to tf32.
    """
    output_name = case.output_name
    reference_inputs = {k: v.double() if isinstance(v, torch.Tensor) else v
                        for k, v in case.inputs().items()}
    expected = exercise.reference(**reference_inputs)
    output = output.detach().cpu()
    bits = _nan_bits(output)
    unwritten = bits == POISON_BITS
    actual = output.double()
    rtol, atol = exercise.tolerance(**reference_inputs)
    bad = mismatches(actual, expected, rtol=rtol, atol=atol)
    if not bad.any():
        return None

    count, total = int(bad.sum()), bad.numel()
    never_written = int((bad & unwritten).sum())
    # Nothing of the output changed, and no kernel is known to have stored into it.
    nothing = bool(unwritten.all()) and stored is not True
    if nothing:
        summary = f"wrote nothing into {output_name}"
        if isinstance(returned, torch.Tensor):
            summary += " (solve returned a tensor instead)"
    else:
        summary = f"{count} of {total} elements of {output_name} wrong"
        if never_written:
            verb = "holds" if never_written == 1 else "hold"
            summary += f" ({never_written} still {verb} the checker's NaN)"
    details = [f"{count} of {total} elements of {output_name} differ beyond "
               f"rtol={rtol:g}, atol={atol:g}; the first wrong positions:"]
    notes = {POISON_BITS: "  (the checker's NaN)",
             INPUT_MARGIN_BITS: "  (the NaN around an input)",
             UNDEFINED_BITS: "  (the NaN of a masked-off lane)"}
    for position in bad.nonzero()[:SHOWN_POSITIONS].tolist():
        index = tuple(position)
        got, want = actual[index].item(), expected[index].item()
        note = notes.get(int(bits[index]), "")
        details.append(f"  {output_name}{list(index)}: expected {want:.7g}, got {got:.7g}{note}")

    if isinstance(returned, torch.Tensor):
        details.append(f"solve returned a tensor: write into the {output_name} you receive; "
                       "the checker ignores what solve returns.")
    elif nothing:
        details.append(f"Nothing stored into {output_name}: does solve pass the "
                       f"{output_name} it receives to the kernel, and launch any program? "
                       "Or is every lane of the store masked off (compare the mask with "
                       "the size, as in offsets < n)?")
    elif never_written:
        details.append("The checker's NaN: the element was never stored, or was computed "
                       f"from {output_name}'s\n  initial value (a tl.atomic_add adds to what "
                       "is there: zero it before the launch). Does the grid cover every "
                       "block? Is a store masked off? Do all programs compute the same "
                       "offsets (program_id(0) * BLOCK_SIZE missing, or the wrong "
                       "program_id axis)?")
    computed_nan = bad & actual.isnan() & ~unwritten & ~expected.isnan()
    if computed_nan.any():
        sources = set(bits[computed_nan].tolist())
        wrong_numbers = int((bad & ~actual.isnan()).sum())
        if UNDEFINED_BITS in sources and wrong_numbers:
            details.append(f"The NaN of a masked-off lane, and "
                           f"{_count(wrong_numbers, 'other wrong element')} that are "
                           "numbers, which other= alone would not fix. Give a masked "
                           "load without other= a value that changes nothing, and check "
                           "where values land: a masked-off lane reaches a kept "
                           "position when the tile is built the wrong way round "
                           "([:, None] and [None, :] swapped), an offset uses the "
                           "wrong stride, or a load's mask is narrower than the store's "
                           "(compared with the wrong size).")
        elif UNDEFINED_BITS in sources:
            details.append("The NaN of a masked-off lane: a tl.load with a mask and no "
                           "other= leaves those lanes undefined on a GPU (NaN here); give "
                           "other= a value that changes nothing, such as 0.0 for a sum.")
        if INPUT_MARGIN_BITS in sources:
            details.append("The NaN around an input (in its margins, and in the gaps of a "
                           "strided view): an unmasked load past the end of an input, or an "
                           "offset computed with a wrong stride?")
        if not sources & {UNDEFINED_BITS, INPUT_MARGIN_BITS} and undefined_read:
            details.append("A NaN where a number is expected, and a load without other= "
                           "had masked-off lanes, which read NaN here: through a maximum, a "
                           "sum or an exp their NaN spreads to a whole row. Give other= a "
                           "value that changes nothing: -inf for a maximum, 0.0 for a sum.")
        elif not sources & {UNDEFINED_BITS, INPUT_MARGIN_BITS}:
            details.append("A NaN where a number is expected: computed from an input's "
                           "margin or gaps (NaN: an unmasked load past the end, or a wrong "
                           "stride?), from masked-off lanes loaded without other=, or by "
                           "the arithmetic itself (inf - inf, 0 / 0)?")
    close = _largest_relative_error(actual, expected, bad)
    on_scale = _largest_error_on_scale(actual, expected, bad)
    if tf32_dots and on_scale is not None and on_scale <= ROUNDING_16_BIT[1]:
        details.append("tl.dot with float32 operands: on a GPU the tensor cores read them as "
                       "tf32, keeping 10 of float32's 23 fraction bits (a relative error of "
                       "up to 9.8e-4 per operand), and the checker cuts them so here "
                       "too. This exercise asks for float32 accuracy: multiply and add "
                       "with * and tl.sum, or pass input_precision=\"ieee\" to tl.dot "
                       "(slower on a GPU).")
    elif close is not None and ROUNDING_16_BIT[0] <= close <= ROUNDING_16_BIT[1]:
        details.append(f"Every wrong element is a number within {close:.1e} of the expected "
                       "one (relatively): about the rounding of a 16-bit float (float16 keeps "
                       "11 significant bits and rounds to within 4.9e-4, bfloat16 keeps 8 and "
                       "rounds to within 3.9e-3, float32 to within 6e-8). Does the kernel "
                       "compute in a 16-bit type: a .to(tl.float16) on a loaded value, a "
                       "tl.zeros(..., dtype=tl.float16) accumulator, a cast before the "
                       "store, a tl.dot on float32 operands (a GPU rounds them to tf32, 11 "
                       "significant bits like float16)? Keep every value float32 up to the "
                       "store (tl.store converts to the output's type by itself).")
    zeros = bad & (actual == 0) & ~unwritten
    if bool(zeros.any()) and bool((zeros == bad).all()):
        details.append("Every wrong element is exactly 0, a value a program or solve wrote, "
                       "not the checker's NaN: was the output zeroed and then never added "
                       "into (no program launched: a grid of n // BLOCK_SIZE is empty when n "
                       "< BLOCK_SIZE), or zeroed after the kernels ran?")
        if int(bad.sum()) >= ALL_NEGATIVE_AT_LEAST and bool((expected[bad] < 0).all()):
            details.append("Or, if the kernel takes a maximum: every expected value here is "
                           "negative, and a 0 that won a maximum reads so. Are masked-off "
                           "lanes loaded with other=0 (a maximum needs -inf there), or a "
                           "running maximum started at 0 rather than -inf?")
    return CaseResult(case, False, summary, details)


# How many wrong zeros, all where a negative value was expected, make a maximum that a 0
# won the likely story (a few could be chance: a sum of one negative element, say).
ALL_NEGATIVE_AT_LEAST = 8

# An output with more columns than this needs more than one tile across (blocks of up to
# 2048 columns): a 2-D grid's second dimension must exceed 1 there.
WIDE_OUTPUT_COLUMNS = 2048

# Relative errors, for every wrong element, that point at 16-bit arithmetic: above what
# float32 rounding and summation order give (a few 1e-7 to 1e-6), up to a few steps of
# bfloat16's 2**-8.
ROUNDING_16_BIT = (1e-4, 2e-2)


def _largest_relative_error(actual: torch.Tensor, expected: torch.Tensor,
                            bad: torch.Tensor) -> float | None:
    """The largest relative error over the ``bad`` elements, or None unless every one of
    them is a finite number next to a finite, nonzero expected value."""
    got, want = actual[bad], expected[bad]
    if not (bool(got.isfinite().all()) and bool(want.isfinite().all()) and bool(want.all())):
        return None
    return float(((got - want).abs() / want.abs()).max())


def _largest_error_on_scale(actual: torch.Tensor, expected: torch.Tensor,
                            bad: torch.Tensor) -> float | None:
    """The largest error over the ``bad`` elements, relative to the largest finite expected
    magnitude, or None unless every one of them is a finite number. A dot product's
    rounding shows this way: an output near zero, whose terms cancel, keeps the error of
    its terms, so its own relative error can be any size."""
    got, want = actual[bad], expected[bad]
    finite = expected[expected.isfinite()]
    if not (bool(got.isfinite().all()) and bool(want.isfinite().all())) or not finite.numel():
        return None
    scale = float(finite.abs().max())
    return float((got - want).abs().max()) / scale if scale else None


def _grid_below(case: Case, launches: list[Launch], grid_dims: int) -> CaseResult | None:
    """The failure, if a launch's grid has fewer than ``grid_dims`` dimensions, or (on an
    output too wide for one block of columns) a second dimension of 1."""
    asked = (f"the exercise asks for a {grid_dims}-D grid of tiles: tl.program_id(0) "
             "numbers a tile's rows and tl.program_id(1) its columns, so that no program "
             "finds its tile by dividing one id")
    columns = case.arguments[case.output_name].shape[-1]
    for launch in launches:
        if launch.grid is None:
            continue
        if len(launch.grid) < grid_dims:
            return CaseResult(case, False, f"launched a {len(launch.grid)}-D grid", [
                f"{launch.kernel} was launched on the grid {launch.grid}; {asked}."])
        if columns > WIDE_OUTPUT_COLUMNS and launch.grid[1] == 1:
            return CaseResult(case, False, "launched one column of tiles", [
                f"{launch.kernel} was launched on the grid {launch.grid}, one program along "
                f"the second axis for {columns} columns, more than any block of columns "
                f"holds; {asked}."])
    return None


def _made_on_cpu(case: Case, watch: Watch, torch_calls: TorchCalls) -> CaseResult | None:
    """The failure, if a kernel received a tensor that solve made without ``device=``: it
    is on the CPU, which the interpreter runs on, but a GPU's kernel cannot read it."""
    for tensor, function, line in torch_calls.made_on_cpu:
        if any(tensor is launched for launched in watch.launched_tensors):
            return CaseResult(case, False, f"passed a kernel a tensor made without device= "
                              f"({function})", [
                f"solve makes a tensor with torch.{function}(...) at line {line} of your "
                "file, without device=, and passes it to a kernel. Without device= PyTorch "
                "puts it in the CPU's memory: the interpreter runs there, so it works here, "
                "but on a GPU the launch fails (\"Pointer argument cannot be accessed from "
                "Triton\"). Give it the inputs' device: device=x.device, or "
                "torch.empty_like(x)."])
    return None


def _torch_work(case: Case, found: list[tuple[str, str, int]]) -> CaseResult | None:
    """The failure, if solve computed something from an input with PyTorch (``found``:
    ``(input, function, line)`` from :class:`TorchCalls`), whatever the kernel did with it."""
    if not found:
        return None
    name, function, line = found[0]
    more = f" (and {_count(len(found) - 1, 'more call')})" if len(found) > 1 else ""
    return CaseResult(case, False, f"computed from {name} with PyTorch ({function})", [
        f"solve calls {function} on {name} at line {line} of your file{more}: PyTorch, not "
        "your kernel, does that part of the work. The exercise is to compute everything in "
        "the kernel from the inputs as they are; solve only allocates, reads shapes and "
        "strides, and launches. Each PyTorch step is also a whole pass over memory that the "
        "kernel would not need."])


def _broken_constraint(case: Case, watch: Watch, regions: list[Region],
                       grid_dims: int | None = None,
                       torch_calls: list[tuple[str, str, int]] = ()) -> CaseResult | None:
    """The failure, if a right output came about in a way the exercise rules out;
    ``grid_dims``, the dimensions the statement asks every grid to have; ``torch_calls``,
    the PyTorch calls solve made on an input (:class:`TorchCalls`)."""
    if not watch.launches:
        return CaseResult(case, False, "launched no Triton kernel", [
            f"solve computed {case.output_name} without launching a Triton kernel: the "
            "exercise is to write the kernel that computes it."])
    torch_work = _torch_work(case, list(torch_calls))
    if torch_work is not None:
        return torch_work
    if grid_dims is not None:
        flat = _grid_below(case, watch.launches, grid_dims)
        if flat is not None:
            return flat
    floats = {name: value for name, value in case.inputs().items() if isinstance(value, float)}
    # The sizes (n, M, N, K): a kernel parameter of the same name that is a tl.constexpr
    # makes every new size a new compilation.
    sizes = {name: value for name, value in case.inputs().items()
             if isinstance(value, int) and not isinstance(value, bool)}
    for launch in watch.launches:
        for parameter, value in launch.constexprs.items():
            if isinstance(value, float) and value in floats.values():
                return CaseResult(case, False, f"took a float as tl.constexpr {parameter}", [
                    f"{launch.kernel} takes {parameter} as a tl.constexpr: every new value "
                    "compiles a new kernel. Pass it as an ordinary argument."])
            # Under another name too: a block size is a power of two, a size here need not be.
            renamed = (isinstance(value, int) and not isinstance(value, bool)
                       and value & (value - 1) != 0 and value in sizes.values())
            if (parameter in sizes and value == sizes[parameter]) or renamed:
                return CaseResult(case, False, f"took the size {parameter} as tl.constexpr", [
                    f"{launch.kernel} takes {parameter} as a tl.constexpr: every new size "
                    "compiles a new kernel. Pass it as an ordinary argument and mask "
                    "against it; only block sizes need to be tl.constexpr."])
    if not WATCH_MEMORY:
        return None
    output = next(region for region in regions if region.name == case.output_name)
    if not output.written:
        return CaseResult(case, False, f"no kernel stored into {case.output_name}", [
            f"{case.output_name} holds the right values, but no Triton kernel stored into it: "
            "solve computed them with PyTorch (from the kernel's results, or instead of "
            "them). The exercise is to compute them in the kernel."])
    changed = int((output.changed_since_stored() & output.is_element).sum())
    if changed:
        return CaseResult(case, False, f"changed {case.output_name} after a kernel stored it", [
            f"{_count(changed, 'element')} of {case.output_name} hold other values than a "
            "kernel last stored there: solve changed them with PyTorch after the launch. The "
            "exercise is to compute them in the kernel."])
    for region in regions:
        if region.name == case.output_name:
            continue
        if not region.read:
            return CaseResult(case, False, f"never read {region.name} itself", [
                f"No kernel read {region.name}: solve gave them a copy of it, or a tensor "
                f"computed from it with PyTorch (such as {region.name}.contiguous() or "
                f"2 * {region.name}). Pass {region.name} as it is, with its strides, and "
                "compute in the kernel: each PyTorch step is a whole extra pass over "
                "memory."])
        if region.reads is not None and region.reads.max() > 1:
            twice = int((region.reads > 1).sum())
            return CaseResult(case, False, f"read {region.name} more than once", [
                f"{_count(twice, 'element')} of {region.name} read more than once (up to "
                f"{int(region.reads.max())} times): the exercise asks for one pass."])
    return None


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
